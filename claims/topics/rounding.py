"""Rounding a million weights: the mean relative error of each format, and the values lost to zero.

The book's weights are `torch.manual_seed(0); torch.randn(1_000_000) * 0.02`, drawn
on the CPU: the spread a model's `initializer_range` of 0.02 implies. Every backend
casts those same weights (drawn once by torch's CPU generator and handed over), so the
printed figures hold exactly on each. A backend that cannot get them (torch absent)
draws its own and checks only the invariants.

Two invariants hold whatever the draw. The values that become zero are exactly those
at or below half the format's smallest subnormal (ties go to the even code, zero), so
their count is predicted without casting. And the fraction zeroed is what the normal
distribution puts below that threshold, within sampling error.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from claims.ops import ops
from claims.topics.formats import FORMATS, Format
from verified_book import Backend, InvariantFailed, NotOnBackend, claim, lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_import("numpy")  # loaded by the first claim that computes with it

COUNT = 1_000_000
SIGMA = 0.02  # initializer_range: the standard deviation of freshly initialised weights
SEED = 0
SCALE = 64.0  # one scale for the whole tensor, lifting 0.02-sized values into E4M3's normal range


@dataclass(frozen=True)
class Row:
    """One line of the rounding table: a format, and the scale applied before the cast."""

    id: str
    fmt: Format
    scale: float = 1.0


ROWS: dict[str, Row] = {
    r.id: r
    for r in (
        Row("bf16", FORMATS["bf16"]),
        Row("fp16", FORMATS["fp16"]),
        Row("e4m3", FORMATS["e4m3"]),
        Row("e5m2", FORMATS["e5m2"]),
        Row("e4m3_x64", FORMATS["e4m3"], SCALE),
    )
}


@functools.cache
def book_weights() -> np.ndarray | None:
    """The book's million weights as float32, from torch's CPU generator; None without torch."""
    try:
        import torch
    except ImportError:
        return None
    generator = torch.Generator(device="cpu").manual_seed(SEED)
    return (torch.randn(COUNT, generator=generator) * SIGMA).numpy()


@functools.cache
def own_weights() -> np.ndarray:
    """Weights of the same spread drawn by numpy, for a machine without torch."""
    return (np.random.default_rng(SEED).standard_normal(COUNT) * SIGMA).astype(np.float32)


def _restore(backend: Backend, weights: Any, row: Row) -> Any:
    """Scale, cast into the row's format, cast back to float32, unscale: on the backend."""
    fmt = row.fmt
    return ops(backend).round_trip(weights * row.scale, fmt.dtype or fmt.id, fmt.label) / row.scale


@functools.cache
def statistics(backend: Backend, row_id: str) -> tuple[float, int, bool]:
    """(mean relative error, values that became zero, whether the weights are the book's) on a backend.

    Cached: the three claims of a row share one cast.
    """
    row = ROWS[row_id]
    weights = book_weights()
    is_book = weights is not None
    host = weights if is_book else own_weights()
    with backend.adapter.on_device():
        x = backend.adapter.from_numpy(host)
        back = _restore(backend, x, row)
        rel = float((abs(back - x) / abs(x)).mean().item())
        zeros = int((back == 0).sum().item())
    _check_zeros(backend, row, host, zeros)
    return rel, zeros, is_book


def flush_threshold(fmt: Format) -> Fraction:
    """Half the smallest subnormal: values at or below it round to zero (the tie goes to even, zero)."""
    return fmt.smallest_subnormal() / 2


def _check_zeros(backend: Backend, row: Row, weights: np.ndarray, zeros: int) -> None:
    threshold = float(flush_threshold(row.fmt)) / row.scale
    scaled = np.abs(weights.astype(np.float64) * row.scale)
    predicted = int((scaled <= float(flush_threshold(row.fmt))).sum())
    if zeros != predicted:
        raise InvariantFailed(
            f"{backend.name}: {row.fmt.label} (scale {row.scale:g}) turned {zeros:,} of {COUNT:,} "
            f"weights into 0; {predicted:,} lie at or below half its smallest subnormal, "
            f"{threshold:.3g}, and only those should"
        )
    expected = math.erf(threshold / (SIGMA * math.sqrt(2)))
    spread = math.sqrt(max(expected * (1 - expected), 1 / COUNT) / COUNT)
    if abs(zeros / COUNT - expected) > 6 * spread:
        raise InvariantFailed(
            f"{backend.name}: {row.fmt.label} (scale {row.scale:g}) zeroed a fraction "
            f"{zeros / COUNT:.5f} of N(0, {SIGMA}) weights; the distribution puts {expected:.5f} "
            f"below {threshold:.3g}"
        )


