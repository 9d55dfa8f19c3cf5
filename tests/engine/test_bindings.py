"""The book reader: bindings with file and line, unbound numbers, what is not prose."""

from __future__ import annotations

import fnmatch
import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from harness.paths import ROOT, SAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

from verified_book.book.bindings import AllowListError, Binding, Book, iter_numbers, read_allowlist, read_page
from verified_book.book.figures import as_number, parse
from verified_book.book.number_words import WORD_NUMBER, binding_hint, is_number_word, word_value
from verified_book.site.render import from_json


@pytest.fixture(scope="module")
def page():
    return read_page(SAMPLES / "reader.md", SAMPLES.parent)


def test_bindings_carry_file_line_and_claim(page) -> None:
    found = {(b.line, b.text, b.claim_id) for b in page.bindings}
    assert (8, "16.6", "decode.ceiling.dgx_spark.bf16") in found
    assert (13, "9.77 × 10^-4", "formats.finfo.fp16.eps") in found
    assert (18, "65,504", "formats.finfo.fp16.max") in found
    assert (20, "448", "formats.finfo.e4m3.max") in found
    assert all(b.file == "samples/reader.md" for b in page.bindings)


def test_words_take_their_value_from_the_title(page) -> None:
    words = next(b for b in page.bindings if b.text == "four per cent")
    assert words.stated == "0.04"
    assert words.printed is not None and words.printed.holds(0.04)


def test_output_blocks_are_scanned_other_code_is_not(page) -> None:
    output = next(b for b in page.bindings if b.claim_id == "shapes.weight.bytes")
    assert output.in_output and output.printed is not None and output.printed.holds(201_326_592)
    texts = {(u.line, u.text) for u in page.unbound}
    assert (29, "7") in texts
    assert not any(u.text in ("4096", "12288") for u in page.unbound)


def test_unbound_numbers_in_prose_tables_and_admonitions(page) -> None:
    texts = {(u.line, u.text) for u in page.unbound}
    assert (14, "7.81e-03") in texts
    assert (18, "42") in texts
    assert (6, "1") in texts  # the heading's number is prose too


def test_names_links_front_matter_and_math_are_not_figures(page) -> None:
    lines = {u.line for u in page.unbound}
    assert 2 not in lines and 3 not in lines  # front matter
    assert 21 not in lines  # link target and image path
    assert {u.text for u in page.unbound if u.line == 22} == {"2", "10"}  # math is scanned, inline code is not
    assert 32 not in lines  # model and format names
    assert 39 not in lines  # display math


def test_numbers_in_words_are_found(page) -> None:
    assert (34, "two") in {(u.line, u.text) for u in page.unbound}  # "powers of two"


def test_disputed_mark(page) -> None:
    disputed = next(b for b in page.bindings if b.text == "264")
    assert disputed.disputed and disputed.printed is not None


@pytest.mark.parametrize(
    ("link", "text", "title"),
    [
        ("[16.6](claim:a.b)", "16.7", None),
        ('[four per cent](claim:a.b "0.04")', "four per cent", "16.7"),
        ('[264](claim:a.b "disputed; 0.04")', "264", "disputed; 16.7"),
        ('[264](claim:a.b "264; disputed")', "16.7", "264; disputed"),  # the title's value is the link text
    ],
)
def test_a_binding_restated_changes_the_text_its_value_is_read_from(
    tmp_path: Path, link: str, text: str, title: str | None
) -> None:
    (tmp_path / "p.md").write_text(f"A figure: {link}.\n", encoding="utf-8")
    (binding,) = read_page(tmp_path / "p.md", tmp_path).bindings
    again = binding.restated("16.7")
    assert (again.text, again.title) == (text, title)
    assert again.stated == ("16.7" if binding.stated != binding.text or binding.title is None else binding.stated)
    assert again.disputed == binding.disputed and binding.printed is not None
    assert again.printed is not None and again.printed.text == again.stated


