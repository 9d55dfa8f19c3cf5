"""Read the book: Markdown → regions (bound figures, unbound numbers), each with file and line.

A figure is bound with standard link syntax, so the raw text stays readable anywhere:
`[16.6](claim:decode.ceiling.dgx_spark.bf16)`, or with a stated value where the text
is words: `[four per cent](claim:formats.e4m3.zeroed "0.04")`. A title of `disputed`
(alone, or after the value: `"264; disputed"`) marks a figure the book prints from a
source while showing that it does not hold.

Code blocks, inline code, display math and HTML are not prose and are not scanned,
except fenced blocks whose info string starts with `output`: those are a snippet's "what
you should see" text, where figures are bound like anywhere else. In prose the scanner
sees digits, versions (`2.14.0`), numbers in words, numbers glued to a unit or a letter, the
numbers inside inline math (which cannot hold a binding, so they are allow-listed with a
reason), and a code span that is a number and nothing else (`50`), which a reader reads as one:
it is bound as the plain number it is ([50](claim:...)), since a binding's text is prose.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from verified_book.book.figures import FigureSyntaxError, Printed, parse
from verified_book.book.lexer import CodeBlock, Prose, include_of, lex
from verified_book.book.number_words import WORD_NUMBER, binding_hint, is_number_word
from verified_book.errors import BookError, Problem

BINDING = re.compile(r"\[(?P<text>(?:[^\[\]]|\[[^\[\]]*\])+)\]\(claim:(?P<id>[^\s)\"]*)(?:\s+\"(?P<title>[^\"]*)\")?\)")
_CLAIM_LINK_START = re.compile(r"(?:\[[^\[\]]*)?\]\(\s*claim:[^)]*\)?")
NUMBER = re.compile(
    # groups of three digits parted by a space, thin space or narrow no-break space are one number (65 504)
    r"(?<![\w.\-/^$])(?:-(?=\d))?(?:\d{1,3}(?:[ \u2009\u202f\u00a0]\d{3})+(?![\d,.])"
    r"|\d(?:[\d,]*\d)?(?:\.\d+)?(?:[eE][+-]?\d+)?)(?![\w]|\.\d|-\w|,\d)"
)
#: a version or any number with two dots or more ("torch 2.14.0"): one figure, which the plain number's
#: pattern leaves alone because no part of it stands by itself
VERSION = re.compile(r"(?<![\w.\-/^$])\d+(?:\.\d+){2,}(?![\w.]*\d)(?!\w)")
#: a code span in prose that is a number and nothing else (`50`, `0.001`): a figure the reader reads
CODE_NUMBER = re.compile(r"(?<!`)(?P<tick>`+)(?P<number>-?\d[\d,]*(?:\.\d+)?(?:[eE][+-]?\d+)?)(?P=tick)(?!`)")
# A number glued to letters is a figure with a unit or a multiplier: "0.6B", "2X", "16-bit",
# "T/2", "2T". A run of letters directly before the digits (FP32, BF16, E4M3, Qwen3, x16)
# makes a name, not a figure, and so does a number joined by a hyphen to a word before it
# (Qwen3-8B, DDR5-5600, gpt-oss-20b); scientific notation (7.81e-03) is a plain number.
GLUED = re.compile(
    r"(?<![\w.^$])(?<!\w-)\d+(?:\.\d+)?(?![eE][+-]?\d)(?=[A-Za-z]|-[A-Za-z])[-A-Za-z]*"
    r"|(?<=[A-Za-z]/)\d+(?:\.\d+)?(?![\w.])"
)
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
_INLINE_MATH = (re.compile(r"(?<![\\\w])\$(?!\s)[^$\n]+?(?<!\s)\$"), re.compile(r"\\\(.+?\\\)"))
# What a binding looks like when one character is off: `] (claim:`, `][claim:`, `(clam:`, `[x](claims:`,
# `16.6(claim:`. A link whose scheme is within two edits of `claim` is taken for a broken binding.
_NEAR_MISS = re.compile(
    r"\]\s+\(\s*claim\s*:|\]\s*\[\s*claim\s*:|(?<!\])\(\s*claim\s*:(?=\S)|\]\(\s*(?P<scheme>[A-Za-z]{3,8})\s*:",
    re.IGNORECASE,
)
_URL_SCHEMES = {"http", "https", "mailto", "ftp", "ftps", "file", "data", "tel", "irc", "ssh", "git", "news"}
_INLINE_SKIPS = (
    re.compile(r"(`+)(?:(?!\1).)+?\1"),
    re.compile(r"\$\$.+?\$\$"),
    re.compile(r"(?<![\\\w])\$(?!\s)[^$\n]+?(?<!\s)\$"),
    re.compile(r"\\\(.+?\\\)"),
    re.compile(r"<!--.*?-->"),
    re.compile(r"</?[a-zA-Z][^>]*>"),
    re.compile(r"\]\((?!claim:)[^)]*\)"),
    re.compile(r"^\s*\[[^\]]+\]:\s+\S+.*$"),
    re.compile(r"\{[#.][^}]*\}"),
    re.compile(r"&#?\w+;"),
)


@dataclass(frozen=True)
class Binding:
    """A printed figure bound to a claim: the unit of checking in the book."""

    file: str
    line: int
    column: int
    text: str
    claim_id: str
    title: str | None
    disputed: bool
    error: str | None = None
    in_output: bool = False

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @functools.cached_property
    def printed(self) -> Printed | None:
        """The figure as printed, read from `stated` when first asked; None for a malformed binding (`error`).
        Not kept with a page read before (`__getstate__`): it was most of a kept page's size and of the time to
        load it, while a run that checks a few figures reads a few."""
        return None if self.error is not None else parse(self.stated)

    def __getstate__(self) -> dict[str, object]:
        return {name: value for name, value in self.__dict__.items() if name != "printed"}

    @property
    def stated(self) -> str:
        """The text the value was read from: the title's value if any, else the link text."""
        value = _title_value(self.title)
        return value if value is not None else self.text

    def restated(self, value: str) -> Binding:
        """This binding with its value printed as `value`: in the title where the value is read from there (the
        words stay), else as the link text; its figure read from the new text when asked."""
        if self.title is not None and self.stated != self.text:
            parts = [p.strip() for p in self.title.split(";")]
            parts[_value_part(parts)] = value
            return dataclasses.replace(self, title="; ".join(parts))
        return dataclasses.replace(self, text=value)


