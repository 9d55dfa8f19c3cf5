"""Messages an author can act on: where the value was computed, why a record is outdated, how to bind a
number in words, which allow-list, and an exact claim that returns a float."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import numpy
import pytest
from harness import books, faults

from verified_book.authoring import inputs
from verified_book.book.number_words import binding_hint
from verified_book.engine.provenance import changed_inputs, input_entry

pytest_plugins = ["pytester"]

CLAIMS = '''
from fractions import Fraction
from verified_book.authoring.registry import claim

@claim("arith.ratio", kind="exact")
def ratio():
    """A decode ceiling: 273 GB/s over 16.4 GB."""
    return Fraction(273) / Fraction("16.4")

@claim("arith.float_ratio", kind="exact")
def float_ratio():
    """The same, in floating point."""
    return 273 / 16.4

@claim("arith.square", kind="library", backends=("numpy",))
def square(backend):
    """3 squared, as the library computes it."""
    return int((backend.tensor([3]) ** 2).sum())
'''


@pytest.fixture
def book(pytester: pytest.Pytester) -> pytest.Pytester:
    (faults.pytester_book(pytester) / "arith.py").write_text(CLAIMS)
    (pytester.path / "book").mkdir()
    return pytester


def run(pytester: pytest.Pytester, page: str) -> pytest.RunResult:
    (pytester.path / "book" / "page.md").write_text(page)
    return pytester.runpytest_inprocess()


def test_a_stale_message_says_exact_arithmetic_or_names_the_library_and_its_version(book: pytest.Pytester) -> None:
    result = run(book, "Ceiling [16.7](claim:arith.ratio), square [8](claim:arith.square).\n")
    result.stdout.fnmatch_lines(
        [
            "*figure 16.7 (arith.ratio) is stale in exact arithmetic: computed 16.6463*",
            f"*figure 8 (arith.square) is stale on numpy {numpy.__version__}: computed 9*",
        ]
    )
    assert "stale on none" not in result.stdout.str()


def test_an_exact_claim_that_returns_a_float_fails_and_says_what_to_return(book: pytest.Pytester) -> None:
    result = run(book, "Ceiling [16.6](claim:arith.float_ratio).\n")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*claim arith.float_ratio on none: returned the float 16.64634146341*, which is 1365/82 to its last bits: "
            "an exact claim "
            "returns int or Fraction*"
        ]
    )


def test_an_unbound_number_in_words_is_told_its_title_and_the_books_allowlist(book: pytest.Pytester) -> None:
    (book.path / "book.toml").write_text((book.path / "book.toml").read_text() + 'allowlist = "notes/numbers.toml"\n')
    result = run(book, "Ceiling [16.6](claim:arith.ratio), about twenty-five times a 17.\n")
    out = result.stdout.str()
    assert "number 17 is bound to no claim: bind it as [17](claim:...) or add it to notes/numbers.toml" in out
    assert (
        'number twenty-five is bound to no claim: bind it as [twenty-five](claim:... "25") or add it to '
        "notes/numbers.toml with a reason"
    ) in out


def test_binding_hints() -> None:
    assert binding_hint("two hundred and fifty-six") == '[two hundred and fifty-six](claim:... "256")'
    assert binding_hint("nine tenths") == '[nine tenths](claim:... "0.9")'
    assert binding_hint("twice") == '[twice](claim:... "2")'
    assert binding_hint("16.6") == "[16.6](claim:...)"


@pytest.fixture
def model_data(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "models" / "m").mkdir(parents=True)
    (tmp_path / "models" / "m" / "config.json").write_text(json.dumps({"hidden_size": 64, "rope_theta": 1000000}))
    (tmp_path / "hw.toml").write_text(
        '[memory_bandwidth]\nunit = "GB/s"\nvalue = 280\nsource = "datasheet: 273 GB/s"\n'
    )
    with books.with_data(tmp_path, "data"):
        yield tmp_path


def test_a_key_of_a_whole_config_says_the_library_reads_all_of_it(model_data: Path) -> None:
    with inputs.recording() as reads:
        inputs.model_config_all("m")
    entries = [input_entry(r) for r in reads]
    assert {e.key: e.whole for e in entries} == {"hidden_size": "transformers", "rope_theta": "transformers"}
    (model_data / "models" / "m" / "config.json").write_text(json.dumps({"hidden_size": 64, "rope_theta": 2000000}))
    inputs.forget_read()
    assert changed_inputs(entries) == [
        "transformers reads all of config.json; rope_theta changed (1000000, now 2000000: data/models/m/config.json)"
    ]


def test_an_input_is_placed_at_its_value_and_a_source_that_disagrees_is_flagged(model_data: Path) -> None:
    with inputs.recording() as reads:
        inputs.vendor("hw.toml", "memory_bandwidth")
    assert reads[0].place == "data/hw.toml:3"  # the value's line, not the table's header
    assert [str(p) for p in inputs.source_disagreements()] == [
        "data/hw.toml:3: memory_bandwidth: value = 280, but its source says 273 GB/s ('datasheet: 273 GB/s'); "
        "correct one of them"
    ]


SPARK_CLAIM = '''
from fractions import Fraction
from verified_book.authoring.inputs import exact, vendor
from verified_book.authoring.registry import claim

@claim("spark.bandwidth", kind="quoted", citation="the vendor's datasheet")
def bandwidth():
    """The datasheet's memory bandwidth, GB/s."""
    return exact(vendor("spark.toml", "memory_bandwidth"))
