"""Printed figures: read a number as the book prints it, with the precision it implies.

The printed text is the expected value, and its precision is the printed precision:
`16.6` holds for 16.55 to 16.65, `8,190,427,136` is exact, `1.56e-02` and
`1.56 × 10^-2` have three significant digits, `2^-7` is exact, `8.6%` is 0.086 to
half a tenth of a per cent, `65 504` (a space, thin space or narrow no-break space between
groups of three digits) is 65,504, and an approximate figure (`≈ 14`, `about 17`) holds
to its printed precision like any other: the word says the figure is rounded, which every
printed figure is, and a wider margin would let the neighbouring round figure pass too
(`about 17` for 16.6 within one unit would admit `about 16`). A figure may state its precision
outright, `0.25 ± 0.03`: that is how a number in words says how loosely it is meant ("a
quarter", bound with the value `0.25 ± 0.03`, is nearer a quarter than a fifth or a third);
the margin stays under half the step to the neighbouring round figure. A unit after the number is kept
for rewriting and does not scale the value: a claim returns its value in the unit
the book prints.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from verified_book.errors import BookError

#: how far past its printed interval a float may lie and still hold, relative to its size: a few units in the
#: last place of a float64, so a figure printed finer than a float resolves is checked to the float's own digits
FLOAT_SLACK = Fraction(1, 2**51)
APPROX_WORDS = ("about", "around", "roughly", "nearly", "approximately", "some", "almost")
_SPACES = str.maketrans({"\u2009": " ", "\u202f": " ", "\u00a0": " ", "\u2212": "-", "\u2013": "-"})

_MANTISSA = r"-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d{1,3}(?:[ ]\d{3})+(?!\d)|\d+)(?:\.\d+)?|-?\.\d+"
_GROUP_SPACES = ("\u202f", "\u2009", "\u00a0", " ")  # thousands separators a printed figure may use besides ','
_SPLIT_DIGITS = re.compile(r"^(?:\s+|,)\d")
_NUMBER = re.compile(
    rf"""^(?P<mant>{_MANTISSA})
    (?:
        (?P<e>[eE](?P<eexp>[+-]?\d+))
      | \s*(?P<times>[×x·*])\s*10\^\{{?(?P<texp>[+-]?\d+)\}}?
    )?
    (?P<pct>\s*%|\s+per\s?cent)?""",
    re.VERBOSE,
)
_POWER = re.compile(r"^(?P<base>\d+)\^\{?(?P<exp>[+-]?\d+)\}?")
_TEN_POWER = re.compile(r"^10\^\{?(?P<texp>[+-]?\d+)\}?")
_SPECIAL = re.compile(r"^(?P<special>-?inf|nan)\b", re.IGNORECASE)
_PLUS_MINUS = re.compile(r"^\s*(?:±|\+/-)\s*(?P<tol>\d+(?:\.\d+)?)(?P<pct>\s*%)?")
_APPROX = re.compile(rf"^(?P<approx>≈|~|(?:{'|'.join(APPROX_WORDS)})\s+)\s*", re.IGNORECASE)


class FigureSyntaxError(BookError, ValueError):
    """A printed figure that is not a number in any form the book uses."""


@dataclass(frozen=True)
class Printed:
    """A number as printed: its value, the interval it stands for, and how to print it again."""

    text: str
    value: Fraction | float | tuple["Printed", ...]
    low: Fraction | float
    high: Fraction | float
    approximate: bool = False
    prefix: str = ""
    core: str = ""
    suffix: str = ""
    group: str = ""  # the thousands separator as printed, where it is a kind of space

    @property
    def is_tuple(self) -> bool:
        return isinstance(self.value, tuple)

    def holds(self, computed: Any) -> bool:
        """Whether a computed value rounds to this printed figure."""
        if isinstance(self.value, tuple):
            items = _as_sequence(computed)
            return (
                items is not None
                and len(items) == len(self.value)
                and all(p.holds(c) for p, c in zip(self.value, items, strict=True))
            )
        number = as_number(computed)
        if number is None:
            return False
        if isinstance(self.value, float):
            if math.isnan(self.value):
                return isinstance(number, float) and math.isnan(number)
            return number == self.value
        if isinstance(number, float) and not math.isfinite(number):
            return False
        slack = abs(Fraction(number)) * FLOAT_SLACK
        return self.low - slack <= Fraction(number) <= self.high + slack

    def render(self, computed: Any) -> str:
        """Print a computed value the way this figure was printed, for rewriting stale text."""
        if self.is_tuple:
            items = _as_sequence(computed) or []
            # A computed value of another length is rewritten as far as both go: the stale text is shown, not raised.
            inner = ", ".join(p.render(c) for p, c in zip(self.value, items, strict=False))  # type: ignore[arg-type]
            return f"{self.prefix}{inner}{self.suffix}"
        return f"{self.prefix}{format_like(self.core, computed, self.group)}{self.suffix}"


def _as_sequence(value: Any) -> list[Any] | None:
    if isinstance(value, (list, tuple)):
        return list(value)
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        out = tolist()
        return out if isinstance(out, list) else None
    return None


def as_number(value: Any) -> Fraction | float | None:
    """A claim's scalar as a Fraction (exact) or a float (inf, nan); None if not a number."""
    if isinstance(value, (bool, str, bytes)) or value is None:
        return None
    if isinstance(value, Fraction):
        return value
    if isinstance(value, int):
        return Fraction(value)
    if type(value).__module__.partition(".")[0] == "sympy":  # asked of its type: no claim's value loads sympy
        import sympy

        if isinstance(value, sympy.Basic):
            if value.is_Rational:
                return Fraction(int(value.p), int(value.q))
            value = float(value)
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (float, int)):
        value = item()
        if isinstance(value, (bool, int)):
            return None if isinstance(value, bool) else Fraction(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number):
        return number
    return Fraction(number)


