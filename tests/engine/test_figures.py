"""The printed-number parser: every form the sources use, and printing then parsing agrees."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verified_book.book.figures import FLOAT_SLACK, FigureSyntaxError, format_like, parse


@pytest.mark.parametrize(
    ("text", "inside", "outside"),
    [
        ("16.6", [16.55, 16.6, 16.649], [16.66, 16.54]),
        ("8,190,427,136", [8_190_427_136], [8_190_427_137, 8_190_427_135]),
        ("1.56e-02", [0.015625, 0.01555], [0.0157, 0.0154]),
        ("1.56 × 10^-2", [0.015625], [0.0157]),
        ("3.4 × 10^38", [3.4028e38, 3.3895e38], [3.46e38]),
        ("2^-7", [Fraction(1, 128)], [0.0078]),
        ("2^{-10}", [Fraction(1, 1024)], [0.000977]),
        ("8.6%", [0.086, 0.0864], [0.0866, 0.085]),
        ("8.6 per cent", [0.086], [0.087]),
        ("≈ 14", [13.5, 14.49], [13.4, 14.6]),
        ("about 17", [16.5, 17.49], [16.4, 17.6, 18.1]),
        ("16.4 GB", [16.38], [16.3]),
        ("65,504", [65504], [65505]),
        ("−0.0026", [-0.0026], [0.0026]),
        ("inf", [math.inf], [1e308]),
        ("0.000018", [0.0000176], [0.0000186]),
        ("4.9 × 10^19", [4.92e19], [5.0e19]),
        ("10^-3", [0.001], [0.00098]),
    ],
)
def test_printed_precision(text: str, inside: list[object], outside: list[object]) -> None:
    printed = parse(text)
    for value in inside:
        assert printed.holds(value), f"{text} should hold for {value}"
    for value in outside:
        assert not printed.holds(value), f"{text} should not hold for {value}"


def test_tuples_compare_element_by_element() -> None:
    printed = parse("(4096, 12288)")
    assert printed.holds((4096, 12288))
    assert printed.holds([4096, 12288])
    assert not printed.holds((12288, 4096))
    assert not printed.holds((4096,))
    assert parse("[7, -7, 35]").holds([7, -7, 35])


def test_nan_is_not_a_figure_of_anything_else() -> None:
    assert parse("nan").holds(float("nan"))
    assert not parse("1.0").holds(float("nan"))
    assert not parse("1.0").holds(None)
    assert not parse("1.0").holds("1.0")


@pytest.mark.parametrize("text", ["", "four", "GB", "e-5", "× 10^3"])
def test_not_a_number_says_what_was_expected(text: str) -> None:
    with pytest.raises(FigureSyntaxError, match="expected"):
        parse(text)


@pytest.mark.parametrize(
    ("core", "value", "expected"),
    [
        ("16.6", 16.646, "16.6"),
        ("16.6", 16.666, "16.7"),
        ("8,190,427,136", 8_190_427_137, "8,190,427,137"),
        ("1.56e-02", 0.015625, "1.56e-02"),
        ("3.4 × 10^38", 3.3895e38, "3.4 × 10^38"),
        ("8.6%", 0.0912, "9.1%"),
        ("2^-7", Fraction(1, 256), "2^-8"),
        ("0.5", 0.25, "0.2"),
    ],
)
def test_rewriting_keeps_the_notation(core: str, value: object, expected: str) -> None:
    assert format_like(core, value) == expected


decimals = st.integers(min_value=0, max_value=6)
magnitudes = st.floats(min_value=1e-6, max_value=1e12, allow_nan=False, allow_infinity=False)
signs = st.sampled_from([1, -1])


@settings(max_examples=300, deadline=None)
@given(value=magnitudes, places=decimals, sign=signs, grouped=st.booleans())
def test_fixed_point_round_trip(value: float, places: int, sign: int, grouped: bool) -> None:
    """Printing a value at a precision and parsing the text back holds for that value."""
    value *= sign
    text = f"{value:,.{places}f}" if grouped else f"{value:.{places}f}"
    assert parse(text).holds(value), text
    assert parse(format_like(text, value)).holds(value)


@settings(max_examples=300, deadline=None)
@given(
    value=magnitudes, places=st.integers(min_value=0, max_value=4), sign=signs, style=st.sampled_from(["e", "times"])
)
def test_scientific_round_trip(value: float, places: int, sign: int, style: str) -> None:
    value *= sign
    if style == "e":
        text = f"{value:.{places}e}"
    else:
        mantissa, exponent = f"{value:.{places}e}".split("e")
        text = f"{mantissa} × 10^{int(exponent)}"
    printed = parse(text)
    assert printed.holds(value), text
    assert parse(format_like(text, value)).holds(value)


@settings(max_examples=200, deadline=None)
@given(value=st.floats(min_value=0, max_value=1, allow_nan=False), places=st.integers(min_value=0, max_value=3))
def test_percent_round_trip(value: float, places: int) -> None:
    text = f"{value * 100:.{places}f}%"
    assert parse(text).holds(value), text


@settings(max_examples=200, deadline=None)
@given(value=magnitudes, places=decimals, other=magnitudes)
def test_a_figure_does_not_hold_for_a_value_that_prints_differently(value: float, places: int, other: float) -> None:
    """The parser is not lax: a value whose printed form differs is outside the interval, beyond the few units in
    a float's last place that a figure printed finer than a float resolves allows (`FLOAT_SLACK`)."""
    text, other_text = f"{value:.{places}f}", f"{other:.{places}f}"
    apart = abs(Fraction(other) - Fraction(text))
    if Fraction(text) != Fraction(other_text) and apart > Fraction(1, 10**places) + abs(Fraction(other)) * FLOAT_SLACK:
        assert not parse(text).holds(other)


