"""The machines page's claims × machines matrix leaves its rows to a data file for each chapter, which the page's
script loads when a reader picks the chapter: a course's matrix holds every claim on every machine, and on the page
it would be most of the site. A generator that copies no data file keeps them on the page."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_render import CLAIMS, PAGE, assert_inert, elements, hostile_results, machine, record

from verified_book.book.bindings import Book, read_page
from verified_book.site import build as site_book
from verified_book.site import machines as site_machines
from verified_book.site import render

SECOND = "# Another page\n\nThe largest is [65,504](claim:t.max) again.\n"
PLACEHOLDER = "vb-panel-test-matrix"


@pytest.fixture
def book(tmp_path: Path) -> Book:
    """Two chapters: the first prints three claims, the second one of them again."""
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "a.md").write_text(PAGE, encoding="utf-8")
    (tmp_path / "book" / "b.md").write_text(SECOND, encoding="utf-8")
    return Book(tmp_path, [read_page(tmp_path / "book" / n, tmp_path) for n in ("a.md", "b.md")], [])


CHAPTERS = {
    "book/a.md": site_machines.Chapter("book/a.md", "A page", "a.html"),
    "book/b.md": site_machines.Chapter("book/b.md", "Another page", "b.html"),
}
IDS = [*CLAIMS, "t.unprinted"]  # a claim of the book no page prints


def machines_page(book: Book, rows: site_machines.MatrixRows | None, results: Any = None) -> str:
    results = results or {"alpha": machine("alpha", {"t.max": {"numpy": record("verified", 65504)}})}
    generated = site_machines.render_machines(results, book, IDS, CHAPTERS, matrix_rows=rows)
    return render.fill_blocks(generated.markdown, generated.blocks)


def claims_in(html: str) -> list[str | None]:
    return [attrs.get("data-claim-row") for tag, attrs in elements(html) if tag == "tr" and "data-claim-row" in attrs]


def matrix_of(html: str) -> dict[str, str | None]:
    (attrs,) = [a for tag, a in elements(html) if tag == "div" and "data-vb-matrix" in a]
    return attrs


def test_each_chapter_s_file_holds_the_rows_of_the_claims_it_prints_and_the_page_holds_none(book: Book) -> None:
    rows = site_machines.MatrixRows(PLACEHOLDER)
    html = machines_page(book, rows)
    assert claims_in(html) == [], "the table's body waits for the script"
    assert matrix_of(html)["data-vb-rows"] == PLACEHOLDER and matrix_of(html)["data-vb-total"] == str(len(IDS))
    assert "data-vb-wait" in html
    files = {key: claims_in(str(render.Markup().join(found))) for key, found in rows.files.items()}
    assert files == {
        "c0": ["t.ceiling", "t.max", "t.quoted"],
        "c1": ["t.max"],  # printed in both chapters: in both files, shown once under all chapters
        "none": ["t.unprinted"],
    }
    selected = [a.get("value") for tag, a in elements(html) if tag == "option" and "selected" in a]
    assert selected == ["c0"], "the page opens on its first chapter's rows, not the course's"


def test_without_data_files_the_page_holds_every_row(book: Book) -> None:
    html = machines_page(book, None)
    assert claims_in(html) == ["t.ceiling", "t.max", "t.quoted", "t.unprinted"]
    assert matrix_of(html)["data-vb-rows"] == "" and "data-vb-wait" not in html
    assert not [a for tag, a in elements(html) if tag == "option" and "selected" in a]


def test_the_files_are_written_beside_the_page_and_the_table_names_each_with_its_digest(
    book: Book, tmp_path: Path
) -> None:
    rows = site_machines.MatrixRows(PLACEHOLDER)
    html = site_book.with_matrix_rows(machines_page(book, rows), tmp_path / "site", "machines/index.html", rows)
    addresses = json.loads(matrix_of(html)["data-vb-rows"] or "")
    assert sorted(addresses) == ["c0", "c1", "none"] and PLACEHOLDER not in html
    for key, address in addresses.items():
        name, _, version = address.partition("?v=")
        assert name == f"index.matrix-{key}.js" and re.fullmatch(r"[0-9a-f]{12}", version)
        written = tmp_path / "site" / "machines" / name
        assert written.read_bytes().isascii(), "a data file reads the same whatever encoding the server names"
        function, (found_key, found_rows) = site_book.read_data_file(written)
        assert (function, found_key) == (site_machines.MATRIX_FUNCTION, key)
        assert claims_in(found_rows) == claims_in(str(render.Markup().join(rows.files[key])))


def test_strings_from_a_results_file_are_escaped_in_the_matrix_s_files(book: Book, tmp_path: Path) -> None:
    rows = site_machines.MatrixRows(PLACEHOLDER)
    html = site_book.with_matrix_rows(
        machines_page(book, rows, hostile_results(book.pages[0])), tmp_path, "machines.html", rows
    )
    assert_inert(html)
    written = [site_book.read_data_file(p)[1][1] for p in tmp_path.glob("*.js")]
    assert written and "&lt;script&gt;" in "".join(written)
    for found_rows in written:
        assert_inert(found_rows)
