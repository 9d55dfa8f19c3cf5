"""Fault scenarios: the faults and bad inputs the suite is proven against, as functions.

Each scenario builds a small sample book in a folder, injects one fault, runs the
verification the way a reader would (in this process, or as separate processes at
once), and returns a `Tally`: how often the fault was tried, how often it was
reported, and how many records were expected, kept and lost. The tests assert on
the tallies; `scripts/fault-table` runs every scenario and writes `docs/faults.md`.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from verified_book.book.bindings import read_page
from verified_book.engine import figure_status
from verified_book.records import conditions, results
from verified_book.records.results import read as read_results
from verified_book.vocabulary import CONTENDED, LABELS, NO_BACKEND_NAME, NOT_HERE, NOT_RUN, RECORDED

SLUG = "sample"

INI = """\
[pytest]
testpaths = book.toml tests book
pythonpath = .
addopts = -p no:cacheprovider -p no:hypothesispytest -p no:anyio -ra --machine {slug}
"""

BOOK_TOML = """\
[book]
pages = "book"
topics = ["{package}"]
data = "data"
results = "results"
"""

PROFILES = Path(__file__).resolve().parents[2] / "claims" / "data" / "hardware"


#: the vendors' figures the sample pages print (copies of the book's sentences, frozen as written): a sample's
#: profiles state these, so a test of the engine does not move when the book's own data does
SAMPLE_FIGURES = {
    ("dgx_spark", "memory_capacity"): 128,
    ("dgx_spark", "memory_bandwidth"): 273,
    ("ryzen_ai_max", "memory_bandwidth"): 256,
    ("m4_max", "memory_bandwidth"): 546,
    ("rtx5090", "memory_bandwidth"): 1792,
}


def copy_profiles(data: Path) -> None:
    """Give a sample book the main book's hardware profiles, so its hardware markers mean the same, with the
    figures its pages print (`SAMPLE_FIGURES`)."""
    (data / "hardware").mkdir(parents=True, exist_ok=True)
    for profile in PROFILES.glob("*.toml"):
        (data / "hardware" / profile.name).write_text(profile.read_text(encoding="utf-8"), encoding="utf-8")
    for (machine, key), value in SAMPLE_FIGURES.items():
        pin(data / "hardware" / f"{machine}.toml", key, value)


def pin(path: Path, key: str, value: int) -> None:
    """Set a data table's `value`, and the same number where its `source` states it with its unit."""
    text = path.read_text(encoding="utf-8")
    entry = tomllib.loads(text)[key]
    old, unit = entry["value"], entry["unit"]
    if old == value:
        return
    head = text.index(f"[{key}]\n")
    end = text.find("\n[", head + 1)
    end = len(text) if end < 0 else end
    section = text[head:end].replace(f"value = {old}\n", f"value = {value}\n")
    for stated in (f"{old:,} {unit}", f"{old} {unit}"):
        section = section.replace(stated, f"{value:,} {unit}")
    path.write_text(text[:head] + section + text[end:], encoding="utf-8")


def pytester_book(pytester: Any, package: str = "sample_claims") -> Path:
    """Lay a sample book out in a pytester folder, as `SampleBook` does on disk: its ini, book.toml,
    the conftest that turns the plugin on, the main book's profiles; returns the claims package."""
    pytester.makeini("[pytest]\ntestpaths = book.toml book\naddopts = -p no:cacheprovider -ra\n")
    (pytester.path / "book.toml").write_text(BOOK_TOML.format(package=package))
    pytester.makeconftest(CONFTEST)
    copy_profiles(pytester.path / "data")
    pytester.syspathinsert()
    return Path(pytester.mkpydir(package))


def sample_book(
    pytester: Any, claims: str, page: str, module: str = "sample.py", files: Mapping[str, str] | None = None
) -> Any:
    """A sample book laid out by `pytester_book`: its claims `module`, one page (book/page.md), and any
    other `files` (paths relative to the book's root: data files, an allow-list)."""
    (pytester_book(pytester) / module).write_text(claims)
    (pytester.path / "book").mkdir()
    (pytester.path / "book" / "page.md").write_text(page)
    for name, text in (files or {}).items():
        (pytester.path / name).write_text(text)
    return pytester


def run_book(pytester: Any, *args: str) -> Any:
    """One verification run of a sample book, in this process: its session opens the book of its own."""
    return pytester.runpytest_inprocess(*args)


# A book turns the engine's plugin on in its own conftest.py, as the project's does.
CONFTEST = 'pytest_plugins = ["verified_book.integration.pytest.hooks"]\n'


def machine_conftest(fields: dict[str, Any]) -> str:
    """A book's conftest that makes its machine look like `fields` say, through the public
    `pytest_claims_machine_info` hook: a run here, fingerprinted as one of the book's machines."""
    return CONFTEST + (f"\n\ndef pytest_claims_machine_info(machine_info):\n    machine_info.update({fields!r})\n")


def profile_fingerprint(match: dict[str, Any]) -> dict[str, Any]:
    """Fingerprint fields a hardware profile's `[match]` table recognises (its first alternatives)."""
    fields = {k: (v[0] if isinstance(v, list) else v) for k, v in match.items()}
    if "gpu" not in fields and str(fields.get("cpu", "")).lower().startswith("apple"):
        fields["gpu"] = fields["cpu"]  # torch names an Apple chip's GPU after the chip
    elif "gpu" not in fields:  # a profile of a CPU: the GPU of the machine running the test is not its own
        fields.update(gpu=None, gpu_memory_gb=None, compute_capability=None, driver=None)
    return fields


# Imported at start-up through PYTHONPATH: hides the packages named in CLAIMS_ABSENT
# exactly as an uninstalled package is hidden (no module, no distribution metadata).
ABSENT_SITECUSTOMIZE = """\
import os
import sys
from importlib.machinery import PathFinder

_ABSENT = {n for n in os.environ.get("CLAIMS_ABSENT", "").split(",") if n}


class _WithoutAbsent(PathFinder):
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.partition(".")[0] in _ABSENT:
            return None
        return super().find_spec(fullname, path, target)

    @classmethod
    def find_distributions(cls, *args, **kwargs):
        for dist in super().find_distributions(*args, **kwargs):
            if (dist.metadata["Name"] or "").lower() not in _ABSENT:
                yield dist


sys.meta_path[:] = [_WithoutAbsent if f is PathFinder else f for f in sys.meta_path]
"""

BASIC_CLAIMS = '''\
from fractions import Fraction
from verified_book.authoring.registry import claim


@claim("basic.ratio", kind="exact")
def ratio():
    """A decode ceiling: 273 GB/s over 16.4 GB."""
    return Fraction(273) / Fraction("16.4")


@claim("basic.square.{n}", kind="library", over={"n": (2, 3)}, backends=("numpy", "torch:cpu"))
def square(backend, n):
    """n squared, as the library computes it."""
    return int((backend.tensor([n]) ** 2).sum())
'''

BASIC_PAGE = "The ceiling is [16.6](claim:basic.ratio) tokens/s and [4](claim:basic.square.2) is a square.\n"


@dataclass
class Run:
    """One verification run of a sample book: exit code, terminal text, the records kept."""

    ret: int
    output: str
    records: dict[str, dict[str, dict[str, Any]]]

    def statuses(self) -> dict[str, dict[str, str]]:
        return {cid: {b: r.get("status", "?") for b, r in per.items()} for cid, per in self.records.items()}