@dataclass(frozen=True)
class Unbound:
    """A number in prose or in an output block that no binding claims."""

    file: str
    line: int
    column: int
    text: str
    context: str
    #: the whole line as the page was read, which the allow-list's patterns are matched against
    source: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Page:
    """One Markdown file of the book, read into regions."""

    file: str
    bindings: list[Binding] = field(default_factory=list)
    unbound: list[Unbound] = field(default_factory=list)
    malformed: list[Binding] = field(default_factory=list)


def _value_part(parts: Sequence[str]) -> int:
    """Which of a title's `;`-separated parts is the value: the first that is not `disputed` (len(parts): none)."""
    return next((i for i, p in enumerate(parts) if p.lower() != "disputed"), len(parts))


def _title_value(title: str | None) -> str | None:
    if title is None:
        return None
    parts = [p.strip() for p in title.split(";")]
    at = _value_part(parts)
    return parts[at] if at < len(parts) and parts[at] else None


def _mask(text: str, start: int, end: int) -> str:
    return text[:start] + " " * (end - start) + text[end:]


def _prose_mask(line: str) -> str:
    if include_of(line) is not None:
        return " " * len(line)
    for pattern in _INLINE_SKIPS:
        line = pattern.sub(lambda m: " " * len(m.group(0)), line)
    return line


