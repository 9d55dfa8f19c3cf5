"""The results store under concurrency and crashes: runs at once, xdist workers, a kill mid-write."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from harness.faults.common import (
    SampleBook,
    Tally,
    _wait_for,
)
from verified_book.book.bindings import read_page
from verified_book.engine import figure_status
from verified_book.records import conditions
from verified_book.records.results import read as read_results
from verified_book.vocabulary import CONTENDED, LABELS, NOT_HERE, NOT_RUN, RECORDED

# ---------------------------------------------------------------- results store: processes

SUBSET_CLAIMS = '''\
from verified_book.authoring.registry import claim


@claim("{prefix}.item.{{i}}", kind="exact", over={{"i": tuple(range({count}))}})
def item(i):
    """A record of its own for each i."""
    return i * 7 + {offset}
'''

# A conftest for runs started together: each waits at the end of its session until all
# have arrived, so their merges meet, and writes slowly, so a merge is under way when
# the other one starts. CLAIMS_NO_LOCK turns the lock off, to show what it prevents.
RACE_CONFTEST = """\
import contextlib
import os
import time
from pathlib import Path

import pytest

import verified_book.records.results  # noqa: F401  (the store, whole, before its writer is patched)
import verified_book.records.writing as writing

_write = writing._atomic_write


def _slow_write(path, text):
    time.sleep(float(os.environ.get("CLAIMS_SLOW_WRITE", "0")))
    _write(path, text)


writing._atomic_write = _slow_write
if os.environ.get("CLAIMS_NO_LOCK"):
    writing.FileLock = lambda *args, **kwargs: contextlib.nullcontext()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    barrier = os.environ.get("CLAIMS_BARRIER")
    if not barrier:
        return
    folder = Path(barrier)
    folder.mkdir(exist_ok=True)
    (folder / str(os.getpid())).touch()
    deadline = time.monotonic() + 60
    while len(list(folder.iterdir())) < int(os.environ["CLAIMS_PEERS"]) and time.monotonic() < deadline:
        time.sleep(0.005)
"""


def _subset_book(root: Path, subsets: Sequence[str], count: int) -> SampleBook:
    book = SampleBook(root)
    for n, prefix in enumerate(subsets):
        book.claims(prefix, SUBSET_CLAIMS.format(prefix=prefix, count=count, offset=n))
    book.conftest(RACE_CONFTEST)
    return book


def concurrent_processes(root: Path, tries: int = 1, count: int = 12, lock: bool = True) -> Tally:
    """Two `pytest` processes started at once on one machine, each verifying its own subset."""
    tally = Tally(
        "results store",
        "two pytest processes at once" + ("" if lock else " (lock switched off)"),
        "every record of both lands in results/<machine>.json",
    )
    for attempt in range(tries):
        book = _subset_book(root / f"race-{attempt}", ("alpha", "beta"), count)
        env_extra = {"CLAIMS_BARRIER": str(book.root / "barrier"), "CLAIMS_PEERS": "2", "CLAIMS_SLOW_WRITE": "0.3"}
        if not lock:
            env_extra["CLAIMS_NO_LOCK"] = "1"
        shared = root / f"race-{attempt}-results"
        procs = []
        for prefix in ("alpha", "beta"):
            env = {**book.env(absent=("torch", "mlx")), **env_extra}
            procs.append(
                subprocess.Popen(
                    book.command("-q", "-k", prefix, "--results-dir", str(shared)),
                    cwd=book.root,
                    env=env,
                    text=True,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
            )
        outputs = [p.communicate(timeout=120)[0] for p in procs]
        records = book.records(shared)
        expected = {f"{p}.item.{i}" for p in ("alpha", "beta") for i in range(count)}
        kept = expected & set(records)
        tally.keep(len(expected), len(kept))
        both_met = len(list((book.root / "barrier").iterdir())) == 2
        tally.check(
            all(p.returncode == 0 for p in procs) and both_met and kept == expected,
            f"exit codes {[p.returncode for p in procs]}, met {both_met}, missing {sorted(expected - kept)[:5]}"
            + ("" if all(p.returncode == 0 for p in procs) else "\n" + "\n".join(o[-1500:] for o in outputs)),
        )
    return tally


WORKER_CLAIMS = '''\
import os

from verified_book.authoring.registry import claim


@claim("work.item.{{i}}", kind="exact", over={{"i": tuple(range({count}))}})
def item(i):
    """The number of the xdist worker that computed it (0 for gw0)."""
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw-1")[2:])


@claim("work.total", kind="exact")
def total():
    """The same on every worker: a figure both workers judge alike."""
    return {count}
'''


def summary_rows(output: str) -> dict[str, dict[str, int]]:
    """The 'verified book' table of a run's terminal output, by backend."""
    rows: dict[str, dict[str, int]] = {}
    lines = output.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if "verified book" in line and line.startswith("="))
    except StopIteration:
        return rows
    body = [line for line in lines[start + 1 :] if line.strip()]
    header: list[str] = []
    for line in body:  # one block of columns, or more where a terminal's 100 columns end
        if line.startswith("backend "):
            header = line.replace(LABELS[NOT_HERE], "not_here").replace(LABELS[NOT_RUN], "not_run").split()
            continue
        parts = line.split()
        if not header or len(parts) != len(header) or not all(p.isdigit() for p in parts[1:]):
            break
        if parts[0] != "all":  # the totals row
            rows.setdefault(parts[0], {}).update({h: int(v) for h, v in zip(header[1:], parts[1:], strict=True)})
    return rows