class SampleBook:
    """A small book with its own claims package, laid out as the project is."""

    def __init__(self, root: Path, package: str = "sample_claims") -> None:
        self.root = root
        self.package = package
        root.mkdir(parents=True, exist_ok=True)
        (root / "pytest.ini").write_text(INI.format(package=package, slug=SLUG))
        (root / "book.toml").write_text(BOOK_TOML.format(package=package))
        (root / "conftest.py").write_text(CONFTEST)
        copy_profiles(root / "data")
        (root / package).mkdir(exist_ok=True)
        (root / package / "__init__.py").write_text("")
        (root / "book").mkdir(exist_ok=True)
        (root / "tests").mkdir(exist_ok=True)

    @classmethod
    def basic(cls, root: Path, package: str = "sample_claims") -> "SampleBook":
        """A sound book: one exact claim and a library family, two figures."""
        book = cls(root, package)
        book.claims("basic", BASIC_CLAIMS)
        book.page("page.md", BASIC_PAGE)
        return book

    def claims(self, module: str, text: str) -> Path:
        path = self.root / self.package / f"{module}.py"
        path.write_text(textwrap.dedent(text))
        return path

    def page(self, name: str, text: str) -> Path:
        path = self.root / "book" / name
        path.write_text(text)
        return path

    def conftest(self, text: str) -> None:
        (self.root / "conftest.py").write_text(CONFTEST + textwrap.dedent(text))

    @property
    def results_dir(self) -> Path:
        return self.root / "results"

    @property
    def results_file(self) -> Path:
        return self.results_dir / f"{SLUG}.json"

    def records(self, results_dir: Path | None = None) -> dict[str, dict[str, dict[str, Any]]]:
        path = (results_dir / f"{SLUG}.json") if results_dir is not None else self.results_file
        if not path.exists():
            return {}
        return json.loads(path.read_text(encoding="utf-8")).get("records", {})

    def forget_modules(self) -> None:
        """Drop this book's claims modules from the import cache, so the next import reads them from disk."""
        for name in [m for m in sys.modules if m.split(".")[0] == self.package]:
            del sys.modules[name]

    def run(self, *args: str) -> Run:
        """Verify the book in this process: its session opens the book of its own; the caller's is current after."""
        self.forget_modules()
        before = set(sys.modules)
        saved_path = list(sys.path)
        saved_cwd = os.getcwd()
        out = io.StringIO()
        os.chdir(self.root)
        try:
            import pytest

            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                # the unraisable-exception plugin collects garbage twice at exit: seconds inside a big run
                ret = int(pytest.main(["--capture=sys", "-p", "no:unraisableexception", *args]))
        finally:
            os.chdir(saved_cwd)
            sys.path[:] = saved_path
            for name in set(sys.modules) - before:
                file = getattr(sys.modules[name], "__file__", None) or ""
                if file.startswith(str(self.root)):
                    del sys.modules[name]
        return Run(ret, out.getvalue(), self.records())

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "pytest", *args]

    def env(self, absent: Sequence[str] = ()) -> dict[str, str]:
        """The environment of a separate run; `absent` packages look uninstalled in it."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
        paths = [str(self.root)]
        if absent:
            site = self.root / "_absent"
            site.mkdir(exist_ok=True)
            (site / "sitecustomize.py").write_text(ABSENT_SITECUSTOMIZE)
            paths.insert(0, str(site))
            env["CLAIMS_ABSENT"] = ",".join(absent)
        env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [os.environ.get("PYTHONPATH")] if p])
        return env

    def spawn(self, *args: str, absent: Sequence[str] = (), **popen: Any) -> subprocess.Popen[str]:
        """Start a separate verification run; collect it with `finish`."""
        return subprocess.Popen(
            self.command(*args),
            cwd=self.root,
            env=self.env(absent),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            **popen,
        )

    def finish(self, proc: subprocess.Popen[str], timeout: float = 120) -> Run:
        output, _ = proc.communicate(timeout=timeout)
        return Run(proc.returncode, output, self.records())

    def run_apart(self, *args: str, absent: Sequence[str] = ()) -> Run:
        return self.finish(self.spawn(*args, absent=absent))


# ---------------------------------------------------------------- tallies


@dataclass
class Tally:
    """One fault tried some number of times: how often it was handled as required, and the records kept."""

    group: str
    fault: str
    required: str
    tried: int = 0
    handled: int = 0
    expected: int = 0
    kept: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return max(self.expected - self.kept, 0)

    @property
    def ok(self) -> bool:
        return self.tried > 0 and self.handled == self.tried and self.lost == 0

    def check(self, handled: bool, note: str = "") -> None:
        self.tried += 1
        self.handled += bool(handled)
        if not handled and note:
            self.notes.append(note)

    def keep(self, expected: int, kept: int) -> None:
        self.expected += expected
        self.kept += min(kept, expected)

    def __str__(self) -> str:
        text = (
            f"{self.group} / {self.fault}: {self.handled}/{self.tried} handled, "
            f"{self.kept}/{self.expected} records kept, {self.lost} lost"
        )
        return text + "".join(f"\n    {n}" for n in self.notes)


def basic_pairs() -> set[tuple[str, str]]:
    """The (claim, backend) records a run of the basic sample book makes on this machine."""
    from verified_book.backends import detect

    present = [b for b in ("numpy", "torch:cpu") if detect()[b].available]
    return {("basic.ratio", "none")} | {(f"basic.square.{n}", b) for n in (2, 3) for b in present}


def _pairs(records: dict[str, dict[str, Any]]) -> set[tuple[str, str]]:
    return {(claim_id, backend) for claim_id, per in records.items() for backend in per}


def _wait_for(path: Path, timeout: float, proc: subprocess.Popen[str] | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        if proc is not None and proc.poll() is not None:
            return path.exists()
        time.sleep(0.005)
    return False


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


# ---------------------------------------------------------------- results store: bad files


def _good_update(slug: str, count: int = 3) -> Any:
    from verified_book.records.results import ResultsFile

    return ResultsFile(
        slug,
        machine={"slug": slug},
        records={
            f"fresh.item.r{i}": {"numpy": {"status": "verified", "value": i, "figures": []}} for i in range(count)
        },
    )


CORRUPT_FILES: dict[str, bytes] = {
    "truncated JSON": b'{"schema_version": 1, "slug": "m", "records": {',
    "empty file": b"",
    "not UTF-8": b'\xff\xfe{"slug": "m"}',
    "binary garbage": bytes(range(256)) * 4,
    "a JSON list at the top": b"[1, 2, 3]",
    "NaN literal": b'{"schema_version": 1, "slug": "m", "records": '
    b'{"a.b": {"numpy": {"status": "verified", "value": NaN}}}}',
    "nested 100,000 deep": b"[" * 100_000 + b"]" * 100_000,
    "5,000-digit integer": b'{"schema_version": 1, "slug": "m", "records": {}, "x": ' + b"9" * 5000 + b"}",
    "schema_version a string": b'{"schema_version": "1", "slug": "m", "records": {}}',
    "schema_version negative": b'{"schema_version": -3, "slug": "m", "records": {}}',
    "old schema with broken records": b'{"slug": "m", "records": [1, 2]}',
    "another machine's file under this name": b'{"schema_version": 1, "slug": "other", "records": {}}',
}


def corrupt_files(root: Path) -> Tally:
    """A results file that does not read: it is reported with its path and kept aside, never replaced silently."""
    tally = Tally(
        "results store",
        "corrupt results file",
        "reported with its path, kept aside byte for byte, a new file holds the run's records",
    )
    from verified_book.records.results import merge_into, read

    for n, (name, content) in enumerate(CORRUPT_FILES.items()):
        folder = root / f"corrupt-{n}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "m.json"
        path.write_bytes(content)
        warnings: list[str] = []
        update = _good_update("m")
        try:
            merge_into(path, update, warn=warnings.append)
        except Exception as e:  # a crash is what this scenario must not see; it is counted as unhandled
            tally.check(False, f"{name}: merge raised {type(e).__name__}: {e}")
            tally.keep(len(update.records), 0)
            continue
        aside = list(folder.glob("m.json.corrupt-*"))
        reported = len(warnings) == 1 and str(path) in warnings[0] and "kept aside" in warnings[0]
        kept_aside = len(aside) == 1 and aside[0].read_bytes() == content
        records = set(read(path).records)
        tally.keep(len(update.records), len(set(update.records) & records))
        tally.check(reported and kept_aside, f"{name}: reported {reported}, kept aside {kept_aside}: {warnings}")
    return tally


def newer_schema(root: Path) -> Tally:
    """A results file written by a newer schema: refused with what to upgrade; the run's records kept apart."""
    from verified_book.records.results import SCHEMA_VERSION

    tally = Tally(
        "results store",
        "results file from a newer schema",
        "left untouched; the message says what to upgrade; the run's records are kept beside it",
    )
    book = SampleBook.basic(root / "newer")
    book.results_dir.mkdir(parents=True, exist_ok=True)
    original = json.dumps({"schema_version": SCHEMA_VERSION + 1, "slug": SLUG, "records": {}, "new_field": [1]})
    book.results_file.write_text(original)
    run = book.run()
    unmerged = list(book.results_dir.glob(f"{SLUG}.json.unmerged-*"))
    kept = _pairs(json.loads(unmerged[0].read_text())["records"]) if len(unmerged) == 1 else set()
    expected = basic_pairs()
    tally.keep(len(expected), len(expected & kept))
    tally.check(
        book.results_file.read_text() == original
        and "update the project" in run.output
        and "run.py setup" in run.output
        and str(book.results_file) in run.output
        and len(unmerged) == 1,
        f"file untouched {book.results_file.read_text() == original}, unmerged {unmerged}\n{run.output[-1500:]}",
    )
    return tally


