"""Matrix-multiply throughput per dtype, and the intensity sweep on one weight matrix.

Throughput: square matrices, 2·n³ FLOPs per call. On an accelerator the operands are
random normal values (a GPU's power draw, hence its clock, depends on the bits; zeros
would flatter it) and n is 8192, smaller only where memory is short. On the CPU the
values do not change the time, so they are a constant, and n is the largest of 128 to
2048 whose call takes at most a quarter of the probe's time cap at the rate of a small
call (a slow, emulated dtype gets small matrices, FP32 at least 512).
FP32 is measured at full FP32 precision on CUDA (TF32 off for the probe, the setting
restored after). FP8 is measured only on CUDA devices of compute capability 8.9 or
higher through `torch._scaled_mm` (E4M3 operands, per-tensor scales of one, BF16 out),
after a small trial call succeeds.

The sweep multiplies a batch of activations `x` (batch × inputs) by one FP32 weight `w`
(inputs × outputs) at growing batch sizes. Every call reads the whole weight once, so
`weight bytes / time` is the rate at which the weight streams from memory, and the
FLOPs per byte (exact, in `intensity`) grow with the batch. The sweep measures the
batches in increasing order; on the CPU a batch whose call does more than CPU_SWEEP_MAX_FLOPS
(batch 8 on Qwen3-8B's gate_proj) is not measured, and says why. The rule is a count of
work, not a time, so every run of a machine measures the same batches and passes the same
checks; a rule on the time left would measure a batch on one run and skip it on the next.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from fractions import Fraction
from typing import Any, Callable

from claims.ops import has, ops
from claims.probes import store
from claims.probes.devices import Runner
from claims.probes.timing import Measurement, repeat
from verified_book import Backend, NotOnBackend

DTYPES = ("fp32", "bf16", "fp16", "fp8")
BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
GPU_N = 8192
CPU_N_MIN, CPU_FP32_N_MIN, CPU_N_MAX, CPU_N_PROBE = 128, 512, 2048, 128
CPU_FILL = 0.5
SWEEP_BATCHES = (1, 8, 64, 256)
CPU_SWEEP_MAX_FLOPS = 2 * 8 * 4096 * 12288  # the most work a CPU sweep call may do: batch 8 on the book's weight
FP8_CAPABILITY = (8, 9)


def intensity(batch: int, inputs: int, outputs: int, element_bytes: int = 4) -> Fraction:
    """FLOPs per byte moved by `x @ w`: 2·b·i·o over the bytes of x, w and the output, exactly."""
    flops = 2 * batch * inputs * outputs
    moved = element_bytes * (inputs * outputs + batch * inputs + batch * outputs)
    return Fraction(flops, moved)


def _unsupported(backend: Backend, dtype: str) -> str | None:
    """Why this backend cannot multiply `dtype` matrices, or None."""
    return ops(backend).matmul_unsupported(dtype)


def _full_fp32(backend: Backend, active: bool = True) -> contextlib.AbstractContextManager[str]:
    """Keep FP32 matmuls in FP32 (no TF32 on CUDA) for the block; yields a note when that failed."""
    return ops(backend).full_precision_fp32() if active else contextlib.nullcontext("")


DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _operands(
    backend: Backend, dtype: str, rows: int, inner: int, cols: int, seed: int = 0
) -> tuple[Callable[[], Any], list[Any]]:
    """(one call of a @ b, the arrays) for a (rows × inner) by (inner × cols) product in `dtype`."""
    adapter = backend.adapter
    if dtype == "fp8":
        return ops(backend).fp8_matmul(rows, inner, cols, seed, CPU_FILL)
    t_dtype = adapter.dtype(DTYPE_NAMES[dtype])
    a = adapter.astype(ops(backend).probe_values((rows, inner), seed, CPU_FILL), t_dtype)
    b = adapter.astype(ops(backend).probe_values((inner, cols), seed + 1, CPU_FILL), t_dtype)
    c = adapter.zeros((rows, cols), t_dtype)
    adapter.evaluate(a, b, c)
    return ops(backend).matmul_into(a, b, c), [a, b, c]


def _gpu_n(runner: Runner, dtype: str) -> int:
    """The largest n up to 8192 whose three matrices take at most a quarter of free memory."""
    free = runner.free_bytes()
    n = GPU_N
    while n > 1024 and 3 * n * n * max(BYTES[dtype], 2) > free // 4:
        n //= 2
    return n


def _cpu_n(runner: Runner, backend: Backend, dtype: str) -> int:
    """The largest n of 128 to 2048 whose call, at the rate of the best of three n = 128 calls,
    takes at most a quarter of the cap; FP32 (native everywhere) gets at least 512, since
    threads that wait on each other make small products slow on a busy machine."""
    probe, _ = _operands(backend, dtype, CPU_N_PROBE, CPU_N_PROBE, CPU_N_PROBE)
    runner.seconds_per_call(probe, 1)
    t_probe = min(runner.seconds_per_call(probe, 1) for _ in range(3))
    target = runner.policy.cap_s / 4
    n = CPU_FP32_N_MIN if dtype == "fp32" else CPU_N_MIN
    for size in (256, 512, 1024, CPU_N_MAX):
        if t_probe * (size / CPU_N_PROBE) ** 3 <= target:
            n = max(n, size)
    return n


def measure_matmul(backend: Backend, dtype: str, one_thread: bool = False, cap_scale: float = 1.0) -> Measurement:
    """Square matmul throughput of `dtype` on a backend, uncached; GFLOP/s as the rate.

    `one_thread` (torch on the CPU only) runs the product on one thread, and `cap_scale`
    stretches the time cap: together a recheck of what a busy CPU can still do, since the
    slowest of several threads sets the pace of a product split across them.
    """
    if dtype not in DTYPES:
        raise ValueError(f"matmul probe: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    if one_thread and not has(backend, "thread_count"):
        raise ValueError(
            f"matmul probe: one_thread applies to a library whose thread count can be set, not {backend.name}"
        )
    runner = Runner(backend)
    runner.policy = dataclasses.replace(runner.policy, cap_s=runner.policy.cap_s * cap_scale)
    why = _unsupported(backend, dtype)
    if why:
        raise NotOnBackend(why)
    try:
        with (
            runner.on_device(),
            _full_fp32(backend, dtype == "fp32") as note,
            ops(backend).one_thread() if one_thread else contextlib.nullcontext(),
        ):
            return _measure_matmul(runner, dtype, note + ("; one thread" if one_thread else ""))
    finally:
        runner.release()  # after the measurement has returned, so its matrices are unreferenced


def _measure_matmul(runner: Runner, dtype: str, note: str) -> Measurement:
    backend = runner.backend
    try:
        trial, _ = _operands(backend, dtype, 64, 64, 64)
        runner.seconds_per_call(trial, 1)
    except NotOnBackend:
        raise
    except Exception as e:  # the library refuses the dtype on this device: a skip, with its words
        raise NotOnBackend(f"{backend.name} cannot multiply {dtype} matrices: {type(e).__name__}: {e}") from None
    n = _gpu_n(runner, dtype) if runner.gpu else _cpu_n(runner, backend, dtype)
    call, _arrays = _operands(backend, dtype, n, n, n)
    first = runner.calibrate(call)
    one = runner.repetition(call, first)
    policy = dataclasses.replace(runner.policy, warmup=max(0, runner.policy.warmup - 1))
    detail = f"n = {n}" + (f"; {note}" if note else "")
    return repeat(
        one, what=f"{dtype} matmul on {backend.name}", work=2 * n**3, unit="GFLOP/s", policy=policy, detail=detail
    )


def matmul(backend: Backend, dtype: str) -> Measurement:
    """Square matmul throughput of `dtype` on a backend, measured once per run."""
    return store.once((backend.name, "matmul", dtype), lambda: measure_matmul(backend, dtype))


def matmul_recheck(backend: Backend, dtype: str) -> Measurement:
    """torch:cpu's matmul on one thread with four times the time cap, measured once per run."""
    return store.once(
        (backend.name, "matmul", dtype, "recheck"),
        lambda: measure_matmul(backend, dtype, one_thread=True, cap_scale=4.0),
    )


