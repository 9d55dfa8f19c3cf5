"""Backends: where a library claim is computed, detected once per run.

A backend is a library on a device: `numpy`, `torch:cpu`, `torch:cuda`, `torch:mps`,
`mlx:cpu`, `mlx:gpu`. Detection never raises: a library that is missing or a device
that is absent makes an unavailable backend whose reason says what was found.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Iterator

NAMES = ("numpy", "torch:cpu", "torch:cuda", "torch:mps", "mlx:cpu", "mlx:gpu")


@dataclass(frozen=True)
class Backend:
    """A library on a device, and whether this machine has it."""

    name: str
    available: bool
    reason: str
    version: str | None = None
    device_name: str | None = None

    @property
    def library(self) -> str:
        return self.name.split(":")[0]

    @property
    def device(self) -> str:
        return self.name.split(":")[1] if ":" in self.name else "cpu"

    @property
    def marker(self) -> str:
        """The pytest marker this backend's tests carry."""
        if self.library == "mlx":
            return "mlx"
        return {"cuda": "cuda", "mps": "mps"}.get(self.device, "cpu")

    @property
    def module(self) -> ModuleType:
        """The library itself: numpy, torch, or mlx.core."""
        return importlib.import_module({"numpy": "numpy", "torch": "torch", "mlx": "mlx.core"}[self.library])

    def tensor(self, values: Any, dtype: Any = None) -> Any:
        """Make an array of this library on this device."""
        if self.library == "numpy":
            import numpy as np

            return np.asarray(values, dtype=dtype)
        if self.library == "torch":
            import torch

            return torch.as_tensor(values, dtype=dtype, device=self.device)
        import mlx.core as mx

        with mx.stream(mx.cpu if self.device == "cpu" else mx.gpu):
            return mx.array(values, dtype=dtype) if dtype is not None else mx.array(values)

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        """Make this backend's device the default for the block: a claim evaluated inside computes
        there even where it makes arrays without naming a device. MLX picks its default device
        itself (the GPU on a Mac), so an `mlx:cpu` claim must run inside the CPU's stream; torch
        and numpy place every tensor explicitly."""
        if self.library != "mlx" or not self.available:
            yield
            return
        mx = self.module
        with mx.stream(mx.cpu if self.device == "cpu" else mx.gpu):
            yield

    def sync(self) -> None:
        """Wait for queued work on the device, before a clock is read."""
        if self.name == "torch:cuda":
            import torch

            torch.cuda.synchronize()
        elif self.name == "torch:mps":
            import torch

            torch.mps.synchronize()

    def __str__(self) -> str:
        return self.name


NO_BACKEND = Backend("none", True, "exact and quoted claims are computed once, on no backend")


def _try_import(name: str) -> tuple[ModuleType | None, str]:
    try:
        return importlib.import_module(name), ""
    except Exception as e:  # an install that imports wrongly is reported, not raised
        return None, f"{name} does not import ({type(e).__name__}: {e})"


def _detect_numpy() -> list[Backend]:
    np, why = _try_import("numpy")
    if np is None:
        return [Backend("numpy", False, why)]
    return [Backend("numpy", True, "numpy on the CPU", np.__version__, "cpu")]


def _detect_torch() -> list[Backend]:
    torch, why = _try_import("torch")
    if torch is None:
        return [Backend(n, False, why) for n in ("torch:cpu", "torch:cuda", "torch:mps")]
    version = torch.__version__
    out = [Backend("torch:cpu", True, "torch on the CPU", version, "cpu")]
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        problem = cuda_build_problem(torch)
        if problem:
            out.append(Backend("torch:cuda", False, problem, version, name))
        else:
            out.append(Backend("torch:cuda", True, f"CUDA device {name}", version, name))
    else:
        build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU-only build"
        out.append(Backend("torch:cuda", False, f"torch {version} ({build}) sees no CUDA device", version))
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append(Backend("torch:mps", True, "Apple MPS device", version, "mps"))
    else:
        out.append(Backend("torch:mps", False, f"torch {version} has no MPS device here (Apple silicon only)", version))
    return out


CUDA_WORKER = "gw0"  # under xdist, the one worker that runs the CUDA items (see verified_book.scheduling)


def touches_cuda_here() -> bool:
    """Whether this process may create a CUDA context: not an xdist worker that runs no CUDA item,
    since each context holds hundreds of MB of the card's memory."""
    return os.environ.get("PYTEST_XDIST_WORKER", CUDA_WORKER) == CUDA_WORKER


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
    install = (f"install a torch build with sm_{major}{minor} kernels (pip install torch=={torch.__version__.split('+')[0]} "
               "from PyPI, or from https://download.pytorch.org/whl/cu128 or newer; scripts/verify-cuda does it)")
    built = f"torch {torch.__version__} (CUDA {torch.version.cuda}) has kernels for {', '.join(archs) or 'no architecture'}"
    if archs and not _arch_fits(archs, major, minor):
        return f"{built}, not for {name} (compute capability {major}.{minor}); {install}"
    if not touches_cuda_here():
        return None
    try:
        value = (torch.ones(4, device="cuda") * 2).sum().item()
    except Exception as e:  # the kernel's own error says what is wrong (no kernel image, a driver mismatch)
        return f"a tiny kernel fails on {name} (compute capability {major}.{minor}): {type(e).__name__}: {e}; {built}; {install}"
    if value != 8:
        return f"a tiny kernel on {name} computed {value} for 8; {built}; {install}"
    return None


def _detect_mlx() -> list[Backend]:
    mx, why = _try_import("mlx.core")
    if mx is None:
        return [Backend(n, False, why) for n in ("mlx:cpu", "mlx:gpu")]
    version = getattr(mx, "__version__", "?")
    out = [Backend("mlx:cpu", True, "MLX on the CPU", version, "cpu")]
    try:
        gpu = bool(mx.is_available(mx.gpu))
    except Exception:
        gpu = False
    if gpu:
        out.append(Backend("mlx:gpu", True, "MLX on the GPU", version, "gpu"))
    else:
        out.append(Backend("mlx:gpu", False, f"mlx {version} has no GPU device here (Metal or CUDA build needed)", version))
    return out


@functools.cache
def detect() -> dict[str, Backend]:
    """Every backend name with its availability on this machine, in the order of NAMES."""
    found = {b.name: b for b in (*_detect_numpy(), *_detect_torch(), *_detect_mlx())}
    return {name: found[name] for name in NAMES}


def available() -> list[Backend]:
    return [b for b in detect().values() if b.available]


def summary() -> str:
    """One line for the run header: what this machine has."""
    return ", ".join(b.name for b in available()) or "no backend"
