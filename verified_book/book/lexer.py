"""A page's Markdown → regions: front matter, prose, fenced code blocks; and its includes.

Every reader of a page (the bindings scanner, the site's page transform, the figure
rewriter and its reread list, the snippet-output check) asks this module where a code
block starts and ends, so a line is code for all of them or for none. The fence rule is
CommonMark's: a fence is three or more backticks or tildes; a block is closed only by a
fence of the same character, at least as long, with nothing after it; a block left open
runs to the end of the page; a backtick fence's info string holds no backtick.

One rule is wider than CommonMark's on purpose: a fence may be indented by any number of
spaces or tabs. CommonMark counts indentation from the enclosing container (a list item,
an admonition, a content tab), and the book's pages put code inside containers indented
four spaces; this lexer knows no containers, so it takes an indented fence as a fence.

A fenced block whose info string's first word is `output` is a snippet's "what you
should see" text (`verified_book.book.snippet_output`). An include is a line
`--8<-- "path"` (pymdownx.snippets), in prose or inside a code block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Sequence

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<marker>`{3,}|~{3,})(?P<info>.*)$")
_INCLUDE = re.compile(r"""^(?P<indent>[ \t]*)--8<--\s*["']?(?P<path>[^"'\s]*)""")
FRONT_MATTER_END = ("---", "...")


@dataclass(frozen=True)
class Fence:
    """A fence line: its indentation, its run of backticks or tildes, and its info string (stripped)."""

    indent: str
    marker: str
    info: str

    @property
    def language(self) -> str:
        """The info string's first word, lower-cased: `python`, `output`, or empty."""
        words = self.info.split()
        return words[0].lower() if words else ""

    def closed_by(self, other: Fence) -> bool:
        """Whether `other` closes a block opened by this fence: same character, at least as long, no info."""
        return other.marker[0] == self.marker[0] and len(other.marker) >= len(self.marker) and not other.info


def fence_of(line: str) -> Fence | None:
    """The fence on `line`, or None when the line is not one."""
    match = _FENCE.match(line)
    if match is None:
        return None
    marker, info = match.group("marker"), match.group("info")
    if marker[0] == "`" and "`" in info:
        return None
    return Fence(match.group("indent"), marker, info.strip())


@dataclass(frozen=True)
class Region:
    """Lines `first` to `last` (1-based, inclusive) of a page, and their text."""

    first: int
    last: int
    lines: tuple[str, ...]

    def numbered(self) -> Iterator[tuple[int, str]]:
        """Each line of the region with its line number."""
        return enumerate(self.lines, self.first)


@dataclass(frozen=True)
class FrontMatter(Region):
    """The YAML block between `---` lines at the top of a page: neither prose nor code."""


@dataclass(frozen=True)
class Prose(Region):
    """A run of lines outside every fenced block and the front matter."""


@dataclass(frozen=True)
class CodeBlock(Region):
    """A fenced block, its fence lines included; `closing` is None when the page ends inside it."""

    fence: Fence
    closing: Fence | None

    @property
    def is_output(self) -> bool:
        """Whether the block shows a snippet's output (info string `output ...`)."""
        return self.fence.language == "output"

    @property
    def body(self) -> tuple[str, ...]:
        """The lines between the fences."""
        return self.lines[1:-1] if self.closing is not None else self.lines[1:]

    def numbered_body(self) -> Iterator[tuple[int, str]]:
        """Each line between the fences with its line number."""
        return enumerate(self.body, self.first + 1)


@dataclass(frozen=True)
class Include:
    """A `--8<-- "path"` line: where it is, the path as written, and whether it sits in a code block."""

    line: int
    indent: str
    path: str
    in_code: bool


def include_of(line: str) -> tuple[str, str] | None:
    """(indentation, path) of an include line, or None when the line includes nothing."""
    match = _INCLUDE.match(line)
    return (match.group("indent"), match.group("path")) if match else None


@dataclass(frozen=True)
class Document:
    """A page read once: its regions in order, each line in exactly one, and its includes."""

    regions: tuple[Region, ...]
    includes: tuple[Include, ...]

    def prose(self) -> Iterator[Prose]:
        return (r for r in self.regions if isinstance(r, Prose))

    def code_blocks(self) -> Iterator[CodeBlock]:
        return (r for r in self.regions if isinstance(r, CodeBlock))

    def output_blocks(self) -> Iterator[CodeBlock]:
        return (r for r in self.code_blocks() if r.is_output)


def lex(lines: Sequence[str], *, front_matter: bool = True, first_line: int = 1) -> Document:
    """Read a page's lines into regions. `front_matter=False` for text whose front matter the site
    generator has already taken off; `first_line` is the file's number of `lines[0]`."""
    regions: list[Region] = []
    includes: list[Include] = []
    index = 0
    if front_matter and lines and lines[0].strip() == "---":
        index = 1
        while index < len(lines) and lines[index].strip() not in FRONT_MATTER_END:
            index += 1
        index = min(index + 1, len(lines))
        regions.append(FrontMatter(first_line, first_line + index - 1, tuple(lines[:index])))
    prose_start = index
    while index < len(lines):
        opening = fence_of(lines[index])
        if opening is None:
            _include(includes, lines[index], first_line + index, False)
            index += 1
            continue
        if prose_start < index:
            regions.append(Prose(first_line + prose_start, first_line + index - 1, tuple(lines[prose_start:index])))
        end, closing = index + 1, None
        while end < len(lines):
            candidate = fence_of(lines[end])
            if candidate is not None and opening.closed_by(candidate):
                closing = candidate
                break
            _include(includes, lines[end], first_line + end, True)
            end += 1
        last = end if closing is not None else len(lines) - 1
        regions.append(
            CodeBlock(first_line + index, first_line + last, tuple(lines[index : last + 1]), opening, closing)
        )
        index = prose_start = last + 1
    if prose_start < len(lines):
        regions.append(Prose(first_line + prose_start, first_line + len(lines) - 1, tuple(lines[prose_start:])))
    return Document(tuple(regions), tuple(includes))


def _include(out: list[Include], line: str, number: int, in_code: bool) -> None:
    found = include_of(line)
    if found is not None:
        out.append(Include(number, found[0], found[1], in_code))