@dataclasses.dataclass(frozen=True)
class SweepPoint:
    """One batch of the sweep: its measurement, or why it was not measured."""

    batch: int
    measurement: Measurement | None
    weight_bytes: int
    skipped: str = ""

    @property
    def gflops(self) -> float:
        assert self.measurement is not None
        return self.measurement.rate

    @property
    def weight_gbs(self) -> float:
        assert self.measurement is not None
        return self.weight_bytes / self.measurement.median_s / 1e9


def measure_sweep(
    backend: Backend, inputs: int, outputs: int, batches: tuple[int, ...] = SWEEP_BATCHES
) -> dict[int, SweepPoint]:
    """x @ w with an FP32 (inputs × outputs) weight at each batch, uncached."""
    runner = Runner(backend)
    try:
        with runner.on_device(), _full_fp32(backend) as note:
            return _measure_sweep(runner, inputs, outputs, batches, note)
    finally:
        runner.release()  # after the sweep has returned, so the weight is unreferenced


def _measure_sweep(
    runner: Runner, inputs: int, outputs: int, batches: tuple[int, ...], note: str
) -> dict[int, SweepPoint]:
    backend = runner.backend
    weight_bytes = 4 * inputs * outputs
    points: dict[int, SweepPoint] = {}
    w: Any = None
    first_batch = True
    for batch in batches:
        work = 2 * batch * inputs * outputs
        if not runner.gpu and work > CPU_SWEEP_MAX_FLOPS:
            points[batch] = SweepPoint(
                batch,
                None,
                weight_bytes,
                f"batch {batch} is not measured on the CPU: {work / 1e9:.1f} GFLOP a call, past the "
                f"sweep's {CPU_SWEEP_MAX_FLOPS / 1e9:.1f} GFLOP a call on a CPU (a count of work, so "
                "every run measures the same batches)",
            )
            continue
        call, arrays = _sweep_operands(backend, batch, inputs, outputs, w)
        w = arrays[1]
        if first_batch or runner.gpu:  # an accelerator may compile or choose a kernel anew for each shape
            for _ in range(runner.policy.warmup - 1 if first_batch else 0):
                runner.seconds_per_call(call, 1)
            first = runner.calibrate(call)
            first_batch = False
        else:  # on the CPU the weight and BLAS are warm from the batch before; x and out are a few rows
            first = runner.seconds_per_call(call, 1)
        one = runner.repetition(call, first)
        policy = dataclasses.replace(runner.policy, warmup=0)
        detail = f"x ({batch} × {inputs}) @ w ({inputs} × {outputs}), FP32" + (f"; {note}" if note else "")
        m = repeat(
            one,
            what=f"sweep batch {batch} on {backend.name}",
            work=work,
            unit="GFLOP/s",
            policy=policy,
            detail=detail,
            first=first if first >= runner.min_rep_s else None,
        )
        points[batch] = SweepPoint(batch, m, weight_bytes)
    return points


