"""This book's operations with MLX on the CPU or the GPU: lazy arrays, evaluated on a stream."""

from __future__ import annotations

import contextlib
import importlib
import os
from typing import Any, Callable, Iterator, Sequence

from claims.ops.base import Ops, environment_setting
from verified_book import NotOnBackend, setting

PROBE_CACHE = 8 * 2**30  # bytes of freed buffers MLX keeps for a probe's duration
NO_STRIDES = (
    "MLX arrays expose no strides, storage or data pointer (mlx.core.array has shape, "
    "size, itemsize and nbytes only), so views and copies cannot be told apart"
)


def _module(name: str) -> Any:
    """An MLX module, untyped: its stubs type arrays as unions of Python scalars."""
    return importlib.import_module(name)


def _core() -> Any:
    return _module("mlx.core")


class MlxOps(Ops):
    library = "mlx"
    features = frozenset({"random", "copy", "nn", "autodiff", "optimizer", "fp4_quantize"})
    lacking = {
        "strides": NO_STRIDES,
        "views": "MLX arrays are values: a write into a slice changes the slice only",
        "grad_mode": (
            "MLX records no graph while it evaluates: it differentiates a function when asked "
            "(mx.grad), so there is no grad mode to switch off"
        ),
        "finfo.resolution": "mlx.core.finfo reports no resolution",
    }

    def round_trip(self, x: Any, name: str, label: str | None = None) -> Any:
        mx = _core()

        with self.adapter.on_device():
            if name == "float8_e4m3fn":
                # MLX has no float8 dtype; to_fp8/from_fp8 convert to and from E4M3 codes in uint8
                return mx.from_fp8(mx.to_fp8(x), mx.float32)
            if name == "float8_e5m2":
                raise NotOnBackend(f"mlx {mx.__version__} has no E5M2: no float8 dtype, and to_fp8 is E4M3 only")
            return x.astype(self.adapter.dtype(name, label)).astype(mx.float32)

    def to_bits(self, values: Sequence[float], name: str, label: str) -> list[int]:
        mx = _core()

        if name != "float8_e4m3fn":
            raise NotOnBackend(f"mlx has no {label} conversion (mx.to_fp8 converts to E4M3 only)")
        return [int(v) for v in mx.to_fp8(self.adapter.array(list(values), mx.float32)).tolist()]

    def from_bits(self, codes: Sequence[int], name: str, label: str) -> list[float]:
        mx = _core()

        if name != "float8_e4m3fn":
            raise NotOnBackend(f"mlx has no {label} conversion (mx.from_fp8 reads E4M3 only)")
        return mx.from_fp8(self.adapter.array(list(codes), mx.uint8), dtype=mx.float32).tolist()

    def default_float_bits(self) -> int:
        mx = _core()

        return mx.array([1.0]).dtype.size * 8

    def placeholder(self, shape: tuple[int, ...]) -> Any:
        mx = _core()

        with self.adapter.on_device():
            return mx.zeros(shape)  # lazy: the shape comes without evaluation

    def cross_entropy(self, logits: Any, target: int) -> float:
        mx = _core()
        nn = _module("mlx.nn")

        return float(nn.losses.cross_entropy(logits, self.adapter.array([target], mx.int32)).item())

    def layer_norm(self, width: int, eps: float | None = None) -> Any:
        nn = _module("mlx.nn")

        try:
            return nn.LayerNorm(width, **({} if eps is None else {"eps": eps}))
        except ValueError as e:
            raise NotOnBackend(f"mlx.nn.LayerNorm refuses to run without ε: {e}") from None

    def gradient(self, fn: Callable[..., Any], args: Sequence[Any]) -> list[Any]:
        mx = _core()

        grads = mx.grad(fn, argnums=tuple(range(len(args))))(*args)
        return list(grads) if isinstance(grads, (tuple, list)) else [grads]  # one argument: one array

    def jvp(self, fn: Callable[[Any], Any], primal: Any, tangent: Any) -> Any:
        mx = _core()

        return mx.jvp(fn, [primal], [tangent])[1][0]

    def adam_bytes(self, widths: tuple[int, ...]) -> dict[str, int]:
        mx = _core()
        nn = _module("mlx.nn")
        optim = _module("mlx.optimizers")
        tree_flatten = _module("mlx.utils").tree_flatten

        mx.random.seed(0)
        model = nn.Sequential(nn.Linear(widths[0], widths[1]), nn.ReLU(), nn.Linear(widths[1], widths[2]))
        optimizer = optim.Adam(learning_rate=1e-3)
        x = mx.random.normal((8, widths[0]))
        grads = nn.value_and_grad(model, lambda m, x: (m(x) ** 2).mean())(model, x)[1]
        optimizer.update(model, grads)
        mx.eval(model.parameters(), optimizer.state)
        weights = dict(tree_flatten(model.parameters()))
        moments = scalars = 0
        for name, value in tree_flatten(optimizer.state):
            owner = name.rsplit(".", 1)[0]
            if owner in weights and value.shape == weights[owner].shape:
                moments += value.nbytes
            else:
                scalars += value.nbytes
        return {
            "params": sum(w.size for w in weights.values()),
            "tensors": len(weights),
            "weights": sum(w.nbytes for w in weights.values()),
            "grads": sum(g.nbytes for _, g in tree_flatten(grads)),
            "moments": moments,
            "per_tensor_scalars": scalars,
        }

    def e8m0_bits(self) -> int:
        mx = _core()

        weights = self.adapter.array([[((3 * j) % 11 - 5) / 2 for j in range(64)]], mx.float32)
        scales = mx.quantize(weights, mode="mxfp4")[1]
        return scales.itemsize * 8

    def quantize_fp4(self, mode: str, group: int) -> tuple[int, float, float]:
        mx = _core()

        with self.adapter.on_device():
            w = mx.random.normal((8, 512), key=mx.random.key(0))
            parts = mx.quantize(w, group_size=group, bits=4, mode=mode)
            mx.eval(*parts)
            stored = sum(p.nbytes for p in parts)
            per_scale = w.shape[-1] // parts[1].shape[-1]
            back = mx.dequantize(*parts, group_size=group, bits=4, mode=mode)
            error = float((mx.abs(back - w).mean() / mx.abs(w).mean()).item())
        return per_scale, stored * 8 / w.size, error

    def e2m1_values(self) -> list[float]:
        """The sixteen E2M1 codes decoded: MXFP4 with a unit scale (E8M0 code 127 is 2^0) reads each nibble bare."""
        mx = _core()
        import numpy as np

        with self.adapter.on_device():
            nibbles = np.arange(32, dtype=np.uint32) % 16
            packed = (nibbles.reshape(4, 8) << (4 * np.arange(8, dtype=np.uint32))).sum(axis=1).astype(np.uint32)
            out = mx.dequantize(
                mx.array(packed.reshape(1, 4)),
                mx.array([[127]], dtype=mx.uint8),
                group_size=32,
                bits=4,
                mode="mxfp4",
                dtype=mx.float32,
            )
            return np.array(out).reshape(-1)[:16].tolist()

    @contextlib.contextmanager
    def probe_scope(self) -> Iterator[None]:
        mx = _core()

        # MLX returns freed buffers above its cache limit (32 MiB on some CPUs) to the OS, so
        # each new result would be page-faulted in again: keep them for the probe's duration
        previous = mx.set_cache_limit(PROBE_CACHE)
        if previous > PROBE_CACHE:  # never lower a larger limit (Metal's is the memory size)
            mx.set_cache_limit(previous)
        try:
            with self.adapter.on_device():
                yield
        finally:
            mx.set_cache_limit(max(previous, 0))

    def copy_into(self, dst: Any, src: Any) -> Any:
        mx = _core()

        return mx.add(src, 0.0)  # MLX has no in-place copy: the copy is a new array

    def matmul_into(self, a: Any, b: Any, out: Any) -> Callable[[], Any]:
        mx = _core()

        return lambda: mx.matmul(a, b)

    def matmul_unsupported(self, dtype: str) -> str | None:
        if dtype == "fp8":
            return (
                "FP8 matmul is measured only with torch on CUDA (torch._scaled_mm); numpy and MLX have no float8 matmul"
            )
        return None

    def matmul_settings(self) -> dict[str, Any]:
        """MLX reads MLX_ENABLE_TF32: its CUDA build and newer Apple GPUs use TF32-like matmuls unless it is 0."""
        if self.backend.device != "gpu":
            return {}
        return {
            "MLX_ENABLE_TF32": environment_setting("MLX_ENABLE_TF32"),
            "device": setting("device", self.adapter.device_words(), self.backend.name),
        }

    def matmul_environment(self) -> str | None:
        if self.backend.device == "gpu" and os.environ.get("MLX_ENABLE_TF32") is not None:
            return f"MLX_ENABLE_TF32={os.environ['MLX_ENABLE_TF32']} sets MLX's FP32 matmul precision here"
        return None

    def probe_values(self, shape: tuple[int, int], seed: int, fill: float) -> Any:
        mx = _core()

        if self.backend.device == "cpu":
            return mx.full(shape, fill, dtype=mx.float32)
        return mx.random.normal(shape, key=mx.random.key(seed))
