"""One matrix multiplication done two ways: a multiply-add at a time in Python, and as one numpy call.

The chapter prints one run of book/snippets/matmul_cost.py on the author's test box. Those
printed values are inputs (claims/data/author_runs.toml): the exact claims check that
each printed line agrees with itself, a rate being the FLOPs over the printed time. The
measured claims read what this machine's run of the snippet prints (`verified_book.
snippet_figures`; the default run executes it once, as a script, since it pins BLAS to one
thread before numpy loads), record it, and check what must hold anywhere: both ways give
the same product within float32's rounding bound, and the library is at least a thousand
times faster.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from verified_book import Backend, InvariantFailed, claim, exact, given, snippet_figure, vendor

RUNS = "author_runs.toml"
PRINTED_ON = "author_test_box"  # no profile matches it: the printed timings are compared nowhere
GIGA = 10**9


def min_speedup() -> int:
    """The least speed-up of the library over the loops the book promises: a given input."""
    return int(given("matmul.min_speedup"))


def size() -> int:
    """The run's m = k = n."""
    return int(vendor(RUNS, "matmul.size"))


def multiply_adds(n: int) -> int:
    """(m, k) @ (k, n) does m·n·k multiply-adds."""
    return n * n * n


def flops(n: int) -> int:
    """Two FLOPs, a multiply and an add, per multiply-add."""
    return 2 * multiply_adds(n)


def operands(n: int) -> tuple[Any, Any]:
    """The snippet's operands: a, then b, (n × n) float32 standard normals from generator seed 0."""
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)


def smallest_bound(n: int) -> float:
    """How far the loops' and numpy's float32 products may differ, at the element where that is least.

    Each side's float32 dot product of n terms errs by at most n · 2^-24 · Σ_p |a_ip| |b_pj|,
    so the two products may differ by twice that at element (i, j).
    """
    import numpy as np

    a, b = operands(n)
    return float((2 * n * 2.0**-24 * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))).min())


@claim("matmul.size", kind="given", citation="the book's own choice: the size of the author's printed run")
def printed_size() -> int:
    """The timed multiplication's m, k and n: one square size."""
    return size()


@claim("matmul.multiply_adds", kind="exact")
def printed_multiply_adds() -> int:
    """m × n × k multiply-adds of the timed multiplication."""
    return multiply_adds(size())


@claim("matmul.flops", kind="exact")
def printed_flops() -> int:
    """2 × m × n × k FLOPs of the timed multiplication."""
    return flops(size())


@claim("matmul.author.loops_gflops", kind="exact")
def author_loops_gflops() -> Fraction:
    """The printed loops rate from the printed loops time: FLOPs / 0.3056 s, in GFLOP/s."""
    return flops(size()) / exact(vendor(RUNS, "matmul.loops_seconds")) / GIGA


@claim("matmul.author.numpy_seconds", kind="exact")
def author_numpy_seconds() -> Fraction:
    """The printed numpy time from the printed numpy rate: FLOPs / 237.917 GFLOP/s, in seconds."""
    return flops(size()) / (exact(vendor(RUNS, "matmul.numpy_gflops")) * GIGA)


@claim("matmul.author.speedup", kind="exact", measured_here="matmul.measured.speedup")
def author_speedup() -> Fraction:
    """How many times faster numpy ran than the loops in the printed run: loops time × numpy rate / FLOPs."""
    loops = exact(vendor(RUNS, "matmul.loops_seconds"))
    rate = exact(vendor(RUNS, "matmul.numpy_gflops")) * GIGA
    return loops * rate / flops(size())


@claim("matmul.loops.seconds", kind="measured", backends=("numpy",), printed_on=PRINTED_ON, tolerance=0.5)
def loops_seconds(backend: Backend) -> float:
    """Seconds for the Python-loop multiplication at the printed size, as matmul_cost.py prints them on this machine."""
    return float(snippet_figure("matmul.loops.seconds"))


@claim("matmul.numpy.gflops", kind="measured", backends=("numpy",), printed_on=PRINTED_ON, tolerance=0.5)
def numpy_gflops(backend: Backend) -> float:
    """numpy's rate for the same multiplication (its fastest of 500 calls), as matmul_cost.py prints it on this
    machine."""
    return float(snippet_figure("matmul.numpy.gflops"))


@claim("matmul.max_difference", kind="measured", backends=("numpy",), printed_on=PRINTED_ON, tolerance=1.0)
def max_difference(backend: Backend) -> float:
    """The largest |loops − numpy| over the product, as matmul_cost.py prints it on this machine.

    Invariant: every element is within float32's dot-product bound; the printed largest
    difference is held to the smallest element's bound, which holds them all.
    """
    found, bound = float(snippet_figure("matmul.max_difference")), smallest_bound(size())
    if found > bound:
        raise InvariantFailed(
            f"the loop and numpy products differ by up to {found:.2g}, more than the float32 rounding "
            f"bound of {bound:.2g} for the {size()}-term dot product where it is least"
        )
    return found


@claim("matmul.min_speedup", kind="given")
def promised_speedup() -> int:
    """The factor by which the library must beat the loops on every machine."""
    return min_speedup()


@claim("matmul.measured.speedup", kind="measured", backends=("numpy",))
def measured_speedup(backend: Backend) -> float:
    """numpy's speed over the loops on this machine, from matmul_cost.py's printed time and rate; it must be
    at least a thousandfold."""
    ratio = loops_seconds(backend) * numpy_gflops(backend) * GIGA / flops(size())
    if ratio < min_speedup():
        raise InvariantFailed(
            f"numpy was only {ratio:,.0f} times faster than the Python loops; expected at least {min_speedup():,}"
        )
    return ratio
