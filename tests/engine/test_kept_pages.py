"""The book's pages kept between runs: a page is parsed again exactly when its bytes or the parser changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness.paths import ROOT

from verified_book.book import bindings
from verified_book.book.bindings import book_pages, read_page
from verified_book.engine import kept_pages

PAGE = "# A page\n\nFP16's largest value is [65,504](claim:formats.fp16.max), and 3 is unbound.\n"


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pages parsed, by file name, as `kept_pages` asks the parser for them."""
    calls: list[str] = []

    def counted(path: Path, root: Path, text: str | None = None) -> Any:
        calls.append(path.name)
        return read_page(path, root, text)

    monkeypatch.setattr(kept_pages, "read_page", counted)
    return calls


def _book(root: Path) -> list[Path]:
    (root / "pages").mkdir(parents=True)
    for name in ("a.md", "b.md"):
        (root / "pages" / name).write_text(PAGE.replace("A page", f"Page {name}"), encoding="utf-8")
    return book_pages(root / "pages")


def test_a_page_whose_bytes_are_unchanged_is_not_parsed_again(tmp_path: Path, parsed: list[str]) -> None:
    paths = _book(tmp_path)
    first = kept_pages.read_pages(paths, tmp_path)
    assert parsed == ["a.md", "b.md"]
    again = kept_pages.read_pages(paths, tmp_path)
    assert parsed == ["a.md", "b.md"], "nothing parsed the second time"
    assert again == first == [read_page(p, tmp_path) for p in paths]
    paths[1].write_text(PAGE.replace("65,504", "65,505"), encoding="utf-8")
    third = kept_pages.read_pages(paths, tmp_path)
    assert parsed == ["a.md", "b.md", "b.md"], "only the saved page is parsed"
    assert third == [read_page(p, tmp_path) for p in paths] and third[1].bindings[0].text == "65,505"
    paths[1].write_text(PAGE.replace("A page", "Page b.md"), encoding="utf-8")  # put back as it was
    assert kept_pages.read_pages(paths, tmp_path) == first and parsed == ["a.md", "b.md", "b.md"]


def test_an_edit_writes_the_page_it_changed_and_no_other(
    tmp_path: Path, parsed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _book(tmp_path)
    kept_pages.read_pages(paths, tmp_path)
    written: list[object] = []
    keep = kept_pages.kept.keep
    monkeypatch.setattr(
        kept_pages.kept, "keep", lambda path, value, at_most: written.append(value) or keep(path, value, at_most)
    )
    paths[1].write_text(PAGE.replace("65,504", "65,505"), encoding="utf-8")
    kept_pages.read_pages(paths, tmp_path)
    assert [page.file for page in written] == ["pages/b.md"]  # type: ignore[attr-defined]
    assert len(list((tmp_path / kept_pages.FOLDER).glob("*/*.pickle"))) == 3


def test_another_parser_reads_every_page_again(
    tmp_path: Path, parsed: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _book(tmp_path)
    kept_pages.read_pages(paths, tmp_path)
    code_of = kept_pages.kept.code_of
    monkeypatch.setattr(kept_pages.kept, "code_of", lambda names, homes: f"{code_of(names, homes)}\n# edited")
    kept_pages.read_pages(paths, tmp_path)
    assert parsed == ["a.md", "b.md", "a.md", "b.md"]
    monkeypatch.setattr(kept_pages.kept, "code_of", lambda names, homes: None)  # a parser edited since it loaded
    kept_pages.read_pages(paths, tmp_path)
    assert parsed[4:] == ["a.md", "b.md"] and not list((tmp_path / kept_pages.FOLDER).glob(".*"))


def test_a_damaged_or_unwritable_keep_costs_the_parse_and_nothing_else(tmp_path: Path, parsed: list[str]) -> None:
    paths = _book(tmp_path)
    kept_pages.read_pages(paths, tmp_path)
    for kept in (tmp_path / kept_pages.FOLDER).glob("*/*.pickle"):
        kept.write_bytes(b"not a pickle")
    assert kept_pages.read_pages(paths, tmp_path) == [read_page(p, tmp_path) for p in paths]
    assert parsed == ["a.md", "b.md", "a.md", "b.md"]
    (tmp_path / ".cache").chmod(0o500)
    try:
        paths[0].write_text(PAGE.replace("3 is", "4 is"), encoding="utf-8")
        assert kept_pages.read_pages(paths, tmp_path)[0] == read_page(paths[0], tmp_path)
    finally:
        (tmp_path / ".cache").chmod(0o700)


def test_an_unreadable_page_is_its_error_and_the_others_are_read(tmp_path: Path) -> None:
    paths = _book(tmp_path)
    paths[0].write_bytes(b"\xff\xfe not utf-8")
    first, second = kept_pages.read_pages(paths, tmp_path)
    assert isinstance(first, UnicodeDecodeError) and second == read_page(paths[1], tmp_path)
    with pytest.raises(UnicodeDecodeError):
        kept_pages.read_or_raise(paths, tmp_path)


def test_the_books_pages_kept_are_the_pages_read(tmp_path: Path) -> None:
    """Every page of this book, kept and taken back, is the page the parser reads (`bindings` dataclasses compare
    by value: each binding, unbound number and malformed binding)."""
    paths = book_pages(ROOT / "book")
    fresh = [read_page(p, ROOT) for p in paths]
    assert kept_pages.read_pages(paths, ROOT) == fresh
    assert kept_pages.read_pages(paths, ROOT) == fresh
    assert bindings.Page in {type(p) for p in fresh}


def test_a_kept_page_reads_its_figures_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page taken from the keep holds no figure read (the largest part of a kept page): each binding reads
    its figure from its text when first asked, the figure a fresh read gives."""
    paths = _book(tmp_path)
    fresh = kept_pages.read_or_raise(paths, tmp_path)[0]
    read: list[str] = []
    monkeypatch.setattr(bindings, "parse", lambda text: read.append(text) or fresh.bindings[0].printed)
    taken = kept_pages.read_or_raise(paths, tmp_path)[0]
    assert taken.bindings == fresh.bindings and taken.bindings[0] is not fresh.bindings[0]
    assert read == []  # nothing read at load
    assert taken.bindings[0].printed == fresh.bindings[0].printed and read == ["65,504"]
    assert taken.bindings[0].printed is taken.bindings[0].printed and read == ["65,504"]  # once
