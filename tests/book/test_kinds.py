"""Kinds say what they are, and a disputed figure quotes what it disputes.

- An `exact` claim is derived: its value must depend on something it reads. Each exact
  claim is computed while its inputs are recorded (`verified_book.authoring.inputs.recording`); one that
  reads no input fails. Reading is not depending, so each one that reads is computed again
  with its recorded inputs perturbed one at a time (the changes `harness.mutation` uses, via
  `verified_book.authoring.inputs.overridden`), and at least one change must change its value. A claim whose
  value survives every change to everything it read returns a literal, whatever it reads
  on the way. (Exact claims take no backend, so no library is asked through one; a value
  a library states, such as gguf-py's block sizes, is a `library` claim instead.)
- A `given` claim returns a value the book states or chooses, so it must read it from a
  table with a `source` in `claims/data/` (`given.toml`, or the napkin examples'
  `napkin.toml`), where it is recorded with that source.
- Every figure the book marks disputed is bound to a claim that carries `quote` (the
  source's exact words) and `quote_at` (`file:line` in the source texts); when the
  sources are beside the repository (`../shared/sources`), the quote must occur verbatim on
  that line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import pytest
from harness.mutation import perturbations
from harness.paths import ROOT

from verified_book.authoring import inputs
from verified_book.authoring.registry import Claim, Kind
from verified_book.book.bindings import Book
from verified_book.book.figures import as_number
from verified_book.engine.config import open_book, read_config

SOURCES = Path(
    os.environ.get("BOOK_SOURCES") or ROOT.parent / "shared" / "sources"
)  # the env var: a checkout elsewhere


@pytest.fixture(scope="module")
def registry() -> Iterator[Any]:
    with open_book(read_config(ROOT)).opened() as book:
        yield book.registry


def _value(claim: Claim) -> Any:
    try:
        value = claim.evaluate()
    except Exception as e:  # a perturbed input may break the computation: that is a change too
        return ("raised", type(e).__name__)
    number = as_number(value)
    if number is not None:
        return number
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else value


def _depends(claim: Claim) -> tuple[bool, list[inputs.Input]]:
    with inputs.recording() as reads:
        before = _value(claim)
    for item in reads:
        for changed in perturbations(item.value):
            with inputs.overridden(item.file, item.key, changed):
                if _value(claim) != before:
                    return True, reads
    return False, reads


def test_exact_claims_depend_on_what_they_read(registry: Any) -> None:
    """No exact claim returns a literal: each reads an input, and changing one changes it."""
    literal, unmoved = [], []
    for claim in registry:
        if claim.kind is not Kind.EXACT:
            continue
        moved, reads = _depends(claim)
        if not reads:
            literal.append(f"{claim.defined_at}: {claim.id}")
        elif not moved:
            unmoved.append(f"{claim.defined_at}: {claim.id} (read {', '.join(i.key for i in reads)})")
    assert not literal, (
        "exact claims that read no input: make each a `given` read from claims/data/given.toml, "
        "or derive it from what it should read:\n" + "\n".join(literal)
    )
    assert not unmoved, "exact claims whose value no change to their inputs moves:\n" + "\n".join(unmoved)


def _reads_a_stated_value(claim: Claim) -> bool:
    with inputs.recording() as reads:
        claim.evaluate()
    return any(i.source for i in reads)


def test_given_claims_read_the_given_file(registry: Any) -> None:
    wrong = []
    for claim in registry:
        if claim.kind is not Kind.GIVEN:
            continue
        if not _reads_a_stated_value(claim):
            wrong.append(f"{claim.defined_at}: {claim.id}")
    assert not wrong, (
        "given claims that read no stated value with its source from claims/data/ "
        f"(claims/data/{inputs.GIVEN}, or a table of value, unit, source like napkin.toml):\n" + "\n".join(wrong)
    )


def test_the_check_finds_a_literal() -> None:
    """The dependency check itself: a literal fails it, a derivation from a given passes."""
    literal = Claim("t.literal", Kind.EXACT, lambda: 2048, "A literal.")
    derived = Claim("t.derived", Kind.EXACT, lambda: 2 * inputs.given("flops.prompt_tokens"), "Twice the prompt.")
    ignored = Claim("t.ignored", Kind.EXACT, lambda: inputs.given("flops.prompt_tokens") * 0 + 7, "Reads, ignores.")
    assert _depends(literal) == (False, [])
    assert _depends(derived)[0]
    moved, reads = _depends(ignored)
    assert reads and not moved
    assert not _reads_a_stated_value(Claim("t.given_literal", Kind.GIVEN, lambda: 8, "A batch typed in."))
    assert _reads_a_stated_value(
        Claim("t.given_read", Kind.GIVEN, lambda: inputs.given("flops.decode_batch"), "A batch read.")
    )


def _disputed(registry: Any) -> list[tuple[Any, Claim | None]]:
    book = Book.read(ROOT / "book", ROOT)
    return [(b, registry.get(b.claim_id)) for b in book.bindings() if b.disputed]


def test_every_disputed_figure_quotes_its_source(registry: Any) -> None:
    missing = [
        f"{b.where}: {b.text} ({b.claim_id})"
        for b, c in _disputed(registry)
        if c is None or not c.quote or not c.quote_at
    ]
    assert not missing, (
        "disputed figures whose claim carries no quote= and quote_at= (the source's exact "
        "words and their file:line):\n" + "\n".join(missing)
    )


@pytest.mark.skipif(
    not SOURCES.is_dir(), reason=f"the source texts are not beside the repository ({SOURCES} does not exist)"
)
def test_each_quote_is_verbatim_at_its_place(registry: Any) -> None:
    wrong = []
    claims = {c.id: c for _, c in _disputed(registry) if c is not None and c.quote}
    for claim in claims.values():
        file, line = claim.quote_at.rsplit(":", 1)
        path = SOURCES / file
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
        if not 1 <= int(line) <= len(lines):
            wrong.append(f"{claim.defined_at}: {claim.id}: {claim.quote_at} is not a line of the sources")
        elif claim.quote not in lines[int(line) - 1]:
            wrong.append(f"{claim.defined_at}: {claim.id}: {claim.quote!r} is not on {claim.quote_at}")
    assert not wrong, "\n".join(wrong)