def test_malformed_bindings_are_reported_with_place(page) -> None:
    errors = {(b.line, b.error.split(":")[0]) for b in page.malformed if b.error}
    assert any(line == 36 for line, _ in errors)
    assert not any(u.line == 36 for u in page.unbound)  # a broken binding's text is not reported twice
    assert any("not a printed number" in (b.error or "") for b in page.malformed)
    assert all(b.file == "samples/reader.md" for b in page.malformed)


def test_allowlist_needs_a_reason(tmp_path: Path) -> None:
    (tmp_path / "allowlist.toml").write_text('[[allow]]\npattern = "Part \\\\d+"\nreason = ""\n')
    with pytest.raises(AllowListError, match="no reason"):
        read_allowlist(tmp_path / "allowlist.toml")


def test_allowlist_excuses_only_inside_its_match(tmp_path: Path) -> None:
    book = tmp_path / "book"
    book.mkdir()
    (book / "p.md").write_text("Part 12 covers it, and 12 more.\n")
    (book / "allowlist.toml").write_text(
        '[[allow]]\npattern = "Part \\\\d+"\nreason = "course part numbers"\n'
        '[[allow]]\npattern = "never matches"\nreason = "stale entry"\n'
    )
    read = Book.read(book, tmp_path)
    verdicts = [(u.column, a is not None) for u, a in read.unbound()]
    assert verdicts == [(6, True), (24, False)]
    assert [a.reason for a in read.unused_allowances()] == ["stale entry"]


words = st.text(
    alphabet=st.characters(whitelist_categories=("Lu", "Ll"), max_codepoint=127), min_size=1, max_size=8
).filter(lambda w: not WORD_NUMBER.fullmatch(w))

