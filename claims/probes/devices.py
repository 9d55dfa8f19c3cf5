"""Timing work on one backend: the clock, the synchronisation and the memory each device needs.

- numpy and torch on the CPU: `time.perf_counter` around the calls;
- torch on CUDA: a pair of `torch.cuda.Event`s recorded on the current stream after a
  `torch.cuda.synchronize()`, read after the end event has completed;
- torch on MPS: `torch.mps.synchronize()` on both sides of the calls;
- MLX: every call's result is queued with `mx.async_eval` (MLX is lazy; nothing runs until it
  is evaluated) on the backend's device, and the clock stops after one `mx.synchronize()` once
  all are queued: evaluating each call on its own would charge every repetition a CPU-GPU round trip.

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
import time
from typing import Any, Callable, Iterator

from verified_book.backends import Backend
from claims.probes.timing import Policy, default_policy
from verified_book.registry import NotOnBackend

GIB = 2**30
MIB = 2**20
MLX_PROBE_CACHE = 8 * GIB


class Runner:
    """How to time work on one backend."""

    def __init__(self, backend: Backend) -> None:
        if not backend.available:
            raise NotOnBackend(f"{backend.name} is not here: {backend.reason}")
        self.backend = backend
        self.gpu = backend.device in ("cuda", "mps", "gpu")
        self.policy: Policy = default_policy(self.gpu)
        # a repetition lasts at least this long, so the clock's resolution and launch costs vanish
        self.min_rep_s = 0.005 if self.gpu else 0.002
        self._events: tuple[Any, Any] | None = None
        self.cleanup: list[Callable[[], Any]] = []

    @property
    def name(self) -> str:
        return self.backend.name

    @contextlib.contextmanager
    def on_device(self) -> Iterator[None]:
        """Make this backend's device the default for the arrays created inside the block."""
        if self.backend.library == "mlx":
            import mlx.core as mx

            # MLX returns freed buffers above its cache limit (32 MiB on some CPUs) to the OS, so
            # each new result would be page-faulted in again: keep them for the probe's duration
            previous = mx.set_cache_limit(MLX_PROBE_CACHE)
            if previous > MLX_PROBE_CACHE:  # never lower a larger limit (Metal's is the memory size)
                mx.set_cache_limit(previous)
            try:
                with mx.stream(mx.cpu if self.backend.device == "cpu" else mx.gpu):
                    yield
            finally:
                mx.set_cache_limit(max(previous, 0))
        else:
            yield

    def seconds_per_call(self, fn: Callable[[], Any], inner: int) -> float:
        """Run `fn` `inner` times, timed as this device needs; seconds per call."""
        name = self.backend.name
        if name == "torch:cuda":
            import torch

            if self._events is None:
                self._events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            start, end = self._events
            torch.cuda.synchronize()
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / inner
        if self.backend.library == "mlx":
            mx = self.backend.module
            mx.synchronize()
            t0 = time.perf_counter()
            queued = []
            for _ in range(inner):
                result = fn()
                mx.async_eval(result)
                queued.append(result)  # kept until the device is done with it
            mx.synchronize()
            elapsed = time.perf_counter() - t0
            del queued
            return elapsed / inner
        self.backend.sync()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        self.backend.sync()
        return (time.perf_counter() - t0) / inner

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
        if self.backend.name == "torch:cuda":
            import torch

            torch.cuda.empty_cache()
        elif self.backend.name == "torch:mps":
            import torch

            torch.mps.empty_cache()
        elif self.backend.library == "mlx":
            import mlx.core as mx

            mx.clear_cache()

    def free_bytes(self) -> int:
        """Memory a probe may use on this device: free device memory, else system memory."""
        if self.backend.name == "torch:cuda":
            import torch

            free, _total = torch.cuda.mem_get_info()
            return int(free)
        if self.backend.name == "torch:mps":
            import torch

            recommended = getattr(torch.mps, "recommended_max_memory", None)
            if recommended is not None:
                return int(recommended()) - int(torch.mps.current_allocated_memory())
        if self.backend.name == "mlx:gpu":
            import mlx.core as mx

            try:
                info = mx.device_info() if hasattr(mx, "device_info") else mx.metal.device_info()
                limit = int(info.get("max_recommended_working_set_size", 0) or info.get("memory_size", 0))
                if limit:
                    return limit - int(mx.get_active_memory())
            except Exception:  # an MLX build without device information: fall back to system memory
                pass
        return available_memory()


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


def cpu_threads() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
