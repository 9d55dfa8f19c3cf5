"""MLX on the CPU or the GPU (Metal, or a CUDA build): lazy arrays, evaluated on a stream."""

from __future__ import annotations

import contextlib
import importlib
import sys
import time
from typing import Any, Callable

from verified_book.authoring.registry import NotOnBackend
from verified_book.backends import Adapter, Backend, register, try_import


def _module(name: str) -> Any:
    """An MLX module, untyped: its stubs type arrays as unions of Python scalars."""
    return importlib.import_module(name)


def _core() -> Any:
    return _module("mlx.core")


@register
class MlxAdapter(Adapter):
    library = "mlx"
    module_name = "mlx.core"
    names = ("mlx:cpu", "mlx:gpu")
    markers = {"mlx": "computed with MLX (mlx:cpu or mlx:gpu)"}

    @classmethod
    def detect(cls) -> list[Backend]:
        mx, why = try_import("mlx.core")
        if mx is None:
            return [Backend(n, False, why) for n in cls.names]
        version = getattr(mx, "__version__", "?")
        out = [Backend("mlx:cpu", True, "MLX on the CPU", version, "cpu")]
        try:
            gpu = bool(mx.is_available(mx.gpu))
        except Exception:
            gpu = False
        if gpu:
            out.append(Backend("mlx:gpu", True, "MLX on the GPU", version, "gpu"))
        else:
            out.append(
                Backend("mlx:gpu", False, f"mlx {version} has no GPU device here (Metal or CUDA build needed)", version)
            )
        return out

    def on_device(self) -> contextlib.AbstractContextManager[Any]:
        mx = _core()

        stream: contextlib.AbstractContextManager[Any] = mx.stream(mx.cpu if self.backend.device == "cpu" else mx.gpu)
        return stream

    def array(self, values: Any, dtype: Any = None) -> Any:
        mx = _core()

        with self.on_device():
            return mx.array(values, dtype=dtype) if dtype is not None else mx.array(values)

    def dtype(self, name: str, label: str | None = None) -> Any:
        mx = _core()

        found = getattr(mx, name, None)
        if not isinstance(found, mx.Dtype):
            raise NotOnBackend(f"mlx {mx.__version__} has no {label or name} dtype")
        return found

    def astype(self, x: Any, dtype: Any) -> Any:
        with self.on_device():
            return x.astype(dtype)

    def bitcast(self, x: Any, name: str) -> Any:
        with self.on_device():
            return x.view(self.dtype(name))

    def finfo(self, dtype: Any) -> Any:
        mx = _core()

        return mx.finfo(dtype)

    def iinfo(self, name: str) -> Any:
        mx = _core()

        dtype = getattr(mx, name, None)
        if dtype is None:
            raise NotOnBackend(f"mlx {mx.__version__} has no {name} dtype")
        return mx.iinfo(dtype)

    def from_numpy(self, a: Any) -> Any:
        return self.array(a)

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        mx = _core()

        with self.on_device():
            return mx.zeros(shape, dtype=dtype)

    def full(self, shape: tuple[int, ...], value: float, dtype: Any) -> Any:
        mx = _core()

        with self.on_device():
            return mx.full(shape, value, dtype=dtype)

    def eye(self, n: int, dtype: Any) -> Any:
        mx = _core()

        with self.on_device():
            return mx.eye(n, dtype=dtype)

    def random_normal(self, shape: tuple[int, ...], seed: int) -> Any:
        mx = _core()

        return mx.random.normal(shape, key=mx.random.key(seed))

    def evaluate(self, *xs: Any) -> None:
        mx = _core()

        mx.eval(*xs)

    def seconds_per_call(self, fn: Callable[[], Any], inner: int) -> float:
        """Every call's result queued with `mx.async_eval` (nothing runs until it is evaluated), the
        clock stopped after one `mx.synchronize()` once all are queued: evaluating each call on its
        own would charge every repetition a CPU-GPU round trip."""
        mx = _core()

        mx.synchronize()
        t0 = time.perf_counter()
        queued = []
        for _ in range(inner):
            result = fn()
            mx.async_eval(result)
            queued.append(result)  # kept until the device is done with it
        mx.synchronize()
        elapsed = time.perf_counter() - t0
        del queued
        return elapsed / inner

    def release_memory(self) -> None:
        mx = _core()

        mx.clear_cache()

    @classmethod
    def empty_caches(cls) -> None:
        mx = sys.modules.get("mlx.core")
        if mx is None:
            return
        with contextlib.suppress(Exception):
            clear = getattr(mx, "clear_cache", None) or mx.metal.clear_cache
            clear()

    def free_bytes(self) -> int | None:
        if self.backend.device == "cpu":
            return None
        mx = _core()

        try:
            info = mx.device_info() if hasattr(mx, "device_info") else mx.metal.device_info()
            limit = int(info.get("max_recommended_working_set_size", 0) or info.get("memory_size", 0))
            if limit:
                return limit - int(mx.get_active_memory())
        except Exception:  # an MLX build without device information: fall back to system memory
            pass
        return None

    def device_words(self) -> str:
        if self.backend.device != "gpu":
            return self.backend.device
        mx = _core()

        try:
            info = mx.device_info() if hasattr(mx, "device_info") else mx.metal.device_info()
            return f"{info.get('device_name', '?')} (architecture {info.get('architecture', '?')})"
        except Exception as e:  # a build without device information still names itself
            return f"MLX GPU ({'CUDA' if mx.cuda.is_available() else 'Metal'} build; no device information: {e})"