_ONES = ["", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_TEENS = ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def _in_words(n: int) -> str:
    """English words for 2 <= n < 1000, the way the book writes them ("two hundred and fifty-six")."""
    hundreds, rest = divmod(n, 100)
    parts = [f"{_ONES[hundreds]} hundred"] if hundreds else []
    if rest:
        if rest < 10:
            text = _ONES[rest]
        elif rest < 20:
            text = _TEENS[rest - 10]
        else:
            text = _TENS[rest // 10] + (f"-{_ONES[rest % 10]}" if rest % 10 else "")
        parts.append(text)
    return " and ".join(parts)


@given(number=st.integers(min_value=0, max_value=10**9), before=words, after=words)
def test_a_number_standing_alone_is_found(number: int, before: str, after: str) -> None:
    assert iter_numbers(f"{before} {number:,} {after}") == [f"{number:,}"]


@given(number=st.integers(min_value=0, max_value=10**6), name=words)
def test_a_number_inside_a_name_is_not(number: int, name: str) -> None:
    assert iter_numbers(f"{name}{number}") == []
    assert iter_numbers(f"{name}{number}-{name}") == []
    assert iter_numbers(f"`{number}`") == [str(number)]  # a code span that is a number is one a reader reads
    assert iter_numbers(f"`x[{number}]`") == []


@given(n=st.integers(min_value=2, max_value=999).filter(lambda n: n >= 100 or n % 100 != 1), before=words, after=words)
def test_a_number_in_words_is_found_as_one_phrase(n: int, before: str, after: str) -> None:
    phrase = _in_words(n)
    assert iter_numbers(f"{before} {phrase} {after}") == [phrase]


@given(
    word=st.sampled_from(
        ["half", "a quarter", "three quarters", "nine tenths", "twice", "doubles", "fourfold", "a third"]
    ),
    before=words,
    after=words,
)
def test_fractions_and_multiples_in_words_are_found(word: str, before: str, after: str) -> None:
    assert iter_numbers(f"{before} {word} {after}") == [word.removeprefix("a ")]


@given(
    number=st.decimals(min_value=0, max_value=10**4, places=1, allow_nan=False, allow_infinity=False),
    unit=st.from_regex(r"[A-DF-Za-df-z][A-Za-z]{0,3}|-bit", fullmatch=True),
    before=words,
    after=words,
)
def test_a_number_glued_to_a_unit_is_found(number, unit: str, before: str, after: str) -> None:
    text = f"{number}{unit}"
    assert iter_numbers(f"{before} {text} {after}") == [text]


@given(number=st.integers(min_value=0, max_value=10**4), letter=st.sampled_from("TNMK"))
def test_a_number_after_a_letter_and_slash_is_found(number: int, letter: str) -> None:
    assert iter_numbers(f"About {letter}/{number}: the batch") == [str(number)]


@given(number=st.integers(min_value=0, max_value=10**6), name=words)
def test_numbers_in_inline_math_are_found(number: int, name: str) -> None:
    assert iter_numbers(f"the {name} is $x^{{{number}}}$ here") == [str(number)]
    assert iter_numbers(f"the {name} is \\({number} + y\\) here") == [str(number)]


@given(number=st.integers(min_value=1, max_value=999), name=words)
def test_a_size_joined_to_a_name_is_part_of_the_name(number: int, name: str) -> None:
    assert iter_numbers(f"{name}3-{number}B and {name}5-{number}") == []


@given(
    value=st.integers(min_value=0, max_value=10**6),
    claim_id=st.from_regex(r"[a-z]{1,6}(\.[a-z0-9_]{1,6}){1,3}", fullmatch=True),
)
def test_every_binding_round_trips(tmp_path_factory: pytest.TempPathFactory, value: int, claim_id: str) -> None:
    folder = tmp_path_factory.mktemp("b")
    (folder / "p.md").write_text(f"See [{value:,}](claim:{claim_id}) here.\n")
    page = read_page(folder / "p.md", folder)
    assert [(b.text, b.claim_id, b.line) for b in page.bindings] == [(f"{value:,}", claim_id, 1)]
    assert page.unbound == [] and page.malformed == []


# Near-miss bindings (item 5) and space-grouped numbers in the scanner.

_IDS = st.from_regex(r"[a-z]{1,8}(\.[a-z0-9_]{1,8}){0,3}", fullmatch=True)
_TEXT = st.from_regex(r"[0-9]{1,4}(\.[0-9]{1,2})?", fullmatch=True)


def _page(tmp: Path, line: str) -> Any:
    path = tmp / "page.md"
    path.write_text(line + "\n", encoding="utf-8")
    return read_page(path, tmp)


@settings(max_examples=60, deadline=None)
@given(
    text=_TEXT,
    claim_id=_IDS,
    broken=st.sampled_from(
        [
            "[{t}] (claim:{i})",
            "[{t}]  (claim:{i})",
            "[{t}][claim:{i}]",
            "[{t}](clam:{i})",
            "[{t}](claims:{i})",
            "[{t}](Claim:{i})",
            "[{t}](cliam:{i})",
            "{t}(claim:{i})",
        ]
    ),
)
def test_a_near_miss_binding_is_reported_as_broken(
    tmp_path_factory: pytest.TempPathFactory, text: str, claim_id: str, broken: str
) -> None:
    page = _page(tmp_path_factory.mktemp("p"), f"The figure {broken.format(t=text, i=claim_id)} here.")
    assert not page.bindings
    assert any(
        "looks like a broken binding" in (b.error or "") or "malformed binding" in (b.error or "")
        for b in page.malformed
    ), page.malformed


@settings(max_examples=60, deadline=None)
@given(text=_TEXT, claim_id=_IDS)
def test_a_sound_binding_is_never_taken_for_a_near_miss(
    tmp_path_factory: pytest.TempPathFactory, text: str, claim_id: str
) -> None:
    page = _page(tmp_path_factory.mktemp("p"), f"See [{text}](claim:{claim_id}) and [the docs](https://example.org/x).")
    assert [b.claim_id for b in page.bindings] == [claim_id] and not page.malformed


def test_a_link_whose_scheme_is_far_from_claim_is_an_ordinary_link(tmp_path: Path) -> None:
    page = _page(tmp_path, "Mail [me](mailto:a@b.c), read [this](https://x.org/y), or ask the claim: nothing.")
    assert not page.malformed


@given(st.integers(min_value=1000, max_value=10**12), st.sampled_from([" ", "\u202f", "\u2009", "\u00a0"]))
def test_the_scanner_reads_space_grouped_thousands_as_one_number(n: int, sep: str) -> None:
    text = f"{n:,}".replace(",", sep)
    assert iter_numbers(f"It holds {text} values.") == [text]


# Numbers in words are excused one occurrence at a time.

_CLASS_PATTERN = '[[allow]]\npattern = "(?i)\\\\b(?:two|three|eight)\\\\b"\nreason = "small counts"\n'


def _sample_book(tmp_path: Path, page: str, allowlist: str) -> Book:
    book = tmp_path / "book"
    book.mkdir()
    (book / "p.md").write_text(page)
    (book / "q.md").write_text("The two tracks meet.\n")
    (book / "allowlist.toml").write_text(allowlist)
    return Book.read(book, tmp_path)


def test_a_wrong_number_word_planted_on_a_page_fails(tmp_path: Path) -> None:
    entry = (
        '[[allow]]\npattern = "The two tracks meet"\nreason = "the tracks the sentence names"\nfiles = ["book/q.md"]\n'
    )
    read = _sample_book(tmp_path, "A byte holds eight bits.\n", entry)
    unexcused = [(u.file, u.text) for u, allowed in read.unbound() if allowed is None]
    assert unexcused == [("book/p.md", "eight")]
    assert read.allowlist_problems() == []


def test_a_class_pattern_for_number_words_is_refused(tmp_path: Path) -> None:
    read = _sample_book(tmp_path, "A byte holds eight bits.\n", _CLASS_PATTERN)
    assert all(
        allowed is not None for _, allowed in read.unbound()
    )  # the class pattern would excuse the wrong "eight"...
    problems = [(page, message) for page, message in read.allowlist_problems() if page is not None]
    assert {page for page, _ in problems} == {"book/p.md", "book/q.md"}  # ...so each page it touches fails
    assert all("book/allowlist.toml:1:" in message and "an entry of its own" in message for _, message in problems)


def test_an_entry_without_files_is_refused(tmp_path: Path) -> None:
    read = _sample_book(
        tmp_path,
        "It has 12 parts.\n",
        '[[allow]]\npattern = "has 12 parts"\nreason = "a count"\n'
        '[[allow]]\npattern = "The two tracks meet"\nreason = "named"\nfiles = ["book/q.md"]\n',
    )
    assert all(allowed is not None for _, allowed in read.unbound())
    assert read.allowlist_problems() == [
        (
            None,
            "book/allowlist.toml:1: allow-list entry 'has 12 parts' names no `files`, so it "
            "excuses its pattern on every page: expected files = [the pages it excuses on], "
            "found none",
        )
    ]


@pytest.mark.parametrize("files", ['["*"]', '["book/*"]', '["book/p.md", "book/q.*"]', '["**"]'])
def test_files_that_match_every_page_are_refused(tmp_path: Path, files: str) -> None:
    read = _sample_book(
        tmp_path,
        "It has 12 parts.\n",
        f'[[allow]]\npattern = "has 12 parts|The two tracks meet"\nreason = "a count"\nfiles = {files}\n',
    )
    assert [m for page, m in read.allowlist_problems() if page is None] == [
        f"book/allowlist.toml:1: allow-list entry 'has 12 parts|The two tracks meet' excuses its pattern on every "
        "page: expected "
        f"files = [the pages it excuses on], found files = {list(read.allowlist[0].files)}, "
        "which match all 2 pages"
    ]


def test_files_must_be_a_list_of_pages(tmp_path: Path) -> None:
    (tmp_path / "allowlist.toml").write_text(
        '[[allow]]\npattern = "Part \\\\d+"\nreason = "parts"\nfiles = "book/p.md"\n'
    )
    with pytest.raises(AllowListError, match=r"allowlist.toml:1: .*expected files = \[.*found files = 'book/p.md'"):
        read_allowlist(tmp_path / "allowlist.toml")


def test_no_entry_of_the_books_allowlist_spans_every_page() -> None:
    read = Book.read(ROOT / "book", ROOT)
    pages = [page.file for page in read.pages]
    assert len(pages) > 1
    for entry in read.allowlist:
        assert entry.files and not all(any(fnmatch.fnmatch(p, f) for f in entry.files) for p in pages), entry.line


def test_a_bare_number_word_is_refused_even_on_one_page(tmp_path: Path) -> None:
    read = _sample_book(
        tmp_path,
        "A byte holds eight bits.\n",
        '[[allow]]\npattern = "eight"\nreason = "a count"\nfiles = ["book/p.md"]\n'
        '[[allow]]\npattern = "The two tracks meet"\nreason = "named"\nfiles = ["book/q.md"]\n',
    )
    assert [m for _, m in read.allowlist_problems()] == [
        "book/p.md:1:14: book/allowlist.toml:1: allow-list entry 'eight' matches the bare word 'eight'; its pattern "
        "must take in the words around it, so that it excuses this occurrence only"
    ]


def test_one_entry_excuses_number_words_on_one_line_only(tmp_path: Path) -> None:
    read = _sample_book(
        tmp_path,
        "It has two parts.\nIt has two parts.\n",
        '[[allow]]\npattern = "has two parts"\nreason = "a count"\nfiles = ["book/p.md"]\n'
        '[[allow]]\npattern = "The two tracks meet"\nreason = "named"\nfiles = ["book/q.md"]\n',
    )
    assert [m for _, m in read.allowlist_problems()] == [
        "book/allowlist.toml:1: allow-list entry 'has two parts' excuses numbers in words on lines 1, 2 of book/p.md; "
        "each occurrence needs an entry of its own, whose pattern matches that line only"
    ]


def test_an_entry_that_excuses_nothing_fails(tmp_path: Path) -> None:
    read = _sample_book(
        tmp_path,
        "Nothing here.\n",
        '[[allow]]\npattern = "The two tracks meet"\nreason = "named"\nfiles = ["book/q.md"]\n'
        '[[allow]]\npattern = "never matches"\nreason = "stale"\nfiles = ["book/p.md"]\n',
    )
    assert [m for _, m in read.allowlist_problems()] == [
        "book/allowlist.toml:5: allow-list entry 'never matches' excuses nothing; remove it, or fix its pattern or "
        "files"
    ]


def test_the_books_allowlist_excuses_each_number_word_on_its_own() -> None:
    root = ROOT
    read = Book.read(root / "book", root)
    assert read.allowlist_problems() == []
    assert not [u.where for u, allowed in read.unbound() if allowed is None]


# No precision admits the neighbouring round figure (a ±1 margin on "about three" lets "about two" pass too).

_UNIT_FRACTION = re.compile(r"(?i)an? (third|quarter|fifth|sixth|seventh|eighth|ninth|tenth)")
_DENOMINATORS = {"third": 3, "quarter": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10}


def _neighbours(binding: Binding) -> tuple[Fraction, Fraction] | None:
    """The round figures on either side of a bound figure: one unit of the stated value's last printed digit
    away ("about 17": 16 and 18; "four per cent": 3 and 5 per cent), or for a unit fraction in words stated
    with a precision of its own, the unit fractions beside it ("a quarter": a fifth and a third)."""
    printed = binding.printed
    if printed is None or printed.is_tuple or not isinstance(printed.value, Fraction):
        return None
    digits = parse(printed.core)
    unit = digits.high - digits.low
    fraction = _UNIT_FRACTION.fullmatch(binding.text.strip())
    if fraction and printed.high - printed.value != unit / 2:
        n = _DENOMINATORS[fraction.group(1).lower()]
        return Fraction(1, n + 1), Fraction(1, n - 1)
    if not isinstance(unit, Fraction) or unit == 0:
        return None  # an exact figure (2^-7, 10^-3) has no neighbour within a precision
    return printed.value - unit, printed.value + unit


def _loose(binding: Binding) -> bool:
    """A figure whose precision is not simply its printed digits': in words, "about N", or an explicit ± margin."""
    printed = binding.printed
    assert printed is not None
    digits = parse(printed.core)
    return (
        printed.approximate
        or printed.high - printed.value != (digits.high - digits.low) / 2
        or bool(is_number_word(binding.text.strip()) or (binding.title and binding.stated != binding.text))
    )


def admitted_neighbours(binding: Binding, values: list[Any]) -> list[str]:
    """Where the neighbouring round figure would hold against a value the figure holds for."""
    around = _neighbours(binding)
    printed = binding.printed
    if around is None or printed is None or binding.disputed:
        return []
    half = Fraction(printed.high) - Fraction(printed.value)  # type: ignore[arg-type]
    out = []
    for value in values:
        number = as_number(value)
        if not isinstance(number, Fraction) or not printed.holds(number):
            continue
        for neighbour in around:
            if abs(number - neighbour) <= half:
                out.append(
                    f"{binding.where}:{binding.column}: figure {binding.text!r} ({binding.claim_id}, "
                    f"stated {binding.stated!r}) holds for {float(number):.6g} under a margin of ±{float(half):.3g}, "
                    f"and so would its neighbour {float(neighbour):.6g}: narrow the precision, or mark the figure "
                    "disputed"
                )
    return out


def test_a_margin_that_admits_the_neighbour_is_caught(tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        'Keeps [about three](claim:d "3 ± 1") digits; [about 17](claim:c) tokens/s; '
        '[A quarter](claim:q "0.25 ± 0.1"); [a quarter](claim:r "0.25 ± 0.03").',
    )
    by_id = {b.claim_id: b for b in page.bindings}
    assert admitted_neighbours(by_id["d"], [2.41]) and "neighbour 2" in admitted_neighbours(by_id["d"], [2.41])[0]
    assert admitted_neighbours(by_id["d"], [3.28]) and "neighbour 4" in admitted_neighbours(by_id["d"], [3.28])[0]
    assert not admitted_neighbours(by_id["c"], [16.6]) and not admitted_neighbours(by_id["c"], [17.4])
    assert admitted_neighbours(by_id["q"], [0.3])  # a third is within 0.1 of 0.3 as well
    assert not admitted_neighbours(by_id["r"], [0.268])


def _recorded_values() -> dict[str, list[Any]]:
    """Every committed machine's value of each claim, on every backend it was computed on."""
    out: dict[str, list[Any]] = {}
    for path in sorted((ROOT / "results").glob("*.json")):
        for claim_id, by_backend in json.loads(path.read_text(encoding="utf-8")).get("records", {}).items():
            for record in by_backend.values():
                if record.get("value") is not None:
                    out.setdefault(claim_id, []).append(from_json(record["value"]))
    return out


def test_no_figure_in_the_book_admits_its_neighbouring_round_figure() -> None:
    read = Book.read(ROOT / "book", ROOT)
    values = _recorded_values()
    loose = [b for b in read.bindings() if b.printed is not None and not b.printed.is_tuple and _loose(b)]
    checked = [b for b in loose if any(isinstance(as_number(v), Fraction) for v in values.get(b.claim_id, []))]
    assert len(checked) > 50, f"only {len(checked)} figures in words or 'about N' have a committed value to check"
    problems = [p for b in checked for p in admitted_neighbours(b, values[b.claim_id])]
    assert not problems, "\n".join(problems)


# Every number a reader sees: versions, code spans that are numbers, hyphenated number words, "dozen", and
# "one" where it counts a unit.


@given(major=st.integers(0, 99), minor=st.integers(0, 99), patch=st.integers(0, 99), before=words, after=words)
def test_a_dotted_version_is_one_number(major: int, minor: int, patch: int, before: str, after: str) -> None:
    version = f"{major}.{minor}.{patch}"
    assert iter_numbers(f"{before} {version}, {after}") == [version]
    assert iter_numbers(f"{before}{version}") == []  # inside a name (py3.11.4, v2.1.0)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("The product of `50` probabilities of `0.001`", ["50", "0.001"]),
        ("It keeps FP32's whole eight-bit exponent", ["eight"]),
        ("a two-layer MLP", ["two"]),
        ("A CPU with a dozen cores", ["dozen"]),
        ("a few dozen lines", []),
        ("one byte per weight and one CPU core", ["one", "one"]),
        ("one-byte codes", ["one"]),
        ("one of them is the one that counts", []),
        ("twenty-five times", ["twenty-five"]),
    ],
)
def test_the_scanner_sees_what_a_reader_reads_as_a_number(text: str, found: list[str]) -> None:
    assert iter_numbers(text) == found


