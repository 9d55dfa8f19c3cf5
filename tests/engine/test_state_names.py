"""One name per state: every surface that speaks of a figure this machine cannot compute, of one no machine
has a record of, of one a stopped run never reached, and of the exact kinds' backend, says it in the
vocabulary's words, read here from each surface for the same sample book."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from harness import books, faults

from verified_book.authoring.registry import REGISTRY
from verified_book.book.bindings import Book, read_page
from verified_book.engine import figure_status
from verified_book.engine.live_report import Report
from verified_book.records.results import read as read_results
from verified_book.site import machines, render
from verified_book.vocabulary import (
    LABELS,
    MEANINGS,
    NO_BACKEND_LABEL,
    NO_BACKEND_NAME,
    NOT_HERE,
    NOT_RUN,
    UNVERIFIED,
    Status,
)

NOT_COMPUTABLE = LABELS[NOT_HERE]
#: what surfaces called these states before they had one name each; none may come back
RETIRED = ("not computed on this machine", "not run here", "  not here:", "backends: none")

HARDWARE_CLAIMS = '''\
from verified_book.authoring.registry import claim


@claim("card.vram", kind="measured", hardware="rtx5080")
def vram(backend):
    """About a GPU this machine is not."""
    return 16
'''

HARDWARE_PAGE = "The card holds [16](claim:card.vram) GB.\n"


@contextlib.contextmanager
def opened(book: faults.SampleBook) -> Iterator[Book]:
    """The sample book opened in this process (a registry of its own, current for the block) and its pages
    read, for the site's and plan's functions; its topic modules are forgotten afterwards."""
    pages = [read_page(p, book.root) for p in sorted((book.root / "book").glob("*.md"))]
    book.forget_modules()
    try:
        with books.opened(book.root):
            yield Book(book.root, pages, [])
    finally:
        book.forget_modules()


def verify(book: faults.SampleBook, *args: str) -> subprocess.Popen[str]:
    """`verified-book verify` of a sample book, in a process of its own, torch and MLX looking uninstalled."""
    return book.verify_apart(*args, absent=("torch", "mlx"))


@pytest.fixture(scope="module")
def verified(tmp_path_factory: pytest.TempPathFactory) -> tuple[faults.SampleBook, str]:
    """The sample book verified once: a figure of an exact claim, one of a library claim, one about a GPU."""
    book = faults.SampleBook.basic(tmp_path_factory.mktemp("names") / "book")
    book.claims("card", HARDWARE_CLAIMS)
    book.page("card.md", HARDWARE_PAGE)
    proc = verify(book)
    output, _ = proc.communicate(timeout=300)
    return book, output


def test_the_verdict_and_the_summary_name_what_cannot_run_here_as_the_vocabulary_does(
    verified: tuple[faults.SampleBook, str],
) -> None:
    book, output = verified
    lines = output.splitlines()
    figures = next(line for line in lines if line.startswith("figures ("))
    start = max(i for i, line in enumerate(lines) if line.startswith("verified-book: "))
    verdict = " ".join(lines[start:])  # its first line says what held, the figures follow, indented
    header = [line for line in lines if line.startswith("backend ")][-1]  # the last block's, where 100 columns end
    assert f"1 {NOT_COMPUTABLE}" in figures and f"1 {NOT_COMPUTABLE}" in verdict, output
    assert header.rstrip().endswith(NOT_COMPUTABLE), header
    assert f"  {NOT_COMPUTABLE}: " in output, "the table's legend names the column as the table does"
    assert f"in {NO_BACKEND_LABEL} on no backend" in output, "the table says what its backend `none` is"
    assert LABELS[NOT_RUN] not in output, "a run that finished never reached nothing"
    for old in RETIRED:
        assert old not in output, old


def test_the_panel_the_machines_page_and_the_legend_name_it_as_the_verdict_does(
    verified: tuple[faults.SampleBook, str],
) -> None:
    book, _ = verified
    results = {faults.SLUG: read_results(book.results_file)}
    with opened(book) as the_book:
        counts = machines.figure_counts(results[faults.SLUG], the_book)
        page = machines.render_machines(results, the_book, [], {})
        claim = REGISTRY.get("basic.square.2")
    pages = the_book.pages
    assert counts[Status.SKIPPED.value] == 1 and counts[UNVERIFIED] == 0, counts
    text = "".join(page.blocks.values()) + page.markdown
    assert f"</span> {NOT_COMPUTABLE}</li>" in text
    # a record skipped on a backend this machine lacks, as a panel shows it
    (square,) = [b for p in pages for b in p.bindings if b.claim_id == "basic.square.2"]
    skipped = faults.sound_results("elsewhere", "basic.square.2")
    skipped["records"]["basic.square.2"] = {
        "torch:cuda": {**next(iter(skipped["records"]["basic.square.2"].values())), "status": "skipped", "value": None}
    }
    path = book.root / "elsewhere.json"
    path.write_text(json.dumps(skipped))
    shown = {"elsewhere": read_results(path)}
    panel = render.render_panel(figure_status.figure_view(square, claim, shown), shown, None, "p")
    assert f"{NOT_COMPUTABLE}: torch:cuda" in panel
    legend = render.render_legend()
    assert f'<th scope="row">{NOT_COMPUTABLE}</th>' in legend and MEANINGS[NOT_HERE] in legend
    assert f'<th scope="row">{LABELS[UNVERIFIED]}</th>' in legend
    for old in RETIRED:
        assert old not in panel + legend + text, old


def test_plan_names_the_exact_kinds_backend_as_what_it_means(verified: tuple[faults.SampleBook, str]) -> None:
    book, _ = verified
    done = subprocess.run(
        [sys.executable, "-c", "from verified_book.integration.cli import run; run()", "plan", "rtx5080"],
        cwd=book.root,
        env=book.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    ratio = next(line for line in lines if "basic.ratio" in line)
    assert ratio.split()[-2:] == NO_BACKEND_LABEL.split(), lines
    assert not any(line.rstrip().endswith(f" {NO_BACKEND_NAME}") for line in lines), lines


def test_serve_names_what_cannot_run_here_as_the_verdict_does(verified: tuple[faults.SampleBook, str]) -> None:
    book, _ = verified
    (binding,) = read_page(book.root / "book" / "card.md", book.root).bindings
    report = Report("card.md saved", figures={binding: NOT_HERE})
    assert f"1 {NOT_COMPUTABLE}" in report.line() and "not here" not in report.line()


def test_the_interrupted_state_is_one_word_apart_from_what_cannot_run_here() -> None:
    assert LABELS[NOT_RUN] == "not run (interrupted)"
    assert len({LABELS[NOT_HERE], LABELS[NOT_RUN], LABELS[UNVERIFIED]}) == 3
    assert LABELS[NOT_HERE] == LABELS[Status.SKIPPED.value], "what cannot run here is drawn and named as skipped"


@pytest.mark.slow
def test_ctrl_c_part_way_through_a_whole_book_run_counts_what_it_never_ran_apart(tmp_path: Path) -> None:
    """SIGINT to `verified-book verify` once some figures were judged: the verdict and the summary count the
    figures it never reached as not run (interrupted), apart from the one this machine cannot compute, and
    the records of what ran are in the results file (the fault table's row)."""
    tally = faults.interrupted_whole_run(tmp_path)
    assert tally.ok, str(tally)


def test_ctrl_c_while_collecting_says_so_instead_of_no_backends(tmp_path: Path) -> None:
    book = faults.SampleBook.basic(tmp_path / "book")
    book.conftest(COLLECTING_CONFTEST)
    proc = verify(book)
    output = interrupt_when_started(book, proc)
    assert "interrupted while collecting" in output, output
    assert "backends: none" not in output, output
    assert "verified-book: interrupted" in output and "before any figure was checked" in output, output


COLLECTING_CONFTEST = """
import os
import time
from pathlib import Path


def pytest_collect_file(parent, file_path):
    if file_path.name == "page.md":
        Path(os.environ["CLAIMS_STARTED"]).touch()
        time.sleep(120)
"""


def interrupt_when_started(book: faults.SampleBook, proc: subprocess.Popen[Any]) -> str:
    """Ctrl-C to a run once it says it has started; its output."""
    assert faults._wait_for(book.started, 120, proc), proc.communicate()[0]
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    return str(output)
