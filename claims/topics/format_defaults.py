"""What the libraries do by default: the floating dtype a new tensor gets, and what an FP32 matmul keeps.

Two statements of the source chapter are about defaults, and both are checked against
the library on the machine that runs the suite:

- "BF16 is the default working dtype for both my inference and my training labs": the
  author's choice, true as stated; what the libraries themselves default to is read from
  them (torch.get_default_dtype(), and the dtype a float literal gets);
- "Matmuls silently run in TF32 by default on recent hardware unless you ask for true
  FP32": in the chapter's tool, PyTorch, on a tensor-core GPU. On such a GPU the FP32
  matmul is probed with PyTorch's settings left as they are; elsewhere the same answer is
  read from the two settings that decide it, `torch.get_float32_matmul_precision()` and
  `torch.backends.cuda.matmul.allow_tf32`. On any backend, an FP32 matmul is probed for
  how many mantissa bits of its inputs survive. The probe multiplies matrices filled with
  1 + 2^-k by the identity; the product is exact in FP32 for every k up to 23, while
  TF32 rounds the inputs to 10 mantissa bits and BF16 to 7, so the largest k that
  survives is the number of mantissa bits the matmul really kept.

What decides that answer on a machine is recorded with it (`matmul_settings`): the environment
variables that switch TF32 on or off behind the library's back (NGC containers set
`TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1`, clusters `NVIDIA_TF32_OVERRIDE=0`; MLX reads
`MLX_ENABLE_TF32`, and its CUDA build and newer Apple GPUs use TF32-like matmuls unless it is 0),
the library's own mode, and the device's architecture. Where the environment, not the library,
sets the default, the default's figure is skipped with the variable named.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

from verified_book.backends import Backend
from verified_book.inputs import setting, vendor
from verified_book.registry import InvariantFailed, NotOnBackend, claim
from claims.topics.formats import FORMATS

TORCH = ("torch:cpu", "torch:cuda", "torch:mps")
LIBRARIES: dict[str, tuple[str, ...]] = {"numpy": ("numpy",), "torch": TORCH, "mlx": ("mlx:cpu", "mlx:gpu")}
PROBE_SIZE = 256  # large enough that a GPU library takes its tensor-core path


def default_float_bits(backend: Backend) -> int:
    """Bits of the dtype a library gives a float literal, and (torch) of its declared default."""
    if backend.library == "numpy":
        import numpy as np

        return np.asarray([1.0]).dtype.itemsize * 8
    if backend.library == "torch":
        import torch

        declared = torch.get_default_dtype()
        made = torch.tensor([1.0], device=backend.device).dtype
        if made != declared:
            raise InvariantFailed(f"torch.get_default_dtype() is {declared}, but a float literal became {made}")
        return declared.itemsize * 8
    import mlx.core as mx

    return mx.array([1.0]).dtype.size * 8


def capability(text: str) -> tuple[int, int]:
    """A compute capability written "major.minor", as a tuple that compares correctly (8.9 < 10.0)."""
    major, minor = str(text).split(".")
    return int(major), int(minor)


for _lib, _names in LIBRARIES.items():
    claim(f"formats.default.float_bits.{_lib}", kind="library", backends=_names)(default_float_bits)


def _on_device(backend: Backend) -> contextlib.AbstractContextManager[Any]:
    """MLX computes on the stream of the backend's device; the others place tensors explicitly."""
    if backend.library != "mlx":
        return contextlib.nullcontext()
    module = backend.module
    return module.stream(module.cpu if backend.device == "cpu" else module.gpu)


def _square(backend: Backend, size: int, value: float | None) -> Any:
    """A size × size FP32 matrix on the backend's device: filled with `value`, or the identity for None."""
    module = backend.module
    if backend.library == "torch":
        place = {"dtype": module.float32, "device": backend.device}
        return module.eye(size, **place) if value is None else module.full((size, size), value, **place)
    return module.eye(size, dtype=module.float32) if value is None else module.full((size, size), value, dtype=module.float32)


def kept_mantissa_bits(backend: Backend) -> int:
    """Mantissa bits an FP32 matmul keeps: the largest k for which (1 + 2^-k) · I comes back exact."""
    kept = 0
    with _on_device(backend):
        identity = _square(backend, PROBE_SIZE, None)
        for k in range(1, FORMATS["fp32"].mantissa + 1):
            value = 1.0 + 2.0**-k
            product = _square(backend, PROBE_SIZE, value) @ identity
            if not bool((product == value).all().item()):
                break
            kept = k
    return kept


UNSET = "unset"


def _variable(name: str) -> str:
    return setting(name, os.environ.get(name, UNSET), "environment")


def _device_words(backend: Backend) -> str:
    """The device and its architecture, as the library names them."""
    module = backend.module
    if backend.library == "torch" and backend.device == "cuda":
        major, minor = module.cuda.get_device_capability()
        return f"{module.cuda.get_device_name()} (compute capability {major}.{minor}, sm_{major}{minor})"
    if backend.library == "mlx" and backend.device == "gpu":
        try:
            info = module.device_info() if hasattr(module, "device_info") else module.metal.device_info()
            return f"{info.get('device_name', '?')} (architecture {info.get('architecture', '?')})"
        except Exception as e:  # a build without device information still names itself
            return f"MLX GPU ({'CUDA' if module.cuda.is_available() else 'Metal'} build; no device information: {e})"
    return backend.device


