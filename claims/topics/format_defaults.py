"""What the libraries do by default: the floating dtype a new tensor gets, and what an FP32 matmul keeps.

Two statements of the source chapter are about defaults, and both are checked against
the library on the machine that runs the suite:

- "BF16 is the default working dtype": a library's default floating dtype is read from
  the library itself (torch.get_default_dtype(), and the dtype a float literal gets);
- "matmuls silently run in TF32 by default": an FP32 matmul is probed for how many
  mantissa bits of its inputs survive. The probe multiplies matrices filled with
  1 + 2^-k by the identity; the product is exact in FP32 for every k up to 23, while
  TF32 rounds the inputs to 10 mantissa bits and BF16 to 7, so the largest k that
  survives is the number of mantissa bits the matmul really kept.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from verified_book.backends import Backend, names_of
from verified_book.inputs import vendor
from verified_book.registry import NotOnBackend, claim
from claims.topics.formats import FORMATS

LIBRARIES: dict[str, tuple[str, ...]] = {lib: names_of(lib) for lib in ("numpy", "torch", "mlx")}  # the book's figures
PROBE_SIZE = 256  # large enough that a GPU library takes its tensor-core path


def default_float_bits(backend: Backend) -> int:
    """Bits of the dtype a library gives a float literal, and (torch) of its declared default."""
    return backend.adapter.default_float_bits()


def capability(text: str) -> tuple[int, int]:
    """A compute capability written "major.minor", as a tuple that compares correctly (8.9 < 10.0)."""
    major, minor = str(text).split(".")
    return int(major), int(minor)


for _lib, _names in LIBRARIES.items():
    claim(f"formats.default.float_bits.{_lib}", kind="library", backends=_names)(default_float_bits)


def _square(backend: Backend, size: int, value: float | None) -> Any:
    """A size × size FP32 matrix on the backend's device: filled with `value`, or the identity for None."""
    adapter = backend.adapter
    float32 = adapter.dtype("float32")
    return adapter.eye(size, float32) if value is None else adapter.full((size, size), value, float32)


def kept_mantissa_bits(backend: Backend) -> int:
    """Mantissa bits an FP32 matmul keeps: the largest k for which (1 + 2^-k) · I comes back exact."""
    kept = 0
    with backend.adapter.on_device():
        identity = _square(backend, PROBE_SIZE, None)
        for k in range(1, FORMATS["fp32"].mantissa + 1):
            value = 1.0 + 2.0**-k
            product = _square(backend, PROBE_SIZE, value) @ identity
            if not bool((product == value).all().item()):
                break
            kept = k
    return kept


@claim("formats.default.matmul.kept_bits", kind="library")
def default_matmul_bits(backend: Backend) -> int:
    """Mantissa bits an FP32 matmul keeps with the library's settings left as they are."""
    return kept_mantissa_bits(backend)


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

    found = torch.cuda.get_device_capability()
    needed = capability(vendor("cuda_formats.toml", "tf32"))
    if found < needed:
        raise NotOnBackend(f"TF32 tensor cores start at compute capability {needed[0]}.{needed[1]}; this device is {found[0]}.{found[1]}")
    with _float32_matmul_precision("high"):
        return kept_mantissa_bits(backend)
