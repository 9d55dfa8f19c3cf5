"""A snippet's printed output held against the book's "what you should see" blocks.

A page shows what a snippet prints in a fenced block whose info string is `output`
followed by the snippet's file name and, where some lines change from machine to
machine, which ones:

    ```output intensity.py varies=1,3-6
    weights: [201](claim:intensity.weight_mb) MB, read once per call; [12](claim:intensity.threads) CPU threads
    ...
    ```

Words after the name: `varies=<lines>` (1-based lines of the block, `1,3-6`) marks the
lines whose numbers are the machine's (times, rates, thread counts, library versions),
and `without=cuda` says the block is what a machine without a CUDA device prints (the
snippet prints its allocator report instead where one is present, so there the block is
not compared, and the record says why).

After a snippet runs, its stdout is compared with each block that names it, line by
line. On every line the text around the numbers must be the book's (whitespace runs
count as one space) and the numbers must stand in the same places. On a line that does
not vary, every number must also hold at the book's printed precision (`16.6` holds for
a printed 16.63; `524,288` only for 524,288), read as `verified_book.book.figures` reads a
figure. On a varying line only that shape is checked; its values are the measured
claims' business (such a claim may read its value from the run: `printed_figure`, used by
`verified_book.engine.snippet_figures`). The declaration is itself checked: a line with a figure bound to a
measured claim, or a library version, must be declared varying, and a declared line
must hold something that can vary (a figure of a measured claim, or a number no claim
binds), so a declaration cannot hide a line that should hold.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

from verified_book.book.bindings import BINDING
from verified_book.book.figures import FigureSyntaxError, parse
from verified_book.book.lexer import CodeBlock, lex
from verified_book.errors import BookError
from verified_book.vocabulary import Status, fingerprint

#: the statuses of one output block's comparison, as recorded under `outputs[<snippet>]["checked"]`
#: what an output block can come to: a subset of the one vocabulary
STATUSES = (Status.VERIFIED.value, Status.STALE.value, Status.SKIPPED.value)

#: devices a block can declare itself to be printed without (`without=cuda`)
WITHOUT = ("cuda",)

#: differing lines reported per block: past them a count, so a runaway snippet cannot swell the results file
MAX_REPORTED = 20

#: a number as a snippet prints it: sign, thousands groups, decimals, exponent, per cent, or a
#: dotted version (2.5.2); not a digit glued to a word (float32, e4m3, 3072x1024, layers.0)
NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)*(?:[eE][+-]?\d+)?%?(?![\w%]|\.\d)")
_VERSION = re.compile(r"^\d+\.\d+\.\d+")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


@dataclass(frozen=True)
class Number:
    """A number on a book's output line: its text, where it sits, and the claim that binds it, if any."""

    text: str
    start: int
    claim_id: str | None
    measured: bool
    figure: str = ""  # the text of the figure that binds it: (4096, 12288) holds two numbers
    figure_start: int = -1  # where that figure starts on the line, so its numbers are reported together

    @property
    def is_version(self) -> bool:
        return bool(_VERSION.match(self.text))


@dataclass(frozen=True)
class BookLine:
    """One line of an output block as a reader sees it (bindings replaced by their text)."""

    file: str
    line: int
    text: str
    numbers: tuple[Number, ...]
    varies: bool

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class OutputBlock:
    """A "what you should see" block: where it is, the snippet it shows, its lines."""

    file: str
    line: int
    snippet: str | None
    lines: tuple[BookLine, ...]
    without: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    end_line: int = 0
    #: the block's text, fence to fence (`block_hash`): what a record of its check compared
    sha256: str = ""

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class BlockComparison:
    """How one output block compared with one run of its snippet."""

    file: str
    line: int
    status: str
    message: str = ""
    sha256: str = ""  # the block's, as it was compared


def block_hash(text: str) -> str:
    """What a record keeps of the block it compared: a hash of its text, its fences included."""
    return fingerprint(text)


def numbers_in(text: str) -> list[tuple[int, int, str]]:
    """Each number printed in `text`: start, end, text."""
    return [(m.start(), m.end(), m.group(0)) for m in NUMBER.finditer(text)]


def shape(text: str) -> str:
    """A line's words with every number replaced by `#` and whitespace runs by one space."""
    return " ".join(NUMBER.sub("#", text).split())