def older_schema(root: Path) -> Tally:
    """A results file of schema 0 (a flat list of records): migrated, and its records kept."""
    tally = Tally(
        "results store",
        "results file from an older schema",
        "migrated to the current schema; its records kept beside the run's",
    )
    book = SampleBook.basic(root / "older")
    book.results_dir.mkdir(parents=True, exist_ok=True)
    old = [{"claim": f"old.item.r{i}", "backend": "numpy", "status": "verified", "value": i} for i in range(4)]
    book.results_file.write_text(json.dumps({"slug": SLUG, "records": old}))
    run = book.run()
    data = json.loads(book.results_file.read_text())
    expected = {f"old.item.r{i}" for i in range(4)} | {"basic.ratio", "basic.square.2", "basic.square.3"}
    tally.keep(len(expected), len(expected & set(data["records"])))
    tally.check(
        run.ret == 0 and data.get("schema_version") == results.SCHEMA_VERSION and isinstance(data["records"], dict),
        f"exit {run.ret}, schema {data.get('schema_version')}\n{run.output[-1500:]}",
    )
    return tally


def locked_threads(root: Path, count: int = 8) -> Tally:
    """Merges racing in threads of one process: filelock serialises them as it does processes."""
    import threading

    from verified_book.records.results import ResultsFile, merge_into, read

    tally = Tally("results store", "merges racing in threads", "every thread's records land")
    path = root / "threads" / "m.json"
    path.parent.mkdir(parents=True, exist_ok=True)

    def one(n: int) -> None:
        merge_into(path, ResultsFile("m", records={f"thread.item.t{n}": {"numpy": {"status": "verified", "value": n}}}))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = set(read(path).records)
    tally.keep(count, len(kept))
    tally.check(len(kept) == count, f"kept {sorted(kept)}")
    return tally


# ---------------------------------------------------------------- untrusted results files

HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'


def sound_results(slug: str = "contrib", claim_id: str = "basic.ratio", text: str = "") -> dict[str, Any]:
    """A valid contributed results file; `text` is put in every free string field (for escaping tests)."""
    date = "2026-11-29T13:00:00+00:00"
    return {
        "schema_version": 1,
        "slug": slug,
        "machine": {
            "slug": slug,
            "markers": [],
            "fingerprint": {
                "cpu": f"Contributed CPU {text}",
                "arch": f"x86_64{text}",
                "cores": 8,
                "memory_gb": 64.0,
                "os": f"Linux {text}",
                "gpu": f"GPU {text}",
                "gpu_memory_gb": 16.0,
                "compute_capability": f"12.0{text}",
                "driver": f"580{text}",
                "python": f"3.12{text}",
                "torch": f"2.9{text}",
            },
        },
        "environment": {
            "date": date,
            "os": f"Linux {text}",
            "driver": f"580{text}",
            "versions": {"python": f"3.12{text}", "torch": f"2.9{text}"},
            "backends": {"numpy": f"2.3{text}", "torch:cpu": f"2.9{text}"},
        },
        "records": {
            claim_id: {
                "numpy": {
                    "status": "verified",
                    "kind": "exact",
                    "value": {"exact": "1365/82", "float": 1365 / 82},
                    "figures": [
                        {
                            "file": "book/index.md",
                            "line": 3,
                            "printed": f"16.6{text}",
                            "stated": f"16.6{text}",
                            "status": "verified",
                        }
                    ],
                    "message": f"computed here {text}",
                    "inputs": [f"claims/data/x.toml:1 value = 1 {text}"],
                    "source": f"claims/topics/x.py:1{text}",
                    "citation": f"a source {text}",
                    "hardware": None,
                    "date": date,
                    "seconds": 0.01,
                    "version": f"2.3{text}",
                }
            }
        },
        "outputs": {"lab.py": {"text": f"what the lab printed {text}", "date": date, "seconds": 0.5}},
    }


def _record(data: dict[str, Any]) -> dict[str, Any]:
    return data["records"]["basic.ratio"]["numpy"]


def _figure(data: dict[str, Any]) -> dict[str, Any]:
    return _record(data)["figures"][0]


def _nest(depth: int) -> Any:
    node: Any = 1
    for _ in range(depth):
        node = [node]
    return node


