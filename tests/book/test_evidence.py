"""Each mark is one kind of evidence, decided from the data flow; a dispute must change a conclusion.

- A figure is verified only where a value was computed here from its inputs: over the whole book, no
  figure that would show ✓ is one data entry read unchanged (`evidence.passed_through`), and one that is
  shows the entry's basis instead (cited, premise, unsourced), whatever its claim's kind.
- Every data entry says what backs it (`inputs.basis_of`): an outside source names one, and a cited entry
  names its document and quotes its words (`inputs.citation_problems`), found in the document where the
  repository ships it.
- A dispute must refute the source beyond the precision the figure gives itself: one planted within it
  is refused with file:line, and one beyond it stands.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import pytest
from harness import books
from harness.paths import ROOT

from verified_book.authoring import inputs
from verified_book.authoring.registry import REGISTRY, Claim, Kind, Registry, claim
from verified_book.backends import NO_BACKEND
from verified_book.book.bindings import Book, read_page
from verified_book.engine import check
from verified_book.engine import evidence as evidence_mod
from verified_book.engine.check import evaluate, judge
from verified_book.engine.config import open_book, read_config
from verified_book.engine.evidence import evidence, passed_through
from verified_book.engine.machine import Machine
from verified_book.engine.outcome import Outcome
from verified_book.vocabulary import WORDS, Status


@pytest.fixture(scope="module")
def book() -> Iterator[Book]:
    config = read_config(ROOT)
    with open_book(config).opened():
        yield Book.read(config.pages, config.root)


def _arithmetic(book: Book) -> list[Claim]:
    bound = book.by_claim()
    return [c for c in REGISTRY if not c.needs_backend and c.id in bound]


def test_no_verified_figure_is_an_input_read_unchanged(book: Book) -> None:
    """The book's ✓ figures each computed something: none returns the one entry it read, or an entry under a
    probe of it."""
    wrong = []
    for item in _arithmetic(book):
        outcome = evaluate(item, NO_BACKEND)
        status, why = evidence(item, outcome.inputs)
        if status is not Status.VERIFIED:
            continue
        read = [r for r in outcome.inputs if isinstance(r, inputs.Input)]
        alone = len(read) == 1 and evidence_mod._same(read[0].value, outcome.value)
        if alone or passed_through(item) is not None:
            wrong.append(f"{item.defined_at}: {item.id} shows verified but returns {read[0] if alone else 'an input'}")
        assert why.startswith("verified: computed here"), why
    assert not wrong, "\n".join(wrong)


def test_no_premise_figure_is_computed(book: Book) -> None:
    """Premise is the book's own choice read as it stands: a figure whose claim computes from its inputs is
    verified, whatever it assumes, and its panel names the assumption beside what was computed."""
    wrong = []
    for item in _arithmetic(book):
        status, why = evidence(item, evaluate(item, NO_BACKEND).inputs)
        if status is Status.PREMISE and passed_through(item) is None:
            wrong.append(f"{item.defined_at}: {item.id} is premise but computes its value")
        if item.assumes and status is Status.VERIFIED:
            assert why.endswith(f"under the book's assumption that {item.assumes}"), why
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("claim_id", "status"),
    [
        ("hierarchy.read.hbm3_h100.bandwidth", Status.CITED),  # 3,350 GB/s: the H100 page's figure
        ("hardware.h100.memory_bandwidth", Status.CITED),
        ("hierarchy.ddr5.channels", Status.PREMISE),  # "two" channels: the book's example desktop
        ("hierarchy.network.ethernet_10gbe.gbit", Status.CITED),
        ("intensity.b256.batch", Status.PREMISE),  # the book's own sweep
        ("rules.lora.rank", Status.PREMISE),
        ("questions.q5.gb.model", Status.PREMISE),
        ("hierarchy.tracks.m_bandwidth_max", Status.UNSOURCED),  # 1,200 GB/s "(M5 Ultra)": no Apple page in hand
        ("models.qwen3_8b.q4_k_m_gb", Status.UNSOURCED),
        ("author_machine.tensor_core_formats", Status.CITED),  # "all three": the vendor's lists, no RTX 5080 ran
        ("author_machine.card_bytes", Status.VERIFIED),  # 16 × 2^30, computed, under the GiB assumption
        ("models.qwen3_8b.checkpoint_gb", Status.VERIFIED),  # parameters × 2, computed: the file's size is not stored
        ("hierarchy.ddr5.gbps", Status.VERIFIED),  # 2 × 5,600 × 8: computed here
    ],
)
def test_each_figure_carries_the_evidence_it_has(book: Book, claim_id: str, status: Status) -> None:
    item = REGISTRY[claim_id]
    assert evidence(item, evaluate(item, NO_BACKEND).inputs)[0] is status


def test_the_mark_follows_the_data_not_the_kind(tmp_path: Path) -> None:
    """An `exact` claim that returns an entry unchanged is cited; a `quoted` one that computes is verified; an
    entry's basis picks cited, premise or unsourced."""
    (tmp_path / "d.toml").write_text(
        '[a]\nvalue = 3350\nunit = "GB/s"\nsource = "a vendor page: 3,350 GB/s"\n'
        '[b]\nvalue = 8\nunit = "sequences"\nsource = "the example\'s choice"\nbasis = "premise"\n'
        '[c]\nvalue = 1200\nunit = "GB/s"\nbasis = "unsourced"\n'
    )
    registry = Registry()
    for key in "abc":
        claim(f"t.read.{key}", kind="exact", registry=registry)(
            lambda key=key: inputs.exact(inputs.vendor("d.toml", key))
        )
    claim("t.double", kind="quoted", registry=registry)(lambda: 2 * inputs.exact(inputs.vendor("d.toml", "a")))
    with books.with_data(tmp_path, "data"):
        found = {c.id: evidence(c, evaluate(c, NO_BACKEND).inputs) for c in registry}
    assert {k: s for k, (s, _) in found.items()} == {
        "t.read.a": Status.CITED,
        "t.read.b": Status.PREMISE,
        "t.read.c": Status.UNSOURCED,
        "t.double": Status.VERIFIED,
    }
    assert "data/d.toml:2 a read unchanged" in found["t.read.a"][1]
    assert found["t.double"][1].endswith("from data/d.toml:2 a")


