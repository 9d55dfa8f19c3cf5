"""`--changed` reads and judges only the records whose sources moved (`verified_book.engine.footprints`), and says
what the one rule says: for each edit of the rule's table, and a figure of a recorded claim printed on a new page,
a run that trusts the footprints reruns, judges again and leaves unchanged exactly what a run that judges every
record does (the same store, its footprints removed), and each figure both check ends the same; it collects less.

Each run is a process of its own, as an author's is: a claims module saved after a process loaded it has no
digest there, so a run in this test's process would trust no footprint."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
from harness.edits import EDITS, Edit, add_lab
from harness.live_book import opened_copy, started

from verified_book.engine.footprints import ENGINE
from verified_book.vocabulary import fingerprint

NEW_PAGE = Edit("a recorded claim's figure on a new page", "pages/more.md", "", "Again: [65504](claim:half.max).\n", ())
ROWS = [*EDITS, NEW_PAGE]
QUICK = ("a printed figure", "a helper the claim calls", NEW_PAGE.name)  # the rest run with the slow tests
FIGURE = re.compile(r"^(pages/\S+::line .*?) (PASSED|FAILED|SKIPPED|XFAIL)")
SAID = ("  rerun ", "  rejudged ", "  unchanged ", "--changed: ")
COLLECTED = re.compile(r"collected (\d+) items")


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """The lab book with a local store, run whole once: its root, and a copy of the store that run wrote."""
    with opened_copy(tmp_path_factory.mktemp("footprints") / "minimal") as root:
        add_lab(root)
        with (root / "book.toml").open("a") as toml:
            toml.write('local_results = "results.local"\n')
        first = _pytest(root)
        assert first.returncode in (0, 1), first.stdout + first.stderr
        (store,) = (root / "results.local").glob("*.sqlite")
        pristine = root.parent / "pristine.sqlite"
        shutil.copy(store, pristine)
        yield store, pristine


def _save(path: Path, text: str) -> None:
    """`path` saved with `text`, dated before any run that reads it: what tells a run the edit is the content, and
    a file dated after a run opened the book would be judged whatever its content."""
    path.write_text(text)
    earlier = time.time() - 10
    os.utime(path, (earlier, earlier))


def _restore(store: Path, pristine: Path, *, footprints: bool, numpy: str | None) -> None:
    """The store as the whole run left it; without its footprints, or with numpy's records made on `numpy`."""
    for extra in ("-wal", "-shm"):
        Path(f"{store}{extra}").unlink(missing_ok=True)
    shutil.copy(pristine, store)
    with sqlite3.connect(store) as db:
        if numpy is not None:
            db.execute("UPDATE records SET record = json_set(record, '$.version', ?) WHERE backend = 'numpy'", (numpy,))
            db.execute("UPDATE sources SET digest = ? WHERE source = 'library:numpy'", (numpy,))
        if not footprints:
            db.execute("DELETE FROM footprints")
    db.close()


def _said(run: subprocess.CompletedProcess[str]) -> tuple[int, list[str], list[str]]:
    lines = run.stdout.splitlines()
    figures = sorted(f"{m[1]} {m[2]}" for line in lines if (m := FIGURE.match(line)))
    return run.returncode, sorted(line for line in lines if line.startswith(SAID)), figures


@pytest.mark.parametrize(
    "edit", [pytest.param(e, marks=() if e.name in QUICK else pytest.mark.slow, id=e.name) for e in ROWS]
)
def test_changed_trusting_footprints_says_what_judging_every_record_says(
    edit: Edit, recorded: tuple[Path, Path]
) -> None:
    store, pristine = recorded
    root = store.parent.parent
    path = root / edit.file
    before = path.read_text() if edit.file and path.exists() else None
    numpy = "0.0.1" if not edit.file else None
    try:
        if edit.file:
            assert before is None or before.count(edit.old) == 1, f"{edit.file}: {edit.old!r} is not there once"
            _save(path, edit.new if before is None else before.replace(edit.old, edit.new))
        _restore(store, pristine, footprints=True, numpy=numpy)
        trusting = _pytest(root, "-v", "--changed")
        _restore(store, pristine, footprints=False, numpy=numpy)
        judging = _pytest(root, "-v", "--changed")
    finally:
        if before is None and edit.file:
            path.unlink()
        elif before is not None:
            _save(path, before)
        _restore(store, pristine, footprints=True, numpy=None)
    assert judging.returncode in (0, 1), judging.stdout + judging.stderr
    assert _said(trusting) == _said(judging), trusting.stdout
    assert any(line.startswith("  unchanged ") for line in _said(judging)[1]), "the edit leaves some record unchanged"
    collected = [int(m[1]) for run in (trusting, judging) if (m := COLLECTED.search(run.stdout))]
    assert collected[0] < collected[1], "the unchanged records' checks are not even collected"
    for claim in edit.invalidates:
        assert any(line.startswith(f"  rerun     {claim}[") for line in _said(trusting)[1]), claim