def read_page(path: Path, root: Path, text: str | None = None) -> Page:
    """Parse one Markdown file (or `text`, as read from it) into its bindings, unbound numbers and malformed
    bindings."""
    rel = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    page = Page(rel)
    in_math = False
    in_comment = False
    text = path.read_text(encoding="utf-8") if text is None else text
    for region in lex(text.splitlines()).regions:
        if isinstance(region, Prose):
            numbered, in_output = region.numbered(), False
        elif isinstance(region, CodeBlock) and region.is_output:
            numbered, in_output = region.numbered_body(), True
        else:
            continue
        for number, raw in numbered:
            if in_comment:
                if "-->" in raw:
                    in_comment = False
                continue
            if raw.strip().startswith("<!--") and "-->" not in raw:
                in_comment = True
                continue
            if raw.strip() == "$$" or (raw.strip().startswith("$$") and raw.count("$$") == 1):
                in_math = not in_math
                continue
            if in_math:
                continue
            _read_line(page, rel, number, raw, in_output)
    return page


def _read_line(page: Page, rel: str, number: int, raw: str, in_output: bool) -> None:
    text = raw if in_output else _prose_mask(raw)
    bound: list[tuple[int, int]] = []
    for match in BINDING.finditer(raw):
        start, end = match.span()
        bound.append((start, end))
        if not in_output and text[start:end].strip() != raw[start:end].strip():
            continue
        title = match.group("title")
        disputed = title is not None and any(p.strip().lower() == "disputed" for p in title.split(";"))
        claim_id = match.group("id")
        stated = _title_value(title)
        source = stated if stated is not None else match.group("text")
        printed, error = None, None
        if not claim_id:
            error = "binding has an empty claim id: expected [text](claim:topic.name)"
        else:
            try:
                printed = parse(source)
            except FigureSyntaxError as e:
                hint = (
                    ""
                    if stated is not None
                    else ' (a figure in words needs its value as the link title: [four per cent](claim:id "0.04"))'
                )
                error = f"{e}{hint}"
        binding = Binding(rel, number, start + 1, match.group("text"), claim_id, title, disputed, error, in_output)
        object.__setattr__(binding, "printed", printed)  # read already: not read again in this process
        (page.malformed if error else page.bindings).append(binding)
        text = _mask(text, start, end)
    for leftover in _CLAIM_LINK_START.finditer(text):
        page.malformed.append(
            Binding(
                rel,
                number,
                leftover.start() + 1,
                raw.strip(),
                "",
                None,
                False,
                "malformed binding: expected [printed text](claim:dotted.id) or "
                '[text](claim:dotted.id "value"); found '
                + repr(raw[max(0, leftover.start() - 30) : leftover.end() + 40].strip()),
                in_output,
            )
        )
        text = _mask(text, leftover.start(), leftover.end())
    for miss in _near_misses(raw, text):
        page.malformed.append(
            Binding(
                rel,
                number,
                miss.start() + 1,
                raw.strip(),
                "",
                None,
                False,
                "looks like a broken binding: found "
                + repr(raw[max(0, miss.start() - 30) : miss.end() + 40].strip())
                + "; a binding is [printed text](claim:dotted.id), with nothing between ] and (",
                in_output,
            )
        )
        text = _mask(text, miss.start(), miss.end())
    for match in NUMBER.finditer(text):
        page.unbound.append(Unbound(rel, number, match.start() + 1, match.group(0), raw.strip(), raw))
    if in_output:
        return
    for pattern in (WORD_NUMBER, GLUED, VERSION):
        for match in pattern.finditer(text):
            page.unbound.append(Unbound(rel, number, match.start() + 1, match.group(0), raw.strip(), raw))
    for start, found in _math_numbers(raw) + _code_numbers(raw, bound):
        page.unbound.append(Unbound(rel, number, start + 1, found, raw.strip(), raw))


def _code_numbers(raw: str, bound: Sequence[tuple[int, int]] = ()) -> list[tuple[int, str]]:
    """Code spans of a prose line that are a number and nothing else, outside bindings, with their offsets."""
    return [
        (m.start("number"), m.group("number"))
        for m in CODE_NUMBER.finditer(raw)
        if not any(start <= m.start() < end for start, end in bound)
    ]