def test_every_data_entry_says_what_backs_it(book: Book) -> None:
    problems = inputs.basis_problems()
    assert not problems, "\n".join(map(str, problems))


#: the source texts the book transcribes, beside the repository where they are (as tests/book/test_kinds.py finds them)
SOURCES = Path(os.environ.get("BOOK_SOURCES") or ROOT.parent / "shared" / "sources")


def test_every_cited_entry_names_its_document_and_quotes_it(book: Book) -> None:
    """Each cited entry's words, checked in its document where the repository or the source texts hold it."""
    problems = inputs.citation_problems(ROOT, SOURCES)
    assert not problems, "\n".join(map(str, problems))


def test_a_citation_without_its_words_is_reported(tmp_path: Path) -> None:
    """No words quoted (and no reason why), no document named, or words the shipped document does not hold."""
    (tmp_path / "spec.md").write_text("The card moves\n  448 GB/s   at most.\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "d.toml").write_text(
        '[words]\nvalue = 1\nsource = "a vendor page"\n'
        '[reason]\nvalue = 2\nsource = "a standard"\nunquoted = "its text is not in hand"\n'
        "[held]\nvalue = 3\nsource = \"spec.md, the table: 'moves 448 GB/s at'\"\n"
        "[lacking]\nvalue = 4\nsource = \"spec.md:3, the table: 'moves 896 GB/s'\"\n"
        '[nowhere]\nvalue = 5\nsource = ": words alone"\n'
        '[choice]\nvalue = 6\nsource = "the book\'s example"\nbasis = "premise"\n'
    )
    with books.with_data(tmp_path / "data", "data"):
        problems = [str(p) for p in inputs.citation_problems(tmp_path)]
    assert len(problems) == 3, problems
    assert any(p.startswith("data/d.toml:2:") and "quotes no words" in p for p in problems), problems
    assert any(p.startswith("data/d.toml:12:") and "spec.md does not hold 'moves 896 GB/s'" in p for p in problems)
    assert any(p.startswith("data/d.toml:15:") and "names no document" in p for p in problems), problems


def test_a_basis_outside_the_words_is_reported(tmp_path: Path) -> None:
    (tmp_path / "d.toml").write_text('[a]\nvalue = 1\nbasis = "hearsay"\n[b]\nvalue = 2\n')
    with books.with_data(tmp_path, "data"):
        problems = [str(p) for p in inputs.basis_problems()]
    assert any(p.startswith("data/d.toml:2:") and "'hearsay'" in p for p in problems), problems
    assert any(p.startswith("data/d.toml:5:") and "no `source`" in p for p in problems), problems


def test_the_new_marks_are_words_of_the_vocabulary() -> None:
    for status in (Status.PREMISE, Status.UNSOURCED):
        word = WORDS[status.value]
        assert word.recorded and word.glyph and word.shape and word.meaning
    css = (ROOT / "verified_book" / "assets" / "stylesheets" / "claims.css").read_text()
    assert '[data-status="premise"]' in css and '[data-status="unsourced"]' in css


def _dispute(tmp_path: Path, title: str, value: Any) -> check.Verdict:
    (tmp_path / "p.md").write_text(
        f"It ran at [twenty-five times](claim:t.ratio {title!r}) the rate.\n".replace("'", '"')
    )
    binding = read_page(tmp_path / "p.md", tmp_path).bindings[0]
    item = Claim("t.ratio", Kind.EXACT, lambda: value, "", quote="25×", quote_at="source.txt:1")
    outcome = Outcome(item, NO_BACKEND.name, check.COMPUTED, value=value)
    return judge(binding, outcome, Machine({}, "here", ()))


def test_a_dispute_within_the_figures_precision_is_refused(tmp_path: Path) -> None:
    from fractions import Fraction

    verdict = _dispute(tmp_path, "25; disputed", Fraction(256, 10))
    assert verdict.status == Status.FAILED
    assert verdict.message.startswith("p.md:1: figure twenty-five times (t.ratio) is marked disputed")
    assert "within ±1 of it" in verdict.message


def test_a_dispute_beyond_the_figures_precision_stands(tmp_path: Path) -> None:
    from fractions import Fraction

    assert _dispute(tmp_path, "25; disputed", Fraction(27)).status == Status.DISPUTED
    assert _dispute(tmp_path, "25 ± 3; disputed", Fraction(27)).status == Status.FAILED
    assert _dispute(tmp_path, "25 ± 1; disputed", Fraction(2601, 100)).status == Status.DISPUTED


def test_the_authors_rate_ratio_in_words_is_a_rounding_not_a_dispute(book: Book) -> None:
    """The source's "twenty-five times" against the author's own 25.6 changed no conclusion (compute-bound): the
    book prints the ratio in words at its rounding, as reference, not as a dispute."""
    found = [b for b in book.by_claim()["intensity.author.rate_ratio"] if b.text == "about twenty-six times"]
    assert found and not found[0].disputed
    item = REGISTRY["intensity.author.rate_ratio"]
    verdict = judge(found[0], evaluate(item, NO_BACKEND), Machine({}, "here", ()))
    assert verdict.status == Status.REFERENCE
