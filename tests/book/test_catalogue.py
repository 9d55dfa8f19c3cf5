"""The catalogue of real devices holds the book's ranges and supposed devices to what is sold.

A range that leaves out a catalogued device of its class, and a card that matches no catalogued
device, fail where the page prints them (file:line), naming the real devices nearest to what the
page said; a range that holds every device, and a card that is sold, pass. The sample book is in
`tests/samples/catalogue/`.
"""

from __future__ import annotations

import contextlib
from fractions import Fraction
from typing import Iterator

import pytest
from harness import faults
from harness.paths import ROOT, SAMPLES

from verified_book.authoring import catalogue, inputs
from verified_book.engine.config import open_book, read_config

pytest_plugins = ["pytester"]

SAMPLE = SAMPLES / "catalogue"


def test_a_range_that_leaves_out_a_card_and_a_card_that_is_not_sold_fail_at_their_lines(
    pytester: pytest.Pytester,
) -> None:
    faults.sample_book(
        pytester,
        (SAMPLE / "claims.py").read_text(),
        (SAMPLE / "page.md").read_text(),
        files={
            "data/devices.toml": (SAMPLE / "devices.toml").read_text(),
            "book/allowlist.toml": (SAMPLE / "allowlist.toml").read_text(),
        },
    )
    result = faults.run_book(pytester)
    out = result.stdout.str()
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*book/page.md:4*cards.bandwidth_floor*the range 936 to 1,792 GB/s leaves out catalogued geforce devices: "
            "Card S (272 GB/s); the class spans 272 to 1,792 GB/s (data/devices.toml)*",
            "*book/page.md:5*cards.supposed_bandwidth*no catalogued geforce device has 16 GB, 1,792 GB/s; "
            "nearest real ones: Card M (16 GB, 960 GB/s)*Card L (32 GB, 1,792 GB/s)*",
        ]
    )
    # the range that holds every card and the card that is sold pass
    assert "page.md:3" not in out and "page.md:6" not in out and "every number is bound" not in out


@pytest.fixture(scope="module")
def book() -> Iterator[None]:
    with open_book(read_config(ROOT)).opened():
        yield


def test_the_books_track_n_range_is_checked_against_every_card(book: None) -> None:
    low, high = catalogue.span("geforce", "bandwidth")
    assert (low, high) == (272, 1792)
    excluded = {d.name for d in catalogue.outside("geforce", "bandwidth", 936, 1792)}
    assert {"GeForce RTX 4060", "GeForce RTX 5060", "GeForce RTX 5070 Ti"} <= excluded
    assert catalogue.outside("geforce", "memory", 8, 32) == []
    with pytest.raises(catalogue.OutsideRange, match=r"GeForce RTX 4060 \(272 GB/s\)"):
        catalogue.check_range("geforce", "bandwidth", 936, 1792)


def test_a_supposed_card_is_matched_or_the_nearest_real_ones_named(book: None) -> None:
    assert catalogue.match_device("geforce", memory=16, bandwidth=960).name == "GeForce RTX 5080"
    with pytest.raises(catalogue.NoSuchDevice, match=r"nearest real ones: GeForce RTX 5080 \(16 GB, 960 GB/s\)") as e:
        catalogue.match_device("geforce", memory=16, bandwidth=1792)
    assert "with 1,792 GB/s: GeForce RTX 5090 (32 GB, 1,792 GB/s)" in str(e.value)


def test_a_profiled_device_is_read_from_its_profile_once(book: None) -> None:
    # one place per fact: the catalogue points at the RTX 5090's profile, and a change there moves the range
    with inputs.recording() as reads:
        assert catalogue.device("rtx_5090").bandwidth == 1792
    assert [(r.file, r.key) for r in reads if isinstance(r, inputs.Input)] == [
        ("hardware/rtx5090.toml", "memory_bandwidth"),
        ("hardware/rtx5090.toml", "memory_capacity"),
    ]
    with inputs.overridden("hardware/rtx5090.toml", "memory_bandwidth", 2000):
        assert catalogue.span("geforce", "bandwidth") == (Fraction(272), Fraction(2000))


def test_every_catalogued_device_has_a_locator_or_says_it_is_unsourced(book: None) -> None:
    entries = {k: v for k, v in inputs.table(catalogue.CATALOGUE).items() if isinstance(v, dict) and "class" in v}
    missing = []
    for key, entry in entries.items():
        if "profile" in entry or "link" in entry:
            continue
        if entry.get("unsourced"):
            if not entry.get("note"):
                missing.append(f"{key}: unsourced without a note saying what is missing")
            continue
        if not (entry.get("page") and str(entry.get("url", "")).startswith("https://")):
            missing.append(f"{key}: no vendor page and url")
        for field in ("memory", "bandwidth"):
            source = entry.get(field, {}).get("source", "")
            if field in entry and (not source or source.startswith("unsourced")):
                missing.append(f"{key}.{field}: no quoted spec row")
    assert not missing, "\n".join(missing)


def test_the_track_n_correction_propagates_through_the_catalogue(book: None) -> None:
    """Every figure that rested on the source's 936 GB/s floor reads the catalogue's cards now: were every
    card at 936 GB/s or more, the disputed floor would hold (and its mark fail), and the first step's
    span would move with it."""
    from claims.topics import hierarchy  # after the book is open: its module reads the data when imported

    assert hierarchy.track_n_bandwidth_floor() == 272
    assert hierarchy.step_span("vram_to_pcie", "low") == Fraction(672, 64)
    slow = [d.key for d in catalogue.devices("geforce") if d.bandwidth is not None and d.bandwidth < 936]
    with contextlib.ExitStack() as stack:
        for key in slow:
            stack.enter_context(inputs.overridden("devices.toml", f"{key}.bandwidth", 936))
        assert hierarchy.track_n_bandwidth_floor() == 936
        assert hierarchy.step_span("vram_to_pcie", "low") == Fraction(936, 64)