HOSTILE_VARIANTS: dict[str, tuple[str, Callable[[dict[str, Any]], Any]]] = {
    "slug with a path": ("names", lambda d: d.update(slug="../../etc/passwd")),
    "slug with markup": ("names", lambda d: d.update(slug="<script>x</script>")),
    "slug of 200 characters": ("names", lambda d: d.update(slug="a" * 200)),
    "machine slug not the file's": ("names", lambda d: d["machine"].update(slug="someone-else")),
    "unknown claim id": ("names", lambda d: d["records"].update({"no.such.claim": d["records"]["basic.ratio"]})),
    "claim id with markup": ("names", lambda d: d["records"].update({"<b>x</b>": {}})),
    "unknown backend": ("names", lambda d: d["records"]["basic.ratio"].update({"gpu:9": _record(d)})),
    "marker with markup": ("names", lambda d: d["machine"].update(markers=["<script>"])),
    "output name with a path": ("names", lambda d: d["outputs"].update({"../../x.py": {"text": "x"}})),
    "figure file outside the book": ("names", lambda d: _figure(d).update(file="../../etc/passwd")),
    "figure file absolute": ("names", lambda d: _figure(d).update(file="/etc/passwd")),
    "status not a status": ("types", lambda d: _record(d).update(status="great")),
    "figure status not a status": ("types", lambda d: _figure(d).update(status="<script>")),
    "kind not a kind": ("types", lambda d: _record(d).update(kind="magic")),
    "record not an object": ("types", lambda d: d["records"]["basic.ratio"].update(numpy=[1, 2])),
    "records a list": ("types", lambda d: d.update(records=[])),
    "inputs not strings": ("types", lambda d: _record(d).update(inputs=[{"a": 1}])),
    "message not a string": ("types", lambda d: _record(d).update(message=["x"])),
    "fingerprint nested": ("types", lambda d: d["machine"]["fingerprint"].update(cpu={"a": 1})),
    "output text not a string": ("types", lambda d: d["outputs"]["lab.py"].update(text=7)),
    "verified with a stale figure": ("types", lambda d: _figure(d).update(status="stale")),
    "figure line 0": ("figure lines", lambda d: _figure(d).update(line=0)),
    "figure line negative": ("figure lines", lambda d: _figure(d).update(line=-4)),
    "figure line a string": ("figure lines", lambda d: _figure(d).update(line="3")),
    "figure line true": ("figure lines", lambda d: _figure(d).update(line=True)),
    "figure line fractional": ("figure lines", lambda d: _figure(d).update(line=2.5)),
    "figure line past a million": ("figure lines", lambda d: _figure(d).update(line=10**9)),
    "value NaN": ("values", lambda d: _record(d).update(value=math.nan)),
    "value infinite": ("values", lambda d: _record(d).update(value=math.inf)),
    "exact and float disagree": ("values", lambda d: _record(d).update(value={"exact": "1/3", "float": 0.5})),
    "exact divides by zero": ("values", lambda d: _record(d).update(value={"exact": "1/0", "float": 1.0})),
    "value integer of 1,300 digits": ("values", lambda d: _record(d).update(value=10**1300)),
    "seconds negative": ("values", lambda d: _record(d).update(seconds=-1)),
    "seconds a year": ("values", lambda d: _record(d).update(seconds=3.2e7)),
    "memory NaN": ("values", lambda d: d["machine"]["fingerprint"].update(memory_gb=math.nan)),
    "date not a date": ("dates", lambda d: _record(d).update(date="yesterday")),
    "date in the future": ("dates", lambda d: _record(d).update(date="2999-01-01T00:00:00+00:00")),
    "date before 2000": ("dates", lambda d: _record(d).update(date="1970-01-01")),
    "environment date with markup": ("dates", lambda d: d["environment"].update(date="<script>")),
    "output date a number": ("dates", lambda d: d["outputs"]["lab.py"].update(date=20261129)),
    "string of 20,000 characters": ("sizes", lambda d: _record(d).update(citation="x" * 20_000)),
    "message of 200,000 characters": ("sizes", lambda d: _record(d).update(message="x" * 200_000)),
    "key of 500 characters": ("sizes", lambda d: d["machine"]["fingerprint"].update({"k" * 500: 1})),
    "value nested 40 deep": ("sizes", lambda d: _record(d).update(value=_nest(40))),
    "non-string key": ("sizes", lambda d: d["machine"]["fingerprint"].update({7: "x"})),
    "top level a list": ("types", lambda d: [d]),
}

