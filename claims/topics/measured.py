"""The book's central bound measured, not quoted: decode tokens/s ≤ memory bandwidth / bytes of weights.

Every claim here is measured on every backend present (numpy on the CPU, torch on each
device, MLX on each device) by the probes of `claims.probes`, once per run, and recorded
per machine in results/. Values depend on the machine and on what else it is doing, so
no claim here compares a value with a fixed number; each checks instead a property that
holds on any machine, with a stated margin:

- a bandwidth measured on the memory a vendor figure describes stays at or below that
  figure plus MARGIN_VENDOR (10 %);
- a batch-1 matrix-vector product, and every batch of the sweep, streams its weight no
  faster than the fastest bandwidth measured on its device (any backend's copy or read;
  where that falls short, the backend's copy and read measured once more with four times
  the time cap) plus MARGIN_ACHIEVED (50 %: a copy's bytes are counted as read plus
  written, while a CPU that allocates lines before writing moves a third share the count
  omits);
- the FP32 ridge point of each device (its fastest matmul over its fastest copy, among
  the backends on it) lies above the batch-1 intensity and below the intensity of a
  prefill-sized batch (2,048), each by a factor of at least 1 + MARGIN_INTENSITY (25 %)
  (a CPU that falls short is rechecked once with torch's matmul on one thread);
- the sweep's GFLOP/s at batch 256 (measured on accelerators; a CPU sweep stops at
  batch 8, see `matmul.CPU_SWEEP_MAX_FLOPS`) is at least 1 + MARGIN_RISE (100 %) times
  that at batch 1: the same weight bytes serve 256 times the arithmetic;
- FLOPs per byte are exact fractions, so the crossover batch is an exact integer.

Interference from other work only slows a repetition. So where an invariant bounds a
measurement from above it takes that measurement's median and the bound's best
repetition, and where it needs what the hardware can do it takes best repetitions; the
margins are wide enough that a machine with one of two cores kept busy passes them every
time (scripts/flake-check runs them 20 times so).
"""

from __future__ import annotations

import os
from fractions import Fraction
from functools import cache

from claims.ops import has
from claims.probes import bandwidth, matmul
from claims.probes.matmul import SWEEP_BATCHES, SweepPoint, crossover_batch, intensity
from claims.topics.models import MODEL, bf16_total_bytes
from verified_book import (
    Backend,
    InvariantFailed,
    Machine,
    NotOnBackend,
    available,
    claim,
    exact,
    fingerprint,
    identify,
    model_config,
    profiles,
    table,
    vendor,
)

MARGIN_VENDOR = 0.10
MARGIN_ACHIEVED = 0.50
MARGIN_INTENSITY = 0.25
MARGIN_RISE = 1.0
PREFILL_BATCH = 2048
GIGA = 10**9
FILES = f"models/{MODEL}/files.toml"


@cache
def this_machine() -> Machine:
    """This machine and the book's hardware profiles it matches (looked up once)."""
    return identify(fingerprint())


def weight_shape() -> tuple[int, int]:
    """(inputs, outputs) of the sweep's weight: Qwen3-8B's gate_proj as x @ w uses it."""
    config = model_config(MODEL)
    return config["hidden_size"], config["intermediate_size"]


def same_memory(backend: Backend) -> list[Backend]:
    """The backends present that compute on the same device as `backend` (the CPU, or the accelerator)."""
    group = backend.device == "cpu"
    return [b for b in available() if (b.device == "cpu") == group]


def fastest_bandwidth(backend: Backend) -> tuple[float, str]:
    """(GB/s, which probe) of the fastest repetition of a copy or a read that any backend on this
    backend's device showed: what its memory can deliver, as far as this run saw."""
    found = []
    for other in same_memory(backend):
        found.append((bandwidth.copy(other).best, f"{other.name} copy"))
        found.append((bandwidth.read(other).best, f"{other.name} read"))
    return max(found)


def vendor_bandwidth(backend: Backend) -> tuple[Fraction, str] | None:
    """The matched profile's memory bandwidth (GB/s) and its name, where it describes the memory this
    backend streams: on a unified-memory machine every backend; on a discrete one only the accelerator."""
    machine = this_machine()
    if not machine.markers:
        return None
    profile = profiles()[machine.markers[0]]
    design = table(profile.file).get("design", "discrete")
    if design != "unified" and backend.device == "cpu":
        return None
    return exact(vendor(profile.file, "memory_bandwidth")), profile.name


def _no_vendor_reason(backend: Backend) -> str:
    machine = this_machine()
    if not machine.markers:
        return (
            f"this machine matches none of the book's hardware profiles ({machine.describe()}); "
            "no vendor bandwidth to compare with"
        )
    profile = profiles()[machine.markers[0]]
    return (
        f"{profile.name}'s quoted memory bandwidth is the accelerator's own memory; {backend.name} streams host memory"
    )


