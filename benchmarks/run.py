#!/usr/bin/env python3
"""What verifying the book costs on this machine, and whether its bandwidth probe agrees with an independent tool.

    .venv/bin/python benchmarks/run.py [--skip-suite] [--skip-site] [--rounds N]

Times, one after another:

1. the whole default test run, `pytest -q -p no:cacheprovider --no-results`;
2. the book's snippets, book/snippets/*.py, each run as a plain script, one after another;
3. the site build, `mkdocs build -d <temporary folder>` (skipped with a note without mkdocs.yml).

Then measures the CPU's copy bandwidth with an independent tool on the same working set
and compares it with the suite's probe:

- `mbw -t0` (memcpy) reports "the amount of data copied over the time": an array of
  S MiB copied in t seconds is S / t MiB/s, counting each byte once. The probe counts a
  copy as bytes read plus bytes written, so mbw's figure is converted as
  2 × MiB/s × 2^20 / 10^9 GB/s. mbw copies on one thread with an array the size of the
  probe's buffer, so it is compared with the probe's numpy copy on one thread
  (claims.probes.bandwidth.measure(..., threads=1); numpy's contiguous copy is a memmove,
  as mbw's is a memcpy), on the same page size: where transparent huge pages are in
  `madvise` mode numpy advises them for large arrays and mbw's calloc does not, so the
  comparison turns numpy's advice off (and shows the probe with it on too). Rounds alternate between the two; mbw's first, cold run of each
  round is dropped, as the probe's warm-up is. The target is judged on the upper quartile
  of each tool's runs over all rounds, since other work on the machine only slows a run;
  the medians are shown too. Also shown: mbw in one process per CPU at once (their rates summed)
  against the probe's numpy copy on every CPU, the way the suite measures it.
- `sysbench memory --memory-oper=read` reports MiB/s read, each byte once, as the probe's
  read bandwidth counts them (one thread, block = the probe's buffer size).

Prints the figures and the ratios (suite time over snippets' time; figures verified per
second of the suite) and writes them to benchmarks/results/<machine-slug>.json.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MIB = 2**20
SUITE_TARGET_S = 60.0
SUITE_OVER_SNIPPETS_TARGET = 1.5
TOOL_AGREEMENT_TARGET = 0.15


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 3600) -> tuple[float, int, str]:
    """(seconds, exit status, last lines of output) of one command."""
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - started
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
    return seconds, proc.returncode, tail


def bin_of(name: str) -> str:
    """A tool from this interpreter's environment, else from PATH."""
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else (shutil.which(name) or name)


