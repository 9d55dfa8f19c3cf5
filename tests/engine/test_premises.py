"""A correction propagates: a claim resting on a premise the book disputes says what became of it, or the book's
check fails at its definition, naming the dispute and what it shares with it."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from harness import faults

pytest_plugins = ["pytester"]

CLAIMS = '''
from fractions import Fraction
from verified_book.authoring.registry import claim, disputes_premise, excuse


def file_gb():
    """The whole file, which the source says a token reads."""
    return Fraction(164, 10)


def read_gb():
    return Fraction(151, 10)


@claim("arith.read_gb", kind="exact")
def read():
    """What a token reads: not the whole file."""
    return read_gb()


disputes_premise(read, file_gb)


@claim("arith.ceiling", kind="exact")
def ceiling():
    """A decode ceiling over the whole file."""
    return 273 / file_gb()
{excuse}


@claim("arith.ceiling_read", kind="exact")
def ceiling_read():
    """The ceiling over what a token reads: re-derived, so resting on the premise no longer."""
    return 273 / read_gb()
'''
PAGE = (
    'A token reads [all 16.4 GB](claim:arith.read_gb "16.4; disputed"), which it does not; the ceiling is\n'
    "[16.6](claim:arith.ceiling) tokens/s over the file and [18.1](claim:arith.ceiling_read) over what is read.\n"
)
#: the line of the dependant's definition in the claims file, and of its excuse where it has one
CEILING_LINE = next(n for n, text in enumerate(CLAIMS.splitlines(), 1) if '@claim("arith.ceiling"' in text)
PREMISE_LINE = next(n for n, text in enumerate(CLAIMS.splitlines(), 1) if text.startswith("disputes_premise("))
EXCUSE_LINE = next(n for n, text in enumerate(CLAIMS.splitlines(), 1) if text == "{excuse}")
#: an excuse of the dependant, given beside it
STANDS = 'excuse(ceiling, {"arith.read_gb": "stands"})'


def book_with(pytester: pytest.Pytester, excuse: str = "", page: str = PAGE) -> Any:
    return faults.sample_book(pytester, CLAIMS.format(excuse=excuse), page, module="arith.py")


def test_a_dependant_with_no_disposition_fails_the_book_at_its_definition(pytester: pytest.Pytester) -> None:
    result = faults.run_book(book_with(pytester))
    assert result.ret == 1
    out = result.stdout.str()
    assert (
        f"sample_claims/arith.py:{CEILING_LINE}: claim 'arith.ceiling' rests on the premise 'arith.read_gb' "
        "disputes at book/page.md:1"
    ) in out, out
    assert "calls sample_claims.arith.file_gb" in out
    assert "expected a disposition" in out and "found none" in out
    assert """(excuse(ceiling, {'arith.read_gb': '...'}))""" in out, "the message shows the declaration to add"
    assert "'arith.ceiling_read' rests" not in out, "a claim re-derived without the premise is no dependant"


def test_an_excused_dependant_passes(pytester: pytest.Pytester) -> None:
    excuse = 'excuse(ceiling, {"arith.read_gb": "the page prints the ceiling over what is read beside it"})'
    result = faults.run_book(book_with(pytester, excuse))
    assert result.ret == 0, result.stdout.str()


def test_a_dependant_disputed_too_passes(pytester: pytest.Pytester) -> None:
    page = PAGE.replace("[16.6](claim:arith.ceiling)", '[16.6](claim:arith.ceiling "disputed")')
    book = book_with(pytester, page=page)
    (book.path / "sample_claims" / "arith.py").write_text(
        CLAIMS.format(excuse="").replace("return 273 / file_gb()", "return 273 / read_gb() + file_gb() * 0")
    )
    result = faults.run_book(book)
    assert result.ret == 0, result.stdout.str()


def test_an_excuse_for_a_claim_that_no_longer_rests_on_the_premise_fails(pytester: pytest.Pytester) -> None:
    book = book_with(pytester, STANDS)
    (book.path / "sample_claims" / "arith.py").write_text(
        CLAIMS.format(excuse=STANDS).replace("return 273 / file_gb()", "return 273 / read_gb()")
    )
    out = faults.run_book(book).stdout.str()
    assert (
        f"sample_claims/arith.py:{EXCUSE_LINE}: claim 'arith.ceiling' is excused from the dispute 'arith.read_gb', "
        "but it no longer rests on"
    ) in out, out


def test_a_premise_no_figure_disputes_fails(pytester: pytest.Pytester) -> None:
    page = PAGE.replace('"16.4; disputed"', '"15.1"').replace("all 16.4 GB", "15.1 GB")
    out = faults.run_book(book_with(pytester, page=page)).stdout.str()
    assert (
        f"sample_claims/arith.py:{PREMISE_LINE}: claim 'arith.read_gb' names a premise (sample_claims.arith.file_gb) "
        "but no figure of it is marked"
    ) in out, out


@pytest.mark.parametrize(
    ("declaration", "found"),
    [
        ('excuse(read_gb, {"arith.read_gb": "stands"})', "excuse(read_gb, ...) names no claim"),
        ('excuse(ceiling, {"arith.read_gb": " "})', "claim 'arith.ceiling': an excuse needs a reason a reader sees"),
        (
            'excuse(ceiling, {"arith.read_gb": "stands"})\nexcuse(ceiling, {"arith.read_gb": "stands"})',
            "claim 'arith.ceiling' is excused from 'arith.read_gb' twice; first at "
            f"sample_claims/arith.py:{EXCUSE_LINE}",
        ),
    ],
)
def test_an_excuse_declared_wrongly_fails_at_its_line(pytester: pytest.Pytester, declaration: str, found: str) -> None:
    out = faults.run_book(book_with(pytester, declaration)).stdout.str()
    place = EXCUSE_LINE + declaration.count("\n")
    assert f"sample_claims/arith.py:{place}: {found}" in out, out


def test_the_book_s_dependants_are_found_alike_under_a_reader_s_profiler() -> None:
    """A profiler the reader runs (cProfile holds the interpreter's profile hook) is left in place: the finder
    does not replace it to watch a claim compute, and finds the same dependants from the code the claims reach."""
    import cProfile

    from harness.paths import ROOT

    from verified_book.authoring.registry import REGISTRY
    from verified_book.book.bindings import Book
    from verified_book.engine import premises
    from verified_book.engine.config import open_book, read_config

    config = read_config(ROOT)
    with open_book(config).opened():
        bindings = list(Book.read(config.pages, config.root).bindings())
        plain = premises.premise_problems(REGISTRY, bindings)
        with cProfile.Profile() as profiler:
            profiled = premises.premise_problems(REGISTRY, bindings)
        assert sys.getprofile() is None and profiler is not None
    assert [str(p) for p in profiled] == [str(p) for p in plain] == []
