"""A snippet's printed output is held against the book's output blocks: the line matcher, the
fence's declaration, the real book's snippets edited in a copy, and the plugin end to end."""

from __future__ import annotations

import json
import os
from datetime import datetime
from fractions import Fraction
from pathlib import Path

import pytest
from harness import faults
from harness.paths import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from verified_book.authoring.registry import REGISTRY, is_measured
from verified_book.book.bindings import book_pages
from verified_book.book.snippet_output import (
    MAX_REPORTED,
    BookLine,
    BookOutputs,
    NotPrinted,
    _book_line,
    block_hash,
    check_snippet,
    compare,
    match_line,
    numbers_in,
    parse_info,
    printed_figure,
    read_blocks,
    read_book,
    shape,
)
from verified_book.engine.config import read_config
from verified_book.engine.snippet_figures import source_hash
from verified_book.engine.snippet_run import run_in_process
from verified_book.records.results import read, validate

pytest_plugins = ["pytester"]

SHAPES_PAGE = "book/gpus-and-precision/1-tensors-and-bandwidth.md"


def fixed(value: Fraction, places: int) -> str:
    """`value` to `places` decimals, as a snippet's f"{x:.{places}f}" prints it (Fraction has no such format in
    3.11)."""
    scaled = round(value * 10**places)
    sign, digits = ("-" if scaled < 0 else ""), str(abs(scaled)).rjust(places + 1, "0")
    return sign + (f"{digits[:-places]}.{digits[-places:]}" if places else digits)


def line(text: str, varies: bool = False, measured: tuple[str, ...] = ()) -> BookLine:
    """A book line from raw Markdown, with the claims named in `measured` taken as measured."""
    return _book_line("book/p.md", 7, text, varies, lambda claim_id: claim_id in measured)


# --- the line matcher ---------------------------------------------------------------------------------


def test_numbers_are_read_as_a_snippet_prints_them_and_digits_in_words_are_text() -> None:
    text = (
        "x: shape=(32, 4096) bytes=524,288 eps 1.19e-07 -0.0026 8.6% float32 e4m3fn 3072x1024 layers.0.mlp numpy 2.5.2"
    )
    assert [t for _, _, t in numbers_in(text)] == ["32", "4096", "524,288", "1.19e-07", "-0.0026", "8.6%", "2.5.2"]
    assert shape(text) == "x: shape=(#, #) bytes=# eps # # # float32 e4m3fn 3072x1024 layers.0.mlp numpy #"


def test_a_line_holds_at_the_books_printed_precision() -> None:
    book = line("rms = [16.6](claim:t.rms)   bytes=[524,288](claim:t.bytes)")
    assert match_line(book, "rms = 16.63   bytes=524,288") is None
    assert match_line(book, "rms = 16.7 bytes=524,288") == "figure 16.6 (t.rms) printed as 16.7"
    assert match_line(book, "rms = 16.6   bytes=524,289") == "figure 524,288 (t.bytes) printed as 524,289"


def test_a_figure_of_several_numbers_is_reported_whole() -> None:
    book = line("codes : [[7, -7, 35]](claim:t.codes)   scale = [3.66e-04](claim:t.scale)")
    assert match_line(book, "codes : [7, -7, 35]   scale = 3.66e-04") is None
    assert match_line(book, "codes : [7, 8, 35]   scale = 3.70e-04") == (
        "figure [7, -7, 35] (t.codes) printed as [7, 8, 35]; figure 3.66e-04 (t.scale) printed as 3.70e-04"
    )


def test_unbound_numbers_on_a_line_that_does_not_vary_hold_too() -> None:
    book = line("bits per weight = (32 x 8 + 16) / 32 = [8.50](claim:t.bpw)")
    assert match_line(book, "bits per weight = (32 x 8 + 16) / 32 = 8.50") is None
    assert (
        match_line(book, "bits per weight = (32 x 8 + 32) / 32 = 9.00")
        == "16 printed as 32; figure 8.50 (t.bpw) printed as 9.00"
    )


def test_a_varying_line_keeps_only_its_shape() -> None:
    book = line("python loops:    [0.3056](claim:t.s) s per call", varies=True, measured=("t.s",))
    assert match_line(book, "python loops:    0.5070 s per call") is None
    assert match_line(book, "python loops: 0.5070 s per call, 2 tries") == "the text differs"
    assert match_line(book, "python loops: s per call") == "the text differs"


