"""What one save answers in `verified-book serve`: the files of the change, by what they are to the book, and
what the warm book did about them (the line the terminal prints, and what tests read)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from verified_book.book.bindings import Binding
from verified_book.records.record import Check
from verified_book.vocabulary import LABELS

Key = Check


@dataclass
class Report:
    """What one change did, for its terminal line and for tests."""

    what: str
    recomputed: list[Key] = field(default_factory=list)
    figures: dict[Binding, str] = field(default_factory=dict)  # each figure touched and its status here
    problems: list[str] = field(default_factory=list)  # a line each, file:line first
    pages: set[str] = field(default_factory=set)  # pages (relative to the root) whose figures changed
    held_back: int = 0
    rebuild: bool = False  # the whole site, not only `pages` (its config, another run's records, a page added or gone)
    restart: str | None = None  # why the process must start again
    invalidated: dict[Key, str] = field(default_factory=dict)  # each value the rule named, and why
    snippets: set[str] = field(default_factory=set)  # snippets saved (as the book shows them): pages including them

    def line(self) -> str:
        counts: dict[str, int] = {}
        for status in self.figures.values():
            counts[status] = counts.get(status, 0) + 1
        claims = sorted({c for c, _ in self.recomputed})
        ran = (
            (
                f"{len(self.recomputed)} (claim, backend) recomputed: "
                + ", ".join(claims[:5])
                + (f" and {len(claims) - 5} more" if len(claims) > 5 else "")
            )
            if self.recomputed
            else "no claim ran"
        )
        shown = ", ".join(f"{n} {LABELS.get(s, s)}" for s, n in sorted(counts.items(), key=lambda i: (-i[1], i[0])))
        text = f"{self.what}: {len(self.figures)} figure(s) touched" + (f" ({shown})" if shown else "") + f"; {ran}"
        if self.held_back:
            text += f"; {self.held_back} measured held back (m to measure)"
        return "\n".join([text, *(f"  {p}" for p in self.problems)])


@dataclass
class Saved:
    """The files of one change, by what they are to the book."""

    pages: list[Path]
    data: list[Path]
    code: list[Path]
    snippets: list[Path]
    results: list[Path]
    site: list[Path]
    allowlist: list[Path]

    def answered(self) -> list[Path]:
        return [*self.pages, *self.data, *self.code, *self.snippets, *self.results, *self.site, *self.allowlist]