HOSTILE_FILES: dict[str, bytes] = {
    "NaN literal in the file": b'{"schema_version": 1, "slug": "contrib", "records": {}, "x": NaN}',
    "Infinity literal in the file": b'{"schema_version": 1, "slug": "contrib", "records": {}, "x": -Infinity}',
    "nested 100,000 deep in the file": b'{"slug": "contrib", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "integer of 5,000 digits in the file": b'{"slug": "contrib", "x": ' + b"9" * 5000 + b"}",
    "not UTF-8": b'{"slug": "contrib\xff"}',
    "schema from the future": b'{"schema_version": 99, "slug": "contrib", "records": {}}',
}


def hostile_results(root: Path, known_claims: set[str] | None = None) -> Tally:
    """A contributed results file is untrusted: each hostile variant is refused, naming the file."""
    from verified_book.records.results import ResultsError, read, validate

    known = known_claims if known_claims is not None else {"basic.ratio"}
    tally = Tally(
        "contributed results",
        "hostile results file",
        "refused before it is merged or rendered, with the file and the field named",
    )
    where = "results/contrib.json"
    sound = sound_results(text=HOSTILE)
    tally.check(validate(sound, where, known) == [], f"the sound file is refused: {validate(sound, where, known)}")
    for name, (_, mutate) in HOSTILE_VARIANTS.items():
        data = json.loads(json.dumps(sound))
        replaced = mutate(data)
        data = replaced if isinstance(replaced, list) else data
        problems = validate(data, where, known)
        tally.check(bool(problems) and all(p.startswith(where) for p in problems), f"{name}: {problems or 'accepted'}")
    folder = root / "hostile"
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in HOSTILE_FILES.items():
        path = folder / "contrib.json"
        path.write_bytes(content)
        try:
            read(path, known)
        except ResultsError as e:
            tally.check(str(path) in str(e), f"{name}: {e}")
        except Exception as e:  # anything but a ResultsError is a crash of the reader
            tally.check(False, f"{name}: {type(e).__name__}: {e}")
        else:
            tally.check(False, f"{name}: accepted")
    return tally


# ---------------------------------------------------------------- bad input in the book and the claims

GOOD_CLAIMS = BASIC_CLAIMS

FAULTY_CLAIMS = '''\
import math

from verified_book.authoring.registry import claim


@claim("bad.raises", kind="exact")
def raises():
    """Divides by zero."""
    return 1 / 0


@claim("bad.wrong_type", kind="exact")
def wrong_type():
    """Returns a mapping, which no figure can be compared with."""
    return {"tokens": 16}


@claim("bad.string_for_number", kind="exact")
def string_for_number():
    """Returns words where the book prints a number."""
    return "sixteen"


@claim("bad.nan", kind="exact")
def not_a_number():
    """Returns NaN."""
    return math.nan


@claim("basic.ratio", kind="exact")
def ratio_again():
    """Declares an id another module declared first."""
    return 1


@claim("Bad.Upper", kind="exact")
def upper():
    """An id that is not dotted lower case."""
    return 1


@claim("bad.after", kind="exact")
def after():
    """Declared after the faulty ones in the same module: still registered, run and recorded."""
    return 42
'''

FAULTY_PAGE = """\
A raising claim gives [5](claim:bad.raises).
A mapping is no figure: [16](claim:bad.wrong_type).
Words are no number: [16](claim:bad.string_for_number).
NaN is no value: [1.5](claim:bad.nan).
A typo: [4](claim:basic.sqare.2).
Words without their value: [sixteen](claim:basic.ratio).
A broken link: [16.6](claim: basic.ratio).
After them all, [42](claim:bad.after).
"""

BAD_INPUTS: dict[str, list[str]] = {
    "claim raises": [
        r"b_faulty\.py:\d+: claim bad\.raises on none: raised ZeroDivisionError: division by zero \(at ",
        r"book/faults\.md:1: figure 5 \(bad\.raises\) cannot be checked: raised ZeroDivisionError",
    ],
    "claim returns the wrong type": [
        r"b_faulty\.py:\d+: claim bad\.wrong_type on none: returned a dict",
        r"book/faults\.md:3: figure 16 \(bad\.string_for_number\) cannot be checked on none: "
        r"the claim returned a str",
    ],
    "claim returns NaN": [
        r"b_faulty\.py:\d+: claim bad\.nan on none: returned NaN",
        r"book/faults\.md:4: figure 1\.5 \(bad\.nan\) cannot be checked: returned NaN",
    ],
    "unknown claim id": [
        r"book/faults\.md:5: figure 4 binds to unknown claim 'basic\.sqare\.2'; did you mean basic\.square\.2"
    ],
    "figure text that does not parse": [
        r"book/faults\.md:6:\d+: figure sixteen \(basic\.ratio\): 'sixteen' is not a printed number"
    ],
    "malformed binding": [
        r"book/faults\.md:7:\d+: malformed binding: expected \[printed text\]\(claim:dotted\.id\).*claim: basic\.ratio"
    ],
    "duplicated claim id": [r"b_faulty\.py:\d+: claim id 'basic\.ratio' is declared twice; first at \S*a_good\.py:\d+"],
    "claim id not dotted lower case": [r"b_faulty\.py:\d+: claim id 'Bad\.Upper' is not a dotted lower-case id"],
    "topic module that does not import": [r"c_syntax\.py:\d+: sample_claims\.c_syntax does not import: SyntaxError"],
    "page that is not UTF-8": [r"book/latin1\.md:1: page cannot be read"],
}


def bad_input(root: Path) -> list[Tally]:
    """Every kind of bad input at once in one book: each is one clear error at its place; the rest is recorded."""
    import re

    book = SampleBook(root / "bad-input")
    book.claims("a_good", GOOD_CLAIMS)
    book.claims("b_faulty", FAULTY_CLAIMS)
    book.claims("c_syntax", "def broken(:\n    return 1\n")
    book.page("page.md", BASIC_PAGE)
    book.page("faults.md", FAULTY_PAGE)
    (book.root / "book" / "latin1.md").write_bytes(b"Caf\xe9 au lait: [42](claim:bad.after).\n")
    run = book.run()
    tallies = []
    for fault, patterns in BAD_INPUTS.items():
        tally = Tally("bad input", fault, "one clear error naming file:line (and the claim id, where one is involved)")
        missing = [p for p in patterns if not re.search(p, run.output)]
        tally.check(
            not missing and "Traceback (most recent call last)" not in run.output,
            f"not reported as expected: {missing}",
        )
        tallies.append(tally)
    statuses = run.statuses()
    good = {("basic.ratio", "none"), ("basic.square.2", "numpy"), ("basic.square.3", "numpy"), ("bad.after", "none")}
    failed = {
        ("bad.raises", "none"),
        ("bad.wrong_type", "none"),
        ("bad.string_for_number", "none"),
        ("bad.nan", "none"),
    }
    kept = {p for p in good if statuses.get(p[0], {}).get(p[1]) == "verified"}
    kept |= {p for p in failed if statuses.get(p[0], {}).get(p[1]) == "failed"}
    around = Tally(
        "bad input",
        "all of the above in one book",
        "the run fails (exit 1) and records every claim that computed, the faulty ones as failed",
    )
    around.check(run.ret == 1 and kept == good | failed, f"exit {run.ret}, missing {sorted((good | failed) - kept)}")
    around.keep(len(good | failed), len(kept))
    tallies.append(around)
    for tally in tallies:
        tally.notes += [] if tally.ok else [run.output[-3000:]]
    return tallies


# ---------------------------------------------------------------- hardware and environment faults

ENV_CLAIMS = '''\
from verified_book.authoring.registry import claim


@claim("env.sum.{n}", kind="library", over={"n": (2, 3)})
def total(backend, n):
    """n plus n, summed by the library on its device."""
    return int(backend.tensor([n, n]).sum())
'''

ENV_PAGE = "The sum of twos is [4](claim:env.sum.2), as [16.6](claim:basic.ratio) is a ratio.\n"


def absent_packages(root: Path, packages: Sequence[str] = ("torch", "mlx")) -> list[Tally]:
    """A machine without torch, and one without MLX: their backends are skipped with the reason; the rest runs."""
    books, procs = [], []
    for package in packages:
        book = SampleBook.basic(root / f"without-{package}")
        book.claims("env", ENV_CLAIMS)
        book.page("page.md", ENV_PAGE)
        books.append(book)
        procs.append(book.spawn(absent=(package,)))
    tallies = []
    for package, book, proc in zip(packages, books, procs, strict=True):
        run = book.finish(proc)
        tally = Tally(
            "environment",
            f"{'MLX' if package == 'mlx' else package} not installed",
            f"{package}'s backends skipped with the reason; every other backend runs and is recorded",
        )
        library = "mlx.core" if package == "mlx" else package
        reason = f"{library} does not import (ModuleNotFoundError: No module named '{package}')"
        gone = [f"{package}:{d}" for d in (("cpu", "gpu") if package == "mlx" else ("cpu", "cuda", "mps"))]
        statuses = run.statuses()
        present = {(c, b) for c, per in statuses.items() for b in per if b not in gone}
        computed = {
            (c, b)
            for (c, b) in present
            if statuses[c][b] == "verified"
            or (statuses[c][b] == "skipped" and package not in run.records[c][b].get("message", ""))
        }
        affected = [s for per in statuses.values() for b, s in per.items() if b in gone]
        tally.check(
            run.ret == 0
            and reason in run.output
            and "SKIPPED" in run.output
            and all(s == "skipped" for s in affected)
            and ("env.sum.2", "numpy") in computed,
            f"exit {run.ret}\n{run.output[-2500:]}",
        )
        tally.keep(len(present), len(computed))
        tallies.append(tally)
    return tallies


OOM_CLAIMS = '''\
from verified_book.authoring.registry import claim


@claim("oom.torch_error", kind="library", backends=("torch:cpu",))
def torch_error(backend):
    """Asks for more device memory than there is (as torch reports it)."""
    import torch

    raise torch.cuda.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 15.47 GiB")


@claim("oom.runtime_error", kind="library", backends=("torch:cpu",))
def runtime_error(backend):
    """The same, as older torch builds report it."""
    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.47 GiB total capacity)")


@claim("oom.after", kind="library", backends=("torch:cpu",))
def after(backend):
    """Computed after the out-of-memory claims: still runs."""
    return int(backend.tensor([20, 22]).sum())
'''


def out_of_memory(root: Path) -> Tally:
    """A CUDA device that runs out of memory in one claim: that claim fails alone, with a clear message."""
    import re

    tally = Tally(
        "environment",
        "device out of memory in one claim",
        "that claim fails alone saying so; every other claim recorded",
    )
    book = SampleBook.basic(root / "oom")
    book.claims("oom", OOM_CLAIMS)
    book.page("oom.md", "The sum is [42](claim:oom.after).\n")
    run = book.run()
    statuses = run.statuses()
    for cid, kind in (("oom.torch_error", "OutOfMemoryError"), ("oom.runtime_error", "RuntimeError")):
        said = re.search(
            rf"claim {re.escape(cid)} on torch:cpu: ran out of device memory on torch:cpu \(at .*\): "
            rf"{kind}: CUDA out of memory",
            run.output,
        )
        tally.check(bool(said) and statuses.get(cid, {}).get("torch:cpu") == "failed", f"{cid}\n{run.output[-2500:]}")
    others = {(c, b) for c, per in statuses.items() for b in per if not c.startswith("oom.") or c == "oom.after"}
    kept = {(c, b) for (c, b) in others if statuses[c][b] == "verified"}
    tally.keep(len(others), len(kept))
    return tally


def keyboard_interrupt(root: Path) -> Tally:
    """Ctrl-C during a probe: the run stops, and every record made before it is in the results file."""
    tally = Tally(
        "environment", "Ctrl-C during a claim", "the run stops as interrupted; every record made before it is written"
    )
    book = SampleBook.basic(root / "interrupt")
    book.claims(
        "zz",
        '''
        from verified_book.authoring.registry import claim


        @claim("zz.probe", kind="exact")
        def probe():
            """A long probe the reader interrupts."""
            raise KeyboardInterrupt
    ''',
    )
    book.page("later.md", "Never reached: [1](claim:zz.probe).\n")
    run = book.run()
    expected = basic_pairs()
    kept = expected & _pairs(run.records)
    tally.keep(len(expected), len(kept))
    tally.check(
        run.ret == 2 and "KeyboardInterrupt" in run.output and "results: " in run.output,
        f"exit {run.ret}\n{run.output[-2000:]}",
    )
    return tally


INTERRUPTED_CLAIMS = '''\
from verified_book.authoring.registry import claim


@claim("late.item.{i}", kind="exact", over={"i": (1, 2, 3)})
def item(i):
    """A figure on the page the run is stopped at."""
    return i * 10


@claim("late.vram", kind="measured", hardware="rtx5080")
def vram(backend):
    """About a GPU this machine is not: not computable here, whether the run is stopped or not."""
    return 16
'''

#: the run holds at the second late claim's check, after saying so, until it is interrupted: the basic claims and
#: the first late one are judged by then, the other two late ones and every figure are not
INTERRUPTED_CONFTEST = """
import os
import time
from pathlib import Path


def pytest_runtest_setup(item):
    if item.nodeid.endswith("late.item.2[none]"):
        Path(os.environ["CLAIMS_STARTED"]).touch()
        time.sleep(120)
"""

#: what a whole-book run stopped by Ctrl-C says of the figures it never reached, and of the one it cannot compute
INTERRUPTED_SAYS = ("0 verified", "1 not computable here", "5 not run (interrupted)")


def interrupted_whole_run(root: Path) -> Tally:
    """Ctrl-C (SIGINT) to `verified-book verify` of a whole book, after some claims were judged: the verdict and
    the summary table count what the run never reached as not run (interrupted), apart from what this machine
    cannot compute, and every record made before it is in the results file."""
    tally = Tally(
        "environment",
        "Ctrl-C part-way through a whole-book verify",
        "what it never ran counted apart, as not run (interrupted); every record made before it written",
    )
    book = SampleBook.basic(root / "interrupted-run")
    book.claims("late", INTERRUPTED_CLAIMS)
    book.page("z-late.md", "Reached last: [10](claim:late.item.1), [20](claim:late.item.2), [30](claim:late.item.3).\n")
    book.page("hardware.md", "The card holds [16](claim:late.vram) GB.\n")
    book.conftest(INTERRUPTED_CONFTEST)
    started = book.root / "started"
    env = {**book.env(absent=("torch", "mlx")), "CLAIMS_STARTED": str(started)}
    command = [sys.executable, "-c", "from verified_book.integration.cli import run; run()", "verify"]
    proc = subprocess.Popen(
        command, cwd=book.root, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    reached = _wait_for(started, 120, proc)
    if reached:
        proc.send_signal(signal.SIGINT)
    run = book.finish(proc)
    lines = run.output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("verified-book: interrupted")), len(lines))
    verdict = " ".join(lines[start:])  # its first line, then the figures and the records, indented
    here = {(c, b) for c, b in basic_pairs() if not b.startswith(("torch", "mlx"))}  # as the run sees this machine
    expected = here | {("late.item.1", "none")}
    tally.keep(len(expected), len(expected & _pairs(run.records)))
    table = summary_rows(run.output)
    tally.check(
        reached
        and run.ret == 130
        and all(words in verdict for words in INTERRUPTED_SAYS)
        and table.get(NO_BACKEND_NAME, {}).get("not_run") == 2
        and not {c for c, _ in _pairs(run.records)} & {"late.item.2", "late.item.3"},
        f"exit {run.ret}\n{run.output[-2500:]}",
    )
    return tally