def _math_numbers(raw: str) -> list[tuple[int, str]]:
    """Numbers inside inline math (`$...$`, `\\(...\\)`) of a prose line, with their offsets."""
    code = re.compile(r"(`+)(?:(?!\1).)+?\1")
    line = code.sub(lambda m: " " * len(m.group(0)), raw)
    out = []
    for pattern in _INLINE_MATH:
        for span in pattern.finditer(line):
            for digits in _DIGITS.finditer(span.group(0)):
                out.append((span.start() + digits.start(), digits.group(0)))
    return out


def _edits(a: str, b: str) -> int:
    """Levenshtein distance: how many one-character edits turn `a` into `b`."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ca != cb))
    return row[-1]


def _near_misses(raw: str, text: str) -> list[re.Match[str]]:
    """Near-miss bindings in a line: searched where code, math and HTML are masked but links are not
    (a link `[x](clam:...)` is masked as an ordinary link in `text`), and where `text` has no real binding."""
    searched = raw
    for pattern in _INLINE_SKIPS[:6]:  # code, math, comments, HTML: not the link and later masks
        searched = pattern.sub(lambda m: " " * len(m.group(0)), searched)
    out = []
    for miss in _NEAR_MISS.finditer(searched):
        scheme = miss.group("scheme")
        if scheme is not None:  # `](word:`: a link, masked in `text`; `](claim:` is a binding's, read above
            if scheme == "claim" or scheme.lower() in _URL_SCHEMES or _edits(scheme.lower(), "claim") > 2:
                continue
        elif not text[miss.start() : miss.end()].strip():  # already read as a binding or reported as malformed
            continue
        out.append(miss)
    return out


def unknown_claim(binding: Binding, near: Sequence[str], load_errors: Sequence[Problem] = ()) -> str:
    """What a figure bound to no known claim says, wherever it is judged (a run, serve, the site): the id, the
    ids it may have meant, and, where a topic module did not load (`load_errors` placed in a `.py` file), that
    its claims are unknown for that reason."""
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    unloaded = [p for p in load_errors if ".py:" in p.where]
    why = (
        f"; the book's claims did not all load ({len(unloaded)} problem{'s' if len(unloaded) > 1 else ''} "
        f"in its topic modules, the first: {unloaded[0]})"
        if unloaded
        else ""
    )
    return f"figure {binding.text} binds to unknown claim {binding.claim_id!r}{hint}{why}"


@dataclass(frozen=True)
class Allowance:
    """One allow-list entry: numbers inside matches of `pattern` are not figures, for `reason`."""

    pattern: re.Pattern[str]
    reason: str
    files: tuple[str, ...]
    line: int

    def applies_to(self, file: str) -> bool:
        """Whether the entry's `files` take this page (no `files`: refused, see Book.allowlist_problems)."""
        return any(fnmatch.fnmatch(file, f) for f in self.files or ("*",))

    def covers(self, item: Unbound, source_line: str) -> bool:
        return self.applies_to(item.file) and self.spans(item, source_line)

    def spans(self, item: Unbound, source_line: str) -> bool:
        """Whether a match of the pattern on the item's line holds the whole number."""
        start = item.column - 1
        return any(m.start() <= start and start + len(item.text) <= m.end() for m in self.pattern.finditer(source_line))


class AllowListError(BookError, ValueError):
    """The allow-list itself is malformed."""