def test_text_is_compared_exactly_after_whitespace() -> None:
    book = line("x: dtype=float32  ndim=[2](claim:t.ndim)")
    assert match_line(book, "  x: dtype=float32 ndim=2   ") is None
    assert match_line(book, "x: dtype=float16  ndim=2") == "the text differs"


WORDS = st.text(alphabet="abcdefghij:=()[]|@ ", min_size=1, max_size=8).filter(lambda w: w.strip())
FIGURES = st.one_of(
    st.integers(-(10**9), 10**9).map(str),
    st.integers(0, 10**12).map(lambda n: f"{n:,}"),
    st.tuples(st.integers(-(10**6), 10**6), st.integers(0, 6)).map(lambda t: fixed(Fraction(t[0], 997), t[1])),
    st.tuples(st.floats(1e-30, 1e30), st.integers(0, 5)).map(lambda t: f"{t[0]:.{t[1]}e}"),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(WORDS, FIGURES), min_size=1, max_size=6), st.booleans())
def test_any_printed_line_holds_against_itself_bound_or_not(parts: list[tuple[str, str]], bind: bool) -> None:
    printed = " ".join(f"{w} {n}" for w, n in parts)
    markdown = " ".join(f"{w} [{n}](claim:t.n{i})" if bind else f"{w} {n}" for i, (w, n) in enumerate(parts))
    book = line(markdown)
    assert book.text == printed
    assert match_line(book, printed) is None
    assert match_line(book, "  " + printed.replace(" ", "   ") + " ") is None


@settings(max_examples=200, deadline=None)
@given(st.integers(-(10**7), 10**7), st.integers(1, 10**6), st.integers(0, 4), st.integers(0, 4))
def test_a_finer_print_holds_the_books_rounding_of_it(
    numerator: int, denominator: int, book_places: int, more: int
) -> None:
    printed = fixed(Fraction(numerator, denominator), book_places + more)
    book = fixed(Fraction(printed), book_places)
    assert match_line(line(f"value [{book}](claim:t.v) units"), f"value {printed} units") is None


@settings(max_examples=200, deadline=None)
@given(st.integers(-(10**7), 10**7), st.integers(0, 4), st.integers(1, 50).map(lambda k: k * (1 if k % 2 else -1)))
def test_a_number_off_by_a_unit_of_the_books_last_place_is_stale(units: int, places: int, step: int) -> None:
    book = fixed(Fraction(units, 10**places), places)
    printed = fixed(Fraction(units + step, 10**places), places)
    assert match_line(line(f"n = [{book}](claim:t.v)"), f"n = {printed}") == f"figure {book} (t.v) printed as {printed}"


# --- the fence's declaration --------------------------------------------------------------------------


@given(st.sets(st.integers(1, 40), max_size=10))
def test_varies_reads_back_the_lines_it_names(lines: set[int]) -> None:
    ordered, ranges = sorted(lines), []
    for n in ordered:
        if ranges and ranges[-1][1] == n - 1:
            ranges[-1][1] = n
        else:
            ranges.append([n, n])
    spelled = ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges)
    info = f"output s.py varies={spelled}" if lines else "output s.py"
    assert parse_info(info) == ("s.py", frozenset(lines), (), [])


def test_a_fence_that_names_no_snippet_or_an_unknown_word_is_an_error() -> None:
    assert parse_info("output")[3] == [
        "output block names no snippet: write the snippet's file name after `output`, as in ```output shapes.py"
    ]
    assert "'lines=3' in the fence is not understood" in parse_info("output s.py lines=3")[3][0]
    assert "'x' is not a line of the block" in parse_info("output s.py varies=1,x")[3][0]
    assert parse_info("output s.py without=cuda") == ("s.py", frozenset(), ("cuda",), [])


