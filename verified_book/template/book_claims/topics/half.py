"""Half precision (FP16): its layout as quoted, what follows from it exactly, what libraries report, and a timing.

One claim of each kind:
- quoted: the mantissa width, read from the standard as stated in data/formats.toml;
- exact: eps and the largest value, derived from the quoted layout with sympy;
- library: eps as each array library's finfo reports it, which must equal the derivation,
  and 2048 + 1 computed in FP16 on each backend;
- given: how many ones the timing sums, the page's own choice, read from data/given.toml;
- measured: how long summing those FP16 ones takes on each backend, with the
  invariant that the sum is exact.
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import TYPE_CHECKING

from verified_book import Backend, InvariantFailed, claim, exact, given, lazy_import, vendor

if TYPE_CHECKING:
    import sympy
else:
    sympy = lazy_import("sympy")  # loaded by the first claim that computes with it

FORMATS = "formats.toml"
PRINTED_ON = "example_author"  # no profile matches it: the printed timing is compared nowhere


def _bits(part: str) -> int:
    return int(exact(vendor(FORMATS, f"fp16_{part}_bits")))


@claim("half.mantissa_bits", kind="quoted", citation="IEEE 754-2019, table 3.5")
def mantissa_bits() -> int:
    """FP16's trailing significand bits, as the standard states them."""
    return _bits("mantissa")


@claim("half.eps", kind="exact")
def eps() -> sympy.Rational:
    """The gap between 1 and the next FP16 value: 2^-mantissa."""
    return sympy.Rational(1, 2 ** _bits("mantissa"))


@claim("half.max", kind="exact")
def largest() -> sympy.Integer:
    """FP16's largest finite value: (2 - 2^-m) · 2^(2^e - 2 - bias), bias 2^(e-1) - 1."""
    m, e = _bits("mantissa"), _bits("exponent")
    bias = 2 ** (e - 1) - 1
    return (2 - sympy.Rational(1, 2**m)) * sympy.Integer(2) ** (2**e - 2 - bias)


@claim("half.finfo_eps", kind="library")
def finfo_eps(backend: Backend) -> float:
    """FP16's eps as the library's finfo reports it; it must equal the layout's."""
    adapter = backend.adapter
    found = float(adapter.finfo(adapter.dtype("float16")).eps)
    if Fraction(found) != Fraction(1, 2 ** _bits("mantissa")):
        raise InvariantFailed(f"{backend.name} reports FP16 eps {found!r}; the layout gives 2^-{_bits('mantissa')}")
    return found


@claim("half.sum_2049", kind="library")
def sum_2049(backend: Backend) -> float:
    """2048 + 1 in FP16: the step at 2048 is 2, so the 1 is a tie and rounds to even, 2048."""
    adapter = backend.adapter
    half = adapter.dtype("float16")
    with adapter.on_device():
        total = adapter.astype(backend.tensor([2048.0], half) + backend.tensor([1.0], half), half)
        return float(adapter.astype(total, adapter.dtype("float32")).tolist()[0])


@claim("half.sum_count", kind="given")
def sum_count() -> int:
    """How many FP16 ones the timing sums: the page's choice."""
    return int(given("half.sum_count"))


@claim("half.sum_ms", kind="measured", printed_on=PRINTED_ON, tolerance=0.5)
def sum_ms(backend: Backend) -> float:
    """Milliseconds to sum `half.sum_count` FP16 ones in FP32 on the backend (best of five)."""
    count = int(given("half.sum_count"))
    adapter = backend.adapter
    with adapter.on_device():
        ones = adapter.full((count,), 1.0, adapter.dtype("float16"))
        adapter.evaluate(ones)
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            total = adapter.astype(ones, adapter.dtype("float32")).sum()
            adapter.evaluate(total)
            value = float(total.item())
            best = min(best, time.perf_counter() - start)
    if value != count:
        raise InvariantFailed(
            f"{backend.name}: {count} FP16 ones summed in FP32 give {value}; FP32 holds {count} exactly"
        )
    return best * 1e3
