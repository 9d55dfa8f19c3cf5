"""The README as a reader sees it rendered: every table whole, every paragraph a paragraph."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import markdown
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "CONTRIBUTING.md", "SECURITY.md", "docs/CONTRIBUTING-RESULTS.md")


class _Tables(HTMLParser):
    """The rendered tables, each as its header row and body rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict[str, list[list[str]]]] = []
        self._part = ""
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "table":
            self.tables.append({"head": [], "body": []})
        elif tag in ("thead", "tbody"):
            self._part = "head" if tag == "thead" else "body"
        elif tag == "tr" and self.tables:
            self.tables[-1][self._part].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.tables:
            self.tables[-1][self._part][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def rendered(name: str) -> str:
    return markdown.markdown((ROOT / name).read_text(encoding="utf-8"), extensions=["tables", "fenced_code"])


@pytest.mark.parametrize("name", DOCS)
def test_every_table_renders_with_one_header_and_rows_of_its_width(name: str) -> None:
    parser = _Tables()
    parser.feed(rendered(name))
    for n, table in enumerate(parser.tables, 1):
        header = table["head"][0] if table["head"] else []
        assert header, f"{name}: table {n} has no header row"
        for row in table["body"]:
            assert row != header, f"{name}: table {n} repeats its header {header} as a row"
            texts = [cell for cell in row if cell]
            assert len(texts) > 1 or len(header) == 1, (
                f"{name}: table {n} has a row of one cell, {row}: a stray sentence?"
            )


def test_the_layout_section_opens_with_its_sentence_then_its_table() -> None:
    html_text = rendered("README.md")
    layout = html_text[html_text.index("<h2>Layout</h2>") :]
    assert re.match(r"<h2>Layout</h2>\s*<p>Three rooms: ", layout), layout[:200]
    assert layout.count("<table>", 0, layout.index("<h2>", 5)) == 1


def test_the_serve_times_the_readme_quotes_are_the_benchmark_s_last() -> None:
    """The README quotes `verified-book serve`'s start and save-to-mark times from the benchmark's results
    file: a rerun of benchmarks/serve.py that moves them makes this fail until the sentence says so."""
    serve = json.loads((ROOT / "benchmarks/results/cpu-x86_64-2c.json").read_text(encoding="utf-8"))["serve"]
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    quoted = (
        f"stays up ({round(serve['start_s'])} s for this book on the 2-core machine of `benchmarks/results/`, "
        f"on {serve['date'][:10]})",
        f"`benchmarks/results/<machine>.json`: {serve['page_edit']['seconds']:.1f} s and "
        f"{serve['data_edit']['seconds']:.1f} s on that machine, the same day)",
    )
    for sentence in quoted:
        assert sentence in text, f"README.md: expected {sentence!r}, from the benchmark's results"
