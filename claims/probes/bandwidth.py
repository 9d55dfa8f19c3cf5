"""Memory bandwidth as each backend reaches it: a streaming copy and a read-only reduction.

Bytes are counted as moved by the program: a copy of N bytes counts N read plus N
written (2N); a reduction over N bytes counts N. Hardware that allocates a cache line
before writing it moves a third N on a copy, which this counting does not see; that is
why a copy can report less than a read on a CPU.

The working set must not fit in a cache. On the CPU each buffer is at least four times
the last-level cache (all of it that this process's CPUs share, read from
/sys/devices/system/cpu, else `lscpu`, else 32 MiB assumed) and at most 2 GiB or an
eighth of the memory available. On an accelerator each buffer is 1 GiB, less where
the device has under 8 GiB free. numpy copies and reduces on one thread per call, so
its probe splits the buffer across every CPU this process may use, as torch does by
itself; MLX on the CPU runs as MLX does.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from claims.probes import store
from claims.probes.devices import GIB, MIB, Runner, available_memory
from claims.probes.timing import Measurement, repeat
from verified_book import Backend, NotOnBackend, usable_cpus

DEFAULT_LLC = 32 * MIB
LLC_MULTIPLE = 4
CPU_MAX_BUFFER = 2 * GIB
GPU_BUFFER = 1 * GIB
GPU_MIN_BUFFER = 256 * MIB
SYS_CPU = Path("/sys/devices/system/cpu")


def _size(text: str) -> int:
    """'32768K', '32M', '1048576' as bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.IGNORECASE)
    if not match:
        raise ValueError(f"cache size {text!r}: expected a number with an optional K, M or G")
    return int(match.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2).upper()]


def _llc_from_sysfs(root: Path, cpus: list[int]) -> int | None:
    """The last-level cache of these CPUs, summed over the distinct caches they share."""
    found: dict[str, int] = {}
    best_level = 0
    for cpu in cpus:
        for index in sorted((root / f"cpu{cpu}" / "cache").glob("index*")):
            try:
                kind = (index / "type").read_text().strip()
                level = int((index / "level").read_text())
                size = _size((index / "size").read_text())
                shared = (
                    (index / "shared_cpu_list").read_text().strip()
                    if (index / "shared_cpu_list").exists()
                    else f"cpu{cpu}"
                )
            except (OSError, ValueError):
                continue
            if kind == "Instruction":
                continue
            if level > best_level:
                best_level, found = level, {}
            if level == best_level:
                found[shared] = size
    return sum(found.values()) or None