def _sweep_operands(
    backend: Backend, batch: int, inputs: int, outputs: int, w: Any
) -> tuple[Callable[[], Any], list[Any]]:
    """One call of x @ w at this batch, reusing the weight `w` when given (it stays warm)."""
    adapter = backend.adapter
    if w is None:
        w = ops(backend).probe_values((inputs, outputs), 0, CPU_FILL)
    x = ops(backend).probe_values((batch, inputs), batch, CPU_FILL)
    out = adapter.zeros((batch, outputs), adapter.dtype("float32"))
    adapter.evaluate(w, x, out)
    return ops(backend).matmul_into(x, w, out), [x, w, out]


def sweep(backend: Backend, inputs: int, outputs: int) -> dict[int, SweepPoint]:
    """The intensity sweep on an (inputs × outputs) FP32 weight, measured once per run."""
    return store.once((backend.name, "sweep", inputs, outputs), lambda: measure_sweep(backend, inputs, outputs))


def crossover_batch(ridge: float, inputs: int, outputs: int, element_bytes: int = 4) -> int | None:
    """The smallest batch whose intensity exceeds `ridge` FLOP/byte; None if none ever does.

    intensity(b) = 2·b·i·o / (e·(i·o + b·(i + o))) rises towards 2·i·o / (e·(i + o)); solving
    intensity(b) > r for b gives b > r·e·i·o / (2·i·o − r·e·(i + o)), computed exactly.
    """
    r = Fraction(ridge)
    io = inputs * outputs
    denominator = 2 * io - r * element_bytes * (inputs + outputs)
    if denominator <= 0:
        return None
    bound = r * element_bytes * io / denominator
    batch = max(1, math.floor(bound) + 1)
    while batch > 1 and intensity(batch - 1, inputs, outputs, element_bytes) > r:
        batch -= 1
    while intensity(batch, inputs, outputs, element_bytes) <= r:
        batch += 1
    return batch