def counts_of(records: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, int]]:
    """The same table, counted from a results file's records."""
    out: dict[str, dict[str, int]] = {}
    for per_backend in records.values():
        for backend, record in per_backend.items():
            row = out.setdefault(backend, {s: 0 for s in RECORDED})
            row[record["status"]] = row.get(record["status"], 0) + 1
    return out


def xdist_workers(root: Path, count: int = 16) -> Tally:
    """`pytest -n 2`: each worker merges its own records; the controller's summary counts them all."""
    tally = Tally(
        "results store",
        "pytest -n 2 (xdist workers)",
        "each worker's records land; the controller's summary table counts them",
    )
    book = SampleBook(root / "xdist")
    book.claims("work", WORKER_CLAIMS.format(count=count))
    book.page("page.md", f"The book has [{count}](claim:work.total) items.\n")
    shared = root / "xdist-results"
    run = book.run_apart("-n", "2", "--results-dir", str(shared), absent=("torch", "mlx"))
    run.records = book.records(shared)
    expected = {f"work.item.{i}" for i in range(count)}
    kept = expected & set(run.records)
    tally.keep(len(expected), len(kept))
    workers = {run.records[c]["none"]["value"] for c in kept}
    table = {b: {s: row.get(s, 0) for s in RECORDED} for b, row in summary_rows(run.output).items()}
    tally.check(
        run.ret in (0, 1) and kept == expected and workers == {0, 1},
        f"exit {run.ret}, missing {sorted(expected - kept)[:5]}, workers {sorted(workers)}\n{run.output[-2000:]}",
    )
    tally.check(
        bool(table) and table == counts_of(run.records) and "results: " in run.output,
        f"controller table {table} differs from the file's {counts_of(run.records)}\n{run.output[-2000:]}",
    )
    return tally


# ---------------------------------------------------------------- results store: a kill mid-write

SLOW_FILE = '''
class SlowFile:
    """Writes in small pieces with pauses, so a kill lands in the middle of the write."""

    def __init__(self, handle, started, piece, pause):
        self.handle, self.started, self.piece, self.pause = handle, started, piece, pause

    def write(self, text):
        for start in range(0, len(text), self.piece):
            self.handle.write(text[start:start + self.piece])
            self.handle.flush()
            self.started.touch()
            time.sleep(self.pause)
        return len(text)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self.handle.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self.handle, name)
'''

KILLED_WRITER = (
    """\
import os
import sys
import time
from pathlib import Path

import verified_book.records.results as results
import verified_book.records.writing as writing

path, started = Path(sys.argv[1]), Path(sys.argv[2])
_fdopen = os.fdopen
"""
    + SLOW_FILE
    + """

writing.os.fdopen = lambda fd, *a, **k: SlowFile(_fdopen(fd, *a, **k), started, 512, 0.02)
records = {f"killed.item.r{i}": {"numpy": {"status": "verified", "value": i, "figures": []}} for i in range(300)}
results.merge_into(path, results.ResultsFile(path.stem, records=records))
"""
)