def run_suite() -> dict[str, Any]:
    started = time.perf_counter()
    proc = subprocess.run([bin_of("pytest"), "-q", "-p", "no:cacheprovider", "--no-results"], cwd=ROOT,
                          capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - started
    lines = proc.stdout.splitlines()
    summary = next((line for line in reversed(lines) if " in " in line), "")
    failed = [line.split(" - ")[0] for line in lines if line.startswith(("FAILED ", "ERROR "))]
    return {"seconds": round(seconds, 2), "exit_status": proc.returncode, "summary": summary.strip("= "),
            "failed": failed}


def run_snippets() -> dict[str, Any]:
    env = {**os.environ, "PYTHONHASHSEED": "0", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    snippets = sorted((ROOT / "book" / "snippets").glob("*.py"))
    each: dict[str, Any] = {}
    total = 0.0
    for path in snippets:
        seconds, status, tail = timed([sys.executable, str(path)], path.parent, env)
        each[path.name] = {"seconds": round(seconds, 2), "exit_status": status}
        if status != 0:
            each[path.name]["error"] = tail
        total += seconds
    return {"seconds": round(total, 2), "count": len(snippets), "each": each}


def run_site() -> dict[str, Any]:
    if not (ROOT / "mkdocs.yml").exists():
        return {"skipped": "no mkdocs.yml: the site is not set up in this checkout"}
    with tempfile.TemporaryDirectory(prefix="site-bench-") as out:
        seconds, status, tail = timed([bin_of("mkdocs"), "build", "-q", "-d", out], ROOT)
    result: dict[str, Any] = {"seconds": round(seconds, 2), "exit_status": status}
    if status != 0:
        result["error"] = tail
    return result


def count_figures() -> int:
    from claims.bindings import Book

    book = Book.read(ROOT / "book", ROOT)
    return sum(1 for _ in book.bindings())


def mbw_copy_gbs(size_mib: int, runs: int = 8) -> list[float]:
    """mbw's memcpy rate of each warm run as the probe counts it (read + write, GB/s)."""
    tool = shutil.which("mbw")
    assert tool is not None
    out = subprocess.run([tool, "-q", "-n", str(runs), "-t0", str(size_mib)], capture_output=True, text=True, timeout=600)
    rates = [float(m.group(1)) for m in re.finditer(r"^\d+\s+Method: MEMCPY.*Copy:\s*([\d.]+) MiB/s", out.stdout, re.M)]
    if len(rates) < 2:
        raise RuntimeError(f"mbw printed no per-run MEMCPY lines:\n{out.stdout}{out.stderr}")
    return [2 * r * MIB / 1e9 for r in rates[1:]]


def upper_quartile(values: list[float]) -> float:
    return statistics.quantiles(values, n=4, method="inclusive")[2]


def mbw_parallel_gbs(size_mib: int, processes: int, runs: int = 8) -> float | None:
    """mbw in `processes` processes at once, each on size / processes MiB; their rates summed."""
    tool = shutil.which("mbw")
    if tool is None:
        return None
    each = max(1, size_mib // processes)
    procs = [subprocess.Popen([tool, "-q", "-n", str(runs), "-t0", str(each)], stdout=subprocess.PIPE, text=True)
             for _ in range(processes)]
    total = 0.0
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        rates = [float(m.group(1)) for m in re.finditer(r"^\d+\s+Method: MEMCPY.*Copy:\s*([\d.]+) MiB/s", out, re.M)]
        if len(rates) < 2:
            return None
        total += statistics.median(rates[1:])
    return 2 * total * MIB / 1e9


def sysbench_read_gbs(size_mib: int) -> float | None:
    """sysbench's sequential read rate on one thread (each byte once, GB/s)."""
    tool = shutil.which("sysbench")
    if tool is None:
        return None
    out = subprocess.run([tool, "memory", f"--memory-block-size={size_mib}M", f"--memory-total-size={size_mib * 32}M",
                          "--memory-oper=read", "--memory-access-mode=seq", "--threads=1", "run"],
                         capture_output=True, text=True, timeout=600)
    match = re.search(r"\(([\d.]+) MiB/sec\)", out.stdout)
    if not match:
        raise RuntimeError(f"sysbench printed no MiB/sec figure:\n{out.stdout}{out.stderr}")
    return float(match.group(1)) * MIB / 1e9


def transparent_huge_pages() -> str:
    """The kernel's transparent huge page mode (always, madvise, never), or 'unknown'."""
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return "unknown"
    match = re.search(r"\[(\w+)\]", text)
    return match.group(1) if match else "unknown"


@contextlib.contextmanager
def pages_like_mbw() -> Iterator[str]:
    """numpy's buffers on the page size mbw's get: with THP in 'madvise' mode numpy asks for huge
    pages on large arrays and mbw's calloc does not, so the advice is off for the block."""
    mode = transparent_huge_pages()
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray  # type: ignore[no-redef]
    setter = getattr(multiarray, "_set_madvise_hugepage", None)
    if mode != "madvise" or setter is None:
        yield f"THP {mode}: numpy and mbw get the same pages"
        return
    previous = setter(False)
    try:
        yield "THP madvise: numpy's huge-page advice off, so its buffers have 4 KiB pages as mbw's do"
    finally:
        setter(previous)


def compare_bandwidth(rounds: int) -> dict[str, Any]:
    from claims.backends import detect
    from claims.probes import bandwidth
    from claims.probes.devices import cpu_threads

    numpy_backend = detect()["numpy"]
    size = bandwidth.cpu_buffer_bytes()
    size_mib = size // MIB
    threads = cpu_threads()
    result: dict[str, Any] = {"working_set_mib": size_mib, "threads": threads,
                              "llc": dict(zip(("bytes", "from"), bandwidth.last_level_cache()))}
    if shutil.which("mbw") is None:
        result["mbw"] = "skipped: mbw is not installed (Debian: apt-get install -y mbw)"
    else:
        ours: list[float] = []
        theirs: list[float] = []
        with pages_like_mbw() as pages:
            for _ in range(rounds):
                theirs += mbw_copy_gbs(size_mib)
                m = bandwidth.measure(numpy_backend, "copy", nbytes=size, threads=1)
                ours += [m.work / t / 1e9 for t in m.samples]
        huge = bandwidth.measure(numpy_backend, "copy", nbytes=size, threads=1)
        probe, tool = statistics.median(ours), statistics.median(theirs)
        probe_uq, tool_uq = upper_quartile(ours), upper_quartile(theirs)
        result["copy_one_thread"] = {
            "probe_gbs": round(probe, 3), "mbw_gbs": round(tool, 3),
            "probe_upper_quartile_gbs": round(probe_uq, 3), "mbw_upper_quartile_gbs": round(tool_uq, 3),
            "probe_runs": len(ours), "mbw_runs": len(theirs),
            "difference": round(probe / tool - 1, 4),
            "difference_upper_quartile": round(probe_uq / tool_uq - 1, 4),
            "within_target": abs(probe_uq / tool_uq - 1) <= TOOL_AGREEMENT_TARGET,
            "conversion": "mbw MiB/s counts bytes copied once; GB/s = 2 × MiB/s × 2^20 / 10^9 (read + write)",
            "judged_on": "the upper quartile of each tool's runs over all rounds: other work on the machine only "
                         "slows a run, so the faster runs are the truer, and a quartile is steadier than one best run",
            "pages": pages,
            "probe_default_pages_gbs": round(huge.rate, 3),
        }
        if threads > 1:
            suite = bandwidth.measure(numpy_backend, "copy", nbytes=size, threads=threads).rate
            parallel = mbw_parallel_gbs(size_mib, threads)
            result["copy_all_threads"] = {
                "probe_gbs": round(suite, 3), "mbw_gbs": round(parallel, 3) if parallel else None,
                "difference": round(suite / parallel - 1, 4) if parallel else None,
                "how": f"{threads} mbw processes at once, {size_mib // threads} MiB each, rates summed",
            }
    if shutil.which("sysbench") is None:
        result["sysbench"] = "skipped: sysbench is not installed (Debian: apt-get install -y sysbench)"
    else:
        tool = sysbench_read_gbs(size_mib)
        probe = bandwidth.measure(numpy_backend, "read", nbytes=size, threads=1).rate
        result["read_one_thread"] = {"probe_gbs": round(probe, 3), "sysbench_gbs": round(tool, 3),
                                     "difference": round(probe / tool - 1, 4)}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-suite", action="store_true", help="do not time the test run")
    parser.add_argument("--skip-site", action="store_true", help="do not time the site build")
    parser.add_argument("--rounds", type=int, default=6, help="alternating rounds of mbw and the probe (default 6)")
    args = parser.parse_args(argv)

    from claims.machine import fingerprint, slug_of

    info = fingerprint()
    slug = slug_of(info)
    report: dict[str, Any] = {"machine": slug, "cpu": info.get("cpu"), "cores": info.get("cores"),
                              "gpu": info.get("gpu"), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    print(f"benchmark on {slug} ({info.get('cpu')}, {info.get('cores')} CPUs)", flush=True)

    figures = count_figures()
    report["figures"] = figures
    if not args.skip_suite:
        print("  timing the default test run ...", flush=True)
        report["suite"] = run_suite()
        print(f"  suite: {report['suite']['seconds']:.1f} s (exit {report['suite']['exit_status']}; "
              f"{report['suite']['summary']})", flush=True)
        for line in report["suite"]["failed"]:
            print(f"    {line}")
    print("  timing the snippets ...", flush=True)
    report["snippets"] = run_snippets()
    print(f"  snippets: {report['snippets']['seconds']:.1f} s for {report['snippets']['count']} scripts", flush=True)
    for name, item in report["snippets"]["each"].items():
        print(f"    {name}: {item['seconds']:.2f} s" + ("" if item["exit_status"] == 0 else f" (exit {item['exit_status']})"))
    if not args.skip_site:
        print("  timing the site build ...", flush=True)
        report["site"] = run_site()
        site = report["site"]
        print(f"  site: {site['skipped']}" if "skipped" in site else f"  site: {site['seconds']:.1f} s (exit {site['exit_status']})")

    ratios: dict[str, Any] = {}
    targets: dict[str, Any] = {}
    suite = report.get("suite")
    if suite:
        targets["suite_under_60_s"] = suite["seconds"] < SUITE_TARGET_S
        ratios["figures_per_second"] = round(figures / suite["seconds"], 2)
        if report["snippets"]["seconds"] > 0:
            ratios["suite_over_snippets"] = round(suite["seconds"] / report["snippets"]["seconds"], 2)
            targets["suite_at_most_1_5x_snippets"] = ratios["suite_over_snippets"] <= SUITE_OVER_SNIPPETS_TARGET
    print("  measuring copy bandwidth with mbw and the probe, alternating ...", flush=True)
    report["bandwidth"] = compare_bandwidth(max(1, args.rounds))
    one = report["bandwidth"].get("copy_one_thread")
    if one:
        targets["probe_within_15pct_of_mbw"] = one["within_target"]
    report["ratios"], report["targets"] = ratios, targets

    print()
    print(f"figures bound in the book: {figures}")
    if suite:
        print(f"whole default run: {suite['seconds']:.1f} s (target < {SUITE_TARGET_S:.0f} s: "
              f"{'met' if targets['suite_under_60_s'] else 'NOT met'})")
        print(f"figures verified per second: {ratios['figures_per_second']}")
        if "suite_over_snippets" in ratios:
            print(f"suite / snippets: {ratios['suite_over_snippets']}× (target ≤ {SUITE_OVER_SNIPPETS_TARGET}×: "
                  f"{'met' if targets['suite_at_most_1_5x_snippets'] else 'NOT met'})")
    bw = report["bandwidth"]
    print(f"bandwidth, {bw['working_set_mib']} MiB working set (LLC {bw['llc']['bytes'] // MIB} MiB from {bw['llc']['from']}):")
    if one:
        print(f"  copy, 1 thread, upper quartiles of {one['probe_runs']} and {one['mbw_runs']} runs: probe "
              f"{one['probe_upper_quartile_gbs']:.2f} GB/s, mbw {one['mbw_upper_quartile_gbs']:.2f} GB/s "
              f"({one['difference_upper_quartile']:+.1%}; target within {TOOL_AGREEMENT_TARGET:.0%}: "
              f"{'met' if one['within_target'] else 'NOT met'})")
        print(f"  copy, 1 thread, medians: probe {one['probe_gbs']:.2f} GB/s, mbw {one['mbw_gbs']:.2f} GB/s "
              f"({one['difference']:+.1%}); {one['conversion']}")
        print(f"  pages: {one['pages']}; the probe with numpy's default pages: {one['probe_default_pages_gbs']:.2f} GB/s")
    else:
        print(f"  copy: {bw.get('mbw')}")
    every = bw.get("copy_all_threads")
    if every:
        shown = f"{every['mbw_gbs']:.2f} GB/s ({every['difference']:+.1%})" if every["mbw_gbs"] else "no figure"
        print(f"  copy, {bw['threads']} threads: probe {every['probe_gbs']:.2f} GB/s, mbw ×{bw['threads']} {shown}")
    read = bw.get("read_one_thread")
    if read:
        print(f"  read, 1 thread: probe {read['probe_gbs']:.2f} GB/s, sysbench {read['sysbench_gbs']:.2f} GB/s "
              f"({read['difference']:+.1%})")
    elif "sysbench" in bw:
        print(f"  read: {bw['sysbench']}")

    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{slug}.json"
    out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"written: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