def _check_vendor(backend: Backend, what: str, measured: float) -> None:
    quoted = vendor_bandwidth(backend)
    if quoted is None:
        return
    figure, name = quoted
    if measured > float(figure) * (1 + MARGIN_VENDOR):
        raise InvariantFailed(
            f"{what} on {backend.name} measured {measured:.1f} GB/s, above {name}'s quoted "
            f"{float(figure):g} GB/s + {MARGIN_VENDOR:.0%}; the probe miscounts bytes or the "
            "working set sits in a cache"
        )


@claim("probe.bandwidth.{op}", kind="measured", over={"op": ("copy", "read")})
def measured_bandwidth(backend: Backend, op: str) -> float:
    """Memory bandwidth in GB/s: a streaming copy (bytes read plus written) or a read-only reduction.

    Invariant: where a hardware profile matches and its figure describes this backend's
    memory, the best repetition is at most the vendor's figure plus MARGIN_VENDOR.
    """
    m = bandwidth.copy(backend) if op == "copy" else bandwidth.read(backend)
    _check_vendor(backend, f"{op} bandwidth", m.best)
    return m.rate


@claim("probe.matmul.{dtype}", kind="measured", over={"dtype": matmul.DTYPES})
def measured_matmul(backend: Backend, dtype: str) -> float:
    """Square matrix-multiply throughput in GFLOP/s at a dtype; skipped where the backend lacks it."""
    return matmul.matmul(backend, dtype).rate


def ridge(backend: Backend, dtype: str) -> float:
    """FLOP per byte at which this backend's matmul stops waiting on memory: matmul / copy bandwidth."""
    return matmul.matmul(backend, dtype).rate / bandwidth.copy(backend).rate


def device_ridge(backend: Backend, dtype: str) -> tuple[float, str]:
    """This device's FP32 ridge from its best runs: the fastest matmul over the fastest copy that any
    backend on it showed, and which backends gave them. A backend with a slow kernel (MLX on a Linux
    CPU multiplies at a few GFLOP/s) has a ridge of its own below the device's; the device's is the one
    the memory-bound argument is about."""
    flops, copies = [], []
    for other in same_memory(backend):
        try:
            flops.append((matmul.matmul(other, dtype).best, other.name))
        except NotOnBackend:
            continue
        copies.append((bandwidth.copy(other).best, other.name))
    if not flops:
        raise NotOnBackend(f"no backend on {backend.name}'s device multiplies {dtype} matrices")
    (best_flops, by), (best_copy, via) = max(flops), max(copies)
    return best_flops / best_copy, f"{by} matmul over {via} copy"


def cpu_ridge_recheck(backend: Backend) -> tuple[float, str]:
    """The CPU's FP32 ridge again, from torch's matmul on one thread with four times the time cap.

    On a busy CPU a product split over threads runs at the pace of the thread that waits
    longest for a core, and can fall twenty-fold while a copy barely slows; one thread
    keeps its share. Its rate is a floor of the CPU's, so a ridge from it is a floor too.
    """
    torch_cpu = next((b for b in same_memory(backend) if has(b, "thread_count") and not b.adapter.accelerator), None)
    if torch_cpu is None:
        return 0.0, "no torch:cpu to recheck with"
    best_copy, via = max((bandwidth.copy(b).best, b.name) for b in same_memory(backend))
    return matmul.matmul_recheck(torch_cpu, "fp32").best / best_copy, f"torch:cpu one-thread matmul over {via} copy"


def check_ridge(backend: Backend, inputs: int, outputs: int) -> None:
    """The device's FP32 ridge lies between the batch-1 and the prefill batch's intensity, with margin."""
    value, how = device_ridge(backend, "fp32")
    low = intensity(1, inputs, outputs)
    high = intensity(PREFILL_BATCH, inputs, outputs)
    if not value > float(low) * (1 + MARGIN_INTENSITY) and backend.device == "cpu":
        value, how = max((value, how), cpu_ridge_recheck(backend))
    if not value > float(low) * (1 + MARGIN_INTENSITY):
        raise InvariantFailed(
            f"FP32 ridge of {backend.name}'s device is {value:.3g} FLOP/byte ({how}, best runs), "
            f"not above the batch-1 intensity {float(low):.3g} × {1 + MARGIN_INTENSITY:g}: a "
            "matrix-vector product would not be memory-bound"
        )
    if not value * (1 + MARGIN_INTENSITY) < float(high):
        raise InvariantFailed(
            f"FP32 ridge of {backend.name}'s device is {value:.4g} FLOP/byte ({how}, best runs), "
            f"not below the batch-{PREFILL_BATCH} intensity {float(high):.4g} / "
            f"{1 + MARGIN_INTENSITY:g}: prefill would not be compute-bound"
        )