def page(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "book" / "p.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


def errors_of(
    tmp_path: Path, body: str, measured: tuple[str, ...] = (), snippets: tuple[str, ...] = ("s.py",)
) -> list[str]:
    blocks = read_blocks(page(tmp_path, body), "book/p.md", lambda c: c in measured)
    return BookOutputs(blocks, snippets).errors("book/p.md")


def test_a_measured_figure_or_a_version_on_an_undeclared_line_is_an_error(tmp_path: Path) -> None:
    body = "Intro.\n\n```output s.py\ntook [0.31](claim:t.seconds) s\nnumpy 2.5.2\n```\n"
    assert errors_of(tmp_path, body, measured=("t.seconds",)) == [
        "book/p.md:4: figure 0.31 (t.seconds) is measured, so this line changes from machine to machine: "
        "declare it in varies= of the fence at book/p.md:3\n    took 0.31 s",
        "book/p.md:5: 2.5.2 is a library version, so this line changes from machine to machine: "
        "declare it in varies= of the fence at book/p.md:3\n    numpy 2.5.2",
    ]
    assert errors_of(tmp_path, body.replace("s.py", "s.py varies=1-2"), measured=("t.seconds",)) == []


def test_varies_cannot_hide_a_line_that_must_hold(tmp_path: Path) -> None:
    body = "```output s.py varies=1,3\nbytes=[524,288](claim:t.bytes)\n```\n"
    assert errors_of(tmp_path, body) == [
        "book/p.md:1: varies names line 3; the block has 1",
        "book/p.md:2: declared varying (varies= at book/p.md:1) but every number on it is bound to a claim that is "
        "computed the same on every machine, so it must hold: take it out of varies=\n    bytes=524,288",
    ]


def test_a_block_naming_an_unknown_snippet_is_an_error_with_its_place(tmp_path: Path) -> None:
    body = "# P\n\n```output nosuch.py\nhello\n```\n\n```output\nhi\n```\n"
    assert errors_of(tmp_path, body) == [
        "book/p.md:3: output block names nosuch.py, which is not a snippet of this book (snippets: s.py)",
        "book/p.md:7: output block names no snippet: write the snippet's file name after `output`, as in ```output "
        "shapes.py",
    ]


# --- a block against a run ----------------------------------------------------------------------------


def test_a_missing_and_an_extra_line_are_named_where_they_belong(tmp_path: Path) -> None:
    (block,) = read_blocks(
        page(tmp_path, "```output s.py\na [1](claim:t.a)\nb 2\nc 3\n```\n"), "book/p.md", lambda c: False
    )
    assert compare(block, "a 1\nb 2\nc 3\n\n").status == "verified"
    missing = compare(block, "a 1\nc 3\n", "script")
    assert (missing.status, missing.file, missing.line) == ("stale", "book/p.md", 1)
    assert missing.message == "book/p.md:3: s.py (script) no longer prints this line at all\n    book:    b 2"
    assert compare(block, "a 1\nb 2\nc 3\nd 4\n").message == (
        "book/p.md:5: s.py prints a line the book does not show\n    printed: d 4"
    )


def test_a_runaway_snippet_is_reported_in_a_bounded_message(tmp_path: Path) -> None:
    (block,) = read_blocks(page(tmp_path, "```output s.py\nok\n```\n"), "book/p.md", lambda c: False)
    check = compare(block, "ok\n" + "noise\n" * 10_000)
    assert check.message.count("prints a line the book does not show") == MAX_REPORTED
    assert check.message.endswith(f"book/p.md:1: and {10_000 - MAX_REPORTED} more line(s) differ")


def test_a_block_printed_without_cuda_is_skipped_where_cuda_is(tmp_path: Path) -> None:
    blocks = read_blocks(
        page(tmp_path, "```output s.py without=cuda\nno CUDA device\n```\n"), "book/p.md", lambda c: False
    )
    outputs = BookOutputs(blocks, ("s.py",))
    assert [c.status for c in check_snippet(outputs, "s.py", "no CUDA device\n", devices=["cpu"])] == ["verified"]
    (skipped,) = check_snippet(outputs, "s.py", "|===| memory summary\n", devices=["cpu", "cuda"])
    assert skipped.status == "skipped" and "on a machine without CUDA" in skipped.message


# --- a measured figure read from a run -----------------------------------------------------------------

TIMED = (
    "```output s.py varies=2-3\nsizes\nbatch [8](claim:t.batch): [2.50](claim:t.ms) ms\n"
    "shape [(2, 3)](claim:t.shape)\n```\n"
)


def test_a_figure_is_read_where_the_block_shows_it_past_lines_the_book_does_not_show(tmp_path: Path) -> None:
    (block,) = read_blocks(page(tmp_path, TIMED), "book/p.md", lambda c: c == "t.ms")
    run = "a warning first\nsizes\nbatch 8: 17.25 ms\nshape (4, 5)\n"
    line, found = printed_figure(block, run, "t.ms")
    assert (line.where, found) == ("book/p.md:3", ("17.25",))
    assert printed_figure(block, run, "t.batch")[1] == ("8",)
    assert printed_figure(block, run, "t.shape")[1] == ("4", "5")  # a figure of several numbers gives them all


def test_a_run_without_the_books_line_gives_no_figure_and_says_where(tmp_path: Path) -> None:
    (block,) = read_blocks(page(tmp_path, TIMED), "book/p.md", lambda c: c == "t.ms")
    with pytest.raises(NotPrinted) as caught:
        printed_figure(block, "sizes\nbatch 8: 17.25 ms per call\nshape (4, 5)\n", "t.ms")
    assert str(caught.value).startswith(
        "book/p.md:3: s.py printed no line like the book's, so t.ms has no value here\n    book:    batch 8: 2.50 ms\n"
    )
    with pytest.raises(NotPrinted, match="book/p.md:1: the block shows no figure of t.other"):
        printed_figure(block, "sizes\n", "t.other")


# --- the real book: every block as declared, and a snippet edited in a copy ---------------------------


def real_outputs() -> BookOutputs:
    config = read_config(ROOT)
    return read_book(book_pages(config.pages), config.root, config.snippets, is_measured)


def test_every_output_block_of_the_book_names_a_snippet_and_every_snippet_has_one() -> None:
    outputs = real_outputs()
    assert outputs.blocks and all(outputs.errors(b.file) == [] for b in outputs.blocks)
    assert sorted({b.snippet for b in outputs.blocks}) == list(outputs.snippets)


def test_a_snippet_whose_computation_changed_fails_with_the_blocks_line_and_both_texts(tmp_path: Path) -> None:
    """A copy of shapes.py stores its weight in float64: the bytes and the dtype it prints change."""
    assert REGISTRY.get("shapes.w.bytes") is not None, "the book's claims are loaded by its conftest"
    copy = tmp_path / "shapes.py"
    source = (ROOT / "book" / "snippets" / "shapes.py").read_text(encoding="utf-8")
    copy.write_text(source, encoding="utf-8")
    outputs = real_outputs()
    assert [c.status for c in check_snippet(outputs, "shapes.py", run_in_process(copy).stdout)] == ["verified"]

    edited = source.replace(
        "weight = np.zeros((hidden, intermediate), dtype=np.float32)",
        "weight = np.zeros((hidden, intermediate), dtype=np.float64)",
    )
    assert edited != source
    copy.write_text(edited, encoding="utf-8")
    done = run_in_process(copy)
    (check,) = check_snippet(outputs, "shapes.py", done.stdout, done.how)
    assert (check.status, check.file) == ("stale", SHAPES_PAGE)
    book_line = next(b for b in outputs.of_snippet("shapes.py")[0].lines if b.text.startswith("w:"))
    assert check.message == (
        f"{SHAPES_PAGE}:{book_line.line}: shapes.py (in process) no longer prints the book's line: the text differs\n"
        f"    book:    {book_line.text}\n"
        "    printed: w: shape=(4096, 12288)  ndim=2  dtype=float64  elements=50,331,648  bytes=402,653,184"
    )

    byte_count = source.replace(
        "weight = np.zeros((hidden, intermediate), dtype=np.float32)",
        "weight = np.zeros((hidden, intermediate), dtype=np.float32)[:, :-1]",
    )
    copy.write_text(byte_count, encoding="utf-8")
    (check,) = check_snippet(outputs, "shapes.py", run_in_process(copy).stdout, "in process")
    assert (
        f"{SHAPES_PAGE}:{book_line.line}: shapes.py (in process) no longer prints the book's line: "
        "figure (4096, 12288) (shapes.w.shape) printed as (4096, 12287); figure 50,331,648 (shapes.w.elements) "
        "printed as "
        "50,327,552; figure 201,326,592 (shapes.w.bytes) printed as 201,310,208" in check.message
    )


# --- the plugin end to end ----------------------------------------------------------------------------

SNIPPET = 'import numpy\nn = 32\nprint(f"block of {n} weights, {n * 4:,} bytes")\nprint("numpy", numpy.__version__)\n'
CLAIMS = '''
from verified_book.authoring.registry import claim

@claim("lab.block", kind="exact")
def block():
    """The block size the snippet uses."""
    return 32

@claim("lab.bytes", kind="exact")
def block_bytes():
    """Its bytes in float32."""
    return 32 * 4
'''
PAGE = (
    "# Lab\n\nWhat `s.py` prints:\n\n```output s.py varies=2\n"
    "block of [32](claim:lab.block) weights, [128](claim:lab.bytes) bytes\nnumpy 2.5.2\n```\n"
)


def lay_out(pytester: pytest.Pytester, claims: str, page: str, snippet: str) -> pytest.Pytester:
    """A sample book of one claims module, one page (book/lab.md) and one snippet (s.py)."""
    (faults.pytester_book(pytester) / "lab.py").write_text(claims)
    (pytester.path / "book" / "snippets").mkdir(parents=True)
    (pytester.path / "book" / "lab.md").write_text(page)
    (pytester.path / "book" / "snippets" / "s.py").write_text(snippet)
    return pytester


@pytest.fixture
def book(pytester: pytest.Pytester) -> pytest.Pytester:
    return lay_out(pytester, CLAIMS, PAGE, SNIPPET)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess("-m", "not slow", *args)


def outputs_of(pytester: pytest.Pytester) -> dict:
    (path,) = (pytester.path / "results").glob("*.json")
    data = json.loads(path.read_text())
    assert validate(data, str(path)) == []
    return data["run"]["outputs"]


def test_the_default_run_holds_a_snippet_to_its_block_and_records_how(book: pytest.Pytester) -> None:
    result = run(book)
    assert result.ret == 0, result.stdout.str()
    block = PAGE[PAGE.index("```output") :].rstrip("\n")
    assert outputs_of(book)["s.py"]["checked"] == [
        {"file": "book/lab.md", "line": 5, "status": "verified", "message": "", "sha256": block_hash(block)}
    ]
    assert outputs_of(book)["s.py"]["sha256"] == source_hash(book.path / "book" / "snippets" / "s.py")


def around_the_run(book: pytest.Pytester) -> tuple[float, float]:
    """A minute before and a minute after the recorded run of s.py: file times that say edited before or since."""
    recorded = datetime.fromisoformat(outputs_of(book)["s.py"]["date"]).timestamp()
    return recorded - 60, recorded + 60


def changed_run(book: pytest.Pytester) -> tuple[int, bool]:
    """`--changed`: its exit status, and whether it ran s.py again."""
    result = run(book, "-v", "--changed")
    return int(result.ret), "book/snippets/s.py::" in result.stdout.str()


def test_changed_reruns_a_snippet_whose_source_changed_and_not_one_only_touched(book: pytest.Pytester) -> None:
    """What printed the record is its source, not its file's time: a fresh checkout touches every file."""
    assert run(book).ret == 0
    snippet = book.path / "book" / "snippets" / "s.py"
    earlier, later = around_the_run(book)
    os.utime(book.path / "book" / "lab.md", (earlier, earlier))  # the page that shows its output: not edited since
    os.utime(snippet, (later, later))
    assert changed_run(book) == (0, False)
    snippet.write_text(SNIPPET.replace("n = 32", "n = 16"))
    os.utime(snippet, (earlier, earlier))
    assert changed_run(book) == (1, True)


@pytest.mark.slow
def test_changed_reruns_a_snippet_whose_block_changed_whatever_the_page_s_time(book: pytest.Pytester) -> None:
    """What a record compared is the block's text: an edit elsewhere on its page leaves it as checked, and an
    edit to it counts even where the page's time is older than the record (saved while the run ran, or
    copied with its time kept)."""
    assert run(book).ret == 0
    page = book.path / "book" / "lab.md"
    earlier, later = around_the_run(book)
    page.write_text(PAGE.replace("What `s.py` prints:", "What the script `s.py` prints:"))
    os.utime(page, (later, later))
    assert changed_run(book) == (0, False)
    page.write_text(PAGE.replace("numpy 2.5.2", "numpy 2.5.3"))
    os.utime(page, (earlier, earlier))
    assert changed_run(book) == (0, True)


def test_changed_goes_by_the_page_s_time_for_a_check_recorded_without_its_block_s_hash(
    book: pytest.Pytester,
) -> None:
    assert run(book).ret == 0
    earlier, later = around_the_run(book)
    (path,) = (book.path / "results").glob("*.json")
    data = json.loads(path.read_text())
    for check in data["run"]["outputs"]["s.py"]["checked"]:
        del check["sha256"]  # as a schema 5 file holds it
    path.write_text(json.dumps(data))
    page = book.path / "book" / "lab.md"
    os.utime(page, (earlier, earlier))
    assert changed_run(book) == (0, False)
    os.utime(page, (later, later))
    assert changed_run(book)[1]


def test_a_changed_snippet_fails_the_default_run_with_the_blocks_place(book: pytest.Pytester) -> None:
    (book.path / "book" / "snippets" / "s.py").write_text(SNIPPET.replace("n = 32", "n = 16"))
    result = run(book)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*book/lab.md:6: s.py (in process) no longer prints the book's line: figure 32 (lab.block) printed as 16; "
            "figure 128 (lab.bytes) printed as 64",
            "    book:    block of 32 weights, 128 bytes",
            "    printed: block of 16 weights, 64 bytes",
        ]
    )
    (checked,) = outputs_of(book)["s.py"]["checked"]
    assert checked["status"] == "stale" and checked["message"].startswith("book/lab.md:6: ")


