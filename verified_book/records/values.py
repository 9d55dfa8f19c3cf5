"""A claim's value as a results file keeps it, and back: exact fractions exact, numbers JSON cannot carry kept as
their size, never as an error."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Mapping

from verified_book.records.record import Exact

MAX_INT_BITS = 4000  # past this an integer is stored as its size (Python refuses to print past 4300 digits)


def _too_large(value: int | Fraction) -> str:
    """A number whose digits JSON cannot carry (Python refuses past 4300 digits), kept as its size."""
    sign = "-" if value < 0 else ""
    bits = abs(value.numerator if isinstance(value, Fraction) else value).bit_length()
    return f"{sign}about 2^{bits - 1} (too many digits to store)"


def to_json(value: Any) -> Any:
    """A claim's value as JSON: exact fractions keep their exact text beside the float."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= MAX_INT_BITS else _too_large(value)
    if isinstance(value, Fraction):
        if value.denominator == 1:
            return to_json(int(value))
        if max(value.numerator.bit_length(), value.denominator.bit_length()) > MAX_INT_BITS:
            return _too_large(value)
        return {"exact": f"{value.numerator}/{value.denominator}", "float": float(value)}
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return to_json(tolist())
    if type(value).__module__.partition(".")[0] == "sympy":  # asked of its type: no other value loads sympy
        import sympy

        if isinstance(value, sympy.Basic):
            return to_json(Fraction(int(value.p), int(value.q))) if value.is_Rational else float(value)
    return str(value)


def from_json(value: Any) -> Any:
    """A recorded value back as the engine had it: exact fractions exact, `inf`/`nan` as floats."""
    if isinstance(value, Exact):
        try:
            return Fraction(value.exact)
        except (ValueError, ZeroDivisionError):
            return value.float
    if isinstance(value, dict) and isinstance(value.get("exact"), str):  # an input's value, kept as JSON
        try:
            return Fraction(value["exact"])
        except (ValueError, ZeroDivisionError):
            return value.get("float")
    if isinstance(value, list):
        return [from_json(v) for v in value]
    if isinstance(value, str) and value.strip().lower() in ("inf", "-inf", "nan"):
        return float(value)
    return value