def test_a_dozen_states_its_value() -> None:
    assert word_value("a dozen") == "12"
    assert binding_hint("dozen") == '[dozen](claim:... "12")'


def test_a_code_span_that_is_a_number_is_seen_outside_bindings(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("The product of [50](claim:a.factors) probabilities of `0.001`, `x[3]` apart.\n")
    read = read_page(page, tmp_path)
    assert [(b.text, b.claim_id) for b in read.bindings] == [("50", "a.factors")]
    assert [u.text for u in read.unbound] == ["0.001"] and not read.malformed


CLAIM_IDS = st.sampled_from(["a.one", "a.two", "b.three", "b.four"])
PAGE_TEXT = st.lists(CLAIM_IDS, max_size=4).map(
    lambda ids: "".join(f"Here [{n}](claim:{c}).\n" for n, c in enumerate(ids))
)


@settings(max_examples=60, deadline=None)
@given(
    pages=st.dictionaries(st.sampled_from(["p0.md", "p1.md", "p2.md", "p3.md"]), PAGE_TEXT, min_size=1),
    edits=st.lists(st.tuples(st.sampled_from(["p0.md", "p1.md", "p2.md", "p4.md"]), st.none() | PAGE_TEXT), max_size=4),
)
def test_a_page_read_again_keeps_the_claims_bindings_as_reading_the_book_whole_gives(
    pages: dict[str, str], edits: list[tuple[str, str | None]]
) -> None:
    def parsed(file: str, text: str):
        return read_page(Path("/book") / file, Path("/book"), text)

    book = Book(Path("/book"), sorted((parsed(f, t) for f, t in pages.items()), key=lambda p: p.file), [])
    by_claim = book.by_claim()
    for file, text in edits:
        book.replace_page(file, None if text is None else parsed(file, text), by_claim)
        assert [p.file for p in book.pages] == sorted(p.file for p in book.pages)
        assert by_claim == book.by_claim()


def test_the_allow_list_is_checked_against_the_page_as_read_not_as_on_disk_now(tmp_path: Path) -> None:
    page = tmp_path / "book" / "p.md"
    page.parent.mkdir()
    page.write_text("A rate of 42 per second.\n", encoding="utf-8")
    allowlist = tmp_path / "allow.toml"
    allowlist.write_text('[[allow]]\npattern = "42 per second"\nreason = "an example"\nfiles = ["book/p.md"]\n')
    book = Book(tmp_path, [read_page(page, tmp_path)], read_allowlist(allowlist))
    page.write_text("Another line.\nA rate of 42 per second.\n", encoding="utf-8")  # saved since: not read yet
    assert [allowed is not None for _, allowed in book.unbound()] == [True]
    assert book.allowlist_problems() == []