@claim("probe.ridge.{dtype}", kind="measured", over={"dtype": ("fp32", "bf16")})
def measured_ridge(backend: Backend, dtype: str) -> float:
    """The ridge point in FLOP per byte: measured matmul GFLOP/s over measured copy GB/s.

    Invariant (FP32, the sweep's dtype): the batch-1 intensity of the sweep's weight lies
    below the ridge of this backend's device, and a prefill-sized batch's (2,048) above it,
    each by a factor of 1 + MARGIN_INTENSITY. The device's ridge is the fastest matmul over
    the fastest copy among the backends on it (best runs; on a CPU that falls short, once
    more from torch on one thread, which a busy machine slows least); a backend whose own
    kernel is slow records a lower ridge of its own, which is this claim's value. BF16 is only
    recorded: a CPU without BF16 units emulates it, and its ridge can fall below one.
    """
    if dtype == "fp32":
        check_ridge(backend, *weight_shape())
    return ridge(backend, dtype)


def model_bytes(fmt: str) -> Fraction:
    """Bytes of Qwen3-8B's weights read per decoded token: BF16 from its config, Q4_K_M the quoted file."""
    if fmt == "bf16":
        return bf16_total_bytes()
    return exact(vendor(FILES, "q4_k_m_file")) * GIGA


@claim("probe.decode_ceiling.qwen3_8b.{fmt}", kind="measured", over={"fmt": ("bf16", "q4_k_m")})
def measured_decode_ceiling(backend: Backend, fmt: str) -> float:
    """Batch-1 decode ceiling of Qwen3-8B in tokens/s on this backend: measured copy bandwidth / bytes of weights."""
    size = model_bytes(fmt)
    return bandwidth.copy(backend).rate * GIGA / float(size)


@claim("probe.vendor_ratio", kind="measured")
def measured_vendor_ratio(backend: Backend) -> float:
    """Measured copy bandwidth over the matched profile's quoted memory bandwidth.

    Skipped where the machine matches no profile, or the profile's figure is an
    accelerator's memory and this backend streams host memory. Invariant: at most
    1 + MARGIN_VENDOR for the best repetition.
    """
    quoted = vendor_bandwidth(backend)
    if quoted is None:
        raise NotOnBackend(_no_vendor_reason(backend))
    figure, _ = quoted
    m = bandwidth.copy(backend)
    _check_vendor(backend, "copy bandwidth", m.best)
    return m.rate / float(figure)


def sweep_points(backend: Backend) -> dict[int, SweepPoint]:
    return matmul.sweep(backend, *weight_shape())


def sweep_point(backend: Backend, batch: int) -> SweepPoint:
    point = sweep_points(backend)[batch]
    if point.measurement is None:
        raise NotOnBackend(point.skipped)
    return point


def _streams(backend: Backend) -> int:
    """How many cores stream a matrix product's weight at once on this backend.

    The bandwidth probes copy with one thread on the CPU (numpy and MLX do), while BLAS
    spreads a matrix-vector product over every core, so on the CPU the bound is the
    per-thread bandwidth times the cores; an accelerator's copy already uses the device.
    """
    if backend.device != "cpu":
        return 1
    return max(1, os.cpu_count() or 1)


def _check_streaming(backend: Backend, point: SweepPoint) -> None:
    """A batch's weight stream is no faster than its device's fastest measured bandwidth
    times the cores streaming (see `_streams`), + MARGIN_ACHIEVED."""
    limit, how = fastest_bandwidth(backend)
    cores = _streams(backend)
    if point.weight_gbs > limit * cores * (1 + MARGIN_ACHIEVED):
        again = bandwidth.recheck(backend)
        limit, how = max((limit, how), *((m.best, f"{backend.name} {op}, rechecked") for op, m in again.items()))
    if point.weight_gbs > limit * cores * (1 + MARGIN_ACHIEVED):
        raise InvariantFailed(
            f"batch {point.batch} on {backend.name} streamed its weight at {point.weight_gbs:.1f} GB/s "
            f"(median), above the fastest bandwidth measured on its device, {limit:.1f} GB/s "
            f"({how}, best run) × {cores} core(s) streaming, + {MARGIN_ACHIEVED:.0%}; the weight "
            "sits in a cache or the time is wrong"
        )


