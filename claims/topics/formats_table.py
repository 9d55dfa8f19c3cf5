"""The rest of the format table: integer grids, the E2M1 grid, significant digits and dynamic range.

`claims.topics.formats` holds each floating-point format's layout, bytes, eps, largest
and smallest values; this module adds what the chapter's table and its discussion say
beyond them:

- INT8 and INT4 as the libraries' `iinfo` reports them: the largest code (qmax), the
  number of steps in the grid, bits and bytes;
- E2M1's eight magnitudes, derived from its layout (1 sign, 2 exponent, 1 mantissa bit,
  bias 1, no specials) and enumerated from what the libraries decode;
- decimal significant digits, the significand's bits times log10(2);
- dynamic range in powers of two, largest over smallest subnormal, which is what
  NVIDIA's mixed-precision guide counts ("including denormals").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from claims.ops import ops
from claims.topics.formats import FORMATS, Format
from verified_book import Backend, InvariantFailed, claim, given, lazy_import

if TYPE_CHECKING:
    import sympy
else:
    sympy = lazy_import("sympy")  # loaded by the first claim that computes with it


@dataclass(frozen=True)
class IntFormat:
    """A signed integer code format; its id is also its dtype's name in every library that has it,
    its width a given input."""

    id: str

    @property
    def bits(self) -> int:
        return int(given(f"formats.{self.id}.bits"))


INT_FORMATS = {f.id: f for f in (IntFormat("int8"), IntFormat("int4"))}


def iinfo(backend: Backend, fmt: IntFormat) -> Any:
    """The backend's iinfo for an integer format, or NotOnBackend naming what is missing."""
    return backend.adapter.iinfo(fmt.id)


@claim(
    "formats.int.{fmt}.{field}",
    kind="library",
    over={"fmt": tuple(INT_FORMATS), "field": ("bits", "qmin", "qmax", "steps", "bytes")},
)
def int_field(backend: Backend, fmt: str, field: str) -> Any:
    """An integer code format's width, smallest and largest code (qmax of a symmetric grid), steps in its grid, and
    bytes per code."""
    spec = INT_FORMATS[fmt]
    info = iinfo(backend, spec)
    low, high = int(info.min), int(info.max)
    if (low, high) != (-(2 ** (spec.bits - 1)), 2 ** (spec.bits - 1) - 1):
        raise InvariantFailed(
            f"{backend.name} reports {fmt} as {low}..{high}; {spec.bits} two's-complement bits hold "
            f"{-(2 ** (spec.bits - 1))}..{2 ** (spec.bits - 1) - 1}"
        )
    steps = high - low + 1
    return {"bits": spec.bits, "qmin": low, "qmax": high, "steps": steps, "bytes": Fraction(int(math.log2(steps)), 8)}[
        field
    ]


def e2m1_magnitudes(fmt: Format) -> tuple[Fraction, ...]:
    """Every non-negative value of a no-specials format, from its layout alone.

    Exponent code 0 is subnormal: m / 2^mantissa x 2^(1 - bias). Codes above it are
    normal: (1 + m / 2^mantissa) x 2^(code - bias).
    """
    values = set()
    for code in range(2**fmt.exponent):
        for m in range(2**fmt.mantissa):
            fraction = Fraction(m, 2**fmt.mantissa)
            if code == 0:
                values.add(fraction * Fraction(2) ** (1 - fmt.bias))
            else:
                values.add((1 + fraction) * Fraction(2) ** (code - fmt.bias))
    return tuple(sorted(values))


def _decoded_e2m1(backend: Backend) -> list[float]:
    """The values the backend decodes from all sixteen E2M1 codes."""
    return ops(backend).e2m1_values()


@claim("formats.e2m1.grid", kind="library")
def e2m1_grid(backend: Backend) -> tuple[float, ...]:
    """E2M1's magnitudes, 0, 0.5, 1, 1.5, 2, 3, 4, 6, decoded by the backend and equal to the layout's."""
    derived = e2m1_magnitudes(FORMATS["e2m1"])
    decoded = _decoded_e2m1(backend)
    magnitudes = sorted({abs(v) for v in decoded})
    if [Fraction(v) for v in magnitudes] != list(derived):
        raise InvariantFailed(
            f"{backend.name} decodes E2M1's magnitudes as {magnitudes}; the layout (1, 2, 1) with bias 1 "
            f"gives {[float(v) for v in derived]}"
        )
    if sorted(decoded) != sorted([float(v) for v in derived] + [-float(v) for v in derived]):
        raise InvariantFailed(
            f"{backend.name} decodes the sixteen E2M1 codes as {decoded}; expected each magnitude with both signs"
        )
    return tuple(magnitudes)