def test_a_block_naming_no_snippet_and_a_snippet_with_no_block_fail(book: pytest.Pytester) -> None:
    (book.path / "book" / "lab.md").write_text(PAGE.replace("```output s.py varies=2", "```output"))
    result = run(book)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*book/lab.md:5: output block names no snippet*",
            "*book/snippets/s.py:1: no output block of the book shows what s.py prints*",
        ]
    )


def test_a_results_file_with_a_bad_check_is_refused() -> None:
    data = json.loads((ROOT / "results" / "cpu-x86_64-2c.json").read_text(encoding="utf-8"))
    data["run"]["outputs"]["shapes.py"]["checked"] = [
        {"file": "/etc/passwd", "line": 0, "status": "fine", "message": 3}
    ]
    problems = validate(data, "r.json")
    assert [p.split(": ", 2)[2] for p in problems if "checked" in p] == [
        "checked[0]: file '/etc/passwd' is not a relative path inside the book",
        "checked[0]: line 0 is not a positive integer",
        "checked[0]: status 'fine' is not one of verified, stale, skipped",
        "checked[0]: message must be a string",
    ]


TIMED_SNIPPET = 'import time\nprint(f"took {time.time_ns() % 10**6 / 1000:.3f} ms a call")\n'
TIMED_CLAIMS = '''
from verified_book.authoring.registry import claim
from verified_book.engine.snippet_figures import snippet_figure


@claim("lab.ms", kind="measured", backends=("numpy",), printed_on="author_test_box", tolerance=0.5)
def ms(backend):
    """Milliseconds per call, as s.py prints them on this machine."""
    return snippet_figure("lab.ms")
'''
TIMED_PAGE = "# Lab\n\n```output s.py varies=1\ntook [0.500](claim:lab.ms) ms a call\n```\n"


