"""Claims' fingerprints kept between processes: taken back while the claim packages' sources are the same, read
again from the code after any edit to them, and never kept from a source newer than the code loaded."""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any, Iterator

import pytest
from harness.live_book import opened_copy

from verified_book.engine import provenance
from verified_book.engine.config import open_book, read_config
from verified_book.engine.kept_fingerprints import FOLDER, KeptFingerprints
from verified_book.records import kept


@pytest.fixture
def book(tmp_path: Path) -> Iterator[Path]:
    with opened_copy(tmp_path / "minimal") as root:
        yield root


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The claims whose code was read, by claim function, each time a process (here: fresh caches) asks."""
    read: list[str] = []
    own_sources = provenance._own_sources

    def counted(fn: Any, *args: Any, **kwargs: Any) -> list[str]:
        read.append(fn.__qualname__)
        return own_sources(fn, *args, **kwargs)

    monkeypatch.setattr(provenance, "_own_sources", counted)
    monkeypatch.setattr(kept, "newer_than_this_process", lambda path: False)  # the copy is written after start
    return read


def _answers(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[str, frozenset[str]]]:
    """Every claim's fingerprint and libraries, as a new process opening the book at `root` reads them."""
    monkeypatch.setattr(provenance, "_CODE_CACHE", weakref.WeakKeyDictionary())
    monkeypatch.setattr(provenance, "_LIBRARIES_CACHE", weakref.WeakKeyDictionary())
    opened = open_book(read_config(root))
    opened.fingerprints = KeptFingerprints(root, ["book_claims"])
    with opened.opened():
        return {c.id: (provenance.code_fingerprint(c), provenance.libraries_of(c)) for c in opened.registry}


QUARTER = '''
from fractions import Fraction
from verified_book import claim


@claim("quarter.of_one", kind="exact")
def of_one():
    """A quarter of one."""
    return Fraction(1, 4)
'''


def _states(root: Path) -> list[Path]:
    """The states of the sources kept: a folder each, a file in it for each module's claims."""
    return [p for p in (root / FOLDER).iterdir() if p.is_dir()]


def test_an_unchanged_book_reads_no_claims_code_again(
    book: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _answers(book, monkeypatch)
    assert first and reads, "the first process reads every claim's code"
    assert len(_states(book)) == 1
    reads.clear()
    assert _answers(book, monkeypatch) == first
    assert reads == [], "the next process takes every answer back"


def test_an_edit_to_the_claims_code_reads_every_claim_again(
    book: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _answers(book, monkeypatch)
    module = next((book / "book_claims").rglob("*.py"))
    module.write_text(module.read_text() + "\n# an edit that changes no claim\n")
    reads.clear()
    assert _answers(book, monkeypatch) == first
    assert reads, "the claims' code is read again"
    assert len(_states(book)) == 2


def test_a_source_newer_than_the_code_loaded_keeps_nothing(
    book: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kept, "newer_than_this_process", lambda path: True)
    first = _answers(book, monkeypatch)
    reads.clear()
    assert _answers(book, monkeypatch) == first and reads, "each process reads the code again"
    assert not (book / FOLDER).exists()


def test_a_process_asking_about_one_modules_claims_takes_back_that_modules_answers_alone(
    book: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (book / "book_claims" / "topics" / "quarter.py").write_text(QUARTER)
    first = _answers(book, monkeypatch)
    (state,) = _states(book)
    modules = sorted(p.stem for p in state.glob("*.pickle"))
    assert modules == ["book_claims.topics.half", "book_claims.topics.quarter"]
    reads.clear()
    taken: list[str] = []
    take = kept.taken
    monkeypatch.setattr(kept, "taken", lambda path: taken.append(path.stem) or take(path))
    monkeypatch.setattr(provenance, "_CODE_CACHE", weakref.WeakKeyDictionary())
    opened = open_book(read_config(book))
    opened.fingerprints = KeptFingerprints(book, ["book_claims"])
    with opened.opened():
        claim = next(c for c in opened.registry if c.compute.__module__ == modules[0])
        assert provenance.code_fingerprint(claim) == first[claim.id][0]
    assert taken == [modules[0]] and reads == []
