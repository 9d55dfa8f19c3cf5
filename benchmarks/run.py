#!/usr/bin/env python3
"""What verifying the book costs on this machine, and whether its bandwidth probe agrees with an independent tool.

    .venv/bin/python benchmarks/run.py [--skip-suite] [--skip-site] [--rounds N]

Times, one after another:

1. the whole default test run, the README's `python3 run.py test` (with `-q -p no:cacheprovider
   --no-results`, so the run leaves nothing behind), with `benchmarks/phases.py` loaded to
   say where its seconds go: start-up (the interpreter, pytest, the libraries, the book),
   collection, the items that time the machine, the book's other items, the machinery's
   tests, pytest's own work between items, and the close. With the CPU seconds of the whole
   command (every process it started) and of its timed items, it computes the least any
   order of the same work could take on this machine's cores: the timed items alone, as
   they ran, and every other CPU second shared out over the cores (`floor_seconds`);
2. `python3 run.py verify` (with `-q --no-results`): the book's checks and the site build, as a
   reader verifies the book, judged against the snippets (at most 1.6 times their time), with
   the same account of its phases (its close is the site build) and its floor (`phases`);
3. the book's snippets, book/snippets/*.py, each run as a plain script in a fresh folder, one
   after another. 2 and 3 alternate for `--verify-rounds` rounds (3 by default), and the
   round with the median ratio is judged: see `verify_against_snippets`;
4. the author's checks: a cold check of one page (`pytest book/index.md`, beside the import of its
   libraries alone), the same page with one figure printed wrong (`--changed`, from the records),
   and the whole book after one data file's value changes (`pytest --changed` from the root);
5. a reader's first minute, fresh clone to first verdict: `git clone` of this repository's HEAD
   into a temporary folder, then the README's first command, `python3 run.py verify`, its set-up
   (up to run.py's `set-up done` line) and its verdict timed apart, with the installer set-up
   used; judged against FIRST_VERDICT_TARGET_S (goal FIRST_VERDICT_GOAL_S), and the same with
   pip forced (`VERIFIED_BOOK_INSTALLER=pip`) shown beside it. The download caches of pip and uv
   are this user's, as a returning reader's are. `--first-verdict-only` runs this alone and
   merges it into the results file (`first_verdict`); `--readme` rewrites README.md's block of
   these figures from the results files;
6. the site build, `mkdocs build -d <temporary folder>` (skipped with a note without mkdocs.yml), and
   what each machine adds to it: the build with the committed machines alone and with two copies of
   each as other machines, each built twice and the second timed (`site_per_machine`).

Then measures the CPU's bandwidth with independent tools on the same working set and
compares each with the suite's probe (claims.probes.bandwidth.measure on numpy, whose
contiguous copy is a memmove and whose reduction reads each byte once). Rounds alternate
between a tool and the probe, so both see the same moments of a busy machine; the
comparison is made on the upper quartile of each side's figures over all rounds, since
other work on the machine only slows a run, and the medians are shown beside it.

- `likwid-bench -t copy_avx` (or `copy` without AVX): LIKWID's STREAM-style copy kernel
  on two arrays of the probe's buffer size, with ordinary stores as numpy's copy uses,
  counting bytes read plus bytes written as the probe does. This is the comparison the
  target is judged on. It is also run with one thread per CPU against the probe's copy
  on every CPU, the way the suite measures it.
- `mbw -t0` (memcpy), shown beside: it reports "the amount of data copied over the
  time", each byte once, so its figure is converted as 2 × MiB/s × 2^20 / 10^9 GB/s. On
  the 2-core machine of benchmarks/results/ its figure has come out 8% to 40% below the
  probe's from one benchmark run to the next, and 18% below a plain C program's memcpy of
  calloc'd buffers timed alongside it (both call glibc's memcpy), so it is shown, not
  judged on.
- `sysbench memory --memory-oper=read`: MiB/s read, each byte once, as the probe's read
  bandwidth counts them (one thread, block = the probe's buffer size).

Where transparent huge pages are in `madvise` mode numpy advises them for large arrays
and the tools' allocations do not, so the comparisons turn numpy's advice off (the probe
with it on is shown too).

Prints the figures and the ratios (suite time over snippets' time; figures verified per
second of the suite) and writes them to benchmarks/results/<machine-slug>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

try:  # imported as benchmarks.run (the tests), or run as a script, whose folder Python puts first on the path
    from benchmarks import phases as phases_plugin
except ImportError:
    import phases as phases_plugin  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent

MIB = 2**20
SUITE_TARGET_S = 60.0
SUITE_OVER_SNIPPETS_TARGET = 1.5
VERIFY_OVER_SNIPPETS_TARGET = 1.6  # the reader's verify costs little past the snippets' own work
ONE_PAGE_TARGET_S = 2.0  # the author's loop: a cold check of one page
ONE_PAGE = "book/index.md"
OTHER_BENCHMARKS = ("serve", "scale", "first_verdict")  # sections of the results file kept where not timed again
FIRST_VERDICT_TARGET_S = 45.0  # fresh clone to the first verdict, on the 2-core machine of benchmarks/results/
FIRST_VERDICT_GOAL_S = 30.0
README_BLOCK = ("<!-- first-verdict:start (benchmarks/run.py --readme) -->", "<!-- first-verdict:end -->")
TOOL_AGREEMENT_TARGET = 0.15


def timed(
    cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 3600
) -> tuple[float, int, str]:
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


def phases_env(phases_file: Path) -> dict[str, str]:
    """This environment, with the project importable and `benchmarks/phases.py` told where to write."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
        phases_plugin.OUT_ENV: str(phases_file),
    }


