"""Results that stay true from any reader's machine: a broken library, a vanished venv, unwritable results."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

from harness.faults.common import (
    BASIC_CLAIMS,
    BASIC_PAGE,
    BOOK_TOML,
    INI,
    SLUG,
    SampleBook,
    Tally,
    _pairs,
    basic_pairs,
)
from harness.faults.concurrency import SUBSET_CLAIMS
from harness.paths import ROOT
from verified_book.records import conditions, store
from verified_book.records.results import dumps

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
import sqlite3
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
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(ROOT), *outer])
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
import sqlite3


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
        """The records of this clone's own history (its store), as the exchange file would hold them."""
        history = store.Store(store.place(self.local, name))
        return json.loads(dumps(history.read())).get("records", {}) if history.exists() else {}


def _last_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _verdict(output: str) -> str:
    """The verdict's lines: the last that begins `verified-book: ` with what held, and the indented lines after it."""
    lines = [line for line in output.splitlines() if line.strip()]
    start = max((i for i, line in enumerate(lines) if line.startswith("verified-book: ")), default=len(lines))
    return "\n".join(lines[start:])


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
        verdict = _verdict(blocked.stdout)
        named = Path(last.rpartition(" kept in ")[2].strip())  # the path alone where the line wraps before it
        kept = json.loads(named.read_text()).get("records", {}) if named.is_file() else {}
        contributed = book.cli("contribute")
    taken = book.cli("verify", "-q")
    committed = json.loads((book.root / "results" / f"{SLUG}.json").read_text()).get("records", {})
    expected = basic_pairs()
    tally.check(
        first.returncode == 0
        and blocked.returncode != 0
        and verdict.startswith(f"verified-book: verified on {SLUG}\n")
        and "records NOT saved:" in verdict
        and verdict.endswith(last)
        and named.is_relative_to(book.state)
        and contributed.returncode == 0
        and named.as_posix() in contributed.stdout
        and taken.returncode == 0
        and "took in the records of an earlier run that could not write them" in taken.stdout
        and f"\n{store.place(book.local, SLUG)}: took in" in taken.stdout  # on a line of its own, not after -q's dots
        and not named.exists(),
        f"exits {first.returncode}, {blocked.returncode}, contribute {contributed.returncode}, "
        f"{taken.returncode}\n{blocked.stdout[-2500:]}\n{contributed.stdout[-1500:]}\n{taken.stdout[-1500:]}",
    )
    tally.keep(len(expected), len(expected & _pairs(kept) & _pairs(committed) & _pairs(book.local_records())))
    return tally


def bad_record_among_hundreds(root: Path, count: int = 400) -> Tally:
    """One misspelt status among hundreds of records in a machine's own history: the next run keeps every other
    record, sets that one aside with its key path and reason, and says so, naming the store and the claim."""
    tally = Tally(
        "results store",
        "one bad record among hundreds",
        "every other record kept; the bad one set aside to a side file with its key path and reason; the run "
        "says so, naming the store and the claim",
    )
    book = ReaderBook(root / "bad-record")
    book.claims("many", SUBSET_CLAIMS.format(prefix="many", count=count, offset=0))
    book.page("page.md", "The item is [7](claim:many.item.1).\n")
    first = book.cli("verify", "-q")
    path = store.place(book.local, SLUG)
    before = _pairs(book.local_records())
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        (text,) = db.execute("SELECT record FROM records WHERE claim = 'many.item.200' AND backend = 'none'").fetchone()
        db.execute(
            "UPDATE records SET record = ? WHERE claim = 'many.item.200' AND backend = 'none'",
            (json.dumps({**json.loads(text), "status": "verifed"}),),
        )
    second = book.cli("verify", "-q", "-k", "many and item and 1")
    sides = sorted(book.local.glob(f"{path.name}.set-aside-*"))
    aside = json.loads(sides[0].read_text()) if len(sides) == 1 else []
    after = _pairs(book.local_records())
    tally.check(
        first.returncode == 0
        and second.returncode == 0
        and [a["at"] for a in aside] == ["['records']['many.item.200']['none']"]
        and "status" in aside[0]["why"]
        and f"{path}['records']['many.item.200']['none']" in second.stdout.replace("\n", "")
        and not list(book.local.glob(f"{path.name}.corrupt-*")),
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
    files = sorted(p.name for p in book.local.glob(f"*{store.SUFFIX}"))
    kept = json.loads(book.identity_file.read_text())
    tally.check(
        with_gpu.returncode == 0
        and without.returncode == 0
        and back.returncode == 0
        and "no GPU this run" in without.stdout
        and f"it is still {named}" in without.stdout
        and "machine identity" not in back.stdout
        and files == [store.place(book.local, named).name]
        and kept["name"] == named
        and not kept.get("previous")
        and store.Store(store.place(book.local, named)).read().machine.fingerprint.get("gpu") == "Example GPU 1000",
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
