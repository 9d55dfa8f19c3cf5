"""Every link a reader of the README, CONTRIBUTING and the docs can follow leads somewhere.

A relative link must name a file of the repository (from docs/, a file of docs/, which is all the
docs' site holds), and its anchor a heading of that file (as MkDocs' and GitHub's slugs make them);
an http(s) link must at least be a well-formed URL. No
network is reached: a site that moved is not this suite's to find.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from harness.paths import ROOT

PAGES = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "SECURITY.md", ROOT / "CHANGELOG.md"]
    + list((ROOT / "docs").glob("*.md"))
)
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
#: link schemes that are not addresses: a figure bound to its claim, mail
NOT_ADDRESSES = ("claim:", "mailto:")


def prose_lines(text: str, code_spans: bool = False) -> list[tuple[int, str]]:
    """The lines outside fenced code, each with its number; inline code removed unless `code_spans`."""
    lines, fence = [], ""
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence:
            if opened and opened[1][0] == fence[0] and len(opened[1]) >= len(fence) and not line.strip()[len(fence) :]:
                fence = ""
            continue
        if opened:
            fence = opened[1]
            continue
        lines.append((number, line if code_spans else CODE_SPAN.sub("", line)))
    return lines


def links(text: str) -> list[tuple[int, str]]:
    return [(number, m[1]) for number, line in prose_lines(text) for m in LINK.finditer(line)]


def slugs(heading: str) -> set[str]:
    """A heading's anchor as MkDocs' toc makes it and as GitHub makes it."""
    text = re.sub(r"`|\*\*?|__?", "", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)).strip()
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    mkdocs = re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", ascii_text).strip().lower())
    github = re.sub(r" ", "-", re.sub(r"[^\w\- ]", "", text.lower()))
    return {mkdocs, github}


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8"), code_spans=True):
        heading = HEADING.match(line)
        if heading:
            found |= slugs(heading[2])
        found |= set(re.findall(r"""\bid=["']([^"']+)["']""", line))
    return found


def problems(page: Path, root: Path = ROOT) -> list[str]:
    """Each link of `page` that leads nowhere, as `file:line: what`."""
    where = page.relative_to(root)
    found = []
    for number, target in links(page.read_text(encoding="utf-8")):
        if target.startswith(NOT_ADDRESSES):
            continue
        parts = urlsplit(target)
        if parts.scheme in ("http", "https"):
            if not parts.netloc or "." not in parts.netloc:
                found.append(f"{where}:{number}: {target!r} is not a well-formed URL")
            continue
        if parts.scheme or parts.netloc:
            found.append(f"{where}:{number}: {target!r}: expected a relative path or an http(s) URL")
            continue
        path = (page.parent / unquote(parts.path)).resolve() if parts.path else page
        if not path.exists():
            found.append(f"{where}:{number}: {target!r} names {path.relative_to(root)}, which does not exist")
            continue
        docs = root / "docs"
        if page.is_relative_to(docs) and not path.is_relative_to(docs):
            found.append(f"{where}:{number}: {target!r} leaves docs/, which the docs' site does not hold")
            continue
        if parts.fragment and path.suffix == ".md" and parts.fragment not in anchors(path):
            found.append(
                f"{where}:{number}: {target!r}: {path.relative_to(root)} has no heading with the anchor "
                f"#{parts.fragment}"
            )
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    assert problems(page) == []


def test_a_link_to_a_missing_file_or_heading_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## A section: its `name`\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-section-its-name) [gone](missing.md) [no anchor](other.md#nowhere)\n"
        "`[in code](missing.md)` [bad](https://) [fine](https://example.org/x) [figure](claim:a.b)\n"
        "```\n[in a fence](missing.md)\n```\n",
        encoding="utf-8",
    )
    assert problems(page, tmp_path) == [
        "page.md:1: 'missing.md' names missing.md, which does not exist",
        "page.md:1: 'other.md#nowhere': other.md has no heading with the anchor #nowhere",
        "page.md:2: 'https://' is not a well-formed URL",
    ]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("[up](../other.md) [here](guide.md)\n", encoding="utf-8")
    assert problems(tmp_path / "docs" / "guide.md", tmp_path) == [
        "docs/guide.md:1: '../other.md' leaves docs/, which the docs' site does not hold"
    ]


def test_every_page_of_the_docs_is_checked() -> None:
    assert {p.name for p in PAGES} >= {"README.md", "CONTRIBUTING.md", "index.md", "install.md"}