NETWORK_CLAIMS = '''\
import os
import socket

from verified_book.authoring.registry import claim


@claim("net.reach", kind="exact")
def reach():
    """Reaches for a server away from this machine."""
    with socket.create_connection(("192.0.2.1", 80), timeout=5):
        return 1


@claim("net.offline", kind="exact")
def offline():
    """How many of the hub's offline switches are on during the run."""
    return sum(os.environ.get(k) == "1" for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
'''


def network(root: Path) -> Tally:
    """A claim that reaches for the network fails alone; the hub's offline switches are on for the run."""
    import re

    tally = Tally(
        "environment",
        "a claim reaching for the network",
        "refused with the address named; that claim fails alone; the hub is offline for the run",
    )
    book = SampleBook.basic(root / "network")
    with (book.root / "book.toml").open("a") as f:
        f.write("offline = true\n")  # as this book's own book.toml says: the run, not its caller, turns the network off
    book.claims("net", NETWORK_CLAIMS)
    book.page("net.md", "Both switches are on: [2](claim:net.offline).\n")
    run = book.run()
    statuses = run.statuses()
    said = re.search(
        r"claim net\.reach on none: raised NetworkRefused: network access is off during verification: "
        r"connection to \('192\.0\.2\.1', 80\) refused",
        run.output,
    )
    tally.check(
        bool(said)
        and statuses.get("net.reach", {}).get("none") == "failed"
        and statuses.get("net.offline", {}).get("none") == "verified",
        run.output[-2000:],
    )
    others = {(c, b) for c, per in statuses.items() for b in per if c != "net.reach"}
    tally.keep(len(others), len({(c, b) for (c, b) in others if statuses[c][b] == "verified"}))
    return tally


# ---------------------------------------------------------------- results that stay true from any machine

FRAGILE_CLAIMS = '''\
from verified_book.authoring.registry import claim


@claim("fragile.sum", kind="library", backends=("numpy",))
def fragile_sum(backend):
    """Two and two, summed by a library that a broken install can no longer load."""
    import fragile_lib

    return fragile_lib.total(backend, [2, 2])
'''

FRAGILE_LIB = """\
from pathlib import Path

if (Path(__file__).parent / "BROKEN").exists():  # a compiled part of the library gone from the install
    raise ImportError("libfragile.so.1: cannot open shared object file: No such file or directory", name="fragile_lib")


def total(backend, values):
    return int(backend.tensor(values).sum())
"""

FRAGILE_PAGE = "The sum is [4](claim:fragile.sum), and [16.6](claim:basic.ratio) is a ratio.\n"


def _fragile_book(root: Path) -> SampleBook:
    book = SampleBook.basic(root)
    book.claims("fragile", FRAGILE_CLAIMS)
    (root / "fragile_lib").mkdir(exist_ok=True)
    (root / "fragile_lib" / "__init__.py").write_text(FRAGILE_LIB)
    book.page("fragile.md", FRAGILE_PAGE)
    return book


def _contribute(book: SampleBook, into: Path) -> tuple[int, str]:
    """`verified-book contribute` of the book's results file into another folder: its exit code and what it said."""
    from verified_book.engine import merge
    from verified_book.engine.config import read_config

    out = io.StringIO()
    saved = os.getcwd()
    os.chdir(book.root)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = merge.main([str(book.results_file), "--into", str(into)], book=read_config(book.root))
    finally:
        os.chdir(saved)
        book.forget_modules()
    return code, out.getvalue()