KILLED_RUN_CONFTEST = (
    """\
import os
import time
from pathlib import Path

import pytest

import verified_book.records.results  # noqa: F401  (the store, whole, before its writer is patched)
import verified_book.records.writing as writing
"""
    + SLOW_FILE
    + """

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    started = Path(os.environ["CLAIMS_STARTED"])
    fdopen = os.fdopen
    writing.os.fdopen = lambda fd, *a, **k: SlowFile(fdopen(fd, *a, **k), started, 256, 0.05)
"""
)


def _previous_file(path: Path, count: int) -> bytes:
    from verified_book.records.results import ResultsFile, merge_into

    records = {
        f"previous.item.r{i}": {"numpy": {"status": "verified", "value": i, "figures": []}} for i in range(count)
    }
    merge_into(path, ResultsFile(path.stem, records=records))
    return path.read_bytes()


def _after_kill(tally: Tally, path: Path, before: bytes, proc: subprocess.Popen[str], started: Path) -> None:
    """Kill the writer once it is writing; the file must be the previous one, and the next merge must work."""
    from verified_book.records.results import ResultsFile, merge_into, read

    was_writing = _wait_for(started, 60, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    leftovers = list(path.parent.glob(f".{path.name}.*.tmp"))
    whole = path.read_bytes() == before
    try:
        previous = set(read(path).records)
    except Exception as e:  # the file must read; if it does not, that is the failure reported
        previous = set()
        tally.notes.append(f"{path}: {e}")
    later = {f"later.item.r{i}": {"numpy": {"status": "verified", "value": i, "figures": []}} for i in range(5)}
    started_at = time.monotonic()
    merged = merge_into(path, ResultsFile(path.stem, records=later), timeout=10)
    quick = time.monotonic() - started_at < 10
    expected = {k for k in json.loads(before)["records"]} | set(later)
    kept = expected & set(merged.records) & set(read(path).records)
    tally.keep(len(expected), len(kept))
    tally.check(
        was_writing
        and whole
        and bool(leftovers)
        and quick
        and not list(path.parent.glob(f".{path.name}.*.tmp"))
        and previous == set(json.loads(before)["records"]),
        f"writing {was_writing}, previous file whole {whole}, killed mid-write {bool(leftovers)}, lock free {quick}",
    )


def killed_mid_write(root: Path, tries: int = 1, pytest_runs: int = 1) -> Tally:
    """SIGKILL to a process that holds the lock and is half-way through writing the results file."""
    tally = Tally(
        "results store",
        "SIGKILL in the middle of a write",
        "the previous file stays whole; the lock is free; the next merge keeps every record",
    )
    for attempt in range(tries):
        folder = root / f"kill-{attempt}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "m.json"
        before = _previous_file(path, 50)
        started = folder / "started"
        script = folder / "writer.py"
        script.write_text(KILLED_WRITER)
        proc = subprocess.Popen(
            [sys.executable, str(script), str(path), str(started)],
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        _after_kill(tally, path, before, proc, started)
    for attempt in range(pytest_runs):
        book = SampleBook.basic(root / f"kill-run-{attempt}")
        book.conftest(KILLED_RUN_CONFTEST)
        book.results_dir.mkdir(parents=True, exist_ok=True)
        before = _previous_file(book.results_file, 400)
        started = book.root / "started"
        env = {**book.env(absent=("torch", "mlx")), "CLAIMS_STARTED": str(started)}
        proc = subprocess.Popen(
            book.command("-q"), cwd=book.root, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        _after_kill(tally, book.results_file, before, proc, started)
    return tally


# ---------------------------------------------------------------- two runs at once

TIMED_CLAIMS = '''\
import os
import time
from pathlib import Path

from verified_book.authoring.registry import claim


@claim("timed.wait", kind="measured", backends=("numpy",))
def wait(backend):
    """Notes when it starts and ends in the run log, and holds the machine until the gate opens."""
    log = Path(os.environ["TIMED_LOG"])
    with log.open("a") as f:
        f.write(f"start {os.getpid()}\\n")
    gate = os.environ.get("TIMED_GATE")
    deadline = time.monotonic() + 120
    while gate and not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    with log.open("a") as f:
        f.write(f"end {os.getpid()}\\n")
    return 1.0
'''


class Output:
    """A run's output, read as it comes, so a test can wait for a line without waiting for the run."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float = 120) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines) or self.proc.poll() is not None:
                break
            time.sleep(0.01)
        self.thread.join(0.5 if self.proc.poll() is None else 30)
        return any(text in line for line in self.lines)

    def finish(self) -> int:
        code = self.proc.wait(timeout=180)
        self.thread.join(30)
        return code

    @property
    def text(self) -> str:
        return "".join(self.lines)


def wait_for_line(path: Path, line: str, timeout: float = 120) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and line in path.read_text().splitlines():
            return True
        time.sleep(0.01)
    return False


def timed_book(root: Path) -> SampleBook:
    book = SampleBook(root)
    book.claims("timed", TIMED_CLAIMS)
    book.page("page.md", "The wait took [1](claim:timed.wait) s.\n")
    return book


def spawn(book: SampleBook, results: Path, log: Path, *args: str, gate: Path | None = None) -> Output:
    env = {**book.env(absent=("torch", "mlx")), "TIMED_LOG": str(log), **({"TIMED_GATE": str(gate)} if gate else {})}
    env.pop(conditions.RUN_ENV, None)  # a reader's run, not one inside this test run
    proc = subprocess.Popen(
        book.command("-q", "--results-dir", str(results), *args),
        cwd=book.root,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return Output(proc)


def conditions_of(results: Path) -> Any:
    """What the machine was doing while the run timed its claim, as its record keeps it."""
    return read_results(results / "sample.json").records["timed.wait"]["numpy"].conditions


def shown_status(book: SampleBook, results: Path) -> str:
    """What the site shows for the figure from this run's records alone."""
    binding = read_page(book.root / "book" / "page.md", book.root).bindings[0]
    view = figure_status.figure_view(binding, None, {"sample": read_results(results / "sample.json")})
    return view.measurements[0].status


def two_runs_at_once(root: Path) -> Tally:
    """A second run of the book started while the first times the machine: it waits, and neither run's
    measurement is taken beside the other; told to run beside it, both runs' measurements are recorded as
    contended, and neither is shown as the machine's figure."""
    from verified_book.records import conditions

    tally = Tally(
        "results store",
        "two runs at once, one timing the machine",
        "the second waits for the first (or, told to run beside it, both measurements are marked "
        "contended and none is shown as the machine's figure)",
    )
    for beside in (False, True):
        where = root / ("beside" if beside else "wait")
        book = timed_book(where / "book")
        log, gate = where / "log", where / "gate"
        first = spawn(book, where / "first", log, gate=gate)
        started = wait_for_line(log, f"start {first.proc.pid}")
        second = spawn(book, where / "second", log, *(["--beside-other-runs"] if beside else []))
        waited = (
            second.wait_for(f"another run of this book is timing the machine (pid {first.proc.pid}")
            if not beside
            else second.finish() == 0
        )
        gate.touch()
        codes = (first.finish(), second.finish())
        order = log.read_text().split() if log.exists() else []
        one, two = str(first.proc.pid), str(second.proc.pid)
        if beside:
            seen = [conditions_of(where / name) for name in ("first", "second")]
            handled = (
                order == ["start", one, "start", two, "end", two, "end", one]
                and all(conditions.contended(c) for c in seen)
                and all(shown_status(book, where / name) == CONTENDED for name in ("first", "second"))
            )
        else:
            handled = order == ["start", one, "end", one, "start", two, "end", two] and all(
                conditions_of(where / name).beside is None for name in ("first", "second")
            )
        tally.check(
            started and waited and codes == (0, 0) and handled,
            f"beside={beside}, exits {codes}, order {order}\n{first.text[-1200:]}\n{second.text[-1200:]}",
        )
        tally.keep(2, sum((where / name / "sample.json").exists() for name in ("first", "second")))
    return tally
