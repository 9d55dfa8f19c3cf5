"""The pytest plugin end to end, on a small sample book run inside this run."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness import faults
from verified_book.registry import REGISTRY

pytest_plugins = ["pytester"]

CLAIMS = '''
from fractions import Fraction
from verified_book.registry import claim

@claim("arith.ratio", kind="exact")
def ratio():
    """A decode ceiling: 273 GB/s over 16.4 GB."""
    return Fraction(273) / Fraction("16.4")

@claim("arith.square.{n}", kind="library", over={"n": (2, 3)}, backends=("numpy", "torch:cpu", "torch:cuda"))
def square(backend, n):
    """n squared, as the library computes it."""
    return int((backend.tensor([n]) ** 2).sum())

@claim("hw.vram", kind="measured", hardware="rtx5080")
def vram(backend):
    """The VRAM of the machine's GPU."""
    return 16
'''

PAGE = "The ceiling is [16.6](claim:arith.ratio) tokens/s and [4](claim:arith.square.2) is two squared.\n"



@pytest.fixture
def book(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\ntestpaths = book.toml book\naddopts = -p no:cacheprovider -ra\n")
    (pytester.path / "book.toml").write_text(faults.BOOK_TOML.format(package="sample_claims"))
    pytester.makeconftest(faults.CONFTEST)
    faults.copy_profiles(pytester.path / "data")
    pytester.syspathinsert()
    pkg = pytester.mkpydir("sample_claims")
    (pkg / "arith.py").write_text(CLAIMS)
    (pytester.path / "book").mkdir()
    (pytester.path / "book" / "page.md").write_text(PAGE)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """One verification run of the sample book, with its own registry."""
    with REGISTRY.isolated():
        return pytester.runpytest_inprocess(*args)


def _records(pytester: pytest.Pytester) -> dict:
    (path,) = (pytester.path / "results").glob("*.json")
    return json.loads(path.read_text())["records"]


def test_a_sound_book_passes_and_is_recorded(book: pytest.Pytester) -> None:
    result = run(book)
    assert result.ret == 0 and result.parseoutcomes().get("failed", 0) == 0
    result.stdout.fnmatch_lines(["*verified book*", "backend*verified*stale*failed*disputed*skipped*", "none*", "results: *"])
    records = _records(book)
    assert records["arith.ratio"]["none"]["status"] == "verified"
    assert records["arith.square.2"]["numpy"]["figures"][0] == {
        "file": "book/page.md", "line": 1, "printed": "4", "stated": "4", "status": "verified"}


def test_a_stale_figure_names_place_claim_printed_and_computed(book: pytest.Pytester) -> None:
    (book.path / "book" / "page.md").write_text(PAGE.replace("16.6", "16.7"))
    result = run(book)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*book/page.md:1: figure 16.7 (arith.ratio) is stale on none: computed 16.6463*"])
    assert _records(book)["arith.ratio"]["none"]["status"] == "stale"


def test_the_rewrite_option_puts_a_stale_figure_back_and_nothing_else(book: pytest.Pytester) -> None:
    page = book.path / "book" / "page.md"
    page.write_text(PAGE.replace("16.6", "16.9") + "Untouched: [4](claim:arith.square.2).\n")
    run(book, "--rewrite-stale-figures").stdout.fnmatch_lines(["rewrote 1 stale figure(s): book/page.md:1"])
    assert page.read_text() == PAGE + "Untouched: [4](claim:arith.square.2).\n"
    assert run(book).ret == 0


def test_hardware_selection_skips_with_what_this_machine_is(book: pytest.Pytester) -> None:
    result = run(book, "-m", "rtx5080")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*needs Desktop with an NVIDIA GeForce RTX 5080 (rtx5080); this machine is *"])
    assert result.ret == 0 and result.parseoutcomes().get("failed", 0) == 0
    assert "passed" in result.stdout.str()


def test_two_subsets_leave_one_file_with_both(book: pytest.Pytester) -> None:
    run(book, "-k", "ratio")
    run(book, "-k", "square")
    records = _records(book)
    assert {"arith.ratio", "arith.square.2"} <= set(records)


def test_unknown_claim_and_unbound_number_fail_with_place(book: pytest.Pytester) -> None:
    (book.path / "book" / "page.md").write_text(PAGE + "A typo [4](claim:arith.sqare.2) and 17 unbound.\n")
    result = run(book)
    result.stdout.fnmatch_lines([
        "*book/page.md:2: figure 4 binds to unknown claim 'arith.sqare.2'; did you mean arith.square.2*",
        "*book/page.md:2:*: number 17 is bound to no claim*",
    ])


def test_a_claim_that_raises_fails_alone(book: pytest.Pytester) -> None:
    (book.path / "sample_claims" / "broken.py").write_text(
        "from verified_book.registry import claim\n\n@claim('broken.one', kind='exact')\ndef one():\n    return 1 / 0\n"
    )
    result = run(book)
    result.stdout.fnmatch_lines(["*broken.one*raised ZeroDivisionError*"])
    records = _records(book)
    assert records["broken.one"]["none"]["status"] == "failed"
    assert records["arith.ratio"]["none"]["status"] == "verified"


def test_the_summary_counts_the_selection_and_what_would_run_on_the_marked_machine(book: pytest.Pytester) -> None:
    result = run(book, "-m", "rtx5080")
    out = result.stdout.str()
    header = next(line for line in out.splitlines() if line.startswith("backend "))
    assert header.split()[1:] == ["selected", "verified", "stale", "failed", "disputed", "outdated", "skipped", "not", "here"]
    for column in ("selected:", "verified:", "skipped:", "not here:"):
        assert f"  {column}" in out, "a legend says what each column counts"
    line = next(line for line in out.splitlines() if line.startswith("-m rtx5080:"))
    # the selection: hw.vram on numpy and torch:cpu (rtx5080 runs numpy, torch:cpu, torch:cuda...) and
    # every square claim on torch:cuda, none of which run on this machine
    selected, ran, there = map(int, re.findall(r"(\d+) checks selected, (\d+) ran here; (\d+) would run", line)[0])
    assert selected == ran + there and there > 0


def test_the_figures_line_counts_each_figure_once(book: pytest.Pytester) -> None:
    result = run(book)
    result.stdout.fnmatch_lines(["figures: 2 verified, 0 stale, 0 failed, 0 disputed, 0 outdated; 0 not computed on this machine"])