'''


def test_a_page_checked_alone_says_what_kept_the_book_from_loading_once(book: pytest.Pytester) -> None:
    """book.toml's load check is not collected when a page is named: the page brings its own where the book has a
    problem, so a source that disagrees with its value fails the page even where the figure agrees with the
    value; with several pages and book.toml the run reports it once."""
    (book.path / "book" / "page.md").write_text("The Spark reads [280](claim:spark.bandwidth) GB/s.\n")
    (book.path / "book" / "other.md").write_text("Ceiling [16.6](claim:arith.ratio).\n")
    (book.path / "sample_claims" / "spark.py").write_text(SPARK_CLAIM)
    (book.path / "data" / "spark.toml").write_text(
        '[memory_bandwidth]\nvalue = 280\nunit = "GB/s"\nsource = "datasheet: memory bandwidth 273 GB/s"\n'
    )
    said = "data/spark.toml:2: memory_bandwidth: value = 280, but its source says 273 GB/s"
    for args, where in [
        (["book/page.md"], "book/page.md"),
        (["book/other.md", "book/page.md"], "book/other.md"),
        (["book/page.md", "book.toml"], "book.toml"),
    ]:
        result = book.runpytest_inprocess(*args)
        assert result.ret == 1, args
        out = result.stdout.str()
        # The short summary repeats each failure's message (in full where CI is set): count the report above it.
        report, summary = out.split("short test summary")
        assert report.count(said) == 1 and f"FAILED {where}::every topic module loads" in summary, (args, out)
        assert "line 1: 280 (spark.bandwidth)" not in summary, "the figure agrees"

    (book.path / "data" / "spark.toml").write_text(
        '[memory_bandwidth]\nvalue = 280\nunit = "GB/s"\nsource = "datasheet: memory bandwidth 280 GB/s"\n'
    )
    result = book.runpytest_inprocess("book/page.md", "--collect-only", "-q")
    assert "every topic module loads" not in result.stdout.str(), "a book that loads adds no item to its pages"


def test_a_figure_of_an_unknown_claim_says_which_topic_module_did_not_load(book: pytest.Pytester) -> None:
    """A module that does not import leaves its claims unknown: the page's figures say why, not only "did you
    mean"; the module that imports it fails too, so the run counts two problems."""
    (book.path / "sample_claims" / "broken.py").write_text("x = (\n")
    (book.path / "sample_claims" / "arith.py").write_text("import sample_claims.broken\n" + CLAIMS)
    (book.path / "book" / "page.md").write_text("Ceiling [16.6](claim:arith.ratio).\n")
    result = book.runpytest_inprocess("book/page.md")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*book/page.md:1: figure 16.6 binds to unknown claim 'arith.ratio'; the book's claims did not all load "
            "(2 problems in its topic modules, the first: sample_claims/broken.py:1: *SyntaxError*"
        ]
    )
