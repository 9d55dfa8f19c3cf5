"""The synthetic book the scale benchmark measures, and the promise that no size limit loses a machine's history.

The benchmark itself (benchmarks/scale.py) is not run here: it takes minutes at this book's size and hours at
64 times it. These tests pin what it stands on: the generated book is a book the engine verifies whole, and a
results file larger than the store's size limit is read back by the next run, never set aside.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from harness.paths import ROOT

from benchmarks import synthetic_book
from verified_book.records import store

LOWERED_LIMIT = 20_000  # bytes: a two-page book's results file is several times this


def test_a_synthetic_page_holds_the_books_mix_of_claims_and_figures(tmp_path: Path) -> None:
    book = synthetic_book.write(tmp_path, pages=2)
    per_page = synthetic_book.GIVEN + synthetic_book.QUOTED + synthetic_book.EXACT + synthetic_book.LIBRARY
    assert book.claims == 2 * per_page
    # each claim printed once, the recap's twice, and the part's snippet output (on its first page only)
    assert book.figures == 2 * (per_page + 2 * synthetic_book.RECAP) + 2
    first = book.page(0).read_text()
    assert "$$" in first and "| Row | Derived | numpy |" in first and "```output part000.py" in first
    assert "```output" not in book.page(1).read_text()
    for module in (tmp_path / "book_claims" / "topics").glob("p*.py"):
        compile(module.read_text(), str(module), "exec")
    assert "from verified_book import" in (tmp_path / "book_claims" / "topics" / "p0000.py").read_text()
    assert "[p0001.g3]" in (tmp_path / "book_claims" / "data" / "given.toml").read_text()


def _pytest(book: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=book,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_a_history_past_the_size_limit_is_read_back_by_the_next_run(tmp_path: Path) -> None:
    """The book's runs lower the limit on contributed files (in their conftest) below the size of the history they
    write: the second run, of one page, finds every record of the first and sets nothing aside. A machine's own
    history is its store, which no limit applies to; benchmarks/scale.py shows a 64x book's second run."""
    book = synthetic_book.write(tmp_path, pages=2)
    with (tmp_path / "conftest.py").open("a", encoding="utf-8") as conftest:
        conftest.write(
            "\nimport verified_book.records.results as _store\n\n"
            f"_store.MAX_FILE_BYTES = {LOWERED_LIMIT}  # a large book's file, in small\n"
        )
    first = _pytest(tmp_path)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    (written,) = (tmp_path / "results.local").glob(f"*{store.SUFFIX}")
    exported = store.Store(written).export(tmp_path / "exported" / f"{written.stem}.json")
    assert exported.stat().st_size > LOWERED_LIMIT
    recorded = set(store.Store(written).read().records)
    assert len(recorded) == book.claims

    second = _pytest(tmp_path, "pages/p0001.md")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "kept aside" not in second.stdout + second.stderr
    assert not [
        p.name for p in (tmp_path / "results.local").iterdir() if ".corrupt-" in p.name or ".set-aside-" in p.name
    ]
    assert set(store.Store(written).read().records) == recorded


#: appended to a synthetic book's conftest: every row its runs write into the store, counted in a file
COUNT_ROWS = """
import atexit, pathlib
from verified_book.records import store as _store

_merge = _store.Store.merge
_written = {"records": 0, "rows": 0}


def _counted(self, *args, **kwargs):
    before = (self.records_written, self.rows_written)
    try:
        return _merge(self, *args, **kwargs)
    finally:
        _written["records"] += self.records_written - before[0]
        _written["rows"] += self.rows_written - before[1]


_store.Store.merge = _counted
atexit.register(lambda: pathlib.Path("rows-written.txt").write_text(f"{_written['records']} {_written['rows']}"))
"""


def _one_figure_edited(
    root: Path, pages: int, args: Callable[[str], list[str]]
) -> tuple[synthetic_book.Book, subprocess.CompletedProcess[str]]:
    """A synthetic book of `pages` at `root`, run whole, then run with `args(page)` (the page's path in the book)
    after one figure of that page is printed wrong (found stale), counting the rows the run writes into its store
    (`rows-written.txt`)."""
    from benchmarks import scale

    book = synthetic_book.write(root, pages=pages)
    first = _pytest(root)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    with (root / "conftest.py").open("a", encoding="utf-8") as conftest:
        conftest.write(COUNT_ROWS)
    page, right, wrong = scale.one_figure(book)
    scale.save(page, right, wrong)
    edited = _pytest(root, *args(page.relative_to(root).as_posix()))
    assert edited.returncode == 1 and "stale" in edited.stdout, edited.stdout[-3000:]
    return book, edited


@pytest.mark.slow
def test_a_one_figure_edit_rewrites_as_many_rows_whatever_the_books_size(tmp_path: Path) -> None:
    """The loop's scaling, without timing: after one figure is printed wrong in a book of 2 and of 8 pages (4x),
    the run of that page writes the same number of rows into the machine's history (its store)."""
    written = {}
    for pages in (2, 8):
        root = tmp_path / f"p{pages}"
        book, edited = _one_figure_edited(root, pages, lambda page: [page])
        records, rows = map(int, (root / "rows-written.txt").read_text().split())
        (history,) = (root / "results.local").glob(f"*{store.SUFFIX}")
        assert len(store.Store(history).read().records) == book.claims
        written[pages] = (records, rows)
    assert written[2] == written[8]
    assert 0 < written[2][0] < 2 * synthetic_book.PAGES_PER_SCALE * 10


