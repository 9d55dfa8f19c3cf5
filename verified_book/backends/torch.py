"""torch on the CPU, a CUDA device, Apple's MPS device or an AMD GPU through a ROCm build.

A ROCm build of torch answers through torch.cuda (its device is "cuda", `torch.cuda.is_available()`
is true) and says what it is in `torch.version.hip`; it is its own backend, `torch:rocm`,
described by its HIP version and the GPU's gfx architecture. What CUDA alone defines (compute
capability, TF32, FP8 as `torch._scaled_mm` takes it) is skipped there with the device named.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Any, Callable, Iterator, Sequence

from verified_book.authoring.inputs import setting
from verified_book.authoring.registry import InvariantFailed, NotOnBackend
from verified_book.backends import UNSET, Adapter, Backend, environment_setting, register, touches_cuda_here, try_import

FP8_CAPABILITY = (8, 9)  # FP8 tensor cores start at Ada and Hopper
ROCM = "torch:rocm"  # torch's ROCm (HIP) build on an AMD GPU


def _arch_fits(arch_list: list[str], major: int, minor: int) -> bool:
    """Whether a torch build's architecture list has code this device runs: a cubin of the same
    major version and no newer minor (`sm_120` runs on 12.0 and 12.1), or PTX no newer than it."""
    for arch in arch_list:
        kind, _, number = arch.partition("_")
        digits = "".join(c for c in number if c.isdigit())
        if len(digits) < 2:
            continue
        a_major, a_minor = int(digits[:-1]), int(digits[-1])
        if kind == "sm" and a_major == major and a_minor <= minor and not number.endswith("a"):
            return True
        if kind == "sm" and number.endswith("a") and (a_major, a_minor) == (major, minor):
            return True
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True
    return False


def cuda_build_problem(torch: Any) -> str | None:
    """Why a torch that sees a CUDA device cannot compute on it, or None: its architecture list
    lacks the card's (an RTX 50 card needs sm_120, from CUDA 12.8 builds on), or one tiny kernel
    fails ("no kernel image is available"). Says what to install."""
    name = torch.cuda.get_device_name(0)
    major, minor = torch.cuda.get_device_capability(0)
    archs = list(torch.cuda.get_arch_list() or [])
    install = (
        f"install a torch build with sm_{major}{minor} kernels (pip install torch=={torch.__version__.split('+')[0]} "
        "from PyPI, or from https://download.pytorch.org/whl/cu128 or newer; scripts/verify-cuda does it)"
    )
    built = (
        f"torch {torch.__version__} (CUDA {torch.version.cuda}) has kernels for {', '.join(archs) or 'no architecture'}"
    )
    if archs and not _arch_fits(archs, major, minor):
        return f"{built}, not for {name} (compute capability {major}.{minor}); {install}"
    return tiny_kernel_problem(torch, f"{name} (compute capability {major}.{minor})", f"{built}; {install}")


def tiny_kernel_problem(torch: Any, device: str, then: str) -> str | None:
    """Why one tiny kernel does not compute on the GPU torch calls "cuda" (a CUDA or a ROCm device), or None;
    `then` says what the build has and what to install. Only the worker that may touch the card runs it."""
    if not touches_cuda_here():
        return None
    try:
        value = (torch.ones(4, device="cuda") * 2).sum().item()
    except Exception as e:  # the kernel's own error says what is wrong (no kernel image, invalid device function)
        return f"a tiny kernel fails on {device}: {type(e).__name__}: {e}; {then}"
    if value != 8:
        return f"a tiny kernel on {device} computed {value} for 8; {then}"
    return None


def gfx_arch(torch: Any) -> str:
    """The AMD GPU's architecture as ROCm names it ("gfx1151"), without its feature flags ("gfx90a:xnack-")."""
    props = torch.cuda.get_device_properties(0)
    return str(getattr(props, "gcnArchName", "") or "").split(":")[0]


