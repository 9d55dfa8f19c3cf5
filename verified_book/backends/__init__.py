"""Backends: where a library claim is computed, detected once per run.

A backend is a library on a device: `numpy`, `torch:cpu`, `torch:cuda`, `torch:mps`,
`mlx:cpu`, `mlx:gpu`. Detection never raises: a library that is missing or a device
that is absent makes an unavailable backend whose reason says what was found.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

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
