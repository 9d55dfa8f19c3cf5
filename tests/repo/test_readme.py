"""The README and the docs as a reader sees them rendered: every table whole; the README a front door."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import markdown
import pytest
from harness.paths import ROOT

DOCS = (
    "README.md",
    "CONTRIBUTING.md",
    "SECURITY.md",
    "CHANGELOG.md",
    *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")),
)


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


README_LIMIT = 6 * 1024


def test_the_readme_is_a_front_door_not_a_manual() -> None:
    """The manual lives in docs/; a README past 6 KB has started to become one again."""
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT, f"README.md: {size} bytes, expected at most {README_LIMIT}; move the detail to docs/"


def test_the_readme_s_own_book_lines_call_init_as_the_command_does() -> None:
    """The five lines of "A book of your own" run `verified-book init` with the arguments its help gives."""
    command = Path(sys.executable).with_name("verified-book")
    help_text = subprocess.run([str(command), "--help"], capture_output=True, text=True, check=True).stdout
    call = next(line.strip() for line in help_text.splitlines() if line.strip().startswith("verified-book init"))
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text[text.index("## A book of your own") :].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = block.strip().splitlines()
    assert len(lines) == 5, f"README.md: a book of your own in {len(lines)} lines, expected 5"
    init = next(line for line in lines if line.startswith("verified-book init"))
    assert re.fullmatch(r"verified-book init \[FOLDER\]", call), f"`verified-book --help` now says {call!r}"
    assert re.fullmatch(r"verified-book init [\w.-]+", init), f"README.md: {init!r} does not match {call!r}"


def test_the_readme_s_benchmark_figures_are_those_of_the_results_files() -> None:
    """Written by `python3 benchmarks/run.py --readme`, never by hand."""
    from benchmarks import run as bench

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start, end = text.index(bench.README_BLOCK[0]), text.index(bench.README_BLOCK[1]) + len(bench.README_BLOCK[1])
    assert text[start:end] == bench.readme_block(), (
        "README.md: its benchmark figures differ from benchmarks/results/; run python3 benchmarks/run.py --readme"
    )


def test_the_readme_s_figures_follow_the_results_file(tmp_path: Path) -> None:
    from benchmarks import run as bench

    first = {"date": "2031-01-02T03:04:05+0000", "seconds": 41.2, "setup_s": 23.4, "verdict_s": 15.1, "met": True}
    first |= {"installer": "uv 9.9.9", "target_s": 45.0, "with_pip": {"setup_s": 99.6}, "load_average_at_start": 3.14}
    result = {"machine": "box-2c", "cpu": "Some CPU", "cores": 2, "first_verdict": first}
    (tmp_path / "box-2c.json").write_text(json.dumps(result), encoding="utf-8")
    (tmp_path / "other.json").write_text(json.dumps({"machine": "other", "cores": 4}), encoding="utf-8")
    block = bench.readme_block(tmp_path)
    assert block.splitlines()[1] == (
        "Fresh clone to first verdict, box-2c (Some CPU, load 3.1), 2031-01-02: 41 s; set-up 23 s with "
        "uv 9.9.9 (100 s with pip), verdict 15 s; target 45 s met (`benchmarks/results/box-2c.json`)."
    )
    assert len(block.splitlines()) == 3, "a results file without a fresh clone's figures adds no line"
