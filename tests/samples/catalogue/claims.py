"""A sample book's claims about devices: a range held to its class, and a card it supposes."""

from __future__ import annotations

from fractions import Fraction

from verified_book import check_range, claim, match_device


@claim("cards.bandwidth_floor", kind="exact")
def bandwidth_floor() -> Fraction:
    """The slowest card of the class, as the page prints the range: every catalogued card must lie in it."""
    check_range("geforce", "bandwidth", 936, 1792)
    return Fraction(936)


@claim("cards.memory_floor", kind="exact")
def memory_floor() -> Fraction:
    """The smallest card's memory, a range every catalogued card lies in."""
    check_range("geforce", "memory", 8, 32)
    return Fraction(8)


@claim("cards.supposed_bandwidth", kind="exact")
def supposed_bandwidth() -> Fraction:
    """The bandwidth of the page's 16 GB card, which must be a card that is sold."""
    card = match_device("geforce", memory=16, bandwidth=1792)
    assert card.bandwidth is not None
    return card.bandwidth


@claim("cards.real_bandwidth", kind="exact")
def real_bandwidth() -> Fraction:
    """The bandwidth of a 16 GB card that is sold."""
    card = match_device("geforce", memory=16, bandwidth=960)
    assert card.bandwidth is not None
    return card.bandwidth