@claim("probe.matvec.fraction", kind="measured")
def measured_matvec_fraction(backend: Backend) -> float:
    """Batch-1 matrix-vector product's weight-streaming rate over measured copy bandwidth.

    Invariant: the rate is at most the fastest bandwidth measured on this backend's device
    (any backend's copy or read, best repetition; rechecked once with a longer cap before
    failing), times the cores streaming on the CPU, plus MARGIN_ACHIEVED.
    """
    point = sweep_point(backend, 1)
    _check_streaming(backend, point)
    return point.weight_gbs / bandwidth.copy(backend).rate


@claim("probe.sweep.{batch}.gflops", kind="measured", over={"batch": SWEEP_BATCHES})
def measured_sweep_gflops(backend: Backend, batch: int) -> float:
    """GFLOP/s of x @ w on the FP32 (4096 × 12288) weight at a batch size.

    Invariant at the last batch (256, measured on accelerators only: see
    `matmul.CPU_SWEEP_MAX_FLOPS`): its best repetition reaches at least 1 + MARGIN_RISE
    times batch 1's median GFLOP/s.
    """
    point = sweep_point(backend, batch)
    if batch == SWEEP_BATCHES[-1]:
        first = sweep_point(backend, SWEEP_BATCHES[0])
        if not point.measurement.best >= first.gflops * (1 + MARGIN_RISE):
            raise InvariantFailed(
                f"GFLOP/s on {backend.name} did not rise from batch {first.batch} ({first.gflops:.3g}) "
                f"to batch {batch} ({point.measurement.best:.3g}, best run) by "
                f"{1 + MARGIN_RISE:g} times; the same weight bytes serve {batch} times the work"
            )
    return point.gflops


@claim("probe.sweep.{batch}.weight_gbs", kind="measured", over={"batch": SWEEP_BATCHES})
def measured_sweep_weight_gbs(backend: Backend, batch: int) -> float:
    """GB/s at which x @ w streams the FP32 (4096 × 12288) weight at a batch size (weight bytes / time).

    Invariant: at most the fastest bandwidth measured on this backend's device plus
    MARGIN_ACHIEVED at every batch: each call reads the whole weight at least once.
    """
    point = sweep_point(backend, batch)
    _check_streaming(backend, point)
    return point.weight_gbs


@claim("probe.sweep.crossover_batch", kind="measured")
def measured_crossover_batch(backend: Backend) -> int:
    """The smallest batch whose exact FP32 intensity on the sweep's weight exceeds the measured FP32 ridge.

    Intensity counts every byte x @ w must move (x, w and the output); FLOPs are
    2 · batch · inputs · outputs. A backend whose matmul is slower than its memory (a ridge
    below the batch-1 intensity) crosses over at batch 1. Invariant: that of the device's
    FP32 ridge (above batch 1, below a prefill-sized batch of 2,048).
    """
    inputs, outputs = weight_shape()
    check_ridge(backend, inputs, outputs)
    point_ridge = ridge(backend, "fp32")
    batch = crossover_batch(point_ridge, inputs, outputs)
    if batch is None:
        raise InvariantFailed(
            f"FP32 ridge on {backend.name} is {point_ridge:.4g} FLOP/byte, above the intensity any "
            f"batch reaches on a ({inputs} × {outputs}) weight"
        )
    return batch


# What a sound results file may hold for each probe claim: (lowest exclusive, highest inclusive, unit).
# The bounds are far outside any machine's reach, so only a broken or forged file meets them.
PLAUSIBLE: dict[str, tuple[float, float, str]] = {
    "probe.bandwidth.": (0.0, 100_000.0, "GB/s"),
    "probe.matmul.": (0.0, 1e8, "GFLOP/s"),
    "probe.ridge.": (0.0, 1e5, "FLOP/byte"),
    "probe.decode_ceiling.": (0.0, 1e6, "tokens/s"),
    "probe.vendor_ratio": (0.0, 10.0, ""),
    "probe.matvec.fraction": (0.0, 10.0, ""),
    "probe.sweep.crossover_batch": (0.0, 1e7, "batch"),
    "probe.sweep.": (0.0, 1e8, "GFLOP/s or GB/s"),
}


def plausible(claim_id: str, value: object) -> str | None:
    """Why a recorded probe value is implausible, or None (also for ids that are not probes)."""
    bounds = next((b for prefix, b in PLAUSIBLE.items() if claim_id.startswith(prefix)), None)
    if bounds is None:
        return None
    low, high, unit = bounds
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"value {value!r} is not a number"
    if not low < value <= high:
        return f"value {value!r} is outside ({low:g}, {high:g}] {unit}".rstrip()
    if claim_id == "probe.sweep.crossover_batch" and not isinstance(value, int):
        return f"value {value!r} is not a whole batch size"
    return None
