"""Special values, integer ranges and scale widths: what the format table says beyond the layouts.

Layouts, biases, eps, largest and smallest values are claimed in `claims.topics.formats`,
integer grids, the E2M1 grid and significant digits in `claims.topics.formats_table`,
MXFP4's bits per weight in `claims.topics.quantisation`. This module adds:

- which bit patterns of E4M3 and E5M2 are infinities and NaNs, and what a cast of
  infinity gives on each library (they do not agree: ml_dtypes gives NaN, torch and
  MLX saturate to the largest finite value);
- INT8's and INT4's (min, max) ranges, and how many magnitudes E2M1 has;
- the width of MX's E8M0 block scale as each library stores it;
- the decimal forms the chapter prints (digits a library guarantees, eps to the nearest decade).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from verified_book.backends import Backend
from verified_book.registry import InvariantFailed, NotOnBackend, claim
from claims.topics.formats import FORMATS, Format, dtype_of, tensor_dtype
from claims.topics.formats_table import INT_FORMATS, e2m1_magnitudes, iinfo

TORCH = ("torch:cpu", "torch:cuda", "torch:mps")
MLX = ("mlx:cpu", "mlx:gpu")
LIBRARIES: dict[str, tuple[str, ...]] = {"ml_dtypes": ("numpy",), "torch": TORCH, "mlx": MLX}
FP8 = (FORMATS["e4m3"], FORMATS["e5m2"])


def _torch_fp8(backend: Backend, fmt: Format) -> Any:
    return tensor_dtype(backend, fmt)


def encode(backend: Backend, fmt: Format, value: float) -> int:
    """The bit pattern a library's cast from FP32 gives for `value` in an 8-bit format."""
    if backend.library == "mlx":
        if fmt.id != "e4m3":
            raise NotOnBackend(f"mlx has no {fmt.label} conversion (mx.to_fp8 converts to E4M3 only)")
        import mlx.core as mx

        return int(mx.to_fp8(backend.tensor([value], mx.float32)).tolist()[0])
    if backend.library == "numpy":
        import numpy as np

        return int(np.array([value], np.float32).astype(dtype_of(backend, fmt)).view(np.uint8)[0])
    import torch

    dtype = _torch_fp8(backend, fmt)
    return int(torch.tensor([value], dtype=torch.float32, device=backend.device).to(dtype).view(torch.uint8).item())


def decode(backend: Backend, fmt: Format, codes: list[int]) -> list[float]:
    """The values a library reads from bit patterns of an 8-bit format, as floats."""
    if backend.library == "mlx":
        if fmt.id != "e4m3":
            raise NotOnBackend(f"mlx has no {fmt.label} conversion (mx.from_fp8 reads E4M3 only)")
        import mlx.core as mx

        return mx.from_fp8(backend.tensor(codes, mx.uint8), dtype=mx.float32).tolist()
    if backend.library == "numpy":
        import numpy as np

        return np.array(codes, np.uint8).view(dtype_of(backend, fmt)).astype(np.float32).tolist()
    import torch

    dtype = _torch_fp8(backend, fmt)
    return torch.tensor(codes, dtype=torch.uint8, device=backend.device).view(dtype).float().tolist()


def inf_bits(backend: Backend, fmt: Format) -> int:
    """The bit pattern a cast of +inf gives: what each library does with a value it cannot hold."""
    return encode(backend, fmt, math.inf)


def inf_value(backend: Backend, fmt: Format) -> float:
    """The value a cast of +inf reads back as."""
    return decode(backend, fmt, [inf_bits(backend, fmt)])[0]


# Which formats each library can cast to, and where the cast of inf reads back as a number (not NaN).
CASTS = {"ml_dtypes": (FP8, (FORMATS["e5m2"],)), "torch": (FP8, FP8), "mlx": ((FORMATS["e4m3"],), (FORMATS["e4m3"],))}
for _lib, (_bits_formats, _value_formats) in CASTS.items():
    claim(f"formats.special.{{fmt}}.inf_bits.{_lib}", kind="library", over={"fmt": _bits_formats}, backends=LIBRARIES[_lib])(inf_bits)
    claim(f"formats.special.{{fmt}}.inf_value.{_lib}", kind="library", over={"fmt": _value_formats}, backends=LIBRARIES[_lib])(inf_value)