def read_allowlist(path: Path, shown: str | None = None) -> list[Allowance]:
    """Read `book/allowlist.toml`: [[allow]] tables with `pattern`, `reason` and `files` (the pages it excuses on).
    A problem names the file as `shown` (the book's own path to it), else as `path`."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    where = shown or str(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise AllowListError(Problem(where, f"does not parse: {e}")) from None
    entries: list[Allowance] = []
    starts = [i for i, line in enumerate(text.splitlines(), 1) if line.strip() == "[[allow]]"]
    for index, entry in enumerate(data.get("allow", [])):
        line = starts[index] if index < len(starts) else 0
        if not entry.get("reason", "").strip():
            raise AllowListError(Problem(f"{where}:{line}", f"allow-list entry {entry.get('pattern')!r} has no reason"))
        try:
            pattern = re.compile(entry["pattern"])
        except (KeyError, re.error) as e:
            raise AllowListError(
                Problem(f"{where}:{line}", f"allow-list entry needs a valid `pattern` regex: {e}")
            ) from None
        files = entry.get("files", [])
        if not isinstance(files, list) or not all(isinstance(f, str) and f.strip() for f in files):
            raise AllowListError(
                Problem(
                    f"{where}:{line}",
                    f"allow-list entry {entry.get('pattern')!r}: expected files = "
                    f'["book/page.md", ...] (a list of page globs), found files = {files!r}',
                )
            )
        entries.append(Allowance(pattern, entry["reason"], tuple(files), line))
    return entries


#: the first line of every file `verified-book pages` writes into the pages folder (verified_book.site.build):
#: a generated page, not one of the book's own
GENERATED = "verified-book pages wrote this file; it is regenerated, not edited"


def generated(path: Path) -> bool:
    """Whether `path` is a file `verified-book pages` wrote."""
    try:
        with path.open(encoding="utf-8") as f:
            return GENERATED in f.readline()
    except (OSError, UnicodeDecodeError):
        return False


def book_pages(book_dir: Path) -> list[Path]:
    return sorted(
        p for p in book_dir.rglob("*.md") if "snippets" not in p.relative_to(book_dir).parts and not generated(p)
    )


@dataclass
class Book:
    """The whole book read once: pages, the bindings by claim, and the allow-list."""

    root: Path
    pages: list[Page]
    allowlist: list[Allowance]

    @classmethod
    def read(cls, book_dir: Path, root: Path | None = None, allowlist: Path | None = None) -> "Book":
        root = root or book_dir.parent
        pages = [read_page(p, root) for p in book_pages(book_dir)]
        return cls(root, pages, read_allowlist(allowlist or book_dir / "allowlist.toml"))

    def bindings(self) -> Iterator[Binding]:
        for page in self.pages:
            yield from page.bindings

    def by_claim(self) -> dict[str, list[Binding]]:
        out: dict[str, list[Binding]] = {}
        for b in self.bindings():
            out.setdefault(b.claim_id, []).append(b)
        return out

    def replace_page(self, file: str, page: Page | None, by_claim: dict[str, list[Binding]]) -> None:
        """The page `file` (relative to the root) read again as `page` (None: removed), and `by_claim`, a map
        `by_claim()` made, brought up to date for the claims the page binds before or now, in the book's order."""
        before = [b for p in self.pages if p.file == file for b in p.bindings]
        self.pages[:] = [p for p in self.pages if p.file != file]
        if page is not None:
            self.pages.append(page)
            self.pages.sort(key=lambda p: p.file)
        now = page.bindings if page is not None else []
        for claim_id in {b.claim_id for b in [*before, *now]}:
            found = [b for b in by_claim.get(claim_id, ()) if b.file != file]
            found += [b for b in now if b.claim_id == claim_id]
            found.sort(key=lambda b: b.file)  # stable: each page's bindings stay in the page's order
            if found:
                by_claim[claim_id] = found
            else:
                by_claim.pop(claim_id, None)

    def unbound(self, page_file: str | None = None) -> list[tuple[Unbound, Allowance | None]]:
        """Every unbound number (of one page, given its file) with the allow-list entry that excuses it, if one does."""
        out = []
        for page in self.pages if page_file is None else [p for p in self.pages if p.file == page_file]:
            here = [a for a in self.allowlist if a.applies_to(page.file)] if page.unbound else []
            for item in page.unbound:
                out.append((item, next((a for a in here if a.spans(item, item.source)), None)))
        return out

    def unbound_lines(self, page_file: str, allowlist: str) -> list[str]:
        """Each number of a page bound to no claim and excused by no entry of the allow-list (`allowlist`, as
        shown), a line each as a compiler says it: what the check `every number is bound` fails with."""
        return [
            f"{u.where}:{u.column}: number {u.text} is bound to no claim: bind it as {binding_hint(u.text)} "
            f"or add it to {allowlist} with a reason\n    {u.context}"
            for u, allowed in self.unbound(page_file)
            if allowed is None
        ]

    def unused_allowances(self) -> list[Allowance]:
        used = {id(a) for _, a in self.unbound() if a is not None}
        return [a for a in self.allowlist if id(a) not in used]

    def allowlist_problems(self, allowlist: str = "book/allowlist.toml") -> list[tuple[str | None, str]]:
        """What is wrong with the allow-list, as (page or None, compiler-style message).

        An entry that excuses nothing is stale. An entry names the pages it excuses on, in `files`,
        and globs that match every page of a book of several are no narrower than none: a class
        pattern spanning the whole book would excuse a wrong figure anywhere. A number in words is excused one
        occurrence
        at a time: the entry that excuses one names its page in `files`, excuses number words
        on that one line only, and its pattern matches more than the word itself, so that a
        class pattern ("two", "half", "ten") cannot excuse every such word in the book.
        """
        problems: list[tuple[str | None, str]] = []
        for entry in self.unused_allowances():
            problems.append(
                (
                    None,
                    f"{allowlist}:{entry.line}: allow-list entry {entry.pattern.pattern!r} excuses "
                    "nothing; remove it, or fix its pattern or files",
                )
            )
        every_page = [page.file for page in self.pages]
        for entry in self.allowlist:
            where = f"{allowlist}:{entry.line}: allow-list entry {entry.pattern.pattern!r}"
            if not entry.files:
                problems.append(
                    (
                        None,
                        f"{where} names no `files`, so it excuses its pattern on every page: expected "
                        "files = [the pages it excuses on], found none",
                    )
                )
            elif len(every_page) > 1 and all(any(fnmatch.fnmatch(page, f) for f in entry.files) for page in every_page):
                problems.append(
                    (
                        None,
                        f"{where} excuses its pattern on every page: expected files = [the pages it "
                        f"excuses on], found files = {list(entry.files)}, which match all {len(every_page)} pages",
                    )
                )
        excused: dict[int, list[Unbound]] = {}
        for item, allowed in self.unbound():
            if allowed is not None and is_number_word(item.text):
                excused.setdefault(id(allowed), []).append(item)
        for entry in self.allowlist:
            items = excused.get(id(entry), [])
            if not items:
                continue
            where = f"{allowlist}:{entry.line}: allow-list entry {entry.pattern.pattern!r}"
            places = sorted({(u.file, u.line) for u in items})
            pages = sorted({file for file, _ in places})
            if not entry.files or len(pages) > 1:
                for page in pages:
                    problems.append(
                        (
                            page,
                            f"{where} excuses numbers in words on "
                            f"{', '.join(pages) if len(pages) > 1 else 'every page'}; "
                            "a number in words is excused by an entry of its own: name its page in `files`",
                        )
                    )
                continue
            if len(places) > 1:
                problems.append(
                    (
                        pages[0],
                        f"{where} excuses numbers in words on lines "
                        f"{', '.join(str(n) for _, n in places)} of {pages[0]}; each occurrence needs "
                        "an entry of its own, whose pattern matches that line only",
                    )
                )
            for u in items:
                start = u.column - 1
                cover = next(
                    m for m in entry.pattern.finditer(u.source) if m.start() <= start and start + len(u.text) <= m.end()
                )
                if cover.group(0).strip().lower() == u.text.lower():
                    problems.append(
                        (
                            u.file,
                            f"{u.where}:{u.column}: {where} matches the bare word {u.text!r}; its "
                            "pattern must take in the words around it, so that it excuses this occurrence only",
                        )
                    )
        return problems


def iter_numbers(text: str) -> Iterable[str]:
    """The numbers the scanner would flag in one line of prose (for tests and tools), in order of place.

    Digits standing alone, numbers in words, numbers glued to letters, versions, numbers in inline math,
    and code spans that are a number.
    """
    masked = _prose_mask(text)
    patterns = (NUMBER, WORD_NUMBER, GLUED, VERSION)
    found = [(m.start(), m.group(0)) for pattern in patterns for m in pattern.finditer(masked)]
    return [t for _, t in sorted(found + _math_numbers(text) + _code_numbers(text))]