def test_a_page_s_changed_run_counts_what_it_leaves_outdated_on_other_pages_alike(
    recorded: tuple[Path, Path],
) -> None:
    """A run of one page that writes records counts, in its table, the records of other pages an edit outdated:
    trusting footprints, it reads those too (their sources moved), so it counts what judging every record does."""
    store, pristine = recorded
    root = store.parent.parent
    data, page = root / "book_claims" / "data" / "formats.toml", root / "pages" / "lab.md"
    texts = {path: path.read_text() for path in (data, page)}
    tables = []
    try:
        _save(data, texts[data].replace("value = 5\n", "value = 6\n"))  # half.max, on pages/index.md
        _save(page, texts[page].replace("[0.500]", "[0.501]"))  # lab.ms is judged again, and its record written
        for footprints in (True, False):
            _restore(store, pristine, footprints=footprints, numpy=None)
            run = _pytest(root, "--changed", "pages/lab.md")
            tables.append([line.split() for line in run.stdout.splitlines() if line.startswith(("none ", "all "))])
    finally:
        for path, text in texts.items():
            _save(path, text)
        _restore(store, pristine, footprints=True, numpy=None)
    header = "selected verified cited premise unsourced stale failed disputed reference outdated skipped".split()
    assert tables[0] == tables[1] and tables[0], tables
    assert tables[0][0][1 + header.index("outdated")] == "1", "half.max's record, left outdated on another page"


def test_records_the_rule_finds_current_are_footprinted_again_so_the_next_run_need_not_read_them(
    recorded: tuple[Path, Path],
) -> None:
    """After the engine that judges them changed (an upgrade), no footprint holds: `--changed` reads every record
    and judges it by the rule, and writes the footprint of each it finds current, so the next run collects what a
    run whose footprints all held collects, and says the same."""
    store, pristine = recorded
    root = store.parent.parent
    try:
        _restore(store, pristine, footprints=True, numpy=None)
        held = _pytest(root, "-v", "--changed")
        with sqlite3.connect(store) as db:
            db.execute("UPDATE sources SET digest = 'another engine' WHERE source = ?", (ENGINE,))
        db.close()
        judged = _pytest(root, "-v", "--changed")
        again = _pytest(root, "-v", "--changed")
    finally:
        _restore(store, pristine, footprints=True, numpy=None)
    collected = [int(m[1]) for run in (held, judged, again) if (m := COLLECTED.search(run.stdout))]
    assert collected[0] < collected[1] and collected[2] == collected[0], collected
    assert _said(again) == _said(held) and _said(judged)[0] == held.returncode, again.stdout


def test_serve_writes_each_record_with_its_footprint_as_a_run_does(tmp_path: Path) -> None:
    """Records `serve` wrote keep their footprints, so that `--changed` after a preview still reads only what an
    edit moved; a page saved while serve ran is digested as serve read it."""
    with opened_copy(tmp_path / "minimal") as root:
        with (root / "book.toml").open("a") as toml:
            toml.write('local_results = "results.local"\n')
        warm = started(root)
        warm.written()
        page = root / "pages" / "index.md"
        _save(page, page.read_text().replace("# Half precision", "# Half precision, in short"))
        warm.look()
        warm.written()
        (store,) = (root / "results.local").glob("*.sqlite")
        with sqlite3.connect(store) as db:
            rows = db.execute(
                "SELECT f.claim, s.source, s.digest FROM footprints f JOIN sources s ON s.id = f.source"
            ).fetchall()
            records = {claim for (claim,) in db.execute("SELECT claim FROM records")}
        db.close()
    assert records and {claim for claim, _, _ in rows} == records, "every record serve wrote has its footprint"
    digests = {(source, digest) for _, source, digest in rows if source == "file:pages/index.md"}
    assert digests == {("file:pages/index.md", fingerprint(page.read_bytes()))}, "the page as serve read it"
