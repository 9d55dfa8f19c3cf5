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

from claims.ops import ops, supporting
from claims.topics.formats import FORMATS, Format
from claims.topics.formats_table import INT_FORMATS, e2m1_magnitudes, iinfo
from verified_book import Backend, InvariantFailed, claim, names_of

# The libraries whose cast of infinity the book reports, by the package that does the cast.
LIBRARIES: dict[str, tuple[str, ...]] = {
    "ml_dtypes": names_of("numpy"),
    "torch": names_of("torch"),
    "mlx": names_of("mlx"),
}
FP8 = (FORMATS["e4m3"], FORMATS["e5m2"])


def encode(backend: Backend, fmt: Format, value: float) -> int:
    """The bit pattern a library's cast from FP32 gives for `value` in an 8-bit format."""
    return ops(backend).to_bits([value], fmt.dtype or fmt.id, fmt.label)[0]


def decode(backend: Backend, fmt: Format, codes: list[int]) -> list[float]:
    """The values a library reads from bit patterns of an 8-bit format, as floats."""
    return ops(backend).from_bits(codes, fmt.dtype or fmt.id, fmt.label)


def inf_bits(backend: Backend, fmt: Format) -> int:
    """The bit pattern a cast of +inf gives: what each library does with a value it cannot hold."""
    return encode(backend, fmt, math.inf)


def inf_value(backend: Backend, fmt: Format) -> float:
    """The value a cast of +inf reads back as."""
    return decode(backend, fmt, [inf_bits(backend, fmt)])[0]


# The versions a library's figures are stated for, where an older one answers otherwise: torch 2.11 casts
# inf to NaN in E4M3 (pattern 127), torch 2.13 saturates it to 448 (pattern 126).
STATED_FOR = {"torch": {"torch": ">=2.13"}}
# Which formats each library can cast to, and where the cast of inf reads back as a number (not NaN).
CASTS = {"ml_dtypes": (FP8, (FORMATS["e5m2"],)), "torch": (FP8, FP8), "mlx": ((FORMATS["e4m3"],), (FORMATS["e4m3"],))}
for _lib, (_bits_formats, _value_formats) in CASTS.items():
    claim(
        f"formats.special.{{fmt}}.inf_bits.{_lib}",
        kind="library",
        over={"fmt": _bits_formats},
        backends=LIBRARIES[_lib],
        stated_for=STATED_FOR.get(_lib),
    )(inf_bits)
    claim(
        f"formats.special.{{fmt}}.inf_value.{_lib}",
        kind="library",
        over={"fmt": _value_formats},
        backends=LIBRARIES[_lib],
        stated_for=STATED_FOR.get(_lib),
    )(inf_value)


# MLX before 0.32.3 reads E4M3's all-ones pattern as 480, not NaN: the counts are stated for the versions after.
@claim(
    "formats.special.{fmt}.{kind}",
    kind="library",
    over={"fmt": FP8, "kind": ("infinities", "nans")},
    stated_for={"mlx": ">=0.32.3"},
)
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
        raise InvariantFailed(
            f"{backend.name} reports {name} spans {found}; {spec.bits} two's-complement bits give {derived}"
        )
    return found


@claim("formats.grid.e2m1.count", kind="exact")
def e2m1_count() -> int:
    """How many distinct magnitudes E2M1's layout gives (the grid itself is formats.e2m1.grid)."""
    return len(e2m1_magnitudes(FORMATS["e2m1"]))


@claim("formats.mx.e8m0.bits", kind="library")
def e8m0_bits(backend: Backend) -> int:
    """The width of MX's E8M0 block scale as a library stores it: an exponent with no sign or mantissa."""
    return ops(backend).e8m0_bits()


@claim("formats.decimal.fp32.guaranteed_digits", kind="library", backends=supporting("finfo.resolution"))
def fp32_guaranteed_digits(backend: Backend) -> int:
    """Digits a library promises for FP32: its finfo resolution is 10^-digits."""
    info = backend.adapter.finfo(backend.adapter.dtype("float32"))
    return round(-math.log10(float(info.resolution)))


@claim("formats.decimal.{fmt}.eps_decade", kind="exact", over={"fmt": (FORMATS["tf32"],)})
def eps_decade(fmt: Format) -> Fraction:
    """A format's eps to the nearest power of ten: 2^-10 is about 10^-3."""
    return Fraction(10) ** round(math.log10(float(fmt.eps())))
