"""Casts: what one value becomes in FP32, BF16 and FP16, and the update BF16 loses.

Each cast starts from the value as FP32 (the snippet's `torch.tensor(value)`), rounds it
into the format on the backend, and reads it back. Every backend's answer must equal
round-to-nearest-even onto the format's grid, computed exactly from its bit layout here,
so a library that rounds differently fails as a broken invariant rather than as a
stale figure.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from claims.ops import ops
from claims.topics.formats import FORMATS, Format, dtype_of
from verified_book import Backend, InvariantFailed, NotOnBackend, claim, lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_import("numpy")  # loaded by the first claim that computes with it

CASES: dict[str, float] = {
    "near_one": 1.001,  # a value just above 1.0
    "small_gradient": 1e-8,  # a gradient of the size that underflows in FP16
    "large_activation": 70000.0,  # an activation above FP16's largest value
}
CAST_FORMATS = ("fp32", "bf16", "fp16")
WEIGHT, UPDATE = 0.5, 0.0001  # the lost update: a weight of 0.5 and a step of 1e-4


def nearest(value: float, fmt: Format) -> float:
    """Round a value to the nearest point of a format's grid, ties to even, exactly.

    The grid is the bit layout's: spacing 2^(e - mantissa) in the binade of 2^e, with
    e no smaller than the smallest normal's exponent (below that, subnormals share its
    spacing). A result past the largest finite value is inf for IEEE-style formats.
    """
    x = Fraction(value)
    if x == 0:
        return 0.0
    sign, a = (-1 if x < 0 else 1), abs(x)
    exponent = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** exponent > a:
        exponent -= 1
    exponent = max(exponent, 1 - fmt.bias)
    quantum = Fraction(2) ** (exponent - fmt.mantissa)
    rounded = round(a / quantum) * quantum  # Fraction.__round__ breaks ties to even
    if rounded > fmt.largest():
        if fmt.specials != "ieee":
            raise ValueError(f"{fmt.label} has no inf; {value!r} overflows it")
        return sign * math.inf
    return float(sign * rounded)


def _as_float32(value: float) -> float:
    return float(np.float32(value))


def round_trip(backend: Backend, value: float, fmt: Format) -> float:
    """Cast an FP32 value into `fmt` on the backend and back to FP32, as a Python float."""
    dtype_of(backend, fmt)  # a format the library lacks is a skip that names it
    x = backend.tensor(value, backend.adapter.dtype("float32"))
    return float(ops(backend).round_trip(x, fmt.dtype or fmt.id, fmt.label).item())


@claim("casts.{case}.{fmt}", kind="library", over={"case": tuple(CASES), "fmt": [FORMATS[f] for f in CAST_FORMATS]})
def cast(backend: Backend, case: str, fmt: Format) -> float:
    """What one value becomes when cast to a format and read back: BF16 loses digits, FP16 loses range."""
    value = _as_float32(CASES[case])
    got = round_trip(backend, value, fmt)
    want = nearest(value, fmt)
    if got != want:
        raise InvariantFailed(
            f"{backend.name} casts {value!r} to {fmt.label} as {got!r}; rounding to the nearest "
            f"point of the {fmt.sign, fmt.exponent, fmt.mantissa} grid (ties to even) gives {want!r}"
        )
    return got


def add_in(backend: Backend, fmt: Format, weight: float, update: float) -> float:
    """`weight + update` with the weight stored in `fmt` and the sum stored back in it."""
    adapter = backend.adapter
    dtype, float32 = dtype_of(backend, fmt), adapter.dtype("float32")
    with adapter.on_device():
        total = adapter.astype(backend.tensor(weight, dtype) + backend.tensor(update, float32), dtype)
        return float(adapter.astype(total, float32).item())


@claim("casts.lost_update.{fmt}", kind="library", over={"fmt": [FORMATS[f] for f in ("bf16", "fp32")]})
def lost_update(backend: Backend, fmt: Format) -> float:
    """0.5 + 0.0001 stored in a format: BF16 keeps 0.5, because 1e-4 is below half its step at 0.5."""
    got = add_in(backend, fmt, WEIGHT, UPDATE)
    want = nearest(nearest(WEIGHT, fmt) + _as_float32(UPDATE), fmt)
    if got != want:
        raise InvariantFailed(
            f"{backend.name}: {WEIGHT} + {UPDATE} in {fmt.label} gives {got!r}; exact rounding "
            f"of the sum onto the format's grid gives {want!r}"
        )
    return got


def spacing_at(value: float, fmt: Format) -> Fraction:
    """The gap between a value and the next point of a format's grid above it, exactly."""
    x = Fraction(nearest(value, fmt))
    exponent = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** exponent > x:
        exponent -= 1
    return Fraction(2) ** (max(exponent, 1 - fmt.bias) - fmt.mantissa)


def table(backend: Backend) -> dict[str, Any]:
    """The casts and the lost update on one backend, as plain numbers (for snapshots)."""
    out: dict[str, Any] = {}
    for case, value in CASES.items():
        for fmt_id in CAST_FORMATS:
            try:
                out[f"{case}.{fmt_id}"] = round_trip(backend, _as_float32(value), FORMATS[fmt_id])
            except NotOnBackend:
                out[f"{case}.{fmt_id}"] = "absent"
    for fmt_id in ("bf16", "fp32"):
        out[f"lost_update.{fmt_id}"] = add_in(backend, FORMATS[fmt_id], WEIGHT, UPDATE)
    return out
