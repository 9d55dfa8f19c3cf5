"""Repetition, median and spread: how a probe turns noisy repetitions into one figure.

A probe runs its work once or more to warm up (caches, clocks, kernel selection), then
repeats it until the spread of the repetitions is small (interquartile range over median
at most `target_spread`) or its time cap is spent, whichever comes first, but never fewer
than `min_reps` times. The figure is the median; the spread is recorded beside it so a
reader can see how settled the machine was. While a probe runs past a second, one
progress line on stderr says what it is doing.

Nothing here knows a library or a device: a repetition is a callable that runs the work
and returns its seconds per call, and the clock is a parameter, so the logic is tested
with a fake one.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, TextIO

CAP_ENV = "CLAIMS_PROBE_CAP_S"
CPU_CAP_S = 0.2
GPU_CAP_S = 1.0


@dataclass(frozen=True)
class Policy:
    """When a probe stops repeating."""

    warmup: int = 1
    min_reps: int = 5
    min_reps_slow: int = 3  # when min_reps repetitions would not fit in the cap
    max_reps: int = 200
    target_spread: float = 0.05
    cap_s: float = CPU_CAP_S
    progress_after_s: float = 1.0


def default_policy(gpu: bool) -> Policy:
    """The policy of a CPU or an accelerator probe; `CLAIMS_PROBE_CAP_S` overrides the cap."""
    cap = GPU_CAP_S if gpu else CPU_CAP_S
    text = os.environ.get(CAP_ENV)
    if text:
        try:
            cap = float(text)
        except ValueError:
            raise ValueError(f"{CAP_ENV}={text!r}: expected seconds as a number, like 0.5") from None
        if not (math.isfinite(cap) and cap > 0):
            raise ValueError(f"{CAP_ENV}={text!r}: expected a positive number of seconds")
    return Policy(warmup=2 if gpu else 1, cap_s=cap)


def spread(samples: list[float] | tuple[float, ...]) -> float:
    """Interquartile range over median; 0 for fewer than two samples."""
    if len(samples) < 2:
        return 0.0
    mid = statistics.median(samples)
    if mid <= 0:
        return math.inf
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return (q3 - q1) / mid


@dataclass(frozen=True)
class Measurement:
    """One probe's repetitions and what they give: seconds per call, and the work per call."""

    what: str
    samples: tuple[float, ...]
    work: float
    unit: str
    settled: bool
    detail: str = ""
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def reps(self) -> int:
        return len(self.samples)

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> float:
        return spread(self.samples)

    @property
    def rate(self) -> float:
        """Work per second in units of 10^9 (GB/s for bytes, GFLOP/s for FLOPs), at the median."""
        return self.work / self.median_s / 1e9

    @property
    def best(self) -> float:
        """The rate of the fastest repetition: interference only slows a run, so this is the
        closest lower bound on what the hardware can do (invariants use it where noise would
        otherwise fail them)."""
        return self.work / min(self.samples) / 1e9

    def describe(self) -> str:
        state = "settled" if self.settled else "capped"
        detail = f"; {self.detail}" if self.detail else ""
        return (
            f"{self.what}: {self.rate:.4g} {self.unit} (median of {self.reps} runs, "
            f"spread {self.spread:.1%}, {state}{detail})"
        )


class Progress:
    """A single progress line on a stream, shown only once a probe has run past a threshold."""

    def __init__(self, what: str, stream: TextIO | None, after_s: float) -> None:
        self.what = what
        self.stream = stream
        self.after_s = after_s
        self.shown = False
        self._last = -math.inf

    def update(self, elapsed: float, samples: list[float], work: float, unit: str) -> None:
        if elapsed < self.after_s or elapsed - self._last < 0.25 or not samples:
            return
        self._last = elapsed
        stream = self.stream or sys.stderr
        rate = work / statistics.median(samples) / 1e9
        text = (
            f"\r  probe {self.what}: {len(samples)} runs in {elapsed:.1f} s, "
            f"{rate:.4g} {unit}, spread {spread(samples):.1%}"
        )
        stream.write(text)
        stream.flush()
        self.shown = True

    def finish(self) -> None:
        if self.shown:
            stream = self.stream or sys.stderr
            stream.write("\n")
            stream.flush()


def repeat(
    one: Callable[[], float],
    *,
    what: str,
    work: float,
    unit: str,
    policy: Policy,
    clock: Callable[[], float] = time.perf_counter,
    stream: TextIO | None = None,
    detail: str = "",
    first: float | None = None,
) -> Measurement:
    """Warm up, then repeat `one` (which returns seconds per call) until settled or capped.

    The cap counts from the first timed repetition; warm-up runs are not timed but are
    counted towards the progress line's clock. `first` is a repetition the caller has
    already timed on warm operands (a calibration run): it counts as the first sample.
    """
    if work <= 0:
        raise ValueError(f"probe {what}: work per call must be positive, found {work}")
    started = clock()
    for _ in range(policy.warmup):
        one()
    timed_from = clock()
    progress = Progress(what, stream, policy.progress_after_s)
    samples: list[float] = []
    pending = first
    settled = False
    try:
        while True:
            seconds, pending = (one() if pending is None else pending), None
            if not (math.isfinite(seconds) and seconds > 0):
                raise ValueError(f"probe {what}: a repetition took {seconds!r} s; expected a positive time")
            samples.append(seconds)
            now = clock()
            progress.update(now - started, samples, work, unit)
            need = policy.min_reps
            if samples[0] * policy.min_reps > policy.cap_s:
                need = min(policy.min_reps, policy.min_reps_slow)
            if len(samples) < need:
                continue
            if spread(samples) <= policy.target_spread:
                settled = True
                break
            if len(samples) >= policy.max_reps or now - timed_from >= policy.cap_s:
                break
    finally:
        progress.finish()
    return Measurement(what, tuple(samples), float(work), unit, settled, detail)