def rocm_words(torch: Any) -> str:
    """The AMD GPU in ROCm's own terms: its name, gfx architecture and the build's HIP version."""
    gfx = gfx_arch(torch) or "gfx architecture not reported"
    return f"{torch.cuda.get_device_name(0)} ({gfx}, ROCm/HIP {torch.version.hip})"


def rocm_build_problem(torch: Any) -> str | None:
    """Why a ROCm torch that sees an AMD GPU cannot compute on it, or None: its architecture list
    lacks the GPU's gfx (the Radeon 8060S of a Ryzen AI Max+ 395 needs gfx1151), or one tiny kernel
    fails ("HIP error: invalid device function"). Says what to install."""
    name = torch.cuda.get_device_name(0)
    gfx = gfx_arch(torch)
    archs = list(torch.cuda.get_arch_list() or [])
    wanted = gfx or "this GPU's"
    install = (
        f"install torch's ROCm build with {wanted} kernels (pip install torch=={torch.__version__.split('+')[0]} "
        "--index-url https://download.pytorch.org/whl/rocmX.Y, the variant `python3 run.py setup --dry-run` "
        "names; scripts/verify-rocm does it)"
    )
    built = (
        f"torch {torch.__version__} (HIP {torch.version.hip}) has kernels for {', '.join(archs) or 'no architecture'}"
    )
    if archs and gfx and gfx not in {a.split(":")[0] for a in archs}:
        return f"{built}, not for {name} ({gfx}); {install}"
    return tiny_kernel_problem(torch, f"{name} ({gfx})", f"{built}; {install}")


