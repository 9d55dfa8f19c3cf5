"""torch on the CPU, a CUDA device, Apple's MPS device or an AMD GPU through a ROCm build.

A ROCm build of torch answers through torch.cuda (its device is "cuda", `torch.cuda.is_available()`
is true) and says what it is in `torch.version.hip`; it is its own backend, `torch:rocm`,
described by its HIP version and the GPU's gfx architecture. What CUDA alone defines (a compute
capability) is not reported there, and the device is named in ROCm's terms (`rocm`, `device_words`).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable

from verified_book.authoring.registry import NotOnBackend
from verified_book.backends import Adapter, Backend, register, touches_cuda_here, try_import

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

    def random_normal(self, shape: tuple[int, ...], seed: int) -> Any:
        import torch

        generator = torch.Generator(device=self.backend.device).manual_seed(seed)
        return torch.randn(shape, generator=generator, device=self.backend.device)

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
        seconds: float = start.elapsed_time(end) / 1e3 / inner
        return seconds

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