def parse(text: str) -> Printed:
    """Read one printed figure; raise FigureSyntaxError naming what was expected."""
    clean = text.translate(_SPACES).strip()
    if not clean:
        raise FigureSyntaxError("empty figure: expected a number such as 16.6, 8,190,427,136 or 2^-7")
    approx_match = _APPROX.match(clean)
    prefix = approx_match.group(0) if approx_match else ""
    body = clean[len(prefix) :]
    if body[:1] in "([" and body.rstrip()[-1:] in ")]" and "," in body:
        return _parse_tuple(text, clean, prefix, body)
    printed = _parse_scalar(body)
    if printed is None:
        raise FigureSyntaxError(
            f"{text!r} is not a printed number: expected forms like 16.6, 8,190,427,136, "
            "1.56e-02, 3.4 × 10^38, 2^-7, 8.6%, ≈ 14, (4096, 12288)"
        )
    core, value, half = printed
    if _SPLIT_DIGITS.match(body[len(core) :]):
        raise FigureSyntaxError(
            f"{text!r} has digits after a space or comma that do not make groups of three: read as one number it is "
            "not "
            f"one, and read as {core.strip()!r} it would leave {body[len(core) :].strip()!r} as its unit; print "
            "thousands as 65,504 or 65 504 (groups of three digits)"
        )
    stated = _PLUS_MINUS.match(body[len(core) :])
    if stated and isinstance(value, Fraction):
        # An explicit precision, for a round figure or one in words: "0.25 ± 0.03" for "a quarter".
        half = Fraction(stated.group("tol")) / (100 if stated.group("pct") else 1)
    low, high = (value - half, value + half) if isinstance(value, Fraction) else (value, value)
    group = next((s for s in _GROUP_SPACES if " " in core and re.search(rf"\d{s}\d", text)), "")
    return Printed(
        text=text,
        value=value,
        low=low,
        high=high,
        approximate=bool(prefix),
        prefix=prefix,
        core=core,
        suffix=body[len(core) :],
        group=group,
    )


def _parse_tuple(text: str, clean: str, prefix: str, body: str) -> Printed:
    opener, closer = body[0], body.rstrip()[-1]
    inner = body[1 : body.rstrip().rindex(closer)]
    items = tuple(parse(part) for part in _split_items(inner))
    if prefix:
        items = tuple(parse(prefix + item.text.strip()) for item in items)
    return Printed(
        text=text,
        value=items,
        low=Fraction(0),
        high=Fraction(0),
        approximate=bool(prefix),
        prefix=prefix + opener,
        core=inner,
        suffix=body[body.rstrip().rindex(closer) :],
    )


