"""Timing work on one backend: the clock, the synchronisation and the memory each device needs.

- numpy and torch on the CPU: `time.perf_counter` around the calls;
- torch on CUDA: a pair of `torch.cuda.Event`s recorded on the current stream after a
  `torch.cuda.synchronize()`, read after the end event has completed;
- torch on MPS: `torch.mps.synchronize()` on both sides of the calls;
- MLX: every call's result is queued with `mx.async_eval` (MLX is lazy; nothing runs until it
  is evaluated) on the backend's device, and the clock stops after one `mx.synchronize()` once
  all are queued: evaluating each call on its own would charge every repetition a CPU-GPU round trip;
- JAX: every call's result is waited for (`jax.block_until_ready`; JAX dispatches asynchronously).

Each backend's adapter (`verified_book.backends`) does the timing; a Runner adds the policy.

Before a repetition count is calibrated from one call's time, one untimed call runs, on every
device (`Runner.calibrate`): the first call compiles kernels (Metal, CUDA's lazy loading) and
would make the work look slow enough to need no repetitions.

A repetition runs the work `inner` times and returns seconds per call, so that work too
short for the clock (a copy on an accelerator) is timed over several calls.
"""

from __future__ import annotations

import contextlib
import math
import os
from typing import Any, Callable

from claims.ops import ops
from claims.probes.timing import Policy, default_policy
from verified_book import Backend, NotOnBackend

GIB = 2**30
MIB = 2**20


class Runner:
    """How to time work on one backend."""

    def __init__(self, backend: Backend) -> None:
        if not backend.available:
            raise NotOnBackend(f"{backend.name} is not here: {backend.reason}")
        self.backend = backend
        self.adapter = backend.adapter
        self.ops = ops(backend)  # the book's operations on this backend, beside the engine's adapter
        self.gpu = self.adapter.accelerator
        self.policy: Policy = default_policy(self.gpu)
        # a repetition lasts at least this long, so the clock's resolution and launch costs vanish
        self.min_rep_s = 0.005 if self.gpu else 0.002
        self.cleanup: list[Callable[[], Any]] = []

    @property
    def name(self) -> str:
        return self.backend.name

    def on_device(self) -> contextlib.AbstractContextManager[Any]:
        """Make this backend's device the default for the arrays created inside the block,
        with the memory settings a probe needs (MLX keeps freed buffers for reuse)."""
        return self.ops.probe_scope()

    def seconds_per_call(self, fn: Callable[[], Any], inner: int) -> float:
        """Run `fn` `inner` times, timed as this device needs; seconds per call."""
        return self.adapter.seconds_per_call(fn, inner)

    def calibrate(self, fn: Callable[[], Any]) -> float:
        """Seconds of one warm call: one untimed call first (kernel compilation, first-touch
        allocation), then one timed, which a repetition count can be calibrated from."""
        self.seconds_per_call(fn, 1)
        return self.seconds_per_call(fn, 1)

    def repetition(self, fn: Callable[[], Any], first_s: float | None = None) -> Callable[[], float]:
        """A repetition of `fn` long enough for the clock: calibrated from one call's time."""
        once = first_s if first_s is not None else self.seconds_per_call(fn, 1)
        inner = 1 if once >= self.min_rep_s else min(1000, math.ceil(self.min_rep_s / max(once, 1e-7)))
        return lambda: self.seconds_per_call(fn, inner)

    def release(self) -> None:
        """Run the cleanup steps and hand freed device memory back, so later claims have it.

        An accelerator's buffers must be unreferenced before its allocator can return them, so
        reference cycles are collected first there. On the CPU the buffers go back as soon as
        their last reference does, and a full collection costs a tenth of a second or more in
        a process holding torch and transformers, so it is left to Python's own schedule.
        """
        import gc

        while self.cleanup:
            self.cleanup.pop()()
        if self.gpu:
            gc.collect()
        self.adapter.release_memory()

    def free_bytes(self) -> int:
        """Memory a probe may use on this device: free device memory, else system memory."""
        free = self.adapter.free_bytes()
        return available_memory() if free is None else free


def available_memory() -> int:
    """System memory available to a new allocation, in bytes (MemAvailable where Linux says it)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) // 2
    except (ValueError, OSError, AttributeError):
        return 8 * GIB