@register
class TorchAdapter(Adapter):
    library = "torch"
    module_name = "torch"
    names = ("torch:cpu", "torch:cuda", "torch:mps", ROCM)
    markers = {
        "cuda": "needs a CUDA device through torch",
        "mps": "needs Apple's Metal Performance Shaders device through torch",
        "rocm": "needs an AMD GPU through torch's ROCm (HIP) build",
    }
    devices = {ROCM: "cuda"}  # a ROCm build reaches the AMD GPU as torch's "cuda" device
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

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self._events: tuple[Any, Any] | None = None

    @classmethod
    def marker_for(cls, place: str) -> str:
        return place if place in cls.markers else "cpu"

    @property
    def rocm(self) -> bool:
        """Whether this backend is torch's ROCm build on an AMD GPU, where CUDA's own terms do not apply."""
        return self.backend.name == ROCM

    @classmethod
    def detect(cls) -> list[Backend]:
        torch, why = try_import("torch")
        if torch is None:
            return [Backend(n, False, why) for n in cls.names]
        version = torch.__version__
        hip = getattr(torch.version, "hip", None)
        out = [Backend("torch:cpu", True, "torch on the CPU", version, "cpu")]
        if torch.cuda.is_available() and hip:
            name = torch.cuda.get_device_name(0)
            words = rocm_words(torch)
            out.append(
                Backend(
                    "torch:cuda",
                    False,
                    f"torch {version} is a ROCm build: its GPU, {words}, is {ROCM}, not a CUDA device",
                    version,
                    name,
                )
            )
            problem = rocm_build_problem(torch)
            out.append(Backend(ROCM, not problem, problem or f"ROCm device {words}", version, name))
        elif torch.cuda.is_available():
            name = torch.cuda.get_device_name(0)
            problem = cuda_build_problem(torch)
            if problem:
                out.append(Backend("torch:cuda", False, problem, version, name))
            else:
                out.append(Backend("torch:cuda", True, f"CUDA device {name}", version, name))
            out.append(
                Backend(ROCM, False, f"torch {version} is a CUDA {torch.version.cuda} build, not a ROCm build", version)
            )
        else:
            build = (
                f"ROCm build (HIP {hip})"
                if hip
                else f"CUDA {torch.version.cuda} build"
                if torch.version.cuda
                else "CPU-only build"
            )
            out.append(Backend("torch:cuda", False, f"torch {version} ({build}) sees no CUDA device", version))
            out.append(
                Backend(
                    ROCM,
                    False,
                    f"torch {version} ({build}) sees no AMD GPU"
                    if hip
                    else f"torch {version} ({build}) is not a ROCm build (on a machine with an AMD GPU, "
                    "python3 run.py setup installs one)",
                    version,
                )
            )
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            out.append(Backend("torch:mps", True, "Apple MPS device", version, "mps"))
        else:
            out.append(
                Backend("torch:mps", False, f"torch {version} has no MPS device here (Apple silicon only)", version)
            )
        return out

    def array(self, values: Any, dtype: Any = None) -> Any:
        import torch

        return torch.as_tensor(values, dtype=dtype, device=self.backend.device)

    def dtype(self, name: str, label: str | None = None) -> Any:
        import torch

        found = getattr(torch, name, None)
        if not isinstance(found, torch.dtype):
            raise NotOnBackend(f"torch {torch.__version__} has no dtype for {label or name}")
        return found

    def tensor_dtype(self, name: str, label: str | None = None) -> Any:
        """torch's MPS device has no float8 tensors: a cast there raises TypeError, which would read
        as a failure instead of an absent format."""
        dtype = self.dtype(name, label)
        if self.backend.device == "mps" and name.startswith("float8"):
            raise NotOnBackend(f"torch on MPS has no {label or name} tensors (a cast to {name} raises TypeError there)")
        return dtype

    def astype(self, x: Any, dtype: Any) -> Any:
        return x.to(dtype)

    def to_bits(self, values: Sequence[float], name: str, label: str) -> list[int]:
        import torch

        dtype = self.tensor_dtype(name, label)
        x = torch.tensor(list(values), dtype=torch.float32, device=self.backend.device)
        return [int(v) for v in x.to(dtype).view(torch.uint8).tolist()]

    def from_bits(self, codes: Sequence[int], name: str, label: str) -> list[float]:
        import torch

        dtype = self.tensor_dtype(name, label)
        return torch.tensor(list(codes), dtype=torch.uint8, device=self.backend.device).view(dtype).float().tolist()

    def iinfo(self, name: str) -> Any:
        import torch

        dtype = getattr(torch, name, None)
        if dtype is None:
            raise NotOnBackend(f"torch {torch.__version__} has no {name} dtype")
        try:
            return torch.iinfo(dtype)
        except TypeError as e:
            raise NotOnBackend(
                f"torch {torch.__version__} has an {name} dtype but torch.iinfo does not answer for it ({e})"
            ) from None

    def default_float_bits(self) -> int:
        import torch

        declared = torch.get_default_dtype()
        made = torch.tensor([1.0], device=self.backend.device).dtype
        if made != declared:
            raise InvariantFailed(f"torch.get_default_dtype() is {declared}, but a float literal became {made}")
        return declared.itemsize * 8

    def to_numpy(self, x: Any) -> Any:
        return x.cpu().numpy()

    def from_numpy(self, a: Any) -> Any:
        import torch

        return torch.from_numpy(a).to(self.backend.device)

    def numel(self, x: Any) -> int:
        return int(x.numel())

    def itemsize(self, x: Any) -> int:
        return int(x.element_size())

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        import torch

        return torch.zeros(shape, dtype=dtype, device=self.backend.device)

    def full(self, shape: tuple[int, ...], value: float, dtype: Any) -> Any:
        import torch

        return torch.full(shape, value, dtype=dtype, device=self.backend.device)

    def eye(self, n: int, dtype: Any) -> Any:
        import torch

        return torch.eye(n, dtype=dtype, device=self.backend.device)

    def placeholder(self, shape: tuple[int, ...]) -> Any:
        import torch

        return torch.empty(shape, device="meta")

    def random_normal(self, shape: tuple[int, ...], seed: int) -> Any:
        import torch

        generator = torch.Generator(device=self.backend.device).manual_seed(seed)
        return torch.randn(shape, generator=generator, device=self.backend.device)

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

        return float(F.cross_entropy(logits, self.array([target], torch.int64)).item())

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

    def sync(self) -> None:
        import torch

        if self.backend.device == "cuda":
            torch.cuda.synchronize()
        elif self.backend.device == "mps":
            torch.mps.synchronize()

    def seconds_per_call(self, fn: Callable[[], Any], inner: int) -> float:
        if self.backend.device != "cuda":
            return super().seconds_per_call(fn, inner)
        import torch

        if self._events is None:
            self._events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        start, end = self._events
        torch.cuda.synchronize()
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / inner

    def release_memory(self) -> None:
        import torch

        if self.backend.device == "cuda":
            torch.cuda.empty_cache()
        elif self.backend.device == "mps":
            torch.mps.empty_cache()

    @classmethod
    def empty_caches(cls) -> None:
        torch = sys.modules.get("torch")
        if torch is None:
            return
        with contextlib.suppress(Exception):  # a device that is gone cannot be cleaned; the next claim reports it
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        with contextlib.suppress(Exception):
            mps = getattr(torch, "mps", None)
            if mps is not None and torch.backends.mps.is_available():
                mps.empty_cache()

    def free_bytes(self) -> int | None:
        import torch

        if self.backend.device == "cuda":
            free, _total = torch.cuda.mem_get_info()
            return int(free)
        if self.backend.device == "mps":
            recommended = getattr(torch.mps, "recommended_max_memory", None)
            if recommended is not None:
                return int(recommended()) - int(torch.mps.current_allocated_memory())
        return None

    def copy_into(self, dst: Any, src: Any) -> Any:
        return dst.copy_(src)

    def matmul_into(self, a: Any, b: Any, out: Any) -> Callable[[], Any]:
        import torch

        return lambda: torch.matmul(a, b, out=out)

    def matmul_unsupported(self, dtype: str) -> str | None:
        import torch

        device = self.backend.device
        if dtype == "fp8" and self.rocm:
            return (
                f"FP8 matmul is measured with torch._scaled_mm on float8_e4m3fn as CUDA defines it; "
                f"{self.device_words()} "
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

    def device_words(self) -> str:
        import torch

        if self.rocm:
            return rocm_words(torch)
        if self.backend.device != "cuda":
            return self.backend.device
        major, minor = torch.cuda.get_device_capability()
        return f"{torch.cuda.get_device_name()} (compute capability {major}.{minor}, sm_{major}{minor})"

    def compute_capability(self) -> tuple[int, int] | None:
        import torch

        if self.backend.device != "cuda" or self.rocm:  # on ROCm, torch reports the gfx version as a capability
            return None
        major, minor = torch.cuda.get_device_capability()
        return int(major), int(minor)

    def matmul_settings(self) -> dict[str, Any]:
        import torch

        gpu = self.backend.device == "cuda"
        found: dict[str, Any] = {
            "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": environment_setting("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE")
        }
        if gpu and not self.rocm:
            found["NVIDIA_TF32_OVERRIDE"] = environment_setting("NVIDIA_TF32_OVERRIDE")
        found["precision"] = setting(
            "torch.get_float32_matmul_precision()", torch.get_float32_matmul_precision(), self.backend.name
        )
        if gpu:
            found["device"] = setting("device", self.device_words(), self.backend.name)
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
        if self.backend.device == "cuda" and not self.rocm and os.environ.get("NVIDIA_TF32_OVERRIDE") is not None:
            return f"NVIDIA_TF32_OVERRIDE={os.environ['NVIDIA_TF32_OVERRIDE']} overrides cuBLAS's math mode here"
        return None

    def tf32_by_settings(self) -> tuple[bool, str]:
        import torch

        if self.rocm:
            raise NotOnBackend(
                f"TF32 is a mode of NVIDIA's tensor cores that torch's CUDA settings select; {self.device_words()} "
                "is a ROCm device, so the figure does not apply to it"
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