def run_job(args: list[str], cores: int) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`python3 run.py ARGS` with `benchmarks/phases.py` loaded: the finished process, and its seconds,
    exit status and command, with where its seconds went where the run recorded them (see `phases`)."""
    with tempfile.TemporaryDirectory(prefix="phases-") as folder:
        phases_file = Path(folder) / "phases.json"
        launched, used_before = time.time(), phases_plugin.cpu_seconds(children_only=True)
        proc = subprocess.run(
            [sys.executable, str(ROOT / "run.py"), *args, "-p", "benchmarks.phases"],
            cwd=ROOT,
            env=phases_env(phases_file),
            capture_output=True,
            text=True,
            timeout=3600,
        )
        ended, used = time.time(), phases_plugin.cpu_seconds(children_only=True) - used_before
        recorded = json.loads(phases_file.read_text(encoding="utf-8")) if phases_file.exists() else None
    out: dict[str, Any] = {
        "seconds": round(ended - launched, 2),
        "exit_status": proc.returncode,
        "command": " ".join(["python3", "run.py", *args]),
    }
    if recorded:
        out["phases"] = phases(recorded, launched, ended, cores, used)
    return proc, out


def run_suite(cores: int) -> dict[str, Any]:
    """The README's test command, with no results file written and no pytest cache, and where
    its seconds went."""
    proc, out = run_job(["test", "-q", "-p", "no:cacheprovider", "--no-results"], cores)
    lines = proc.stdout.splitlines()
    summary = next((line for line in reversed(lines) if " in " in line), "")
    failed = [line.split(" - ")[0] for line in lines if line.startswith(("FAILED ", "ERROR "))]
    return {**out, "summary": summary.strip("= "), "failed": failed}


def run_verify(cores: int = 1) -> dict[str, Any]:
    """`python3 run.py verify` as a reader runs it (the book's checks, then the site), writing no results
    file, and where its seconds went (its `close` is the site build and the exit)."""
    proc, out = run_job(["verify", "-q", "--no-results"], cores)
    verdict = next((line for line in reversed(proc.stdout.splitlines()) if line.startswith("verified-book: ")), "")
    return {**out, "verdict": verdict}


def verify_against_snippets(rounds: int, cores: int = 1) -> tuple[dict[str, Any], dict[str, Any]]:
    """`run.py verify` and the snippets as scripts, one after the other, `rounds` times.

    Other work on a shared machine slows whatever runs beside it, by a quarter or more for a
    minute at a time; each round compares two runs made seconds apart, and the median round's
    ratio is the one judged. Each side's median seconds is shown beside it; the snippets'
    per-script times are those of their median round, as are verify's phases.
    """
    verifies, snippet_runs = [], []
    for n in range(rounds):
        verifies.append(run_verify(cores))
        snippet_runs.append(run_snippets())
        print(
            f"    round {n + 1}: verify {verifies[-1]['seconds']:.1f} s, snippets {snippet_runs[-1]['seconds']:.1f} s",
            flush=True,
        )
    ratios = [
        v["seconds"] / s["seconds"] if s["seconds"] > 0 else math.inf
        for v, s in zip(verifies, snippet_runs, strict=True)
    ]
    median_round = sorted(range(rounds), key=lambda i: ratios[i])[(rounds - 1) // 2]
    verify = {
        **verifies[median_round],
        "seconds": round(statistics.median(v["seconds"] for v in verifies), 2),
        "rounds": rounds,
        "each_round": [
            {"verify_s": v["seconds"], "snippets_s": s["seconds"], "ratio": round(r, 2)}
            for v, s, r in zip(verifies, snippet_runs, ratios, strict=True)
        ],
        "over_snippets": round(ratios[median_round], 2),
        "exit_status": max((v["exit_status"] for v in verifies), key=abs),
    }
    snippets = {
        **snippet_runs[median_round],
        "seconds": round(statistics.median(s["seconds"] for s in snippet_runs), 2),
    }
    return verify, snippets


def phases(
    recorded: dict[str, Any], launched: float, ended: float, cores: int, cpu_seconds: float | None = None
) -> dict[str, Any]:
    """Seconds by phase of one timed run, and the least any order of its work could take on `cores`.

    `cpu_seconds` is what the whole command used, every process it started included. The timed
    items must have the machine to themselves, so their seconds count as they passed; every
    other CPU second could at best be shared out over the cores. That is `floor_seconds`: no
    order of the same work, on this machine, takes less. It is absent where the CPU seconds are
    not known.
    """
    stamps, items = recorded["stamps"], recorded["items"]
    # under xdist the items' seconds are the workers' and add up over them: pytest's own work between items is
    # what the workers' time held beyond them
    workers = max(int(recorded.get("workers") or 0), 1)
    collected = stamps.get("collected", stamps["session_start"])
    between = (stamps["session_finish"] - collected) * workers - sum(row["seconds"] for row in items.values())
    parts = {
        "start_up": stamps["session_start"] - launched,
        "collection": collected - stamps["session_start"],
        **{f"{name}_items": row["seconds"] for name, row in items.items()},
        "between_items": between,
        "close": ended - stamps["session_finish"],
    }
    out: dict[str, Any] = {
        "seconds": {k: round(v, 2) for k, v in parts.items()},
        "items": {name: row["items"] for name, row in items.items()},
        "slowest": {name: row.get("slowest", []) for name, row in items.items()},
        "cores": cores,
        "workers": workers,
    }
    timed_cpu = items["timed"].get("cpu_seconds")
    if cpu_seconds is not None and timed_cpu is not None:
        shared = max(cpu_seconds - timed_cpu, 0.0)
        out["cpu_seconds"] = {"all": round(cpu_seconds, 2), "timed_items": round(timed_cpu, 2)}
        out["floor_seconds"] = round(parts["timed_items"] + shared / max(cores, 1), 2)
    return out


def run_one_page(rounds: int = 3) -> dict[str, Any]:
    """A cold check of one page as an author runs it (`pytest book/index.md`, nothing written), in a fresh
    interpreter each round; the median is judged."""
    runs = []
    for _ in range(rounds):
        start = time.perf_counter()
        done = subprocess.run(
            [bin_of("python"), "-m", "pytest", ONE_PAGE, "-q", "-p", "no:cacheprovider", "--no-results"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        runs.append((time.perf_counter() - start, done.returncode))
    libraries = libraries_floor(page_imports(), rounds)
    median = median_seconds(s for s, _ in runs)
    return {
        "page": ONE_PAGE,
        "seconds": round(median, 2),
        "rounds": [round(s, 2) for s, _ in runs],
        "exit_status": max(code for _, code in runs),
        "libraries": libraries,
        "engine_seconds": round(median - libraries["seconds"], 2),
    }


#: the figure the author's check edits on ONE_PAGE, printed wrong so that the check's answer is a stale mark
PAGE_EDIT = ("[65,504](claim:formats.finfo.fp16.max)", "[65,505](claim:formats.finfo.fp16.max)")


def run_page_edit(rounds: int = 3) -> dict[str, Any]:
    """The author's loop on ONE_PAGE: one figure printed wrong, and `pytest ONE_PAGE --changed` judging it
    against the values the records keep (`changed_after_edit`)."""
    old, new = PAGE_EDIT
    runs, stale = changed_after_edit(ONE_PAGE, [PAGE_EDIT], recorded=[ONE_PAGE], checked=[ONE_PAGE], rounds=rounds)
    figure = f"figure {new.split(']')[0][1:]} "
    if not any(figure in line for line in stale):
        raise RuntimeError(f"the edited figure was not reported stale: {sorted(stale)}")
    return {
        "page": ONE_PAGE,
        "command": f"pytest {ONE_PAGE} --changed",
        "edit": f"{old} to {new}",
        "seconds": round(median_seconds(runs), 2),
        "rounds": [round(s, 2) for s in runs],
    }


#: the data the author's whole-book check edits: the DGX Spark's bandwidth, its value and its source's words
DATA_EDIT = (
    "claims/data/hardware/dgx_spark.toml",
    [("value = 273\n", "value = 274\n"), ("memory bandwidth 273 GB/s", "memory bandwidth 274 GB/s")],
)


def run_data_edit(rounds: int = 3) -> dict[str, Any]:
    """The author's loop on the whole book: one input of a data file changes, and `pytest --changed`, from the
    root with no path as an author types it, computes the claims that read it and judges their figures
    (`changed_after_edit`)."""
    file, edits = DATA_EDIT
    runs, stale = changed_after_edit(file, edits, recorded=["book.toml", "book"], checked=[], rounds=rounds)
    return {
        "file": file,
        "command": "pytest --changed",
        "edit": "; ".join(f"{old.strip()} to {new.strip()}" for old, new in edits),
        "stale_figures": len(stale),
        "seconds": round(median_seconds(runs), 2),
        "rounds": [round(s, 2) for s in runs],
    }


STALE_FIGURE = re.compile(r"^(\S+\.md:\d+: figure .+?) is stale ", re.MULTILINE)  # a failure's first line


def changed_after_edit(
    file: str, edits: Sequence[tuple[str, str]], *, recorded: list[str], checked: list[str], rounds: int
) -> tuple[list[float], set[str]]:
    """A run of `recorded` records its checks in a temporary results folder, `edits` are made to `file`, and
    `pytest [checked] --changed` answers in a fresh interpreter each round: the seconds of each round, and the
    stale figures the last one reported (one at least, and exit status 1, or the benchmark fails). The file is
    put back as it was, whatever happens."""
    path = ROOT / file
    text = path.read_text(encoding="utf-8")
    edited = text
    for old, new in edits:
        if old not in edited:
            raise RuntimeError(f"{file} no longer holds {old.strip()!r}: name another edit")
        edited = edited.replace(old, new, 1)
    runs: list[float] = []
    stale: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="verified-book-edit-") as folder:
        # one word: pytest would take a separate value for a path to find the book's root from
        base = [bin_of("python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--results-dir={folder}"]
        _, status, tail = timed([*base, *recorded], ROOT, timeout=900)
        if status != 0:
            raise RuntimeError(f"recording {' '.join(recorded)} exited {status}: {tail}")
        try:
            path.write_text(edited, encoding="utf-8")
            for _ in range(rounds):
                proc_start = time.perf_counter()
                done = subprocess.run(
                    [*base, *checked, "--changed", "--no-results"],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                runs.append(time.perf_counter() - proc_start)
                stale = set(STALE_FIGURE.findall(done.stdout))
                if done.returncode != 1 or not stale:
                    raise RuntimeError(
                        f"the edit was not reported as stale figures (exit {done.returncode}): "
                        f"{(done.stdout + done.stderr)[-2000:]}"
                    )
        finally:
            path.write_text(text, encoding="utf-8")
    return runs, stale


def median_seconds(seconds: Iterable[float]) -> float:
    """The seconds of the median round: the judged one (of an even count, the slower of the middle two)."""
    ordered = sorted(seconds)
    return ordered[len(ordered) // 2]


#: the others' code whose import a page check may pay for: pytest, and each library a claim may compute with
LIBRARIES = ("pytest", "numpy", "ml_dtypes", "sympy", "torch", "mlx.core", "jax", "transformers", "gguf")


def page_imports() -> list[str]:
    """LIBRARIES that a check of ONE_PAGE imports here, read off one untimed run of it."""
    with tempfile.TemporaryDirectory(prefix="page-imports-") as folder:
        out = Path(folder) / "phases.json"
        check = [bin_of("python"), "-m", "pytest", ONE_PAGE, "-q", "-p", "no:cacheprovider", "--no-results"]
        subprocess.run(
            [*check, "-p", "benchmarks.phases"], cwd=ROOT, env=phases_env(out), capture_output=True, timeout=600
        )
        if not out.exists():
            raise RuntimeError(f"the check of {ONE_PAGE} wrote no {phases_plugin.OUT_ENV} file")
        loaded = set(json.loads(out.read_text(encoding="utf-8"))["modules"])
    return [name for name in LIBRARIES if name in loaded]


def libraries_floor(imports: list[str], rounds: int = 3) -> dict[str, Any]:
    """The seconds a fresh interpreter takes to import `imports` and nothing else, and to exit: the part of the
    one-page check that is the libraries' own start-up, not the engine's."""
    code = "import " + ", ".join(imports)
    each = []
    for _ in range(rounds):
        seconds, status, tail = timed([bin_of("python"), "-c", code], ROOT, timeout=600)
        if status != 0:
            raise RuntimeError(f"{code!r} exited {status}: {tail}")
        each.append(seconds)
    return {"imports": imports, "seconds": round(median_seconds(each), 2), "rounds": [round(s, 2) for s in each]}


def run_snippets() -> dict[str, Any]:
    """Each snippet as a reader runs it: its own interpreter, a fresh working folder."""
    from verified_book.engine.snippet_run import run_as_script

    snippets = sorted((ROOT / "book" / "snippets").glob("*.py"))
    each: dict[str, Any] = {}
    for path in snippets:
        done = run_as_script(path)
        each[path.name] = {"seconds": round(done.seconds, 2), "exit_status": done.exit_status}
        if done.exit_status != 0:
            each[path.name]["error"] = "\n".join(done.stderr.strip().splitlines()[-3:])
    return {"seconds": round(sum(e["seconds"] for e in each.values()), 2), "count": len(snippets), "each": each}


def run_site() -> dict[str, Any]:
    """The site build as the README runs it, and what each machine of a growing fleet adds to it
    (`site_per_machine`)."""
    if not (ROOT / "mkdocs.yml").exists():
        return {"skipped": "no mkdocs.yml: the site is not set up in this checkout"}
    with tempfile.TemporaryDirectory(prefix="site-bench-") as out:
        seconds, status, tail = timed([bin_of("mkdocs"), "build", "-q", "-d", out], ROOT)
    result: dict[str, Any] = {"seconds": round(seconds, 2), "exit_status": status}
    if status != 0:
        result["error"] = tail
        return result
    result["per_machine"] = site_per_machine()
    return result


def fleet_of(committed: Path, out: Path, copies: int) -> int:
    """The committed results files in `out`, each with `copies` copies of it as other machines (another
    slug and identity): a fleet of the same records, larger. The number of files written."""
    written = 0
    for path in sorted(committed.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        (out / path.name).write_text(json.dumps(document), encoding="utf-8")
        written += 1
        for n in range(1, copies + 1):
            slug = f"{document['slug']}-copy{n}"
            identity = hashlib.sha256(slug.encode()).hexdigest()[:12]
            copy = {**document, "slug": slug, "machine": {**document["machine"], "slug": slug, "id": identity}}
            (out / f"{slug}.json").write_text(json.dumps(copy), encoding="utf-8")
            written += 1
    return written


def site_per_machine(copies: int = 2) -> dict[str, Any]:
    """Seconds the site build takes with the committed machines alone, and with `copies` more of each:
    the second build of each, so that each chart is drawn once already, as a published site's builds find
    them; the slope is the seconds each added machine costs."""
    builds: dict[str, Any] = {}
    for name, n in (("committed", 0), ("grown", copies)):
        with tempfile.TemporaryDirectory(prefix="site-fleet-") as folder:
            results, out = Path(folder) / "results", Path(folder) / "site"
            results.mkdir()
            machines = fleet_of(ROOT / "results", results, n)
            env = {**os.environ, "CLAIMS_RESULTS_DIR": str(results), "NO_MKDOCS_2_WARNING": "1"}
            cmd = [bin_of("mkdocs"), "build", "-q", "-d", str(out)]
            first = timed(cmd, ROOT, env)
            second = timed(cmd, ROOT, env)
        if first[1] != 0 or second[1] != 0:
            return {"error": (first if first[1] else second)[2]}
        builds[name] = {"machines": machines, "first_s": round(first[0], 2), "seconds": round(second[0], 2)}
    added = builds["grown"]["machines"] - builds["committed"]["machines"]
    slope = (builds["grown"]["seconds"] - builds["committed"]["seconds"]) / added if added else 0.0
    return {**builds, "seconds_per_added_machine": round(slope, 3)}


def count_figures() -> int:
    from verified_book.book.bindings import Book

    book = Book.read(ROOT / "book", ROOT)
    return sum(1 for _ in book.bindings())


def mbw_copy_gbs(size_mib: int, runs: int = 8) -> list[float]:
    """mbw's memcpy rate of each warm run as the probe counts it (read + write, GB/s)."""
    tool = shutil.which("mbw")
    assert tool is not None
    out = subprocess.run(
        [tool, "-q", "-n", str(runs), "-t0", str(size_mib)], capture_output=True, text=True, timeout=600
    )
    rates = [float(m.group(1)) for m in re.finditer(r"^\d+\s+Method: MEMCPY.*Copy:\s*([\d.]+) MiB/s", out.stdout, re.M)]
    if len(rates) < 2:
        raise RuntimeError(f"mbw printed no per-run MEMCPY lines:\n{out.stdout}{out.stderr}")
    return [2 * r * MIB / 1e9 for r in rates[1:]]


def likwid_kernel() -> str | None:
    """The likwid-bench copy kernel closest to numpy's copy: AVX loads and ordinary stores where
    the CPU has AVX, else the plain one; None without likwid-bench."""
    tool = shutil.which("likwid-bench")
    if tool is None:
        return None
    listed = subprocess.run([tool, "-a"], capture_output=True, text=True, timeout=60).stdout
    kernels = {line.split(" - ")[0].strip() for line in listed.splitlines() if " - " in line}
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        flags = ""
    if "copy_avx" in kernels and re.search(r"\bavx\b", flags):
        return "copy_avx"
    return "copy" if "copy" in kernels else None


def likwid_copy_gbs(kernel: str, size: int, threads: int = 1, iterations: int = 10) -> float:
    """likwid-bench's copy of two arrays of `size` bytes each on `threads` threads of socket 0:
    read + write counted, in GB/s (its MByte/s are 10^6 bytes)."""
    tool = shutil.which("likwid-bench")
    assert tool is not None
    out = subprocess.run(
        [tool, "-t", kernel, "-i", str(iterations), "-w", f"S0:{2 * size}B:{threads}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    match = re.search(r"^MByte/s:\s*([\d.]+)", out.stdout, re.M)
    if not match:
        raise RuntimeError(f"likwid-bench printed no MByte/s figure:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return float(match.group(1)) / 1000


def alternate(
    rounds: int, tool: Callable[[], list[float]], probe: Callable[[], list[float]]
) -> tuple[list[float], list[float]]:
    """(the probe's figures, the tool's figures) over `rounds` rounds, the tool first in each, so
    both see the same moments of a busy machine."""
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(rounds):
        theirs += tool()
        ours += probe()
    return ours, theirs


def judged(ours: list[float], theirs: list[float], tool: str) -> dict[str, Any]:
    """The probe against a tool over alternating rounds: medians, upper quartiles, the difference."""
    probe, other = statistics.median(ours), statistics.median(theirs)
    probe_uq, other_uq = upper_quartile(ours), upper_quartile(theirs)
    return {
        "probe_gbs": round(probe, 3),
        f"{tool}_gbs": round(other, 3),
        "probe_upper_quartile_gbs": round(probe_uq, 3),
        f"{tool}_upper_quartile_gbs": round(other_uq, 3),
        "probe_runs": len(ours),
        f"{tool}_runs": len(theirs),
        "difference": round(probe / other - 1, 4),
        "difference_upper_quartile": round(probe_uq / other_uq - 1, 4),
        "within_target": abs(probe_uq / other_uq - 1) <= TOOL_AGREEMENT_TARGET,
    }


def upper_quartile(values: list[float]) -> float:
    return statistics.quantiles(values, n=4, method="inclusive")[2]


def mbw_parallel_gbs(size_mib: int, processes: int, runs: int = 8) -> float | None:
    """mbw in `processes` processes at once, each on size / processes MiB; their rates summed."""
    tool = shutil.which("mbw")
    if tool is None:
        return None
    each = max(1, size_mib // processes)
    procs = [
        subprocess.Popen([tool, "-q", "-n", str(runs), "-t0", str(each)], stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
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
    out = subprocess.run(
        [
            tool,
            "memory",
            f"--memory-block-size={size_mib}M",
            f"--memory-total-size={size_mib * 32}M",
            "--memory-oper=read",
            "--memory-access-mode=seq",
            "--threads=1",
            "run",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
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
def small_pages() -> Iterator[str]:
    """numpy's buffers on the page size the tools' get: with THP in 'madvise' mode numpy asks for
    huge pages on large arrays and the tools' allocations do not, so the advice is off for the block."""
    mode = transparent_huge_pages()
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray  # type: ignore[no-redef]
    setter = getattr(multiarray, "_set_madvise_hugepage", None)
    if mode != "madvise" or setter is None:
        yield f"THP {mode}: numpy and the tools get the same pages"
        return
    previous = setter(False)
    try:
        yield "THP madvise: numpy's huge-page advice off, so its buffers have 4 KiB pages as the tools' do"
    finally:
        setter(previous)


def compare_bandwidth(rounds: int) -> dict[str, Any]:
    from verified_book.engine.config import open_book, read_config

    with open_book(read_config(ROOT)).opened():  # the book current, its content (claims/) importable
        return bandwidth_against_tools(rounds)


def bandwidth_against_tools(rounds: int) -> dict[str, Any]:
    from claims.probes import bandwidth
    from verified_book.backends import detect
    from verified_book.engine.machine import usable_cpus

    numpy_backend = detect()["numpy"]
    size = bandwidth.cpu_buffer_bytes()
    size_mib = size // MIB
    threads = usable_cpus()
    result: dict[str, Any] = {
        "working_set_mib": size_mib,
        "threads": threads,
        "llc": dict(zip(("bytes", "from"), bandwidth.last_level_cache(), strict=True)),
    }

    def probe_runs(n_threads: int = 1) -> list[float]:
        m = bandwidth.measure(numpy_backend, "copy", nbytes=size, threads=n_threads)
        return [m.work / t / 1e9 for t in m.samples]

    def probe_median(n_threads: int = 1) -> list[float]:
        return [statistics.median(probe_runs(n_threads))]

    def mbw_all_threads() -> list[float]:
        rate = mbw_parallel_gbs(size_mib, threads)
        return [rate] if rate else []

    kernel = likwid_kernel()
    with small_pages() as pages:
        result["pages"] = pages
        if kernel is None:
            result["likwid"] = "skipped: likwid-bench is not installed (Debian: apt-get install -y likwid)"
        else:
            ours, theirs = alternate(rounds, lambda: [likwid_copy_gbs(kernel, size)], probe_median)
            result["copy_one_thread_likwid"] = {
                **judged(ours, theirs, "likwid"),
                "kernel": kernel,
                "how": f"likwid-bench -t {kernel} -w S0:{2 * size}B:1, one figure a round against the probe's "
                "median a round; both count bytes read plus bytes written",
            }
            if threads > 1:
                ours, theirs = alternate(
                    max(2, rounds // 2), lambda: [likwid_copy_gbs(kernel, size, threads)], lambda: probe_median(threads)
                )
                result["copy_all_threads_likwid"] = {
                    **judged(ours, theirs, "likwid"),
                    "how": f"likwid-bench with {threads} threads against the probe's copy split over {threads} threads",
                }
        if shutil.which("mbw") is None:
            result["mbw"] = "skipped: mbw is not installed (Debian: apt-get install -y mbw)"
        else:
            ours, theirs = alternate(rounds, lambda: mbw_copy_gbs(size_mib), probe_runs)
            result["copy_one_thread_mbw"] = {
                **judged(ours, theirs, "mbw"),
                "conversion": "mbw MiB/s counts bytes copied once; GB/s = 2 × MiB/s × 2^20 / 10^9 (read + write)",
            }
            if threads > 1:
                ours, theirs = alternate(max(2, rounds // 2), mbw_all_threads, lambda: probe_median(threads))
                if theirs:
                    result["copy_all_threads_mbw"] = {
                        **judged(ours, theirs, "mbw"),
                        "how": f"{threads} mbw processes at once, {size_mib // threads} MiB each, rates summed",
                    }
    result["probe_default_pages_gbs"] = round(statistics.median(probe_runs()), 3)
    if shutil.which("sysbench") is None:
        result["sysbench"] = "skipped: sysbench is not installed (Debian: apt-get install -y sysbench)"
    else:
        tool = sysbench_read_gbs(size_mib)
        probe = bandwidth.measure(numpy_backend, "read", nbytes=size, threads=1).rate
        result["read_one_thread"] = {
            "probe_gbs": round(probe, 3),
            "sysbench_gbs": round(tool, 3),
            "difference": round(probe / tool - 1, 4),
        }
    return result


def clone_to_verdict(installer: str | None = None) -> dict[str, Any]:
    """A fresh clone's `python3 run.py verify`: the clone, the set-up and the verdict timed apart.

    The set-up ends where run.py says `set-up done`; the installer is the one it names there.
    `installer` "pip" forces pip; None leaves the choice to set-up.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "VERIFIED_BOOK_VENV")}
    env.pop("VERIFIED_BOOK_INSTALLER", None)
    if installer:
        env["VERIFIED_BOOK_INSTALLER"] = installer
    python = shutil.which("python3") or sys.executable  # the reader's Python, not this benchmark's environment
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    with tempfile.TemporaryDirectory(prefix="first-verdict-") as folder:
        clone = Path(folder) / "book"
        started = time.perf_counter()
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=600)
        cloned = time.perf_counter()
        set_up, used, lines = None, None, []
        command = [python, "run.py", "verify"]
        with subprocess.Popen(
            command, cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line.rstrip())
                found = re.match(r"run\.py: set-up done \(installed with (\w+)\)", line)
                if found and set_up is None:
                    set_up, used = time.perf_counter(), found.group(1)
            status = proc.wait(timeout=3600)
        ended = time.perf_counter()
    verdict = [line for line in lines if line and not line.startswith("run.py:")][-6:]
    uv = next((m.group(1) for line in lines if (m := re.search(r"installing with (uv \S+)", line))), None)
    setup_end = set_up if set_up is not None else cloned
    return {
        "command": "git clone; python3 run.py verify",
        "installer": (uv if used == "uv" and uv else used) or "none: set-up did not finish",
        "clone_s": round(cloned - started, 2),
        "setup_s": round(setup_end - cloned, 2),
        "verdict_s": round(ended - setup_end, 2),
        "seconds": round(ended - started, 2),
        "exit_status": status,
        "verdict": verdict,
        "load_average_at_start": round(load, 2) if load is not None else None,
    }


def first_verdict(with_pip: bool = True) -> dict[str, Any]:
    """Fresh clone to first verdict with set-up's own choice of installer, judged; and with pip forced, shown."""
    print("  timing a fresh clone to its first verdict (git clone; python3 run.py verify) ...", flush=True)
    result = clone_to_verdict()
    result.update(
        date=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        target_s=FIRST_VERDICT_TARGET_S,
        goal_s=FIRST_VERDICT_GOAL_S,
        met=result["exit_status"] == 0 and result["seconds"] <= FIRST_VERDICT_TARGET_S,
        goal_met=result["exit_status"] == 0 and result["seconds"] <= FIRST_VERDICT_GOAL_S,
    )
    print(f"  first verdict: {first_verdict_words(result)}", flush=True)
    if with_pip:
        print("  the same with pip (VERIFIED_BOOK_INSTALLER=pip), shown, not judged ...", flush=True)
        result["with_pip"] = clone_to_verdict("pip")
        print(f"  with pip: {first_verdict_words(result['with_pip'])}", flush=True)
    return result


def first_verdict_words(result: dict[str, Any]) -> str:
    """One fresh clone's figures in a line."""
    judged = (
        f"; target {result['target_s']:.0f} s: {'met' if result['met'] else 'NOT met'}, goal {result['goal_s']:.0f} s: "
        f"{'met' if result['goal_met'] else 'not met'}"
        if "target_s" in result
        else ""
    )
    return (
        f"{result['seconds']:.1f} s (clone {result['clone_s']:.1f} s, set-up {result['setup_s']:.1f} s with "
        f"{result['installer']}, verdict {result['verdict_s']:.1f} s; exit {result['exit_status']}){judged}"
    )


def readme_block(results: Path | None = None) -> str:
    """README.md's block of the benchmark's figures, from each results file that has a fresh clone's."""
    lines = []
    for path in sorted((results or ROOT / "benchmarks" / "results").glob("*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        first = result.get("first_verdict")
        if not first:
            continue
        pip = first.get("with_pip")
        lines.append(
            f"Fresh clone to first verdict, {result['machine']} ({result.get('cpu') or 'a CPU'}{_load(first)}), "
            f"{first['date'][:10]}: {first['seconds']:.0f} s; set-up {first['setup_s']:.0f} s with "
            f"{first['installer']}" + (f" ({pip['setup_s']:.0f} s with pip)" if pip else "") + f", verdict "
            f"{first['verdict_s']:.0f} s; target {first['target_s']:.0f} s {'met' if first['met'] else 'not met'} "
            f"(`benchmarks/results/{path.name}`)."
        )
    return "\n".join([README_BLOCK[0], *lines, README_BLOCK[1]])


def _load(first: dict[str, Any]) -> str:
    """The load average the fresh clone's timing began under, as the README says it: what else the machine ran."""
    load = first.get("load_average_at_start")
    return f", load {load:.1f}" if isinstance(load, (int, float)) else ""


def rewrite_readme(readme: Path | None = None) -> bool:
    """Put readme_block() between README.md's markers; whether the file changed."""
    path = readme or ROOT / "README.md"
    text = path.read_text(encoding="utf-8")
    start, end = text.index(README_BLOCK[0]), text.index(README_BLOCK[1]) + len(README_BLOCK[1])
    new = text[:start] + readme_block() + text[end:]
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def _time_suite(report: dict[str, Any], cores: int) -> None:
    """Time the default test run into `report`, saying its phases and slowest items."""
    print("  timing the default test run ...", flush=True)
    report["suite"] = run_suite(cores)
    print(
        f"  suite: {report['suite']['seconds']:.1f} s (exit {report['suite']['exit_status']}; "
        f"{report['suite']['summary']})",
        flush=True,
    )
    for line in report["suite"]["failed"]:
        print(f"    {line}")
    split = report["suite"].get("phases", {})
    for name, seconds in split.get("seconds", {}).items():
        heading = name.removesuffix("_items")
        count = split["items"].get(heading)
        print(f"    {name.replace('_', ' ')}: {seconds:.1f} s" + (f" ({count} items)" if count is not None else ""))
        for nodeid, item_seconds in split["slowest"].get(heading, []):
            print(f"      {item_seconds:5.2f} s  {nodeid}")


def _time_verify(report: dict[str, Any], rounds: int, cores: int) -> None:
    """Time `run.py verify` against the snippets, alternating, into `report`, saying the median round's phases."""
    print(
        f"  timing python3 run.py verify and the snippets, alternating, {rounds} round(s) ...",
        flush=True,
    )
    report["verify"], report["snippets"] = verify_against_snippets(rounds, cores)
    print(
        f"  verify: {report['verify']['seconds']:.1f} s, median of {report['verify']['rounds']} "
        f"(exit {report['verify']['exit_status']}); {report['verify']['verdict']}",
        flush=True,
    )
    split = report["verify"].get("phases", {})
    for name, seconds in split.get("seconds", {}).items():
        heading = name.removesuffix("_items")
        count = split["items"].get(heading)
        shown = "close (the site build and the exit)" if name == "close" else name.replace("_", " ")
        print(
            f"    {shown}: {seconds:.1f} s"
            + (f" ({count} items)" if count is not None else "")
            + " in the median round"
        )
    if "floor_seconds" in split:
        print(
            f"    {split['cpu_seconds']['all']:.1f} CPU seconds in all, {split['cpu_seconds']['timed_items']:.1f} "
            f"of them in the timed items: no order of this work takes less than {split['floor_seconds']:.1f} s "
            f"on {split['cores']} cores"
        )


def _time_site(report: dict[str, Any]) -> None:
    """Time the site build into `report`, and its growth per machine."""
    print("  timing the site build ...", flush=True)
    report["site"] = run_site()
    site = report["site"]
    print(
        f"  site: {site['skipped']}"
        if "skipped" in site
        else f"  site: {site['seconds']:.1f} s (exit {site['exit_status']})"
    )
    grown = site.get("per_machine", {})
    if "seconds_per_added_machine" in grown:
        print(
            f"  site with {grown['committed']['machines']} machines: {grown['committed']['seconds']:.1f} s, "
            f"with {grown['grown']['machines']}: {grown['grown']['seconds']:.1f} s "
            f"({grown['seconds_per_added_machine']:.2f} s a machine)"
        )


def _suite_ratios(report: dict[str, Any], figures: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The test run's and verify's ratios to the snippets, and the targets they meet."""
    ratios: dict[str, Any] = {}
    targets: dict[str, Any] = {}
    if "first_verdict" in report:
        targets["first_verdict_within_45_s"] = report["first_verdict"]["met"]
    suite = report.get("suite")
    if suite:
        targets["suite_under_60_s"] = suite["seconds"] < SUITE_TARGET_S
        ratios["figures_per_second"] = round(figures / suite["seconds"], 2)
        if "verify" in report:
            ratios["verify_over_snippets"] = report["verify"]["over_snippets"]
            targets["verify_at_most_1_6x_snippets"] = ratios["verify_over_snippets"] <= VERIFY_OVER_SNIPPETS_TARGET
            floor = report["verify"].get("phases", {}).get("floor_seconds")
            if floor and report["snippets"]["seconds"] > 0:
                ratios["verify_floor_over_snippets"] = round(floor / report["snippets"]["seconds"], 2)
        if report["snippets"]["seconds"] > 0:
            ratios["suite_over_snippets"] = round(suite["seconds"] / report["snippets"]["seconds"], 2)
            targets["suite_at_most_1_5x_snippets"] = ratios["suite_over_snippets"] <= SUITE_OVER_SNIPPETS_TARGET
            if "floor_seconds" in suite.get("phases", {}):
                ratios["floor_over_snippets"] = round(
                    suite["phases"]["floor_seconds"] / report["snippets"]["seconds"], 2
                )
    return ratios, targets


def _print_suite_summary(report: dict[str, Any], ratios: dict[str, Any], targets: dict[str, Any]) -> None:
    """Say the test run's and verify's figures against their targets."""
    suite = report["suite"]
    print(
        f"whole default run: {suite['seconds']:.1f} s (target < {SUITE_TARGET_S:.0f} s: "
        f"{'met' if targets['suite_under_60_s'] else 'NOT met'})"
    )
    print(f"figures verified per second: {ratios['figures_per_second']}")
    if "verify_over_snippets" in ratios:
        print(
            f"verify / snippets: {ratios['verify_over_snippets']}× (target ≤ {VERIFY_OVER_SNIPPETS_TARGET}×: "
            f"{'met' if targets['verify_at_most_1_6x_snippets'] else 'NOT met'})"
        )
    if "verify_floor_over_snippets" in ratios:
        print(
            f"least verify's work could take in any order on {report['verify']['phases']['cores']} cores, the "
            f"timed items alone: {ratios['verify_floor_over_snippets']}× the snippets (shown, not judged)"
        )
    if "suite_over_snippets" in ratios:
        print(
            f"suite / snippets: {ratios['suite_over_snippets']}× (target ≤ {SUITE_OVER_SNIPPETS_TARGET}×: "
            f"{'met' if targets['suite_at_most_1_5x_snippets'] else 'NOT met'})"
        )
    if "floor_over_snippets" in ratios:
        print(
            f"least the same work could take on {suite['phases']['cores']} cores with the timed items alone: "
            f"{suite['phases']['floor_seconds']:.1f} s, {ratios['floor_over_snippets']}× the snippets "
            "(shown, not judged)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-suite", action="store_true", help="do not time the test run")
    parser.add_argument("--skip-site", action="store_true", help="do not time the site build")
    parser.add_argument(
        "--rounds", type=int, default=8, help="alternating rounds of each tool and the probe (default 8)"
    )
    parser.add_argument(
        "--verify-rounds",
        type=int,
        default=3,
        help="alternating rounds of `run.py verify` and the snippets (default 3)",
    )
    parser.add_argument("--skip-first-verdict", action="store_true", help="do not time a fresh clone's first verdict")
    parser.add_argument(
        "--first-verdict-only", action="store_true", help="time a fresh clone's first verdict alone and merge it in"
    )
    parser.add_argument("--readme", action="store_true", help="rewrite README.md's figures from the results files")
    args = parser.parse_args(argv)
    if args.readme or args.first_verdict_only:
        return _side_job(args)
    # the suite runs through run.py, which lets Python cache bytecode; every other command timed here gets the same
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

    from verified_book.engine.machine import fingerprint, slug_of

    info = fingerprint()
    slug = slug_of(info)
    report: dict[str, Any] = {
        "machine": slug,
        "cpu": info.get("cpu"),
        "cores": info.get("cores"),
        "gpu": info.get("gpu"),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    print(f"benchmark on {slug} ({info.get('cpu')}, {info.get('cores')} CPUs)", flush=True)

    figures = count_figures()
    report["figures"] = figures
    if not args.skip_suite:
        _time_suite(report, info.get("cores") or 1)
    if not args.skip_suite:
        _time_verify(report, max(1, args.verify_rounds), info.get("cores") or 1)
    else:
        print("  timing the snippets ...", flush=True)
        report["snippets"] = run_snippets()
    print(f"  snippets: {report['snippets']['seconds']:.1f} s for {report['snippets']['count']} scripts", flush=True)
    for name, item in report["snippets"]["each"].items():
        print(
            f"    {name}: {item['seconds']:.2f} s"
            + ("" if item["exit_status"] == 0 else f" (exit {item['exit_status']})")
        )
    print(f"  timing a cold check of one page ({ONE_PAGE}), 3 rounds ...", flush=True)
    report["one_page"] = one_page = run_one_page()
    print(
        f"  one page: {one_page['seconds']:.2f} s, median of {one_page['rounds']} (exit {one_page['exit_status']}); "
        f"importing its libraries alone ({', '.join(one_page['libraries']['imports'])}) "
        f"takes {one_page['libraries']['seconds']:.2f} s",
        flush=True,
    )
    print(f"  timing the author's check of an edited figure on {ONE_PAGE} (--changed), 3 rounds ...", flush=True)
    report["page_edit"] = page_edit = run_page_edit()
    print(f"  edited figure: {page_edit['seconds']:.2f} s, median of {page_edit['rounds']}", flush=True)
    print("  timing the author's check of the whole book after a data edit (--changed), 3 rounds ...", flush=True)
    report["data_edit"] = data_edit = run_data_edit()
    print(
        f"  edited data: {data_edit['seconds']:.2f} s, median of {data_edit['rounds']}; "
        f"{data_edit['stale_figures']} figures stale",
        flush=True,
    )
    if not args.skip_site:
        _time_site(report)
    if not args.skip_first_verdict:
        report["first_verdict"] = first_verdict()

    ratios, targets = _suite_ratios(report, figures)
    suite = report.get("suite")
    print("  measuring bandwidth with likwid-bench, mbw, sysbench and the probe, alternating ...", flush=True)
    report["bandwidth"] = bw = compare_bandwidth(max(2, args.rounds))
    targets["one_page_within_2_s"] = report["one_page"]["seconds"] <= ONE_PAGE_TARGET_S
    targets["page_edit_within_2_s"] = report["page_edit"]["seconds"] <= ONE_PAGE_TARGET_S
    judged_on = bw.get("copy_one_thread_likwid") or bw.get("copy_one_thread_mbw")
    if judged_on:
        tool = "likwid" if "likwid_gbs" in judged_on else "mbw"
        targets[f"probe_copy_within_15pct_of_{tool}"] = judged_on["within_target"]
    report["ratios"], report["targets"] = ratios, targets

    print()
    print(f"figures bound in the book: {figures}")
    if suite:
        _print_suite_summary(report, ratios, targets)
    print(
        f"one page, computing every figure: {report['one_page']['seconds']:.2f} s (target ≤ {ONE_PAGE_TARGET_S:.0f} s: "
        f"{'met' if targets['one_page_within_2_s'] else 'NOT met'}; its libraries' import alone "
        f"{report['one_page']['libraries']['seconds']:.2f} s)"
    )
    print(
        f"one page, an edited figure checked with --changed: {report['page_edit']['seconds']:.2f} s "
        f"(target ≤ {ONE_PAGE_TARGET_S:.0f} s: {'met' if targets['page_edit_within_2_s'] else 'NOT met'})"
    )
    print(
        f"the whole book after a data edit, checked with --changed: {report['data_edit']['seconds']:.2f} s "
        f"({report['data_edit']['stale_figures']} figures stale: {report['data_edit']['edit']})"
    )
    print(
        f"bandwidth, {bw['working_set_mib']} MiB buffers "
        f"(LLC {bw['llc']['bytes'] // MIB} MiB from {bw['llc']['from']}); "
        f"{bw['pages']}:"
    )
    judged_key = "copy_one_thread_likwid" if "copy_one_thread_likwid" in bw else "copy_one_thread_mbw"
    for key, tool in (("copy_one_thread_likwid", "likwid"), ("copy_one_thread_mbw", "mbw")):
        one = bw.get(key)
        if not one:
            print(f"  copy, 1 thread: {bw.get(tool)}")
            continue
        verdict = (
            f"; target within {TOOL_AGREEMENT_TARGET:.0%}: {'met' if one['within_target'] else 'NOT met'}"
            if key == judged_key
            else "; shown, not judged"
        )
        print(
            f"  copy, 1 thread, {tool}{' (' + one['kernel'] + ')' if 'kernel' in one else ''}: upper quartiles "
            f"probe {one['probe_upper_quartile_gbs']:.2f} GB/s, {tool} {one[tool + '_upper_quartile_gbs']:.2f} GB/s "
            f"({one['difference_upper_quartile']:+.1%}{verdict}); medians {one['probe_gbs']:.2f} and "
            f"{one[tool + '_gbs']:.2f} GB/s ({one['difference']:+.1%})"
        )
    for key, tool in (("copy_all_threads_likwid", "likwid"), ("copy_all_threads_mbw", "mbw")):
        every = bw.get(key)
        if every:
            print(
                f"  copy, {bw['threads']} threads, {tool}, medians of {every['probe_runs']} rounds: probe "
                f"{every['probe_gbs']:.2f} GB/s, {tool} {every[tool + '_gbs']:.2f} GB/s ({every['difference']:+.1%})"
            )
    print(f"  the probe's copy with numpy's default pages: {bw['probe_default_pages_gbs']:.2f} GB/s")
    read = bw.get("read_one_thread")
    if read:
        print(
            f"  read, 1 thread: probe {read['probe_gbs']:.2f} GB/s, sysbench {read['sysbench_gbs']:.2f} GB/s "
            f"({read['difference']:+.1%})"
        )
    elif "sysbench" in bw:
        print(f"  read: {bw['sysbench']}")

    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{slug}.json"
    kept = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
    report = {**{k: v for k, v in kept.items() if k in OTHER_BENCHMARKS}, **report}  # benchmarks/serve.py's figures
    out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"written: {out.relative_to(ROOT)}")
    return 0


def _side_job(args: argparse.Namespace) -> int:
    """`--readme`: rewrite README.md's figures; `--first-verdict-only`: time a fresh clone alone and merge it in,
    every other section of this machine's results file kept as it was."""
    if args.readme:
        print("README.md " + ("rewritten" if rewrite_readme() else "already says the results files' figures"))
        return 0
    from verified_book.engine.machine import fingerprint, slug_of

    info = fingerprint()
    out = ROOT / "benchmarks" / "results" / f"{slug_of(info)}.json"
    print(f"benchmark on {slug_of(info)} ({info.get('cpu')}, {info.get('cores')} CPUs)", flush=True)
    result = first_verdict()
    kept = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {"machine": slug_of(info), **info}
    kept["first_verdict"] = result
    if "targets" in kept:
        kept["targets"]["first_verdict_within_45_s"] = result["met"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(kept, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"written: {out.relative_to(ROOT)} (first_verdict); README.md's figures: benchmarks/run.py --readme")
    return 0


if __name__ == "__main__":
    sys.exit(main())
