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
import warnings
from fractions import Fraction
from typing import Any, Callable, Iterator

from verified_book.backends import Backend
from claims.probes import store
from claims.probes.devices import Runner
from claims.probes.timing import Measurement, repeat
from verified_book.registry import NotOnBackend

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
    library, device = backend.library, backend.device
    if dtype == "fp8":
        if backend.name != "torch:cuda":
            return ("FP8 matmul is measured only with torch on CUDA (torch._scaled_mm); "
                    f"{'numpy and MLX have no float8 matmul' if library != 'torch' else 'torch has no FP8 matmul on ' + device}")
        import torch

        if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
            return f"torch {torch.__version__} has no torch._scaled_mm or float8_e4m3fn"
        capability = torch.cuda.get_device_capability()
        if tuple(capability) < FP8_CAPABILITY:
            return (f"{torch.cuda.get_device_name()} has compute capability {capability[0]}.{capability[1]}; "
                    f"FP8 tensor cores need {FP8_CAPABILITY[0]}.{FP8_CAPABILITY[1]} or higher")
        return None
    if library == "numpy" and dtype == "bf16":
        return "numpy has no bfloat16 of its own (ml_dtypes adds the dtype, not a matrix-multiply kernel for it)"
    if backend.name == "torch:cuda" and dtype == "bf16":
        import torch

        if not torch.cuda.is_bf16_supported():
            return f"{torch.cuda.get_device_name()} does not support bfloat16 through torch"
    return None


@contextlib.contextmanager
def _full_fp32(backend: Backend, active: bool = True) -> Iterator[str]:
    """Keep CUDA FP32 matmuls in FP32 (no TF32) for the block; yields a note when that failed."""
    if not active or backend.name != "torch:cuda":
        yield ""
        return
    import torch

    previous = None
    note = ""
    with warnings.catch_warnings():  # torch may warn that these are its older TF32 settings
        warnings.simplefilter("ignore")
        try:
            previous = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision("highest")
            if getattr(torch.backends.cuda.matmul, "allow_tf32", False):
                note = "TF32 stays allowed by this torch's settings"
        except Exception as e:  # a torch that refuses mixing its TF32 settings: measure as set, and say so
            note = f"FP32 precision left as set ({type(e).__name__}: {e})"
    try:
        yield note
    finally:
        if previous is not None:
            with warnings.catch_warnings(), contextlib.suppress(Exception):
                warnings.simplefilter("ignore")
                torch.set_float32_matmul_precision(previous)


def _operands(backend: Backend, dtype: str, rows: int, inner: int, cols: int, seed: int = 0) -> tuple[Callable[[], Any], list[Any]]:
    """(one call of a @ b, the arrays) for a (rows × inner) by (inner × cols) product in `dtype`."""
    library = backend.library
    if library == "numpy":
        import numpy as np

        np_dtype = {"fp32": np.float32, "fp16": np.float16}[dtype]
        a = np.full((rows, inner), CPU_FILL, dtype=np_dtype)
        b = np.full((inner, cols), CPU_FILL, dtype=np_dtype)
        c = np.empty((rows, cols), dtype=np_dtype)
        return (lambda: np.matmul(a, b, out=c)), [a, b, c]
    if library == "torch":
        import torch

        device = backend.device

        def normal(shape: tuple[int, int]) -> Any:
            return _torch_values(torch, shape, device, seed)

        if dtype == "fp8":
            f8 = torch.float8_e4m3fn
            a = normal((rows, inner)).to(f8)
            b = normal((cols, inner)).to(f8).t()  # column-major, as _scaled_mm needs its second operand
            scale = torch.ones((), device=device, dtype=torch.float32)

            def fp8_call() -> Any:
                out = torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
                return out[0] if isinstance(out, tuple) else out  # torch < 2.4 returned (out, amax)

            return fp8_call, [a, b, scale]
        t_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
        a = normal((rows, inner)).to(t_dtype)
        b = normal((inner, cols)).to(t_dtype)
        c = torch.empty((rows, cols), dtype=t_dtype, device=device)
        return (lambda: torch.matmul(a, b, out=c)), [a, b, c]
    import mlx.core as mx

    m_dtype = {"fp32": mx.float32, "bf16": mx.bfloat16, "fp16": mx.float16}.get(dtype)
    if m_dtype is None:
        raise NotOnBackend(f"MLX has no {dtype} matmul")
    a = _mlx_values(mx, (rows, inner), backend, seed).astype(m_dtype)
    b = _mlx_values(mx, (inner, cols), backend, seed + 1).astype(m_dtype)
    mx.eval(a, b)
    return (lambda: mx.matmul(a, b)), [a, b]


def _torch_values(torch: Any, shape: tuple[int, int], device: str, seed: int) -> Any:
    """FP32 operands: random normal on an accelerator, a constant on the CPU."""
    if device == "cpu":
        return torch.full(shape, CPU_FILL, dtype=torch.float32)
    if device == "cuda":
        gen = torch.Generator(device="cuda").manual_seed(seed)
        return torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen, dtype=torch.float32).to(device)