def library_fails_to_import(root: Path) -> Tally:
    """A library that stops importing between two runs (its shared object gone): the claims that need it are
    not failed but not checked, said in one line; the earlier records stand; contribute refuses the run."""
    tally = Tally(
        "environment",
        "a library fails to import during a run",
        "its claims are not recorded as failed: one line says what the environment lost and how to mend "
        "it, the verified records stand, contribute refuses the run, the run exits non-zero",
    )
    book = _fragile_book(root / "fragile")
    first = book.run()
    before = {cid: {b: r.get("status") for b, r in per.items()} for cid, per in first.records.items()}
    (root / "fragile" / "fragile_lib" / "BROKEN").write_text("")
    second = book.run()
    after = {cid: {b: r.get("status") for b, r in per.items()} for cid, per in second.records.items()}
    data = json.loads(book.results_file.read_text(encoding="utf-8"))
    code, said = _contribute(book, root / "fragile-contributed")
    line = "the environment lost fragile_lib during the run"
    tally.check(
        first.ret == 0
        and before.get("fragile.sum", {}).get("numpy") == "verified"
        and second.ret != 0
        and second.output.count(line) >= 1
        and "failed" not in after.get("fragile.sum", {}).values()
        and any(line in e for e in data["run"].get("environment_errors", []))
        and code != 0
        and "did not check everything" in said
        and not (root / "fragile-contributed").exists(),
        f"first exit {first.ret}, second exit {second.ret}, contribute {code}\n{second.output[-2500:]}\n{said}",
    )
    expected = {(c, b) for c, per in before.items() for b, s in per.items() if s == "verified"}
    kept = {(c, b) for (c, b) in expected if after.get(c, {}).get(b) == "verified"}
    tally.keep(len(expected), len(kept))
    return tally


VANISHING_CLAIMS = '''\
import os
import shutil
import sys

from verified_book.authoring.registry import claim


@claim("vanish.a_first", kind="exact")
def first():
    """Computed first: in the fault's run it removes the interpreter's own virtual environment."""
    if os.environ.get("SAMPLE_REMOVE_VENV") == sys.prefix:
        shutil.rmtree(sys.prefix)
    return 3


@claim("vanish.b_after", kind="exact")
def after():
    """Computed after: imports a module that lived in that virtual environment."""
    import vanishing

    return vanishing.SEVEN
'''


def venv_removed_mid_run(root: Path) -> Tally:
    """The run's virtual environment deleted while it runs: what it could no longer ask is not recorded as
    failed, one line says the environment is gone, earlier records stand, the run exits non-zero."""
    import venv

    tally = Tally(
        "environment",
        "the virtual environment removed mid-run",
        "one line says the environment is gone and how to mend it; no claim is recorded as failed for it; "
        "the verified records stand; the run exits non-zero",
    )
    book = SampleBook.basic(root / "vanish")
    book.claims("vanish", VANISHING_CLAIMS)
    book.page("vanish.md", "The first is [3](claim:vanish.a_first) and the second [7](claim:vanish.b_after).\n")
    module = "SEVEN = 7\n"
    lib = root / "vanish-lib"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "vanishing.py").write_text(module)
    env = book.env()
    env["PYTHONPATH"] = os.pathsep.join([str(lib), env["PYTHONPATH"]])
    first = subprocess.run(book.command(), cwd=book.root, env=env, text=True, capture_output=True, timeout=300)
    before = {cid: {b: r.get("status") for b, r in per.items()} for cid, per in book.records().items()}
    throwaway = root / "throwaway-venv"
    venv.EnvBuilder(with_pip=False).create(throwaway)
    python = throwaway / "bin" / "python"
    site = next((throwaway / "lib").glob("python3*/site-packages"))
    (site / "vanishing.py").write_text(module)
    outer = [p for p in sys.path if p.endswith("site-packages")]
    env = book.env()
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(Path(__file__).resolve().parents[2]), *outer])
    env["SAMPLE_REMOVE_VENV"] = str(throwaway)
    second = subprocess.run(
        [str(python), "-m", "pytest"], cwd=book.root, env=env, text=True, capture_output=True, timeout=300
    )
    output = second.stdout + second.stderr
    after = {cid: {b: r.get("status") for b, r in per.items()} for cid, per in book.records().items()}
    tally.check(
        first.returncode == 0
        and before.get("vanish.b_after", {}).get("none") == "verified"
        and not throwaway.exists()
        and second.returncode != 0
        and f"the environment lost its virtual environment {throwaway}" in output
        and after.get("vanish.b_after", {}).get("none") == "verified"
        and "failed" not in str(after),
        f"first exit {first.returncode}, second exit {second.returncode}\n{first.stdout[-800:]}\n{output[-2500:]}",
    )
    expected = {(c, b) for c, per in before.items() for b, s in per.items() if s == "verified"}
    tally.keep(len(expected), len({(c, b) for (c, b) in expected if after.get(c, {}).get(b) == "verified"}))
    return tally


READER_MKDOCS = "site_name: sample\ndocs_dir: book\nplugins:\n  - verified-book\n"

#: a conftest whose machine has a GPU while GPU_PRESENT is set, as a box whose driver loads in some runs only
FLICKERING_GPU = """
import os


def pytest_claims_machine_info(machine_info):
    machine_info.update(cpu="Example CPU 2000", arch="x86_64", cores=2)
    if os.environ.get("GPU_PRESENT"):
        machine_info.update(gpu="Example GPU 1000", gpu_memory_gb=24.0, compute_capability="9.0")
    else:
        machine_info.update(gpu=None, gpu_memory_gb=None, compute_capability=None)
"""


class ReaderBook(SampleBook):
    """A sample book laid out as a clone is, run as a reader runs it: `verified-book verify` and `verified-book
    contribute` in a process of their own, writing to `results.local/`, with an identity file and a state folder
    of the book's own (so no run touches the reader's)."""

    def __init__(self, root: Path, package: str = "sample_claims") -> None:
        super().__init__(root, package)
        (root / "book.toml").write_text(BOOK_TOML.format(package=package) + 'local_results = "results.local"\n')
        (root / "mkdocs.yml").write_text(READER_MKDOCS)
        (root / "book" / "index.md").write_text("# Sample\n")
        self.identity_file = root / "home" / "machine.json"
        self.state = root / "home" / "state"

    @property
    def local(self) -> Path:
        return self.root / "results.local"

    def env(self, absent: Sequence[str] = ()) -> dict[str, str]:
        env = super().env(absent)
        env.pop(conditions.RUN_ENV, None)  # a reader's run, not one inside this test run
        env["VERIFIED_BOOK_MACHINE_FILE"] = str(self.identity_file)
        env["VERIFIED_BOOK_STATE_DIR"] = str(self.state)
        return env

    def cli(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "verified_book.integration.cli", *args],
            cwd=self.root,
            env={**self.env(), **env},
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=300,
        )

    def local_records(self, name: str = SLUG) -> dict[str, dict[str, Any]]:
        path = self.local / f"{name}.json"
        return json.loads(path.read_text(encoding="utf-8")).get("records", {}) if path.exists() else {}


def _last_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@contextlib.contextmanager
def _unwritable(folder: Path) -> Any:
    """`folder` made immutable (chattr +i), as a reader's disk or a mount can make it; where that cannot be done
    here, its path is taken by a file. Either way a run cannot write its records there; undone at the end."""
    folder.mkdir(parents=True, exist_ok=True)
    immutable = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
    saved = None
    if not immutable:
        saved = folder.with_name(folder.name + ".saved")
        folder.rename(saved)
        folder.write_text("a file where the results folder should be\n")
    try:
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        elif saved is not None:
            folder.unlink()
            saved.rename(folder)