def _llc_from_lscpu() -> int | None:
    try:
        out = subprocess.run(["lscpu", "-C=NAME,ALL-SIZE,LEVEL", "--bytes"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    best = (0, 0)
    for line in out.stdout.splitlines()[1:]:
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit() and not parts[0].lower().endswith("i"):
            best = max(best, (int(parts[2]), int(parts[1])))
    return best[1] or None


def _llc_from_sysctl() -> int | None:
    for key in ("hw.l3cachesize", "hw.perflevel0.l2cachesize", "hw.l2cachesize"):
        try:
            out = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            return None
        if out.returncode == 0 and out.stdout.strip().isdigit() and int(out.stdout) > 0:
            return int(out.stdout)
    return None


@functools.cache
def last_level_cache() -> tuple[int, str]:
    """(bytes, where it was read) of the CPU's last-level cache."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        cpus = [0]
    size = _llc_from_sysfs(SYS_CPU, cpus) if SYS_CPU.is_dir() else None
    if size:
        return size, str(SYS_CPU)
    size = _llc_from_lscpu() if platform.system() == "Linux" else _llc_from_sysctl()
    if size:
        return size, "lscpu" if platform.system() == "Linux" else "sysctl"
    return DEFAULT_LLC, "assumed (no cache size found)"


def cpu_buffer_bytes(llc: int | None = None, available: int | None = None) -> int:
    """One buffer's size on the CPU: ≥ 4 × LLC (≥ 4 × 32 MiB), ≤ 2 GiB and ≤ available / 8."""
    llc = last_level_cache()[0] if llc is None else llc
    available = available_memory() if available is None else available
    want = LLC_MULTIPLE * max(llc, DEFAULT_LLC)
    size = min(want, CPU_MAX_BUFFER, available // 8)
    return max(MIB, size // MIB * MIB)


def buffer_bytes(runner: Runner) -> int:
    """One buffer's size for this backend's bandwidth probes."""
    if not runner.gpu:
        return cpu_buffer_bytes()
    free = runner.free_bytes()
    size = min(GPU_BUFFER, free // 8) // MIB * MIB
    if size < GPU_MIN_BUFFER:
        raise NotOnBackend(
            f"{runner.name} has {free / GIB:.1f} GiB free; a bandwidth probe needs two buffers of "
            f"at least {GPU_MIN_BUFFER // MIB} MiB with room to spare"
        )
    return size


def _split(array: Any, parts: int) -> list[Any]:
    import numpy as np

    return list(np.array_split(array, parts))


def _operations(
    runner: Runner, nbytes: int, threads: int
) -> tuple[Callable[[], Any], Callable[[], Any], Callable[[], bool]]:
    """(copy, read, check) on two float32 buffers of `nbytes` each on this backend."""
    n = nbytes // 4
    adapter = runner.adapter
    if runner.ops.splits_copies:
        import numpy as np

        src = np.full(n, 1.0, dtype=np.float32)
        dst = np.zeros(n, dtype=np.float32)
        if threads <= 1:
            return (lambda: np.copyto(dst, src)), (lambda: np.add.reduce(src)), (lambda: bool(dst[-1] == src[-1]))
        pool = ThreadPoolExecutor(threads, thread_name_prefix="probe")
        pairs = list(zip(_split(src, threads), _split(dst, threads)))
        chunks = _split(src, threads)

        def copy() -> None:
            list(pool.map(lambda p: np.copyto(p[1], p[0]), pairs))

        def read() -> float:
            return float(sum(pool.map(np.add.reduce, chunks)))

        runner.cleanup.append(pool.shutdown)
        return copy, read, (lambda: bool(dst[-1] == src[-1] and dst[0] == src[0]))
    float32 = adapter.dtype("float32")
    src = adapter.full((n,), 1.0, float32)
    dst = adapter.zeros((n,), float32)
    adapter.evaluate(src, dst)
    total = adapter.module.sum
    last: list[Any] = []

    def copy_one() -> Any:
        out = runner.ops.copy_into(dst, src)  # a new array where the library copies into none in place
        last[:] = [out]
        return out

    def check() -> bool:
        return bool(last and last[0].shape == src.shape and last[0][-1].item() == src[-1].item())

    return copy_one, (lambda: total(src)), check


def measure(backend: Backend, op: str, nbytes: int | None = None, threads: int | None = None) -> Measurement:
    """Measure one bandwidth (`copy` or `read`) on a backend, uncached; GB/s as the rate."""
    return measure_ops(backend, (op,), nbytes, threads)[op]


def measure_ops(
    backend: Backend,
    ops: tuple[str, ...] = ("copy", "read"),
    nbytes: int | None = None,
    threads: int | None = None,
    cap_scale: float = 1.0,
) -> dict[str, Measurement]:
    """Measure bandwidths (`copy`, `read`) on a backend with one pair of buffers, uncached;
    `cap_scale` stretches the time cap (a recheck)."""
    for op in ops:
        if op not in ("copy", "read"):
            raise ValueError(f"bandwidth probe {op!r}: expected 'copy' or 'read'")
    runner = Runner(backend)
    runner.policy = dataclasses.replace(runner.policy, cap_s=runner.policy.cap_s * cap_scale)
    try:
        with runner.on_device():
            size = nbytes or buffer_bytes(runner)
            threads = threads or (usable_cpus() if runner.ops.splits_copies else 1)
            copy, read, check = _operations(runner, size, threads)
            out = {op: _measure(runner, op, copy if op == "copy" else read, size, threads) for op in ops}
            if "copy" in ops and not check():
                raise RuntimeError(
                    f"copy bandwidth on {backend.name}: the destination does not hold the source after the copy"
                )
            del copy, read, check
            return out
    finally:
        runner.release()  # the buffers are unreferenced by now, so their memory goes back


def _measure(runner: Runner, op: str, fn: Callable[[], Any], size: int, threads: int) -> Measurement:
    work = 2 * size if op == "copy" else size
    detail = f"{size // MIB} MiB buffers" + (f", {threads} threads" if runner.ops.splits_copies else "")
    first = runner.calibrate(fn)
    policy = dataclasses.replace(runner.policy, warmup=max(0, runner.policy.warmup - 1))
    return repeat(
        runner.repetition(fn, first),
        what=f"{op} bandwidth on {runner.name}",
        work=work,
        unit="GB/s",
        policy=policy,
        detail=detail,
    )


def _both(backend: Backend) -> dict[str, Measurement]:
    return store.once((backend.name, "bandwidth"), lambda: measure_ops(backend))


def copy(backend: Backend) -> Measurement:
    """The streaming-copy bandwidth of this backend, measured once per run (with the read)."""
    return _both(backend)["copy"]


def read(backend: Backend) -> Measurement:
    """The read-only (reduction) bandwidth of this backend, measured once per run (with the copy)."""
    return _both(backend)["read"]


def recheck(backend: Backend) -> dict[str, Measurement]:
    """Copy and read again with four times the time cap, measured once per run: for an invariant that
    a busy moment during the first measurement would fail."""
    return store.once((backend.name, "bandwidth", "recheck"), lambda: measure_ops(backend, cap_scale=4.0))
