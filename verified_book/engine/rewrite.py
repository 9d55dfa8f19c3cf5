"""Rewrite stale figures in the book in place, the way `--force-regen` rewrites a data file.

Only figures judged stale in this run are touched, each at its printed precision and
in its printed notation; a figure that holds, a disputed one, and one whose backends
disagree among themselves are left as they are. A figure is rewritten only where its new
text, read as the book reads it, holds on every backend the run computed it on; after
the rewrite the run reads the pages again and judges the rewritten figures once more.

A rewritten figure can make its sentence false while every figure in it holds: "the
Spark's ceiling becomes 17.1 ... while the Ryzen's 15.6 stays as printed" compares
figures, and only the author can reread it. `sentences_to_reread` lists each sentence
where a rewritten figure stands beside other figures or comparative words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from verified_book.book.bindings import BINDING, Binding, Book
from verified_book.book.figures import FigureSyntaxError
from verified_book.book.lexer import lex
from verified_book.vocabulary import Status, worst

if TYPE_CHECKING:
    from verified_book.engine.check import Verifier


@dataclass(frozen=True)
class Rewrite:
    """One figure rewritten: where it stands, its claim, and its text before and after."""

    file: str
    line: int
    column: int
    claim_id: str
    old: str
    new: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} ({self.old} → {self.new})"


def rewritten(verifier: "Verifier", binding: Binding) -> tuple[str, str] | None:
    """The text a stale figure is rewritten to, and the status it has then, judged before it is written
    (its value read as the book reads it, against every backend's): None where this run gives
    no single value (a backend failed, backends disagree, the figure is disputed or holds) or where the
    new text, read as the book reads it, would not hold on every backend."""
    from verified_book.engine.check import judge

    claim = verifier.registry.get(binding.claim_id)
    if claim is None or binding.printed is None or binding.disputed:
        return None
    backends = verifier.backends_for(claim)
    verdicts = [judge(binding, verifier.outcome(claim, b), verifier.machine) for b in backends]
    if not any(v.status == Status.STALE for v in verdicts) or any(
        v.status in (Status.FAILED, "broken") for v in verdicts
    ):
        return None
    texts = {
        binding.printed.render(verifier.outcome(claim, b).value)
        for b, v in zip(backends, verdicts, strict=True)
        if v.status == Status.STALE
    }
    if len(texts) != 1:
        return None
    new = texts.pop()
    candidate = binding.restated(new)
    try:
        if candidate.printed is None:  # the new text read as the book reads it
            return None
    except FigureSyntaxError:
        return None
    again = [judge(candidate, verifier.outcome(claim, b), verifier.machine) for b in backends]
    if any(v.status in (Status.STALE, Status.FAILED) for v in again):
        return None
    judged = [v.status for v in again if v.status != Status.SKIPPED]
    return new, worst(judged) if judged else Status.SKIPPED


def rewrite_stale(verifier: "Verifier", root: Path) -> list[Rewrite]:
    """Rewrite every stale figure from the values this run computed; return each rewrite, by place."""
    plans: dict[tuple[str, int, int], tuple[Binding, str]] = {}
    for claim_id, _ in list(verifier.judged):
        for binding in verifier.bindings.get(claim_id, []):
            key = (binding.file, binding.line, binding.column)
            if key in plans:
                continue
            found = rewritten(verifier, binding)
            if found is not None:
                plans[key] = (binding, found[0])
    edits: dict[str, list[tuple[int, int, Binding, str]]] = {}
    for (file, line, column), (binding, new) in plans.items():
        edits.setdefault(file, []).append((line, column, binding, new))
    changed = []
    for file, items in edits.items():
        path = root / file
        lines = path.read_text(encoding="utf-8").split("\n")
        done: list[tuple[int, int, int, Binding, str]] = []  # line, column, change in length, binding, new
        for line, column, binding, new in sorted(items, key=lambda e: (e[0], e[1]), reverse=True):
            text = lines[line - 1]
            match = BINDING.match(text, column - 1)
            if not match:
                continue
            restated = binding.restated(new)
            title_part = f' "{restated.title}"' if restated.title is not None else ""
            link = f"[{restated.text}](claim:{match.group('id')}{title_part})"
            lines[line - 1] = text[: match.start()] + link + text[match.end() :]
            done.append((line, column, len(link) - (match.end() - match.start()), binding, new))
        for line, column, _, binding, new in done:  # each at its column in the rewritten line
            shift = sum(d for ln, c, d, _, _ in done if ln == line and c < column)
            changed.append(Rewrite(file, line, column + shift, binding.claim_id, binding.stated, new))
        path.write_text("\n".join(lines), encoding="utf-8")
    return sorted(changed, key=lambda r: (r.file, r.line, r.column))


def rejudge(verifier: "Verifier", book: Book, changed: list[Rewrite]) -> list[str]:
    """Take the book as the rewrite left it and judge each rewritten figure again against the values
    this run computed (nothing is computed twice); the messages of any that still do not hold."""
    from verified_book.engine.check import judge

    verifier.book, verifier.bindings = book, book.by_claim()
    places = {(r.file, r.line) for r in changed}
    problems = []
    for binding in book.bindings():
        claim = verifier.registry.get(binding.claim_id)
        if (binding.file, binding.line) not in places or claim is None:
            continue
        for b in verifier.backends_for(claim):
            verdict = judge(binding, verifier.outcome(claim, b), verifier.machine)
            if verdict.status in (Status.STALE, Status.FAILED):
                problems.append(verdict.message)
    return problems


#: words that compare figures or say one follows from another: a sentence holding a rewritten figure
#: and one of these may have turned false while each figure in it holds
COMPARATIVES = (
    "becomes",
    "become",
    "than",
    "stay as printed",
    "stays as printed",
    "as printed",
    "times",
    "twice",
    "half",
    "same",
    "while",
    "whereas",
    "instead",
    "compared",
    "versus",
    "vs",
)
_COMPARATIVE = re.compile(
    r"\b(" + "|".join(re.escape(w) for w in sorted(COMPARATIVES, key=len, reverse=True)) + r")\b", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\[*_\"'(])")


@dataclass(frozen=True)
class Reread:
    """A sentence the author should reread after a rewrite: where it starts, its text, and why."""

    file: str
    line: int
    sentence: str
    figures: tuple[str, ...]  # the rewritten figures in it, as now printed
    why: str

    def __str__(self) -> str:
        return (
            f'{self.file}:{self.line}: reread: {", ".join(self.figures)} rewritten beside {self.why}: "{self.sentence}"'
        )


def _paragraphs(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) line numbers of each prose paragraph: not code, output or a table's rows."""
    out: list[tuple[int, int]] = []
    for region in lex(lines).prose():
        start: int | None = None
        for number, text in region.numbered():
            prose = text.strip() and not text.lstrip().startswith(("|", "#"))
            if prose and start is None:
                start = number
            elif not prose and start is not None:
                out.append((start, number - 1))
                start = None
        if start is not None:
            out.append((start, region.last))
    return out


def sentences_to_reread(root: Path, changed: list[Rewrite]) -> list[Reread]:
    """Each prose sentence in which a rewritten figure stands beside other figures or comparative words."""
    out: list[Reread] = []
    by_file: dict[str, list[Rewrite]] = {}
    for r in changed:
        by_file.setdefault(r.file, []).append(r)
    for file, rewrites in sorted(by_file.items()):
        lines = (root / file).read_text(encoding="utf-8").split("\n")
        for first, last in _paragraphs(lines):
            mine = [r for r in rewrites if first <= r.line <= last]
            if not mine:
                continue
            text = "\n".join(lines[first - 1 : last])
            starts = [0] + [m.end() for m in _SENTENCE_END.finditer(text)]
            ends = starts[1:] + [len(text)]
            for start, end in zip(starts, ends, strict=True):
                sentence = text[start:end]
                line = first + text[:start].count("\n")
                span_last = first + text[:end].rstrip().count("\n")
                inside = [
                    r for r in mine if line <= r.line <= span_last and _holds_rewrite(text, start, end, r, first, lines)
                ]
                if not inside:
                    continue
                links = list(BINDING.finditer(sentence))
                others = len(links) - len(inside)
                plain = BINDING.sub(lambda m: m.group("text"), sentence)
                words = list(dict.fromkeys(m.group(1).lower() for m in _COMPARATIVE.finditer(plain)))
                if not others and not words:
                    continue
                why = " and ".join(
                    x
                    for x in (
                        f"{others} other figure{'s' if others != 1 else ''}" if others else "",
                        ", ".join(f"'{w}'" for w in words),
                    )
                    if x
                )
                out.append(Reread(file, line, " ".join(plain.split()), tuple(r.new for r in inside), why))
    return out


def _holds_rewrite(text: str, start: int, end: int, rewrite: Rewrite, first: int, lines: list[str]) -> bool:
    """Whether the rewritten figure's link starts inside text[start:end] (a paragraph from line `first`)."""
    offset = sum(len(lines[n]) + 1 for n in range(first - 1, rewrite.line - 1)) + rewrite.column - 1
    return start <= offset < end