def _mlx_values(mx: Any, shape: tuple[int, int], backend: Backend, seed: int) -> Any:
    if backend.device == "cpu":
        return mx.full(shape, CPU_FILL, dtype=mx.float32)
    return mx.random.normal(shape, key=mx.random.key(seed))


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
    if one_thread and backend.name != "torch:cpu":
        raise ValueError(f"matmul probe: one_thread applies to torch:cpu, not {backend.name}")
    runner = Runner(backend)
    runner.policy = dataclasses.replace(runner.policy, cap_s=runner.policy.cap_s * cap_scale)
    why = _unsupported(backend, dtype)
    if why:
        raise NotOnBackend(why)
    try:
        with runner.on_device(), _full_fp32(backend, dtype == "fp32") as note, _threads(one_thread):
            return _measure_matmul(runner, dtype, note + ("; one thread" if one_thread else ""))
    finally:
        runner.release()  # after the measurement has returned, so its matrices are unreferenced


@contextlib.contextmanager
def _threads(one: bool) -> Iterator[None]:
    """torch's intra-op threads set to one for the block, when asked; restored after."""
    if not one:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


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
    return repeat(one, what=f"{dtype} matmul on {backend.name}", work=2 * n**3, unit="GFLOP/s",
                  policy=policy, detail=detail)


def matmul(backend: Backend, dtype: str) -> Measurement:
    """Square matmul throughput of `dtype` on a backend, measured once per run."""
    return store.once((backend.name, "matmul", dtype), lambda: measure_matmul(backend, dtype))


def matmul_recheck(backend: Backend, dtype: str) -> Measurement:
    """torch:cpu's matmul on one thread with four times the time cap, measured once per run."""
    return store.once((backend.name, "matmul", dtype, "recheck"),
                      lambda: measure_matmul(backend, dtype, one_thread=True, cap_scale=4.0))


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


def measure_sweep(backend: Backend, inputs: int, outputs: int,
                  batches: tuple[int, ...] = SWEEP_BATCHES) -> dict[int, SweepPoint]:
    """x @ w with an FP32 (inputs × outputs) weight at each batch, uncached."""
    runner = Runner(backend)
    try:
        with runner.on_device(), _full_fp32(backend) as note:
            return _measure_sweep(runner, inputs, outputs, batches, note)
    finally:
        runner.release()  # after the sweep has returned, so the weight is unreferenced


def _measure_sweep(runner: Runner, inputs: int, outputs: int, batches: tuple[int, ...], note: str) -> dict[int, SweepPoint]:
    backend = runner.backend
    weight_bytes = 4 * inputs * outputs
    points: dict[int, SweepPoint] = {}
    w: Any = None
    first_batch = True
    for batch in batches:
        work = 2 * batch * inputs * outputs
        if not runner.gpu and work > CPU_SWEEP_MAX_FLOPS:
            points[batch] = SweepPoint(batch, None, weight_bytes,
                                       f"batch {batch} is not measured on the CPU: {work / 1e9:.1f} GFLOP a call, past the "
                                       f"sweep's {CPU_SWEEP_MAX_FLOPS / 1e9:.1f} GFLOP a call on a CPU (a count of work, so "
                                       "every run measures the same batches)")
            continue
        call, arrays = _sweep_operands(backend, batch, inputs, outputs, w)
        w = arrays[1]
        if first_batch:
            for _ in range(runner.policy.warmup - 1):
                runner.seconds_per_call(call, 1)
            first_batch = False
        first = runner.calibrate(call)
        one = runner.repetition(call, first)
        policy = dataclasses.replace(runner.policy, warmup=0)
        detail = f"x ({batch} × {inputs}) @ w ({inputs} × {outputs}), FP32" + (f"; {note}" if note else "")
        m = repeat(one, what=f"sweep batch {batch} on {backend.name}", work=work,
                   unit="GFLOP/s", policy=policy, detail=detail, first=first if first >= runner.min_rep_s else None)
        points[batch] = SweepPoint(batch, m, weight_bytes)
    return points


def _sweep_operands(backend: Backend, batch: int, inputs: int, outputs: int, w: Any) -> tuple[Callable[[], Any], list[Any]]:
    """One call of x @ w at this batch, reusing the weight `w` when given (it stays warm)."""
    library = backend.library
    if library == "numpy":
        import numpy as np

        if w is None:
            w = np.full((inputs, outputs), CPU_FILL, dtype=np.float32)
        x = np.full((batch, inputs), CPU_FILL, dtype=np.float32)
        out = np.empty((batch, outputs), dtype=np.float32)
        return (lambda: np.matmul(x, w, out=out)), [x, w, out]
    if library == "torch":
        import torch

        device = backend.device
        if w is None:
            w = _torch_values(torch, (inputs, outputs), device, 0)
        x = _torch_values(torch, (batch, inputs), device, batch)
        out = torch.empty((batch, outputs), dtype=torch.float32, device=device)
        return (lambda: torch.matmul(x, w, out=out)), [x, w, out]
    import mlx.core as mx

    if w is None:
        w = _mlx_values(mx, (inputs, outputs), backend, 0)
    x = _mlx_values(mx, (batch, inputs), backend, batch)
    mx.eval(w, x)
    return (lambda: mx.matmul(x, w)), [x, w]


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
