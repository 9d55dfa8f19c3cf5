"""The sample book the scenarios build, run and count: its pages, claims, profiles and tallies."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.paths import ROOT

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

PROFILES = ROOT / "claims" / "data" / "hardware"


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

    @property
    def started(self) -> Path:
        """The file a run started by `verify_apart` is told to make once it has started (`CLAIMS_STARTED`)."""
        return self.root / "started"

    def verify_apart(self, *args: str, absent: Sequence[str] = ()) -> subprocess.Popen[str]:
        """Start `verified-book verify` of this book in a process of its own, told where to say it has started
        (`started`) and reached by Ctrl-C as from a terminal (`_ctrl_c_reachable`); collect it with `finish`."""
        command = [sys.executable, "-c", "from verified_book.integration.cli import run; run()", "verify", *args]
        return subprocess.Popen(
            command,
            cwd=self.root,
            env={**self.env(absent), "CLAIMS_STARTED": str(self.started)},
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=_ctrl_c_reachable,
        )

    def finish(self, proc: subprocess.Popen[str], timeout: float = 120) -> Run:
        output, _ = proc.communicate(timeout=timeout)
        return Run(proc.returncode, output, self.records())

    def run_apart(self, *args: str, absent: Sequence[str] = ()) -> Run:
        return self.finish(self.spawn(*args, absent=absent))


def _ctrl_c_reachable() -> None:
    """In a child about to start (`preexec_fn`): SIGINT at its default, so the child's Python turns it into
    KeyboardInterrupt. A shell that starts a suite in the background starts it with SIGINT ignored, every child
    inherits that, and Python then installs no handler: a test's Ctrl-C would never arrive, and the run it meant
    to stop would run on to the test's timeout."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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