def parse_info(info: str) -> tuple[str | None, frozenset[int], tuple[str, ...], list[str]]:
    """An output fence's info string: the snippet it names, its varying lines, what it is printed without, problems."""
    words = info.split()
    snippet: str | None = None
    varies: set[int] = set()
    without: list[str] = []
    problems: list[str] = []
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if not eq and word.endswith(".py"):
            if snippet is not None:
                problems.append(f"names two snippets, {snippet} and {word}; a block shows one snippet's output")
            snippet = Path(word.strip("\"'")).name
        elif key == "varies" and eq:
            for part in value.split(","):
                m = _RANGE.match(part)
                if not m or int(m.group(1)) < 1 or (m.group(2) and int(m.group(2)) < int(m.group(1))):
                    problems.append(f"varies={value}: {part!r} is not a line of the block (1, 3-6)")
                    continue
                varies.update(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
        elif key == "without" and eq and value in WITHOUT:
            without.append(value)
        else:
            problems.append(
                f"{word!r} in the fence is not understood: expected the snippet's file name, "
                f"varies=<lines> or without={'|'.join(WITHOUT)}"
            )
    if snippet is None:
        problems.append(
            "output block names no snippet: write the snippet's file name after `output`, as in ```output shapes.py"
        )
    return snippet, frozenset(varies), tuple(without), problems


def _book_line(file: str, number: int, raw: str, varies: bool, is_measured: Callable[[str], bool]) -> BookLine:
    """The displayed text of a raw output line, and each number in it with the claim that binds it."""
    text: list[str] = []
    spans: list[tuple[int, int, str, str]] = []
    cursor = 0
    shown = 0
    for m in BINDING.finditer(raw):
        text.append(raw[cursor : m.start()])
        shown += m.start() - cursor
        spans.append((shown, shown + len(m.group("text")), m.group("id"), m.group("text")))
        text.append(m.group("text"))
        shown += len(m.group("text"))
        cursor = m.end()
    text.append(raw[cursor:])
    display = "".join(text)
    numbers = []
    for start, end, token in numbers_in(display):
        claim_id, figure, at = next(((c, f, s) for s, e, c, f in spans if s <= start and end <= e), (None, "", -1))
        numbers.append(Number(token, start, claim_id, bool(claim_id and is_measured(claim_id)), figure, at))
    return BookLine(file, number, display, tuple(numbers), varies)


def read_blocks(path: Path, rel: str, is_measured: Callable[[str], bool]) -> list[OutputBlock]:
    """Every output block of one page, in order, with the problems of its declaration."""
    document = lex(path.read_text(encoding="utf-8").splitlines())
    return [_block(rel, block, is_measured) for block in document.output_blocks()]


def _block(rel: str, block: CodeBlock, is_measured: Callable[[str], bool]) -> OutputBlock:
    snippet, varies, without, problems = parse_info(block.fence.info)
    where = f"{rel}:{block.first}"
    errors = [f"{where}: {p}" for p in problems]
    indent = block.fence.indent
    body = []
    for number, text in block.numbered_body():
        raw = text[len(indent) :] if text.startswith(indent) else text.lstrip()
        body.append(_book_line(rel, number, raw, (number - block.first) in varies, is_measured))
    for n in sorted(varies):
        if n > len(body):
            errors.append(f"{where}: varies names line {n}; the block has {len(body)}")
    for line in body:
        errors += _declaration_errors(line, where)
    # an unclosed block ends past the page's last line, as if its closing fence followed it
    end_line = block.last if block.closing is not None else block.last + 1
    text = "\n".join(block.lines)
    return OutputBlock(rel, block.first, snippet, tuple(body), without, tuple(errors), end_line, block_hash(text))


def _declaration_errors(line: BookLine, fence: str) -> list[str]:
    """A varying line must hold something that varies; a line with a measured figure or a version must vary."""
    if line.varies:
        if not any(n.measured or n.claim_id is None for n in line.numbers):
            return [
                f"{line.where}: declared varying (varies= at {fence}) but every number on it is bound to a claim "
                f"that is computed the same on every machine, so it must hold: take it out of varies=\n"
                f"    {line.text.strip()}"
            ]
        return []
    why = [f"figure {n.text} ({n.claim_id}) is measured" for n in line.numbers if n.measured]
    why += [f"{n.text} is a library version" for n in line.numbers if n.is_version and n.claim_id is None]
    if why:
        return [
            f"{line.where}: {'; '.join(why)}, so this line changes from machine to machine: "
            f"declare it in varies= of the fence at {fence}\n    {line.text.strip()}"
        ]
    return []


def match_line(book: BookLine, printed: str) -> str | None:
    """Why `printed` is not the book's line, or None when it is: the same words with numbers
    in the same places, and on a line that does not vary, each number at the book's precision."""
    if shape(book.text) != shape(printed):
        return "the text differs"
    if book.varies:
        return None
    figures: dict[tuple[int, int], list[tuple[Number, str]]] = {}  # a bound figure's numbers, or one unbound number
    for i, (expected, (_, _, found)) in enumerate(zip(book.numbers, numbers_in(printed), strict=True)):
        key = (expected.figure_start, -1) if expected.claim_id else (expected.start, i)
        figures.setdefault(key, []).append((expected, found))
    differ = []
    for pairs in figures.values():
        if all(_holds(expected.text, found) for expected, found in pairs):
            continue
        first = pairs[0][0]
        if not first.claim_id:
            differ.append(f"{first.text} printed as {pairs[0][1]}")
            continue
        now, cursor = [], first.figure_start
        for expected, found in pairs:  # the figure as the snippet printed it: the book's text, its numbers replaced
            now += [book.text[cursor : expected.start], found]
            cursor = expected.start + len(expected.text)
        now.append(book.text[cursor : first.figure_start + len(first.figure)])
        differ.append(f"figure {first.figure} ({first.claim_id}) printed as {''.join(now)}")
    return "; ".join(differ) or None


def _holds(book_text: str, printed_text: str) -> bool:
    """Whether a printed number holds the book's, at the book's printed precision."""
    if _VERSION.match(book_text) or _VERSION.match(printed_text):
        return book_text == printed_text
    try:
        printed = parse(printed_text).value
        return parse(book_text).holds(printed)
    except FigureSyntaxError:
        return book_text == printed_text


def _trimmed(lines: Iterable[str]) -> list[str]:
    out = [line.rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def compare(block: OutputBlock, stdout: str, how: str = "") -> BlockComparison:
    """One block against one run's stdout, aligned line by line; stale with a message per line that differs."""
    book = list(block.lines)
    while book and not book[-1].text.strip():
        book.pop()
    printed = _trimmed(stdout.splitlines())
    name = block.snippet or "the snippet"
    ran = f" ({how})" if how else ""
    problems: list[str] = []

    def differs(line: BookLine, now: str, why: str) -> None:
        problems.append(
            f"{line.where}: {name}{ran} no longer prints the book's line: {why}\n"
            f"    book:    {line.text.strip()}\n    printed: {now.strip()}"
        )

    def missing(line: BookLine) -> None:
        problems.append(
            f"{line.where}: {name}{ran} no longer prints this line at all\n    book:    {line.text.strip()}"
        )

    def extra(before: int, now: str) -> None:
        where = book[before].where if before < len(book) else f"{block.file}:{block.end_line}"
        problems.append(f"{where}: {name}{ran} prints a line the book does not show\n    printed: {now.strip()}")

    for b0, b1, p0, p1 in _aligned(book, printed):
        paired = min(b1 - b0, p1 - p0)
        for k in range(paired):
            why = match_line(book[b0 + k], printed[p0 + k])
            if why:
                differs(book[b0 + k], printed[p0 + k], why)
        for k in range(b0 + paired, b1):
            missing(book[k])
        for k in range(p0 + paired, p1):
            extra(b1, printed[k])
    if problems:
        more = len(problems) - MAX_REPORTED
        shown = problems[:MAX_REPORTED] + ([f"{block.where}: and {more} more line(s) differ"] if more > 0 else [])
        return BlockComparison(block.file, block.line, Status.STALE.value, "\n".join(shown))
    return BlockComparison(block.file, block.line, Status.VERIFIED.value)


def _aligned(book: list[BookLine], printed: list[str]) -> list[tuple[int, int, int, int]]:
    """The block's lines against the run's, by their shapes: (book from, to, printed from, to) runs, the
    first min(to - from) lines of each run paired, as `compare` and `printed_figure` read them."""
    matcher = difflib.SequenceMatcher(None, [shape(b.text) for b in book], [shape(p) for p in printed], autojunk=False)
    return [(b0, b1, p0, p1) for _op, b0, b1, p0, p1 in matcher.get_opcodes()]


class NotPrinted(BookError):
    """A run of a snippet printed no number where the book shows the figure asked for."""


def printed_figure(block: OutputBlock, stdout: str, claim_id: str) -> tuple[BookLine, tuple[str, ...]]:
    """The numbers a run printed where `block` shows the figure of `claim_id`, and the book's line.

    The run's lines are paired with the block's as `compare` pairs them; the figure's numbers
    are those at the same places on the paired line, which must have the book line's shape.
    """
    where = next(
        ((i, line) for i, line in enumerate(block.lines) if any(n.claim_id == claim_id for n in line.numbers)), None
    )
    if where is None:
        raise NotPrinted(f"{block.where}: the block shows no figure of {claim_id}")
    index, line = where
    printed = _trimmed(stdout.splitlines())
    name = block.snippet or "the snippet"
    for b0, b1, p0, p1 in _aligned(list(block.lines), printed):
        if b0 <= index < b0 + min(b1 - b0, p1 - p0):
            now = printed[p0 + index - b0]
            if shape(now) != shape(line.text):
                break
            found = [text for _, _, text in numbers_in(now)]
            return line, tuple(found[k] for k, n in enumerate(line.numbers) if n.claim_id == claim_id)
    raise NotPrinted(
        f"{line.where}: {name} printed no line like the book's, so {claim_id} has no value here\n"
        f"    book:    {line.text.strip()}\n    printed: " + ("\n             ".join(printed[-5:]) or "nothing")
    )


@dataclass
class BookOutputs:
    """Every output block of a book, by page and by the snippet it shows."""

    blocks: list[OutputBlock] = field(default_factory=list)
    snippets: tuple[str, ...] = ()

    def of_page(self, rel: str) -> list[OutputBlock]:
        return [b for b in self.blocks if b.file == rel]

    def of_snippet(self, name: str) -> list[OutputBlock]:
        return [b for b in self.blocks if b.snippet == name]

    def times_the_machine(self, name: str) -> bool:
        """Whether snippet `name` prints a measured figure in some block: its run then has the machine to itself."""
        return any(n.measured for b in self.of_snippet(name) for line in b.lines for n in line.numbers)

    def errors(self, rel: str) -> list[str]:
        """A page's declaration problems: a block that names no snippet or an unknown one, bad words, bad varies=."""
        out: list[str] = []
        for block in self.of_page(rel):
            out += block.errors
            if block.snippet is not None and block.snippet not in self.snippets:
                known = ", ".join(self.snippets) or "none"
                out.append(
                    f"{block.where}: output block names {block.snippet}, which is not a snippet of this book "
                    f"(snippets: {known})"
                )
        return out


def read_book(pages: Iterable[Path], root: Path, snippets_dir: Path, is_measured: Callable[[str], bool]) -> BookOutputs:
    """The output blocks of every page, and the snippet files they may name."""
    blocks: list[OutputBlock] = []
    for path in pages:
        rel = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        try:
            blocks += read_blocks(path, rel, is_measured)
        except (OSError, UnicodeDecodeError):
            continue  # the page's load error is reported where pages are read
    names = tuple(sorted(p.name for p in snippets_dir.glob("*.py"))) if snippets_dir.is_dir() else ()
    return BookOutputs(blocks, names)


def check_snippet(
    outputs: BookOutputs, name: str, stdout: str, how: str = "", devices: Iterable[str] = ()
) -> list[BlockComparison]:
    """Each block that shows snippet `name`, against this run's stdout. A block printed without a
    device this machine has is skipped with that reason."""
    present = set(devices)
    checks = []
    for block in outputs.of_snippet(name):
        absent = [d for d in block.without if d in present]
        if absent:
            checks.append(
                BlockComparison(
                    block.file,
                    block.line,
                    Status.SKIPPED.value,
                    f"{block.where}: the block shows {name} on a machine without {', '.join(absent).upper()}; "
                    f"this one has it, so {name} printed its {absent[0].upper()} report instead",
                )
            )
        elif block.errors:
            checks.append(BlockComparison(block.file, block.line, Status.STALE.value, "\n".join(block.errors)))
        else:
            checks.append(compare(block, stdout, how))
        checks[-1] = replace(checks[-1], sha256=block.sha256)
    return checks
