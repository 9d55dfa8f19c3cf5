"""One matrix multiplication done two ways: a multiply-add at a time in Python, and as one numpy call.

The chapter prints one run of book/snippets/matmul_cost.py on the author's test box. Those
printed values are inputs (claims/data/author_runs.toml): the exact claims check that
each printed line agrees with itself, a rate being the FLOPs over the printed time. The
measured claims repeat the run on this machine at the same size, with one BLAS thread as
the snippet pins, record what they find, and check what must hold anywhere: both ways
give the same product within float32's rounding bound, and the library is at least a
thousand times faster.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any, Callable

from verified_book.backends import Backend
from verified_book.inputs import exact, given, vendor
from verified_book.registry import InvariantFailed, claim

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


def loops_matmul(a: Any, b: Any) -> Any:
    """The product one multiply-add at a time, each operand fetched from the arrays by the interpreter."""
    import numpy as np

    n, k = a.shape
    m = b.shape[1]
    b_columns = np.ascontiguousarray(b.T)
    c = np.zeros((n, m), dtype=np.float32)
    for i in range(n):
        a_row = a[i]
        for j in range(m):
            b_column = b_columns[j]
            total = np.float32(0)
            for p in range(k):
                total += a_row[p] * b_column[p]
            c[i, j] = total
    return c


def best_seconds(call: Callable[[], object], calls: int, budget_s: float) -> float:
    """The fastest of up to `calls` timed calls; none starts once `budget_s` has passed (one always runs)."""
    best, started = float("inf"), time.perf_counter()
    for i in range(calls):
        start = time.perf_counter()
        if i and start - started > budget_s:
            break
        call()
        best = min(best, time.perf_counter() - start)
    return best


def measure_here(n: int) -> dict[str, float]:
    """Both ways once, in this process: seconds, the largest difference, and its float32 bound.

    Each side's float32 dot product of n terms errs by at most n · 2^-24 · sum |a_ip| |b_pj|,
    so the two products may differ by twice that, element by element.
    """
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    start = time.perf_counter()
    looped = loops_matmul(a, b)
    loops_seconds = time.perf_counter() - start
    numpy_seconds = best_seconds(lambda: a @ b, calls=500, budget_s=0.3)
    difference = np.abs(looped.astype(np.float64) - (a @ b).astype(np.float64))
    bound = 2 * n * 2.0**-24 * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    return {
        "loops_seconds": loops_seconds,
        "numpy_seconds": numpy_seconds,
        "max_difference": float(difference.max()),
        "worst_share_of_bound": float((difference / bound).max()),
    }


@cache
def measure(n: int) -> dict[str, float]:
    """`measure_here` in a fresh interpreter with one BLAS thread, as the snippet runs.

    In the test process other claims leave torch's worker threads behind, and a
    multi-threaded BLAS competing with them can run a small product a hundred times slower.
    """
    one_thread = {k: "1" for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")}
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, **one_thread, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
    script = "import json, sys; from claims.topics.matmul import measure_here; print(json.dumps(measure_here(int(sys.argv[1]))))"
    done = subprocess.run([sys.executable, "-c", script, str(n)], capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"the timing run exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@claim("matmul.size", kind="quoted", source="claims/data/author_runs.toml: the printed run's size")
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


@claim("matmul.author.speedup", kind="exact")
def author_speedup() -> Fraction:
    """How many times faster numpy ran than the loops in the printed run: loops time × numpy rate / FLOPs."""
    loops = exact(vendor(RUNS, "matmul.loops_seconds"))
    rate = exact(vendor(RUNS, "matmul.numpy_gflops")) * GIGA
    return loops * rate / flops(size())


@claim("matmul.loops.seconds", kind="measured", backends=("numpy",), printed_on=PRINTED_ON, tolerance=0.5)
def loops_seconds(backend: Backend) -> float:
    """Seconds for the Python-loop multiplication at the printed size, on this machine."""
    return measure(size())["loops_seconds"]


@claim("matmul.numpy.gflops", kind="measured", backends=("numpy",), printed_on=PRINTED_ON, tolerance=0.5)
def numpy_gflops(backend: Backend) -> float:
    """numpy's rate for the same multiplication, best of five runs of a hundred calls, in GFLOP/s."""
    return flops(size()) / measure(size())["numpy_seconds"] / GIGA


@claim("matmul.max_difference", kind="measured", backends=("numpy",), printed_on=PRINTED_ON, tolerance=1.0)
def max_difference(backend: Backend) -> float:
    """The largest |loops − numpy| over the product; every element must be within float32's dot-product bound."""
    found = measure(size())
    if found["worst_share_of_bound"] > 1:
        raise InvariantFailed(f"the loop and numpy products differ by up to {found['max_difference']:.2e}, "
                              f"{found['worst_share_of_bound']:.2f} times the float32 rounding bound for {size()}-term dot products")
    return found["max_difference"]


@claim("matmul.min_speedup", kind="given")
def promised_speedup() -> int:
    """The factor by which the library must beat the loops on every machine."""
    return min_speedup()


@claim("matmul.measured.speedup", kind="measured", backends=("numpy",))
def measured_speedup(backend: Backend) -> float:
    """numpy's speed over the loops on this machine; it must be at least a thousandfold."""
    found = measure(size())
    ratio = found["loops_seconds"] / found["numpy_seconds"]
    if ratio < min_speedup():
        raise InvariantFailed(f"numpy was only {ratio:,.0f} times faster than the Python loops; expected at least {min_speedup():,}")
    return ratio
