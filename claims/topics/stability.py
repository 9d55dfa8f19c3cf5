"""Stability idioms, checked on every library: the max-subtracted softmax, log-sum-exp, log space,
the ε of normalisation layers, seeds, and the order of a sum.

The softmax example is the logits (100, 99, 98): e^100 is about 2.7 × 10^43, beyond
FP32's largest value, so the textbook formula gives inf / inf = NaN, while subtracting
the largest logit first gives the same probabilities with no overflow. sympy gives the
exact values the libraries must reach.
"""

from __future__ import annotations

import contextlib
import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Iterator

from claims.ops import ops, supporting
from claims.topics.formats import FORMATS, Format
from verified_book import Backend, InvariantFailed, claim, given, lazy_import, model_config

if TYPE_CHECKING:
    import sympy
else:
    sympy = lazy_import("sympy")  # loaded by the first claim that computes with it

LAYERS = supporting("nn")  # libraries with neural-network layers of their own


def logits() -> tuple[int, ...]:
    """The example's logits, (100, 99, 98): a given input."""
    return tuple(int(x) for x in given("stability.logits"))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """numpy warns on overflow; the overflow is the point here."""
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):
        yield


def _vector(backend: Backend, values: tuple[float, ...], dtype_name: str = "float32") -> Any:
    return backend.tensor([float(v) for v in values], backend.adapter.dtype(dtype_name))


def _floats(array: Any) -> list[float]:
    return [float(v) for v in array.tolist()]


@claim("stability.exp100.exact", kind="exact")
def exp100() -> sympy.Float:
    """e^100, exactly enough to print: far beyond FP32's largest value."""
    return sympy.exp(logits()[0]).evalf(30)


@claim("stability.exp100.{fmt}", kind="library", over={"fmt": (FORMATS["fp32"], FORMATS["fp16"])})
def exp100_in(backend: Backend, fmt: Format) -> float:
    """exp(100) computed in a format by the library: it overflows to inf."""
    with _quiet():
        return _floats(backend.module.exp(_vector(backend, (logits()[0],), fmt.dtype or fmt.id)))[0]


@claim("stability.exp_limit.{fmt}", kind="exact", over={"fmt": (FORMATS["fp32"], FORMATS["fp16"], FORMATS["bf16"])})
def exp_limit(fmt: Format) -> float:
    """The largest logit whose exponential a format still holds: ln of its largest value."""
    return float(sympy.log(fmt.largest()).evalf(30))


@claim("stability.softmax.exact", kind="exact")
def softmax_exact() -> tuple[sympy.Float, ...]:
    """softmax(100, 99, 98) from sympy: e^(x_i) / Σ e^(x_j), exactly."""
    total = sum(sympy.exp(x) for x in logits())
    return tuple((sympy.exp(x) / total).evalf(30) for x in logits())


@claim("stability.softmax.naive_finite", kind="library")
def softmax_naive_finite(backend: Backend) -> int:
    """How many entries of the textbook softmax, exp(x) / sum(exp(x)) in FP32, are finite numbers."""
    x = _vector(backend, logits())
    with _quiet():
        e = backend.module.exp(x)
        probabilities = _floats(e / e.sum())
    return sum(1 for p in probabilities if math.isfinite(p))


@claim("stability.softmax.stable", kind="library")
def softmax_stable(backend: Backend) -> tuple[float, ...]:
    """The softmax with the largest logit subtracted first, in FP32; it must equal sympy's."""
    x = _vector(backend, logits())
    e = backend.module.exp(x - x.max())
    found = tuple(_floats(e / e.sum()))
    expected = [float(p) for p in softmax_exact()]
    if max(abs(a - b) for a, b in zip(found, expected)) > 1e-6:
        raise InvariantFailed(f"{backend.name}: the shifted softmax gives {found}; sympy gives {expected}")
    return found


@claim("stability.logsumexp.exact", kind="exact")
def logsumexp_exact() -> sympy.Float:
    """log Σ e^(x_i) for the example's logits, exactly."""
    return sympy.log(sum(sympy.exp(x) for x in logits())).evalf(30)


@claim("stability.logsumexp.naive", kind="library")
def logsumexp_naive(backend: Backend) -> float:
    """log(sum(exp(x))) computed as written, in FP32: the sum is already inf."""
    with _quiet():
        return float(backend.module.log(backend.module.exp(_vector(backend, logits())).sum()).item())


@claim("stability.logsumexp.shifted", kind="library")
def logsumexp_shifted(backend: Backend) -> float:
    """m + log Σ e^(x_i − m) with m the largest logit, in FP32; equal to the exact value."""
    x = _vector(backend, logits())
    m = x.max()
    found = float((m + backend.module.log(backend.module.exp(x - m).sum())).item())
    if abs(found - float(logsumexp_exact())) > 1e-4:
        raise InvariantFailed(f"{backend.name}: shifted log-sum-exp gives {found}; sympy gives {logsumexp_exact()}")
    return found


@claim("stability.logsumexp.library", kind="library")
def logsumexp_library(backend: Backend) -> float:
    """The library's own log-sum-exp (numpy: logaddexp.reduce), which does the shift for you."""
    return ops(backend).logsumexp(_vector(backend, logits()))


@claim("stability.cross_entropy", kind="library", backends=LAYERS)
def cross_entropy(backend: Backend) -> float:
    """The library's cross-entropy of the logits against the first class: log-sum-exp minus 100, finite."""
    return ops(backend).cross_entropy(_vector(backend, logits()).reshape(1, -1), 0)


