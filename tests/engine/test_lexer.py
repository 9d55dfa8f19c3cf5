"""One lexer for every page reader: CommonMark's fence rule (kind and length), front matter, includes.

Property tests generate pages with nested and mixed fences (``` inside ~~~, longer closing fences,
```` fences holding ```) and prose with bound figures, and hold the lexer to invariants and to a
reference written here line by line, another way than the lexer's.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from verified_book.book.lexer import CodeBlock, Fence, FrontMatter, Prose, fence_of, include_of, lex

# ---------------------------------------------------------------------------
# A reference: one pass over the lines, a state of (character, length) or nothing


def reference(lines: list[str]) -> list[str]:
    """What each line is: 'front', 'prose', 'open', 'body' or 'close'."""
    kinds: list[str] = []
    start = 0
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), len(lines) - 1)
        kinds = ["front"] * (end + 1)
        start = end + 1
    open_char, open_len = "", 0
    for line in lines[start:]:
        text = line.lstrip(" \t")
        char = text[:1]
        run = len(text) - len(text.lstrip(char)) if char in ("`", "~") else 0
        rest = text[run:]
        if not open_char:
            if run >= 3 and not (char == "`" and "`" in rest):
                open_char, open_len = char, run
                kinds.append("open")
            else:
                kinds.append("prose")
        elif char == open_char and run >= open_len and not rest.strip():
            open_char = ""
            kinds.append("close")
        else:
            kinds.append("body")
    return kinds


def kinds_of(lines: list[str]) -> list[str]:
    """What the lexer makes of each line, in the reference's words."""
    kinds: list[str] = []
    for region in lex(lines).regions:
        if isinstance(region, FrontMatter):
            kinds += ["front"] * len(region.lines)
        elif isinstance(region, Prose):
            kinds += ["prose"] * len(region.lines)
        else:
            assert isinstance(region, CodeBlock)
            closed = region.closing is not None
            kinds += ["open"] + ["body"] * len(region.body) + (["close"] if closed else [])
    return kinds


# ---------------------------------------------------------------------------
# Pages

FIGURES = st.sampled_from(
    [
        "The ceiling is [16.6](claim:decode.ceiling.dgx_spark.bf16) tokens/s.",
        'A half is [0.5](claim:t.half) and [four per cent](claim:t.zeroed "0.04") of it.',
        "Plain words and no figure.",
        "| a | [273](claim:t.bandwidth) |",
        "# A heading",
        "",
        '--8<-- "book/snippets/shapes.py"',
        "Inline `code` and ``two`` ticks.",
        "---",
    ]
)
INDENT = st.sampled_from(["", " ", "  ", "   ", "    ", "\t"])
INFO = st.sampled_from(["", "python", "output", "output shapes.py varies=1", "markdown", " text ", "~"])


@st.composite
def fence_line(draw: st.DrawFn) -> str:
    """Any fence-like line: backticks or tildes, 2 to 6 of them, with an info string or not."""
    char = draw(st.sampled_from("`~"))
    info = draw(st.sampled_from(["", "python", "output", " ", "a`b", "``", "~~~", "x ~"]))
    return draw(INDENT) + char * draw(st.integers(2, 6)) + info


LINE = st.one_of(FIGURES, fence_line(), st.text(alphabet="`~ -x[]()1.\t", max_size=8))


@dataclass(frozen=True)
class Segment:
    """A piece of a page whose reading is known: prose lines, or a block that its own closing fence ends."""

    lines: tuple[str, ...]
    kinds: tuple[str, ...]


@st.composite
def prose(draw: st.DrawFn) -> Segment:
    lines = tuple(draw(st.lists(FIGURES.filter(lambda s: fence_of(s) is None), min_size=1, max_size=4)))
    return Segment(lines, ("prose",) * len(lines))


@st.composite
def block(draw: st.DrawFn) -> Segment:
    """A fenced block whose body holds fences that cannot close it: the other kind, shorter ones of its kind,
    ones with an info string; closed by a fence of its kind at least as long."""
    char = draw(st.sampled_from("`~"))
    length = draw(st.integers(3, 5))
    info = draw(INFO)
    if char == "`":
        info = info.replace("`", "")
    if info.startswith(char):  # a tilde right after the fence would lengthen it
        info = " " + info
    other = "~" if char == "`" else "`"
    inner = st.one_of(
        FIGURES,
        st.builds(lambda i, n, x: i + other * n + x, INDENT, st.integers(3, 6), st.sampled_from(["", "python"])),
        st.builds(lambda i, n: i + char * n, INDENT, st.integers(3, length - 1)) if length > 3 else FIGURES,
        st.builds(lambda i, n: i + char * n + "python", INDENT, st.integers(length, 6)),
    )
    body = tuple(draw(st.lists(inner, max_size=4)))
    closing = draw(INDENT) + char * draw(st.integers(length, length + 2)) + draw(st.sampled_from(["", " ", "\t"]))
    lines = (draw(INDENT) + char * length + info, *body, closing)
    return Segment(lines, ("open", *("body",) * len(body), "close"))


PAGES = st.lists(st.one_of(prose(), block()), max_size=8)