def test_a_figure_printed_finer_than_a_float_resolves_holds_within_the_float_s_last_places() -> None:
    """1e12 to four places is 17 digits, more than a float64 has: 999999999999.9999 is 1.2e-4 from it (one
    unit in the last place), which holds, and ten units away does not."""
    printed = parse("1000000000000.0000")
    assert printed.holds(999999999999.9999)
    assert not printed.holds(1e12 - 10 * math.ulp(1e12))


@given(exponent=st.integers(min_value=-30, max_value=30))
def test_powers_of_two_are_exact(exponent: int) -> None:
    printed = parse(f"2^{exponent}")
    assert printed.holds(Fraction(2) ** exponent)
    assert not printed.holds(Fraction(2) ** exponent * Fraction(1001, 1000))


@given(value=st.integers(min_value=0, max_value=10**4), tol=st.integers(min_value=1, max_value=100))
def test_an_explicit_precision_sets_the_interval(value: int, tol: int) -> None:
    """`25 ± 3`: a round figure or one in words states how loosely it is meant, and holds exactly that far."""
    from fractions import Fraction

    printed = parse(f"{value / 100} ± {tol / 100}")
    centre, half = Fraction(value, 100), Fraction(tol, 100)
    assert printed.holds(centre + half) and printed.holds(centre - half)
    assert not printed.holds(centre + half + Fraction(1, 10**6)) and not printed.holds(
        centre - half - Fraction(1, 10**6)
    )


# Thousands parted by a space (item 5): one number, or a clear refusal, never a number with digits as its unit.

GROUP_SPACES = [" ", "\u202f", "\u2009", "\u00a0"]


def _grouped(n: int, sep: str) -> str:
    return f"{n:,}".replace(",", sep)


@given(st.integers(min_value=1000, max_value=10**15), st.sampled_from(GROUP_SPACES))
def test_space_grouped_thousands_read_as_one_number(n: int, sep: str) -> None:
    printed = parse(_grouped(n, sep))
    assert printed.value == n and printed.suffix == ""
    assert printed.holds(n) and not printed.holds(n + 1)


@given(
    st.integers(min_value=1000, max_value=10**12),
    st.integers(min_value=0, max_value=10**12),
    st.sampled_from(GROUP_SPACES),
)
def test_space_grouped_figures_are_rewritten_with_their_own_separator(n: int, computed: int, sep: str) -> None:
    printed = parse(_grouped(n, sep))
    again = parse(printed.render(computed)) if computed >= 1000 else None
    assert printed.render(computed) == _grouped(computed, sep)
    assert again is None or again.value == computed


@given(
    st.integers(min_value=1, max_value=999),
    st.text("0123456789", min_size=1, max_size=6),
    st.sampled_from([*GROUP_SPACES, ","]),
)
def test_digits_after_a_space_that_are_not_a_group_of_three_are_refused(head: int, tail: str, sep: str) -> None:
    text = f"{head}{sep}{tail}"
    if len(tail) == 3:
        assert parse(text).value == int(f"{head}{tail}")
        return
    with pytest.raises(FigureSyntaxError, match="groups of three"):
        parse(text)


def test_a_space_before_a_unit_is_still_a_unit() -> None:
    printed = parse("65 GB")
    assert printed.value == 65 and printed.suffix == " GB"


def test_a_rounded_count_in_words_is_not_admitted_by_its_neighbour() -> None:
    """'about three' digits for BF16's 2.41 would pass a ±1 tolerance under which 'about two' passes too; "about N"
    holds to its printed digit, as does a count bound to the nearest whole (`3 ± 0.5`), so each tells them apart."""
    bf16, fp16 = 8 * math.log10(2), 11 * math.log10(2)  # significand bits times log10(2): 2.41, 3.31
    assert parse("about 2").holds(bf16) and not parse("about 3").holds(bf16)
    assert parse("about 3").holds(fp16) and not parse("about 2").holds(fp16) and not parse("about 4").holds(fp16)
    assert parse("2 ± 0.5").holds(bf16) and not parse("3 ± 0.5").holds(bf16)
    assert parse("3 ± 0.5").holds(fp16) and not parse("2 ± 0.5").holds(fp16)
    assert not parse("about 3 ± 0.5").holds(bf16)