def _book_only(backend: Backend, is_book: bool, what: str) -> None:
    if not is_book:
        raise NotOnBackend(
            f"{backend.name}: torch is not installed, so the book's weights (torch's CPU generator, "
            f"seed {SEED}) cannot be drawn; {what} held on numpy's own draw"
        )


#: JAX before 0.8 sends to zero values just above half of E4M3's smallest subnormal, where round-to-nearest-even
#: gives the subnormal: the FP8 rounding figures are stated for JAX 0.8 and later
ROUNDING_STATED_FOR = {"jax": ">=0.8"}


@claim("rounding.{row}.rel_error", kind="library", over={"row": tuple(ROWS)}, stated_for=ROUNDING_STATED_FOR)
def rel_error(backend: Backend, row: str) -> float:
    """Mean relative rounding error of the book's weights cast to a format and back."""
    rel, _, is_book = statistics(backend, row)
    fmt = ROWS[row].fmt
    if fmt.id in ("bf16", "fp16") and rel > 2.0 ** -(fmt.mantissa + 1):
        raise InvariantFailed(
            f"{backend.name}: mean relative error {rel:.5f} in {fmt.label} exceeds its unit "
            f"roundoff 2^-{fmt.mantissa + 1}, which bounds every normal value's error"
        )
    _book_only(backend, is_book, f"the zero count's invariants (error {rel:.4f})")
    return rel


@claim("rounding.{row}.zeros", kind="library", over={"row": tuple(ROWS)}, stated_for=ROUNDING_STATED_FOR)
def zeros(backend: Backend, row: str) -> int:
    """How many of the book's million weights became exactly zero in a format."""
    _, count, is_book = statistics(backend, row)
    _book_only(backend, is_book, f"the zero count's invariants ({count:,} zeros)")
    return count


@claim(
    "rounding.{row}.zero_fraction",
    kind="library",
    over={"row": ("e4m3", "e4m3_x64")},
    stated_for=ROUNDING_STATED_FOR,
)
def zero_fraction(backend: Backend, row: str) -> float:
    """The share of weights a cast to E4M3 zeroes: about four per cent unscaled, almost none at x64."""
    _, count, is_book = statistics(backend, row)
    fraction = count / COUNT
    if row == "e4m3" and not 0.03 <= fraction <= 0.05:
        raise InvariantFailed(
            f"{backend.name}: E4M3 zeroed {fraction:.2%} of N(0, {SIGMA}) weights; "
            "between 3 and 5 per cent lie below half its smallest subnormal"
        )
    _book_only(backend, is_book, f"the invariants ({fraction:.2%} zeroed)")
    return fraction


@claim("rounding.e4m3.below_normal", kind="library")
def below_normal(backend: Backend) -> float:
    """The share of the book's weights below E4M3's smallest normal, 2^-6: where the format has fewer bits."""
    weights = book_weights()
    _book_only(backend, weights is not None, "nothing")
    threshold = float(FORMATS["e4m3"].smallest_normal())
    adapter = backend.adapter
    with adapter.on_device():
        return ops(backend).share(abs(adapter.from_numpy(weights)) < threshold)


def _e4m3_cast(backend: Backend, values: np.ndarray) -> np.ndarray:
    """Cast float32 values to E4M3 and back on a backend, as numpy float32."""
    adapter, e4m3 = backend.adapter, FORMATS["e4m3"]
    with adapter.on_device():
        return adapter.to_numpy(ops(backend).round_trip(adapter.from_numpy(values), e4m3.dtype or e4m3.id, e4m3.label))


@claim("rounding.e4m3.flush_threshold", kind="library", stated_for=ROUNDING_STATED_FOR)
def e4m3_flush_threshold(backend: Backend) -> float:
    """The size below which a cast to E4M3 gives zero, found by casting on the backend: 2^-10, about 0.001."""
    fmt = FORMATS["e4m3"]
    t = np.float32(float(flush_threshold(fmt)))
    probes = np.array([np.nextafter(t, np.float32(0)), t, np.nextafter(t, np.float32(1))], dtype=np.float32)
    got = _e4m3_cast(backend, probes).tolist()
    sub = float(fmt.smallest_subnormal())
    if got != [0.0, 0.0, sub]:
        raise InvariantFailed(
            f"{backend.name}: E4M3 casts of just below, at and just above {float(t)!r} give {got}; "
            f"expected [0.0, 0.0, {sub!r}] (ties to even, zero)"
        )
    return float(t)


def table(backend: Backend) -> dict[str, Any]:
    """The whole rounding table on one backend, as plain numbers (for snapshots)."""
    out: dict[str, Any] = {}
    for row_id in ROWS:
        try:
            rel, count, is_book = statistics(backend, row_id)
        except NotOnBackend:
            out[row_id] = "absent"
            continue
        out[row_id] = {"mean_relative_error": round(rel, 6), "zeros": count, "book_weights": is_book}
    return out