def _split_items(inner: str) -> list[str]:
    """Split a printed list on ', ' but not inside a thousands-separated number."""
    parts = re.split(r",\s+", inner.strip())
    if len(parts) == 1 and re.fullmatch(r"-?\d+(,\d+)+", inner.strip()):
        parts = inner.strip().split(",")
    return [p for p in parts if p]


def _parse_scalar(body: str) -> tuple[str, Fraction | float, Fraction] | None:
    special = _SPECIAL.match(body)
    if special:
        word = special.group("special").lower()
        return special.group(0), float(word), Fraction(0)
    ten = _TEN_POWER.match(body)
    if ten:
        return ten.group(0), Fraction(10) ** int(ten.group("texp")), Fraction(0)
    power = _POWER.match(body)
    if power and not body.startswith("10^"):
        return power.group(0), Fraction(int(power.group("base"))) ** int(power.group("exp")), Fraction(0)
    match = _NUMBER.match(body)
    if not match:
        return None
    mant = match.group("mant").replace(",", "").replace(" ", "")
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    value = Fraction(mant)
    half = Fraction(1, 2 * 10**decimals)
    exponent = match.group("eexp") or match.group("texp")
    if exponent is not None:
        scale = Fraction(10) ** int(exponent)
        value, half = value * scale, half * scale
    if match.group("pct"):
        value, half = value / 100, half / 100
    return match.group(0), value, half


def format_like(core: str, computed: Any, group: str = "") -> str:
    """Format `computed` in the same notation and precision as the printed `core`; `group` is
    the printed thousands separator where it is a kind of space."""
    number = as_number(computed)
    if number is None:
        return str(computed)
    if isinstance(number, float):
        return "nan" if math.isnan(number) else ("-inf" if number < 0 else "inf")
    clean = core.translate(_SPACES)
    if _TEN_POWER.match(clean) or (_POWER.match(clean) and not _NUMBER.fullmatch(clean)):
        return _format_power(clean, number)
    match = _NUMBER.match(clean)
    if not match:
        return str(float(number))
    mant = match.group("mant")
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    spaced = " " in mant
    grouped = "," in mant or spaced
    pct = match.group("pct") or ""
    if pct:
        number *= 100
    if match.group("eexp") is not None:
        exp_text = match.group("eexp")
        exp = _exponent_of(number)
        mantissa = float(number) / 10**exp
        if round(abs(mantissa), decimals) >= 10:
            exp += 1
            mantissa /= 10
        width = len(exp_text.lstrip("+-"))
        sign = "-" if exp < 0 else ("+" if exp_text.startswith("+") else "")
        return f"{mantissa:.{decimals}f}{match.group('e')[0]}{sign}{abs(exp):0{width}d}{pct}"
    if match.group("texp") is not None:
        exp = _exponent_of(number)
        mantissa = float(number) / 10**exp
        if round(abs(mantissa), decimals) >= 10:
            exp += 1
            mantissa /= 10
        times = match.group(0)[len(mant) :].split("10^")[0]
        braces = "{" in clean
        exp_text = f"{{{exp}}}" if braces else str(exp)
        return f"{mantissa:.{decimals}f}{times}10^{exp_text}{pct}"
    rounded = _round_half_even(number, decimals)
    text = f"{rounded:,.{decimals}f}" if grouped else f"{rounded:.{decimals}f}"
    if spaced:
        text = text.replace(",", group or " ")
    return text + pct


def _round_half_even(value: Fraction, decimals: int) -> float:
    scaled = value * 10**decimals
    return float(Fraction(round(scaled), 10**decimals))


def _exponent_of(value: Fraction) -> int:
    if value == 0:
        return 0
    return math.floor(math.log10(abs(float(value))))


def _format_power(core: str, value: Fraction) -> str:
    power = _POWER.match(core) or _TEN_POWER.match(core)
    base = int(power.group("base")) if power and "base" in power.groupdict() else 10
    if value > 0:
        exp = round(math.log(float(value), base))
        if Fraction(base) ** exp == value:
            return f"{base}^{exp}" if "{" not in core else f"{base}^{{{exp}}}"
    return f"{float(value):.3g}"