FACTORS, PROBABILITY = 50, 1e-3


@claim("stability.log_space.product", kind="library")
def probability_product(backend: Backend) -> float:
    """The product of 50 probabilities of 0.001, multiplied out in FP32: it underflows to zero."""
    x = _vector(backend, (PROBABILITY,) * FACTORS)
    return float(x.prod().item())


@claim("stability.log_space.{given_input}", kind="given", over={"given_input": ("factors", "probability")})
def log_space_input(given_input: str) -> Fraction:
    """The example's inputs as the page prints them in code: 50 factors, each a probability of 0.001."""
    return Fraction(str(given(f"stability.log_space_{given_input}")))


@claim("stability.log_space.exact_product", kind="exact")
def probability_product_exact() -> Fraction:
    """The same product computed exactly, in rationals: what FP32 would have to hold."""
    factors, probability = int(given("stability.log_space_factors")), given("stability.log_space_probability")
    if (factors, probability) != (FACTORS, PROBABILITY):
        raise InvariantFailed(
            f"the example multiplies {FACTORS} factors of {PROBABILITY}; the given inputs are "
            f"{factors} of {probability}"
        )
    return Fraction(str(probability)) ** factors


@claim("stability.log_space.log_sum", kind="library")
def probability_log_sum(backend: Backend) -> float:
    """The same product kept as a sum of logs in FP32: an ordinary number."""
    found = float(backend.module.log(_vector(backend, (PROBABILITY,) * FACTORS)).sum().item())
    if abs(found - FACTORS * math.log(PROBABILITY)) > 1e-3:
        raise InvariantFailed(
            f"{backend.name}: the sum of logs is {found}; 50 · ln(0.001) is {FACTORS * math.log(PROBABILITY)}"
        )
    return found


@claim("stability.norm_eps.layernorm", kind="library", backends=LAYERS)
def layernorm_eps(backend: Backend) -> float:
    """The ε a LayerNorm gets when none is given."""
    return float(ops(backend).layer_norm(8).eps)


@claim("stability.norm_eps.qwen3", kind="exact")
def qwen3_rms_eps() -> Fraction:
    """The ε Qwen3's RMSNorm layers use, from its config.json."""
    return Fraction(str(model_config("qwen3-8b")["rms_norm_eps"]))


@claim("stability.norm_eps.{setting}_finite", kind="library", over={"setting": ("without", "with")}, backends=LAYERS)
def constant_row(backend: Backend, setting: str) -> int:
    """Finite outputs of LayerNorm on a constant row of 8 (variance zero), with ε = 0 and with the default."""
    row = [[0.5] * 8]
    layer = ops(backend).layer_norm(8, 0.0 if setting == "without" else None)
    out = layer(backend.tensor(row, backend.adapter.dtype("float32"))).tolist()[0]
    return sum(1 for v in out if math.isfinite(v))


SAMPLES = 1000


def _random(backend: Backend, seed: int) -> list[float]:
    """SAMPLES standard normal FP32 draws from the library's generator, seeded."""
    return backend.adapter.random_normal((SAMPLES,), seed).tolist()


@claim("stability.seed.{case}_differing", kind="library", over={"case": ("same", "other")})
def seeded(backend: Backend, case: str) -> Fraction:
    """The share of draws that differ between two runs: seeded alike, and seeded differently."""
    first = _random(backend, 0)
    second = _random(backend, 0 if case == "same" else 1)
    return Fraction(sum(1 for a, b in zip(first, second) if a != b), SAMPLES)


SMALL_TERM = 2.0**-24  # the summation-order example's small term, as its snippet of prose writes it


def small_terms_count() -> int:
    """Copies of 2^-24, FP32's half step at 1.0, that the example adds: a given input."""
    return int(given("stability.small_terms"))


def _ordered_sum(backend: Backend, reverse: bool) -> float:
    """1 plus SMALL_TERMS copies of 2^-24, added one at a time in FP32, in either order."""
    terms = [1.0] + [SMALL_TERM] * small_terms_count()
    if reverse:
        terms.reverse()
    values = _vector(backend, tuple(terms))
    total = values[0]
    for i in range(1, len(terms)):
        total = total + values[i]
    return float(total.item())


@claim("stability.order.small_terms", kind="given")
def small_terms() -> int:
    """How many copies of 2^-24 the summation-order example adds to 1."""
    return small_terms_count()


@claim("stability.order.small_terms_sum", kind="exact")
def small_terms_sum() -> Fraction:
    """What the example's small terms add up to on their own: their count times 2^-24."""
    return small_terms_count() * Fraction(SMALL_TERM)


@claim("stability.order.small_term_over_step", kind="exact")
def small_term_over_step() -> Fraction:
    """The example's small term, 2^-24, over FP32's step at 1.0 (its eps, from the layout)."""
    return Fraction(SMALL_TERM) / FORMATS["fp32"].eps()


@claim("stability.order.{direction}", kind="library", over={"direction": ("large_first", "small_first")})
def ordered_sum(backend: Backend, direction: str) -> float:
    """The same numbers summed large first (each small term rounds away) or small first (they add up)."""
    return _ordered_sum(backend, direction == "small_first")


@claim("stability.order.difference", kind="library")
def order_difference(backend: Backend) -> float:
    """How far apart the two orders land: SMALL_TERMS × 2^-24 = 2^-20."""
    return _ordered_sum(backend, True) - _ordered_sum(backend, False)