def _counts(run: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """The outcomes in a run's last line (`2 failed, 4 passed, 139 deselected in 0.4s`), by outcome."""
    last = run.stdout.strip().splitlines()[-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (failed|passed|deselected|skipped|error)", last)}


@pytest.mark.slow
def test_changed_after_one_figure_edit_collects_computes_and_writes_as_much_whatever_the_books_size(
    tmp_path: Path,
) -> None:
    """The author's loop, without timing: after one figure is printed wrong in a book of 2 and of 8 pages (4x),
    `--changed` collects the same checks, reruns and judges again the same ones, and writes the same rows; the
    records of every other page are neither read nor collected (`verified_book.engine.footprints`)."""
    seen = {}
    for pages in (2, 8):
        root = tmp_path / f"p{pages}"
        book, edited = _one_figure_edited(root, pages, lambda _: ["-vv", "--changed"])
        counts = _counts(edited)
        said = [line for line in edited.stdout.splitlines() if line.startswith("--changed: ") and "rerun" in line]
        written = tuple(map(int, (root / "rows-written.txt").read_text().split()))
        seen[pages] = (sum(counts.values()), counts.get("failed"), said, written)  # collected, deselected too
        unchanged = sum(1 for line in edited.stdout.splitlines() if line.startswith("  unchanged "))
        assert unchanged == book.claims - 1, "every record but the edited figure's, which is judged again"
    assert seen[2] == seen[8]


def test_the_benchmark_fits_growth_between_4x_and_64x_over_the_sizes_it_has() -> None:
    from benchmarks import scale

    def entry(size: int) -> dict[str, object]:
        return {"full_run": {"seconds": 2.0 * size, "peak_mb": 100.0}, "records": {"bytes": 1000 * size**2}}

    fitted = scale.exponents({"1": entry(1), "4": entry(4), "16": entry(16), "64": entry(64)})
    assert fitted["full_run_s"] == {"exponent": 1.0, "sizes": [4, 16, 64]}
    assert fitted["results_bytes"]["exponent"] == 2.0 and fitted["full_run_peak_mb"]["exponent"] == 0.0
    assert "changed_s" not in fitted  # not measured: not fitted
    small = scale.exponents({"1": entry(1), "4": entry(4)})  # a run of the small sizes alone
    assert small["full_run_s"] == {"exponent": 1.0, "sizes": [1, 4]}


def _one_figure_edit(root: Path, pages: int) -> tuple[int, int, int, int]:
    """What the warm book does after one figure of a middle page is printed wrong: (claim, backend) pairs
    computed, pages shown again, figures judged, rows the machine's store wrote."""
    from harness import live_book

    book = synthetic_book.write(root, pages=pages)
    rows: list[int] = []
    merge = store.Store.merge

    def counted(self: store.Store, update: Any, *args: Any, **kwargs: Any) -> Any:
        before = self.rows_written
        try:
            return merge(self, update, *args, **kwargs)
        finally:
            rows.append(self.rows_written - before)

    live = live_book.started(root)
    try:
        store.Store.merge = counted  # type: ignore[method-assign]
        middle = pages // 2 + 1  # a part's first page also shows its snippet's output: this page is like every other
        page = book.page(middle)
        name = synthetic_book.page_name(middle)
        text = page.read_text()
        figure = re.search(rf"\[([1-9][^\]]*)\]\(claim:{re.escape(name)}\.exact\.e0\)", text)
        assert figure, f"{page}: no figure of {name}.exact.e0"
        wrong = figure.group(0).replace(f"[{figure.group(1)}]", f"[{int(figure.group(1)[0]) % 9 + 1}", 1)
        report = live_book.saving(live, page)(text.replace(figure.group(0), wrong + figure.group(1)[1:] + "]"))
        live.written()
    finally:
        store.Store.merge = merge  # type: ignore[method-assign]
        for module in [m for m in sys.modules if m.split(".")[0] == "book_claims"]:
            del sys.modules[module]
    assert not report.rebuild, "one figure edited: no page added or removed, the site is not built whole"
    assert rows, "the edit's records were written into the machine's store"
    return len(report.recomputed), len(report.pages), len(report.figures), sum(rows)


@pytest.mark.slow
def test_a_one_figure_edit_costs_the_same_in_a_book_sixteen_times_larger(tmp_path: Path) -> None:
    """The author's loop pinned without a clock: after one figure is printed wrong, the claims computed, the pages
    shown again, the figures judged and the rows the store rewrote are as many in a 256-page book as in a 16-page
    one."""
    small = _one_figure_edit(tmp_path / "small", 16)
    large = _one_figure_edit(tmp_path / "large", 256)
    assert small == large, f"computed, pages, figures, rows: {small} at 1x, {large} at 16x"
    assert small[0] == 0 and small[1] == 1, "a page edit computes no claim and shows one page again"


def test_a_run_that_skips_a_step_keeps_that_step_s_figures_with_their_date() -> None:
    """`--skip-site` at a size measured before keeps the site's figures of that size, dated when measured; a step
    the run did measure is the run's."""
    from benchmarks import scale

    before = {"date": "2031-01-01T00:00:00+0000", "full_run": {"seconds": 9.0}, "site": {"1": {"seconds": 5.0}}}
    now = {"date": "2031-02-01T00:00:00+0000", "full_run": {"seconds": 8.0}}
    kept = scale.kept_from(before, now, ["site", "serve"])
    assert kept["site"] == {"1": {"seconds": 5.0}} and kept["full_run"] == {"seconds": 8.0}
    assert kept["earlier"] == {"site": "2031-01-01T00:00:00+0000"}, "serve was never measured: nothing to date"
    again = scale.kept_from(kept, {"date": "2031-03-01T00:00:00+0000"}, ["site"])
    assert again["earlier"]["site"] == "2031-01-01T00:00:00+0000", "still the date it was measured on"