def unwritable_results(root: Path) -> Tally:
    """`results.local/` that cannot be written: the run exits non-zero, its verdict says the book holds and that
    the records were not saved, and its last line names the file that keeps them; `contribute` takes them from
    there, and the next run that can write the folder takes them in and says so."""
    tally = Tally(
        "results store",
        "results folder cannot be written",
        "the run exits non-zero; its verdict says the book holds, the records were not saved, and (last) the file "
        "that keeps them; contribute and the next run take them from there",
    )
    book = ReaderBook(root / "unwritable")
    book.claims("basic", BASIC_CLAIMS)
    book.page("page.md", BASIC_PAGE)
    first = book.cli("verify", "-q")
    with _unwritable(book.local):
        blocked = book.cli("verify", "-q")
        last = _last_line(blocked.stdout)
        named = Path(last.rpartition(" kept in ")[2])
        kept = json.loads(named.read_text()).get("records", {}) if named.is_file() else {}
        contributed = book.cli("contribute")
    taken = book.cli("verify", "-q")
    committed = json.loads((book.root / "results" / f"{SLUG}.json").read_text()).get("records", {})
    expected = basic_pairs()
    tally.check(
        first.returncode == 0
        and blocked.returncode != 0
        and last.startswith(f"verified-book: verified on {SLUG}: ")
        and "records NOT saved: " in last
        and named.is_relative_to(book.state)
        and contributed.returncode == 0
        and named.as_posix() in contributed.stdout
        and taken.returncode == 0
        and "took in the records of an earlier run that could not write them" in taken.stdout
        and not named.exists(),
        f"exits {first.returncode}, {blocked.returncode}, contribute {contributed.returncode}, "
        f"{taken.returncode}\n{blocked.stdout[-2500:]}\n{contributed.stdout[-1500:]}\n{taken.stdout[-1500:]}",
    )
    tally.keep(len(expected), len(expected & _pairs(kept) & _pairs(committed) & _pairs(book.local_records())))
    return tally


def bad_record_among_hundreds(root: Path, count: int = 400) -> Tally:
    """One misspelt status among hundreds of records in a machine's results file: the next run keeps every other
    record, sets that one aside with its key path and reason, and says how many of each."""
    tally = Tally(
        "results store",
        "one bad record among hundreds",
        "every other record kept; the bad one set aside to a side file with its key path and reason; the run "
        "says how many were kept and set aside",
    )
    book = ReaderBook(root / "bad-record")
    book.claims("many", SUBSET_CLAIMS.format(prefix="many", count=count, offset=0))
    book.page("page.md", "The item is [7](claim:many.item.1).\n")
    first = book.cli("verify", "-q")
    path = book.local / f"{SLUG}.json"
    data = json.loads(path.read_text())
    before = _pairs(data["records"])
    data["records"]["many.item.200"]["none"]["status"] = "verifed"
    path.write_text(json.dumps(data, indent=2))
    second = book.cli("verify", "-q", "-k", "many and item and 1")
    sides = sorted(book.local.glob(f"{SLUG}.json.set-aside-*"))
    aside = json.loads(sides[0].read_text()) if len(sides) == 1 else []
    after = _pairs(book.local_records())
    tally.check(
        first.returncode == 0
        and second.returncode == 0
        and [a["at"] for a in aside] == ["['records']['many.item.200']['none']"]
        and "verifed" in aside[0]["why"]
        and f"{len(before) - 1} records kept, 1 set aside" in second.stdout
        and not list(book.local.glob(f"{SLUG}.json.corrupt-*")),
        f"exits {first.returncode}, {second.returncode}, side files {sides}\n{second.stdout[-2500:]}",
    )
    kept_elsewhere = {("many.item.200", "none")} if aside and aside[0]["value"].get("status") == "verifed" else set()
    tally.keep(len(before), len(before & (after | kept_elsewhere)))
    return tally


def gpu_lost_and_regained(root: Path) -> Tally:
    """A box whose GPU driver fails to load for one run: it stays the machine it was (one name, one results file),
    the run header says no GPU was found, and when the GPU is back nothing is renamed."""
    tally = Tally(
        "results store",
        "a box loses its GPU for one run, then regains it",
        "one name before, during and after; the run without the GPU says so; one results file keeps every run's "
        "records",
    )
    book = ReaderBook(root / "flicker")
    book.claims("basic", BASIC_CLAIMS)
    book.page("page.md", BASIC_PAGE)
    book.conftest(FLICKERING_GPU)
    (book.root / "pytest.ini").write_text(INI.format(package=book.package, slug=SLUG).replace(f" --machine {SLUG}", ""))
    with_gpu = book.cli("verify", GPU_PRESENT="1")
    named = json.loads(book.identity_file.read_text())["name"] if book.identity_file.exists() else "?"
    records = book.local_records(named)
    without = book.cli("verify")
    during = book.local_records(named)
    back = book.cli("verify", GPU_PRESENT="1")
    files = sorted(p.name for p in book.local.glob("*.json"))
    kept = json.loads(book.identity_file.read_text())
    tally.check(
        with_gpu.returncode == 0
        and without.returncode == 0
        and back.returncode == 0
        and "no GPU this run" in without.stdout
        and f"it is still {named}" in without.stdout
        and "machine identity" not in back.stdout
        and files == [f"{named}.json"]
        and kept["name"] == named
        and not kept.get("previous")
        and json.loads((book.local / f"{named}.json").read_text())["machine"]["fingerprint"].get("gpu")
        == "Example GPU 1000",
        f"exits {with_gpu.returncode}, {without.returncode}, {back.returncode}; files {files}; identity {kept}\n"
        f"{without.stdout[-2500:]}\n{back.stdout[-1500:]}",
    )
    expected = _pairs(records) | _pairs(during)
    tally.keep(len(expected), len(expected & _pairs(book.local_records(named))))
    return tally


def second_machine(root: Path) -> Tally:
    """Another machine of the same name (a second 2-core box) runs the book into the first one's file, then
    contributes: both are refused, naming both machines; the first machine's records are untouched; the
    second machine's are kept aside, and the run exits non-zero."""
    tally = Tally(
        "results store",
        "a second machine writes under the first one's name",
        "refused, naming both machines; the first machine's file unchanged; the second's records kept "
        "aside; the run exits non-zero; contribute refuses as well",
    )
    first_identity, second_identity = root / "first-machine.json", root / "second-machine.json"
    book = SampleBook.basic(root / "two-machines")
    saved = os.environ.get("VERIFIED_BOOK_MACHINE_FILE")
    try:
        os.environ["VERIFIED_BOOK_MACHINE_FILE"] = str(first_identity)
        first = book.run()
        committed = book.results_file.read_bytes()
        os.environ["VERIFIED_BOOK_MACHINE_FILE"] = str(second_identity)
        second = book.run()
        elsewhere = root / "second-clone"
        other = SampleBook.basic(elsewhere)
        other_run = other.run()
        code, said = _contribute(other, book.results_dir)
    finally:
        if saved is None:
            os.environ.pop("VERIFIED_BOOK_MACHINE_FILE", None)
        else:
            os.environ["VERIFIED_BOOK_MACHINE_FILE"] = saved
    ids = [json.loads(p.read_text())["id"] for p in (first_identity, second_identity)]
    aside = sorted(book.results_dir.glob(f"{SLUG}.json.unmerged-*"))  # beside the file it was refused by
    named = all(i in second.output for i in ids) and all(i in said for i in ids)
    tally.check(
        first.ret == 0
        and second.ret != 0
        and other_run.ret == 0
        and code != 0
        and named
        and "Two machines never share a results file" in second.output
        and book.results_file.read_bytes() == committed
        and len(aside) == 1,
        f"exits {first.ret}, {second.ret}, {other_run.ret}, contribute {code}\n{second.output[-2500:]}\n{said}",
    )
    expected = len(first.records) and sum(len(per) for per in first.records.values())
    kept = sum(len(per) for per in book.records().values()) if book.results_file.read_bytes() == committed else 0
    tally.keep(expected, kept)
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