def joined(segments: list[Segment]) -> tuple[list[str], list[str]]:
    lines = [line for s in segments for line in s.lines]
    kinds = [kind for s in segments for kind in s.kinds]
    if lines and lines[0].strip() == "---":  # a page that starts with a rule would open front matter
        lines.insert(0, "")
        kinds.insert(0, "prose")
    return lines, kinds


# ---------------------------------------------------------------------------
# Invariants


def check_invariants(lines: list[str]) -> None:
    document = lex(lines)
    regions = document.regions
    assert [line for r in regions for line in r.lines] == lines  # every line in exactly one region, in order
    if not lines:
        assert regions == ()
        return
    assert regions[0].first == 1 and regions[-1].last == len(lines)
    for before, after in itertools.pairwise(regions):
        assert after.first == before.last + 1
        assert not (isinstance(before, Prose) and isinstance(after, Prose))
    for region in regions:
        assert region.last - region.first + 1 == len(region.lines)
        if isinstance(region, Prose):
            assert all(fence_of(line) is None for line in region.lines)  # prose never holds a fence
        if isinstance(region, CodeBlock):
            assert fence_of(region.lines[0]) == region.fence
            assert not any((f := fence_of(line)) and region.fence.closed_by(f) for line in region.body)
            if region.closing is None:
                assert region is regions[-1]  # only the page's end leaves a block open
            else:
                assert fence_of(region.lines[-1]) == region.closing
                assert region.closing.marker[0] == region.fence.marker[0]
                assert len(region.closing.marker) >= len(region.fence.marker)
                assert region.closing.info == ""
    for include in document.includes:
        (where,) = [r for r in regions if r.first <= include.line <= r.last]
        assert include.in_code == isinstance(where, CodeBlock)
        assert include_of(lines[include.line - 1]) == (include.indent, include.path)


@given(PAGES)
def test_a_generated_page_is_read_as_it_was_built(segments: list[Segment]) -> None:
    lines, kinds = joined(segments)
    assert kinds_of(lines) == kinds
    check_invariants(lines)
    for region in lex(lines).prose():
        for number, line in region.numbered():
            assert kinds[number - 1] == "prose", (number, line)


@given(st.lists(LINE, max_size=14))
def test_any_lines_agree_with_the_reference_and_keep_the_invariants(lines: list[str]) -> None:
    check_invariants(lines)
    assert kinds_of(lines) == reference(lines)


@given(PAGES, st.sampled_from(["`", "~"]), st.integers(3, 5))
def test_a_block_left_open_runs_to_the_end_of_the_page(segments: list[Segment], char: str, length: int) -> None:
    lines, _ = joined(segments)
    lines.append(char * length)
    *_, last = lex(lines).regions
    assert isinstance(last, CodeBlock) and last.closing is None and last.last == len(lines)
    assert last.first == len(lines) and last.body == ()


# ---------------------------------------------------------------------------
# The rule, case by case


def test_a_backtick_line_inside_a_tilde_block_is_code_and_the_prose_after_it_is_prose() -> None:
    lines = ["~~~markdown", "```", "~~~", "The ceiling is [16.6](claim:c).", "```", "x"]
    code, text, rest = lex(lines).regions
    assert isinstance(code, CodeBlock) and (code.first, code.last) == (1, 3) and code.body == ("```",)
    assert isinstance(text, Prose) and (text.first, text.last) == (4, 4)
    assert isinstance(rest, CodeBlock) and rest.closing is None and rest.body == ("x",)


def test_only_a_fence_of_the_same_kind_at_least_as_long_and_without_info_closes() -> None:
    lines = ["````markdown", "```", "```python", "~~~~", "````python", "`````", "after"]
    code, after = lex(lines).regions
    assert isinstance(code, CodeBlock) and code.last == 6 and code.closing == Fence("", "`````", "")
    assert isinstance(after, Prose) and after.lines == ("after",)


def test_a_backtick_fence_holds_no_backtick_in_its_info_string() -> None:
    assert fence_of("```a`b") is None
    assert fence_of("~~~a`b") == Fence("", "~~~", "a`b")
    assert fence_of("  ```` python ") == Fence("  ", "````", "python")
    assert fence_of("``") is None


def test_front_matter_is_its_own_region_unless_the_generator_took_it_off() -> None:
    lines = ["---", "title: A", "---", "Text [1.5](claim:c)."]
    front, text = lex(lines).regions
    assert isinstance(front, FrontMatter) and front.last == 3 and isinstance(text, Prose)
    (only,) = lex(lines, front_matter=False, first_line=5).regions
    assert isinstance(only, Prose) and (only.first, only.last) == (5, 8)


def test_an_output_block_is_one_whose_info_string_starts_with_the_word_output() -> None:
    lines = ["```output shapes.py", "1", "```", "```outputs", "2", "```", "~~~ Output", "3", "~~~"]
    assert [b.first for b in lex(lines).output_blocks()] == [1, 7]


def test_includes_are_found_in_prose_and_in_code() -> None:
    lines = ['--8<-- "a.md"', "```python", '  --8<-- "book/snippets/x.py"', "```", "say --8<-- 'no.py'"]
    includes = lex(lines).includes
    assert [(i.line, i.path, i.in_code) for i in includes] == [(1, "a.md", False), (3, "book/snippets/x.py", True)]
