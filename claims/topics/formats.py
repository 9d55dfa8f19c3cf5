"""Number formats: what the bits of each floating-point format buy, derived and as libraries report it.

Each format is a bit layout (sign, exponent, mantissa) with a bias and a rule for its
top exponent code. From the layout alone, exactly (Python's Fraction): the step above 1.0 is
2^-mantissa, the smallest normal is 2^(1 - bias), and the largest finite value
depends on what the top exponent code is spent on:

- IEEE style (FP32, FP16, BF16, E5M2): the top code is inf and NaN, so the largest
  exponent is 2^e - 2 - bias and the largest value (2 - 2^-m) · 2^emax;
- "fn" style (E4M3): only the all-ones pattern is NaN, so the top code holds values
  too and the largest is (2 - 2 · 2^-m) · 2^(2^e - 1 - bias);
- no specials (E2M1): every code is a number, the largest (2 - 2^-m) · 2^(2^e - 1 - bias).

The library claims ask numpy (with ml_dtypes), torch and MLX, and each must agree with
the derivation exactly: a library answer that differs fails as a broken invariant.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from verified_book import GIVEN, Backend, InvariantFailed, NotOnBackend, claim, given, table


@dataclass(frozen=True)
class Format:
    """A floating-point format, as each library names it; its layout is a given input.

    The (sign, exponent, mantissa) layout and the use of the top exponent code are read
    from `claims/data/given.toml` (the standard that defines the format) on every use, so
    each claim that derives from them records them as inputs.
    """

    id: str
    label: str
    dtype: str | None  # the dtype's name, numpy style (ml_dtypes' for the small formats); each adapter looks it up

    @property
    def layout(self) -> tuple[int, int, int]:
        sign, exponent, mantissa = given(f"formats.{self.id}.layout")
        return int(sign), int(exponent), int(mantissa)

    @property
    def sign(self) -> int:
        return self.layout[0]

    @property
    def exponent(self) -> int:
        return self.layout[1]

    @property
    def mantissa(self) -> int:
        return self.layout[2]

    @property
    def bias(self) -> int:
        """The exponent bias every format here uses: half the exponent codes, less one."""
        return 2 ** (self.exponent - 1) - 1

    @property
    def specials(self) -> str:
        value = given(f"formats.{self.id}.specials")
        if value not in ("ieee", "fn", "none"):
            raise InvariantFailed(f"{self.label}'s top exponent code is {value!r}; expected 'ieee', 'fn' or 'none'")
        return value

    @property
    def bits(self) -> int:
        return self.sign + self.exponent + self.mantissa

    @property
    def storage_bits(self) -> int:
        """Bits one element occupies in memory: its width, unless the standard gives a slot (TF32's 32)."""
        if "storage_bits" in table(GIVEN).get("formats", {}).get(self.id, {}):
            return int(given(f"formats.{self.id}.storage_bits"))
        return self.bits

    def eps(self) -> Fraction:
        return Fraction(1, 2**self.mantissa)

    def smallest_normal(self) -> Fraction:
        return Fraction(2) ** (1 - self.bias)

    def smallest_subnormal(self) -> Fraction:
        return self.smallest_normal() * self.eps()

    def largest(self) -> Fraction:
        two = Fraction(2)
        if self.specials == "ieee":
            emax = 2**self.exponent - 2 - self.bias
            return (2 - two**-self.mantissa) * two**emax
        emax = 2**self.exponent - 1 - self.bias
        if self.specials == "fn":
            return (2 - 2 * two**-self.mantissa) * two**emax
        return (2 - two**-self.mantissa) * two**emax  # "none": every code is a number

    def derived(self, field: str) -> Fraction:
        return {
            "eps": self.eps,
            "max": self.largest,
            "smallest_normal": self.smallest_normal,
            "smallest_subnormal": self.smallest_subnormal,
        }[field]()


FORMATS: dict[str, Format] = {
    f.id: f
    for f in (
        Format("fp32", "FP32", "float32"),
        Format("tf32", "TF32", None),
        Format("fp16", "FP16", "float16"),
        Format("bf16", "BF16", "bfloat16"),
        Format("e4m3", "FP8 E4M3", "float8_e4m3fn"),
        Format("e5m2", "FP8 E5M2", "float8_e5m2"),
        Format("e2m1", "E2M1 (FP4)", "float4_e2m1fn"),
    )
}

FINFO_FORMATS = ("fp32", "bf16", "fp16", "e4m3", "e5m2")
FINFO_FIELDS = ("eps", "max", "smallest_normal")


def dtype_of(backend: Backend, fmt: Format) -> Any:
    """The backend's dtype object for a format, or NotOnBackend naming what is missing."""
    return backend.adapter.dtype(fmt.dtype or fmt.id, fmt.label)


def tensor_dtype(backend: Backend, fmt: Format) -> Any:
    """The dtype of `fmt` for tensors on the backend's device: `dtype_of`, and NotOnBackend where the
    library has the dtype but the device holds no tensors of it (torch's MPS has no float8: a cast
    there raises TypeError, which would read as a failure instead of an absent format)."""
    return backend.adapter.tensor_dtype(fmt.dtype or fmt.id, fmt.label)


def finfo(backend: Backend, fmt: Format) -> Any:
    """The backend's finfo object for a format."""
    return backend.adapter.finfo(dtype_of(backend, fmt))


def _finfo_field(info: Any, field: str) -> float:
    if field == "smallest_normal":
        value = getattr(info, "smallest_normal", None)
        if value is None:
            value = getattr(info, "tiny", None)
        if value is None:
            raise NotOnBackend(f"{type(info).__name__} reports no smallest normal value")
        return float(value)
    return float(getattr(info, field))


@claim(
    "formats.{fmt}.derived.{field}",
    kind="exact",
    over={"fmt": list(FORMATS.values()), "field": ("eps", "max", "smallest_normal", "smallest_subnormal")},
)
def derived_field(fmt: Format, field: str) -> Fraction:
    """A format's eps, largest value or smallest normal, derived exactly from its bit layout."""
    return fmt.derived(field)


@claim("formats.{fmt}.layout", kind="given", over={"fmt": list(FORMATS.values())})
def layout(fmt: Format) -> tuple[int, int, int]:
    """A format's (sign, exponent, mantissa) layout, as its standard defines it."""
    return fmt.layout


@claim(
    "formats.{fmt}.{part}_bits", kind="given", over={"fmt": list(FORMATS.values()), "part": ("exponent", "mantissa")}
)
def field_bits(fmt: Format, part: str) -> int:
    """A format's exponent or mantissa width, from its layout."""
    return fmt.exponent if part == "exponent" else fmt.mantissa


@claim("formats.{fmt}.{part}", kind="exact", over={"fmt": list(FORMATS.values()), "part": ("bits", "bias", "bytes")})
def layout_part(fmt: Format, part: str) -> Any:
    """A format's width, exponent bias, and bytes per element, from its layout."""
    if part == "bits":
        return fmt.bits
    if part == "bias":
        return fmt.bias
    return Fraction(fmt.storage_bits, 8)


@claim(
    "formats.finfo.{fmt}.{field}",
    kind="library",
    over={"fmt": [FORMATS[f] for f in FINFO_FORMATS], "field": FINFO_FIELDS},
)
def finfo_field(backend: Backend, fmt: Format, field: str) -> float:
    """What a library's finfo reports for a format, which must equal the bit-layout derivation."""
    value = _finfo_field(finfo(backend, fmt), field)
    derived = fmt.derived(field)
    if Fraction(value) != derived:
        raise InvariantFailed(
            f"{backend.name} reports {field} = {value!r} for {fmt.label}; the bit layout "
            f"{fmt.sign, fmt.exponent, fmt.mantissa} with bias {fmt.bias} gives {derived} = {float(derived)!r}"
        )
    return value


@claim("formats.finfo.{fmt}.bits", kind="library", over={"fmt": [FORMATS[f] for f in FINFO_FORMATS]})
def finfo_bits(backend: Backend, fmt: Format) -> int:
    """The width a library reports for a format's elements."""
    info = finfo(backend, fmt)
    bits = getattr(info, "bits", None)
    if bits is None:
        bits = dtype_of(backend, fmt).size * 8
    if int(bits) != fmt.bits:
        raise InvariantFailed(f"{backend.name} reports {bits} bits for {fmt.label}; the layout has {fmt.bits}")
    return int(bits)