@pytest.fixture
def timed_book(pytester: pytest.Pytester) -> pytest.Pytester:
    book = lay_out(pytester, TIMED_CLAIMS, TIMED_PAGE, TIMED_SNIPPET)
    with (book.path / "book.toml").open("a") as toml:  # the machine the book's timing was printed on
        toml.write('elsewhere = ["author_test_box"]\n')
    return book


def test_a_measured_claim_takes_the_figure_the_snippets_one_run_printed(timed_book: pytest.Pytester) -> None:
    result = run(timed_book)
    assert result.ret == 0, result.stdout.str()
    (path,) = (timed_book.path / "results").glob("*.json")
    data = json.loads(path.read_text())
    printed = data["run"]["outputs"]["s.py"]["text"].split()[1]  # a clock reading: a second run would print another
    record = read(path).records["lab.ms"]["numpy"]
    assert record.status == "reference" and record.inputs[0].value == printed
    assert record.value == pytest.approx(float(printed))


def test_a_claim_whose_snippet_fails_or_prints_another_line_fails_with_the_place(timed_book: pytest.Pytester) -> None:
    snippet = timed_book.path / "book" / "snippets" / "s.py"
    snippet.write_text("raise SystemExit('no clock here')\n")
    result = run(timed_book, "-k", "lab.ms")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*claim lab.ms on numpy: bad input: book/snippets/s.py exited 1 (in process), so it "
            "printed no lab.ms for book/lab.md:3:*"
        ]
    )
    snippet.write_text('print("took about 3 ms")\n')
    result = run(timed_book, "-k", "lab.ms")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*claim lab.ms on numpy: bad input: book/lab.md:4: s.py printed no line like the book's, "
            "so lab.ms has no value here"
        ]
    )