@claim("formats.special.{fmt}.{kind}", kind="library", over={"fmt": FP8, "kind": ("infinities", "nans")})
def special_patterns(backend: Backend, fmt: Format, kind: str) -> int:
    """How many of the 256 bit patterns decode to ±inf, or to NaN."""
    values = decode(backend, fmt, list(range(256)))
    if kind == "infinities":
        return sum(1 for v in values if math.isinf(v))
    return sum(1 for v in values if math.isnan(v))


@claim("formats.special.{fmt}.max_bits", kind="exact", over={"fmt": FP8})
def max_bits(fmt: Format) -> int:
    """The bit pattern of the largest finite value, from the layout: 0x7E for E4M3, 0x7B for E5M2."""
    top_exponent = 2**fmt.exponent - 1 if fmt.specials == "fn" else 2**fmt.exponent - 2
    mantissa = 2**fmt.mantissa - 2 if fmt.specials == "fn" else 2**fmt.mantissa - 1
    return (top_exponent << fmt.mantissa) | mantissa


@claim("formats.integer.{name}.range", kind="library", over={"name": tuple(INT_FORMATS)})
def integer_range(backend: Backend, name: str) -> tuple[int, int]:
    """A signed integer type's (min, max) as the library's iinfo reports it: -2^(b-1) to 2^(b-1) - 1."""
    spec = INT_FORMATS[name]
    info = iinfo(backend, spec)
    found = (int(info.min), int(info.max))
    derived = (-(2 ** (spec.bits - 1)), 2 ** (spec.bits - 1) - 1)
    if found != derived:
        raise InvariantFailed(f"{backend.name} reports {name} spans {found}; {spec.bits} two's-complement bits give {derived}")
    return found


@claim("formats.grid.e2m1.count", kind="exact")
def e2m1_count() -> int:
    """How many distinct magnitudes E2M1's layout gives (the grid itself is formats.e2m1.grid)."""
    return len(e2m1_magnitudes(FORMATS["e2m1"]))


@claim("formats.mx.e8m0.bits", kind="library")
def e8m0_bits(backend: Backend) -> int:
    """The width of MX's E8M0 block scale as a library stores it: an exponent with no sign or mantissa."""
    if backend.library == "numpy":
        import ml_dtypes

        info = ml_dtypes.finfo(ml_dtypes.float8_e8m0fnu)
        if (info.nexp, info.nmant) != (8, 0):
            raise InvariantFailed(f"ml_dtypes' float8_e8m0fnu has {info.nexp} exponent and {info.nmant} mantissa bits; E8M0 has 8 and 0")
        return int(info.bits)
    if backend.library == "torch":
        import torch

        if not hasattr(torch, "float8_e8m0fnu"):
            raise NotOnBackend(f"torch {torch.__version__} has no float8_e8m0fnu dtype")
        return torch.float8_e8m0fnu.itemsize * 8
    import mlx.core as mx

    weights = backend.tensor([[((3 * j) % 11 - 5) / 2 for j in range(64)]], mx.float32)
    scales = mx.quantize(weights, mode="mxfp4")[1]
    return scales.itemsize * 8


@claim("formats.decimal.fp32.guaranteed_digits", kind="library", backends=("numpy", *TORCH))
def fp32_guaranteed_digits(backend: Backend) -> int:
    """Digits a library promises for FP32: its finfo resolution is 10^-digits."""
    import numpy as np

    info = np.finfo(np.float32) if backend.library == "numpy" else backend.module.finfo(backend.module.float32)
    return round(-math.log10(float(info.resolution)))


@claim("formats.decimal.{fmt}.eps_decade", kind="exact", over={"fmt": (FORMATS["tf32"],)})
def eps_decade(fmt: Format) -> Fraction:
    """A format's eps to the nearest power of ten: 2^-10 is about 10^-3."""
    return Fraction(10) ** round(math.log10(float(fmt.eps())))