def matmul_settings(backend: Backend) -> dict[str, Any]:
    """Record what decides an FP32 matmul's precision on this backend, and return it by name."""
    found: dict[str, Any] = {}
    if backend.library == "torch":
        found["TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"] = _variable("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE")
        if backend.device == "cuda":
            found["NVIDIA_TF32_OVERRIDE"] = _variable("NVIDIA_TF32_OVERRIDE")
        found["precision"] = setting("torch.get_float32_matmul_precision()", backend.module.get_float32_matmul_precision(),
                                     backend.name)
    elif backend.library == "mlx" and backend.device == "gpu":
        found["MLX_ENABLE_TF32"] = _variable("MLX_ENABLE_TF32")
    if backend.device in ("cuda", "gpu"):
        found["device"] = setting("device", _device_words(backend), backend.name)
    return found


def environment_default(backend: Backend) -> str | None:
    """Why an FP32 matmul's default precision on this backend is the environment's, not the
    library's own; None where nothing outside the library sets it. Reads no device."""
    if backend.library == "torch":
        precision = backend.module.get_float32_matmul_precision()
        if precision != "highest":
            variable = os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", UNSET)
            because = (f" (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE={variable} sets it, as NGC containers do)"
                       if variable not in (UNSET, "0") else "")
            return f"FP32 matmul precision starts at {precision!r} here, not torch's default 'highest'{because}"
        if backend.device == "cuda" and os.environ.get("NVIDIA_TF32_OVERRIDE") is not None:
            return f"NVIDIA_TF32_OVERRIDE={os.environ['NVIDIA_TF32_OVERRIDE']} overrides cuBLAS's math mode here"
    if backend.library == "mlx" and backend.device == "gpu" and os.environ.get("MLX_ENABLE_TF32") is not None:
        return f"MLX_ENABLE_TF32={os.environ['MLX_ENABLE_TF32']} sets MLX's FP32 matmul precision here"
    return None


@claim("formats.default.matmul.kept_bits", kind="library")
def default_matmul_bits(backend: Backend) -> int:
    """Mantissa bits an FP32 matmul keeps with the library's settings left as they are."""
    overridden = environment_default(backend)
    if overridden:
        raise NotOnBackend(f"{overridden}; the figure is the library's own default, so it is checked only where "
                           "the environment leaves it alone")
    matmul_settings(backend)
    return kept_mantissa_bits(backend)


TORCH = ("torch:cpu", "torch:cuda", "torch:mps")


@claim("formats.default.matmul.torch_tensor_core_bits", kind="library", backends=TORCH,
       quote="Matmuls silently run in TF32 by default on recent hardware unless you ask for true FP32.",
       quote_at="tensors-autograd-and-number-formats.txt:33")
def torch_tensor_core_bits(backend: Backend) -> int:
    """Mantissa bits PyTorch's FP32 matmul keeps by default on a GPU with TF32 tensor cores.

    Measured by the probe on such a GPU; on any other device, what PyTorch's own defaults
    select there: TF32's mantissa if TF32 is allowed for matmuls, else FP32's. On a
    tensor-core GPU the two must agree.
    """
    import torch

    allowed = torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest"
    by_settings = FORMATS["tf32" if allowed else "fp32"].mantissa
    if backend.device == "cuda":
        found = torch.cuda.get_device_capability()
        needed = capability(vendor("cuda_formats.toml", "tf32"))
        if found >= needed:
            measured = kept_mantissa_bits(backend)
            if measured != by_settings:
                raise InvariantFailed(f"the default FP32 matmul kept {measured} bits; torch's settings "
                                      f"(allow_tf32={torch.backends.cuda.matmul.allow_tf32}, precision "
                                      f"{torch.get_float32_matmul_precision()!r}) select {by_settings}")
            return measured
    return by_settings


@contextlib.contextmanager
def _float32_matmul_precision(setting: str) -> Iterator[None]:
    import torch

    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(setting)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


@claim("formats.default.matmul.tf32_kept_bits", kind="library", backends=("torch:cuda",))
def tf32_matmul_bits(backend: Backend) -> int:
    """Mantissa bits an FP32 matmul keeps once TF32 is asked for with set_float32_matmul_precision("high")."""
    import torch

    forced = os.environ.get("NVIDIA_TF32_OVERRIDE")
    if forced == "0":
        raise NotOnBackend("NVIDIA_TF32_OVERRIDE=0 turns TF32 off in cuBLAS on this machine, so asking for it keeps "
                           "FP32's 23 bits; the figure is what TF32 keeps where it is allowed")
    matmul_settings(backend)
    found = torch.cuda.get_device_capability()
    needed = capability(vendor("cuda_formats.toml", "tf32"))
    if found < needed:
        raise NotOnBackend(f"TF32 tensor cores start at compute capability {needed[0]}.{needed[1]}; this device is {found[0]}.{found[1]}")
    with _float32_matmul_precision("high"):
        return kept_mantissa_bits(backend)