@claim("formats.{fmt}.digits", kind="exact", over={"fmt": [FORMATS[f] for f in ("fp32", "fp16", "e4m3", "e5m2")]})
@claim(
    "formats.{fmt}.digits",
    kind="exact",
    over={"fmt": [FORMATS["bf16"]]},
    quote="it keeps about three significant digits",
    quote_at="tensors-gpus-and-precision.txt:340",
)
def digits(fmt: Format) -> float:
    """Decimal significant digits a format keeps: its significand's bits (mantissa + the implicit 1) times log10(2)."""
    return (fmt.mantissa + 1) * math.log10(2)


@claim("formats.{fmt}.binades", kind="exact", over={"fmt": [FORMATS[f] for f in ("bf16", "fp16")]})
@claim(
    "formats.{fmt}.binades",
    kind="exact",
    over={"fmt": [FORMATS["fp32"]]},
    quote="single precision dynamic range including denormals is 264 powers of 2",
    quote_at="tensors-gpus-and-precision.txt:340",
)
def binades(fmt: Format) -> float:
    """Dynamic range in powers of two, subnormals included: log2(largest / smallest subnormal)."""
    ratio = fmt.largest() / fmt.smallest_subnormal()
    return float(sympy.log(ratio, 2).evalf(30))


@claim("formats.mixed_adam.bytes_per_param", kind="exact")
def training_bytes() -> sympy.Rational:
    """Bytes per parameter of mixed-precision Adam training: BF16 weights and gradients, FP32 copy and two FP32
    moments."""
    bf16, fp32 = FORMATS["bf16"], FORMATS["fp32"]
    parts = {
        "bf16 weights": bf16,
        "bf16 gradients": bf16,
        "fp32 primary copy": fp32,
        "fp32 first moment": fp32,
        "fp32 second moment": fp32,
    }
    return sympy.Rational(sum(f.storage_bits for f in parts.values()), 8)


@claim("formats.fp16.mantissa_over_bf16", kind="exact")
def fp16_mantissa_over_bf16() -> int:
    """How many more mantissa bits FP16 has than BF16."""
    return FORMATS["fp16"].mantissa - FORMATS["bf16"].mantissa


TABLE_ROWS = ("bf16", "fp16", "e4m3", "e5m2", "e2m1", "int8", "int4")  # the formats table's rows below FP32


def _row_bytes(name: str) -> Fraction:
    if name in INT_FORMATS:
        return Fraction(INT_FORMATS[name].bits, 8)
    return Fraction(FORMATS[name].storage_bits, 8)


@claim("formats.fp32.bytes_over_rows.{end}", kind="exact", over={"end": ("least", "most")})
def fp32_bytes_over_rows(end: str) -> Fraction:
    """FP32's bytes per parameter over another row's of the formats table: the least and the most of those ratios."""
    ratios = [_row_bytes("fp32") / _row_bytes(name) for name in TABLE_ROWS]
    return min(ratios) if end == "least" else max(ratios)


@claim("formats.{fmt}.bytes_over_{base}", kind="exact", over={"fmt": [FORMATS["e4m3"]], "base": [FORMATS["bf16"]]})
@claim("formats.{fmt}.bytes_over_{base}", kind="exact", over={"fmt": [FORMATS["bf16"]], "base": [FORMATS["fp32"]]})
def bytes_over(fmt: Format, base: Format) -> Fraction:
    """A format's bytes per value over another's, from their storage widths: FP8 against BF16, BF16 against FP32."""
    return Fraction(fmt.storage_bits, base.storage_bits)


@claim("formats.{fmt}.bits_after_sign", kind="exact", over={"fmt": [FORMATS["e4m3"]]})
def bits_after_sign(fmt: Format) -> int:
    """The bits an FP8 format splits between exponent and mantissa: its width less the sign bit."""
    return fmt.exponent + fmt.mantissa
