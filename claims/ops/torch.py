"""This book's operations with torch, on the CPU, a CUDA device, Apple's MPS device or an AMD GPU (ROCm).

What CUDA alone defines (TF32, FP8 as `torch._scaled_mm` takes it) is skipped on a ROCm device with
the device named (`Adapter.rocm`, `Adapter.device_words`).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from typing import Any, Callable, Iterator, Sequence

from claims.ops.base import UNSET, Ops, environment_setting
from verified_book import InvariantFailed, NotOnBackend, setting


class TorchOps(Ops):
    library = "torch"
    features = frozenset(
        {
            "strides",
            "views",
            "finfo.resolution",
            "random",
            "copy",
            "nn",
            "autodiff",
            "optimizer",
            "grad_mode",
            "linear",
            "autocast",
            "thread_count",
            "fp8_matmul",
        }
    )
    shape_errors = (RuntimeError,)

    def to_bits(self, values: Sequence[float], name: str, label: str) -> list[int]:
        import torch

        dtype = self.adapter.tensor_dtype(name, label)
        x = torch.tensor(list(values), dtype=torch.float32, device=self.backend.device)
        return [int(v) for v in x.to(dtype).view(torch.uint8).tolist()]

    def from_bits(self, codes: Sequence[int], name: str, label: str) -> list[float]:
        import torch

        dtype = self.adapter.tensor_dtype(name, label)
        return torch.tensor(list(codes), dtype=torch.uint8, device=self.backend.device).view(dtype).float().tolist()

    def default_float_bits(self) -> int:
        import torch

        declared = torch.get_default_dtype()
        made = torch.tensor([1.0], device=self.backend.device).dtype
        if made != declared:
            raise InvariantFailed(f"torch.get_default_dtype() is {declared}, but a float literal became {made}")
        return declared.itemsize * 8

    def placeholder(self, shape: tuple[int, ...]) -> Any:
        import torch

        return torch.empty(shape, device="meta")

    def strides(self, x: Any) -> tuple[int, ...]:
        return tuple(x.stride())

    def element_offset(self, x: Any, i: int, j: int) -> int:
        return int(x[i, j].storage_offset())

    def allocated(self, parent: Any, result: Any) -> int:
        if result.untyped_storage().data_ptr() == parent.untyped_storage().data_ptr():
            return 0
        return int(result.untyped_storage().nbytes())

    def broadcast_to(self, x: Any, shape: tuple[int, ...]) -> Any:
        return x.expand(*shape)

    def logsumexp(self, x: Any) -> float:
        import torch

        return float(torch.logsumexp(x, dim=0).item())

    def cross_entropy(self, logits: Any, target: int) -> float:
        import torch
        import torch.nn.functional as F

        return float(F.cross_entropy(logits, self.adapter.array([target], torch.int64)).item())

    def layer_norm(self, width: int, eps: float | None = None) -> Any:
        import torch

        return torch.nn.LayerNorm(width, **({} if eps is None else {"eps": eps})).to(self.backend.device)

    def linear(self, x: Any, w: Any) -> Any:
        import torch

        return torch.nn.functional.linear(x, w)

    def gradient(self, fn: Callable[..., Any], args: Sequence[Any]) -> list[Any]:
        inputs = [a.detach().requires_grad_(True) for a in args]
        fn(*inputs).backward()
        return [x.grad for x in inputs]

    def jvp(self, fn: Callable[[Any], Any], primal: Any, tangent: Any) -> Any:
        import torch

        return torch.func.jvp(fn, (primal,), (tangent,))[1]

    def adam_bytes(self, widths: tuple[int, ...]) -> dict[str, int]:
        import torch

        device = self.backend.device
        torch.manual_seed(0)
        layers = [torch.nn.Linear(a, b) for a, b in zip(widths, widths[1:])]
        model = torch.nn.Sequential(layers[0], torch.nn.ReLU(), layers[1]).to(device)
        optimizer = torch.optim.Adam(model.parameters())
        model(torch.randn(8, widths[0], device=device)).pow(2).mean().backward()
        optimizer.step()
        params = list(model.parameters())
        size = lambda t: t.numel() * t.element_size()  # noqa: E731
        moments = scalars = 0
        for p in params:
            for value in optimizer.state[p].values():
                if value.shape == p.shape:
                    moments += size(value)
                else:
                    scalars += size(value)
        return {
            "params": sum(p.numel() for p in params),
            "tensors": len(params),
            "weights": sum(size(p) for p in params),
            "grads": sum(size(p.grad) for p in params),
            "moments": moments,
            "per_tensor_scalars": scalars,
        }

    def e8m0_bits(self) -> int:
        import torch

        if not hasattr(torch, "float8_e8m0fnu"):
            raise NotOnBackend(f"torch {torch.__version__} has no float8_e8m0fnu dtype")
        return torch.float8_e8m0fnu.itemsize * 8

    def e2m1_values(self) -> list[float]:
        import torch

        raise NotOnBackend(
            f"torch {torch.__version__} stores E2M1 only packed in pairs (float4_e2m1fn_x2) and cannot cast it"
        )

    def copy_into(self, dst: Any, src: Any) -> Any:
        return dst.copy_(src)

    def matmul_into(self, a: Any, b: Any, out: Any) -> Callable[[], Any]:
        import torch

        return lambda: torch.matmul(a, b, out=out)

    def matmul_unsupported(self, dtype: str) -> str | None:
        import torch

        device = self.backend.device
        if dtype == "fp8" and self.adapter.rocm:
            return (
                f"FP8 matmul is measured with torch._scaled_mm on float8_e4m3fn as CUDA defines it; "
                f"{self.adapter.device_words()} "
                "is a ROCm device, whose FP8 formats and kernels depend on its architecture, so it is not measured "
                "there"
            )
        if dtype == "fp8":
            if device != "cuda":
                return (
                    "FP8 matmul is measured only with torch on CUDA (torch._scaled_mm); "
                    f"torch has no FP8 matmul on {device}"
                )
            if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
                return f"torch {torch.__version__} has no torch._scaled_mm or float8_e4m3fn"
            from claims.probes.matmul import FP8_CAPABILITY

            capability = torch.cuda.get_device_capability()
            if tuple(capability) < FP8_CAPABILITY:
                return (
                    f"{torch.cuda.get_device_name()} has compute capability {capability[0]}.{capability[1]}; "
                    f"FP8 tensor cores need {FP8_CAPABILITY[0]}.{FP8_CAPABILITY[1]} or higher"
                )
            return None
        if device == "cuda" and dtype == "bf16" and not torch.cuda.is_bf16_supported():
            return f"{torch.cuda.get_device_name()} does not support bfloat16 through torch"
        return None

    def probe_values(self, shape: tuple[int, int], seed: int, fill: float) -> Any:
        import torch

        device = self.backend.device
        if device == "cpu":
            return torch.full(shape, fill, dtype=torch.float32)
        if device == "cuda":
            gen = torch.Generator(device="cuda").manual_seed(seed)
            return torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32)
        gen = torch.Generator().manual_seed(seed)
        return torch.randn(shape, generator=gen, dtype=torch.float32).to(device)

    def fp8_matmul(
        self, rows: int, inner: int, cols: int, seed: int, fill: float
    ) -> tuple[Callable[[], Any], list[Any]]:
        """One call of torch._scaled_mm on E4M3 operands, with unit scales, and the arrays."""
        import torch

        f8 = torch.float8_e4m3fn
        a = self.probe_values((rows, inner), seed, fill).to(f8)
        b = (
            self.probe_values((cols, inner), seed, fill).to(f8).t()
        )  # column-major, as _scaled_mm needs its second operand
        scale = torch.ones((), device=self.backend.device, dtype=torch.float32)

        def call() -> Any:
            out = torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
            return out[0] if isinstance(out, tuple) else out  # torch < 2.4 returned (out, amax)

        return call, [a, b, scale]

    def matmul_settings(self) -> dict[str, Any]:
        import torch

        gpu = self.backend.device == "cuda"
        found: dict[str, Any] = {
            "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": environment_setting("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE")
        }
        if gpu and not self.adapter.rocm:
            found["NVIDIA_TF32_OVERRIDE"] = environment_setting("NVIDIA_TF32_OVERRIDE")
        found["precision"] = setting(
            "torch.get_float32_matmul_precision()", torch.get_float32_matmul_precision(), self.backend.name
        )
        if gpu:
            found["device"] = setting("device", self.adapter.device_words(), self.backend.name)
        return found

    def matmul_environment(self) -> str | None:
        import torch

        precision = torch.get_float32_matmul_precision()
        if precision != "highest":
            variable = os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", UNSET)
            because = (
                f" (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE={variable} sets it, as NGC containers do)"
                if variable not in (UNSET, "0")
                else ""
            )
            return f"FP32 matmul precision starts at {precision!r} here, not torch's default 'highest'{because}"
        if (
            self.backend.device == "cuda"
            and not self.adapter.rocm
            and os.environ.get("NVIDIA_TF32_OVERRIDE") is not None
        ):
            return f"NVIDIA_TF32_OVERRIDE={os.environ['NVIDIA_TF32_OVERRIDE']} overrides cuBLAS's math mode here"
        return None

    def tf32_by_settings(self) -> tuple[bool, str]:
        import torch

        if self.adapter.rocm:
            raise NotOnBackend(
                "TF32 is a mode of NVIDIA's tensor cores that torch's CUDA settings select; "
                f"{self.adapter.device_words()} is a ROCm device, so the figure does not apply to it"
            )
        allow_tf32 = torch.backends.cuda.matmul.allow_tf32
        precision = torch.get_float32_matmul_precision()
        return (
            bool(allow_tf32) or precision != "highest",
            f"torch's settings (allow_tf32={allow_tf32}, precision {precision!r})",
        )

    @contextlib.contextmanager
    def full_precision_fp32(self) -> Iterator[str]:
        if self.backend.device != "cuda":
            yield ""
            return
        import torch

        previous = None
        note = ""
        with warnings.catch_warnings():  # torch may warn that these are its older TF32 settings
            warnings.simplefilter("ignore")
            try:
                previous = torch.get_float32_matmul_precision()
                torch.set_float32_matmul_precision("highest")
                if getattr(torch.backends.cuda.matmul, "allow_tf32", False):
                    note = "TF32 stays allowed by this torch's settings"
            except Exception as e:  # a torch that refuses mixing its TF32 settings: measure as set, and say so
                note = f"FP32 precision left as set ({type(e).__name__}: {e})"
        try:
            yield note
        finally:
            if previous is not None:
                with warnings.catch_warnings(), contextlib.suppress(Exception):
                    warnings.simplefilter("ignore")
                    torch.set_float32_matmul_precision(previous)

    @contextlib.contextmanager
    def one_thread(self) -> Iterator[None]:
        """torch's intra-op threads set to one for the block; restored after."""
        import torch

        previous = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(previous)
