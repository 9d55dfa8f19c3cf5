"""The hierarchy's "factor of four to ten" is tested step by step, between consecutive levels of the source's list.

The source says each level is slower than the one above by four to ten; the book binds that as
7 ± 3 for each step (`hierarchy.step.range`, disputed). These tests hold the claim to the
proposition: every consecutive pair of the source's levels whose bandwidths are known gives a
step, in the list's order, none inside one level; and a change to a link, a lane count or a
bandwidth in the data moves the steps, up to the point where the disputed figure would hold and
the book would be wrong to dispute it.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Iterator

import pytest
from harness.paths import ROOT

from verified_book.authoring import inputs
from verified_book.book.bindings import Book
from verified_book.book.figures import Printed
from verified_book.engine.config import open_book, read_config


@pytest.fixture(scope="module")
def hierarchy() -> Iterator[object]:
    with open_book(read_config(ROOT)).opened():
        from claims.topics import hierarchy as module

        yield module


@pytest.fixture(scope="module")
def disputed_figure() -> Printed:
    """The book's own binding of "four to ten": its value, one interval per step."""
    bindings = Book.read(ROOT / "book").by_claim()["hierarchy.step.range"]
    assert len(bindings) == 1 and bindings[0].disputed, bindings
    printed = bindings[0].printed
    assert printed is not None and printed.is_tuple
    return printed


def test_every_consecutive_pair_of_levels_with_bandwidths_is_a_step(hierarchy) -> None:  # type: ignore[no-untyped-def]
    levels = list(hierarchy.SOURCE_LEVELS)
    known = [
        (a, b)
        for a, b in itertools.pairwise(levels)
        if hierarchy.SOURCE_LEVELS[a] is not None and hierarchy.SOURCE_LEVELS[b] is not None
    ]
    assert known == list(hierarchy.STEPS.values())
    assert list(hierarchy.consecutive_steps()) == list(hierarchy.STEPS)
    assert hierarchy.step_range() == tuple(hierarchy.consecutive_steps().values())
    # a step inside one level is none of them: NVMe and Ethernet are both "storage and network"
    assert all(pair[0] != pair[1] for pair in hierarchy.STEPS.values())


def test_the_steps_are_bandwidth_ratios_of_adjacent_levels(hierarchy) -> None:  # type: ignore[no-untyped-def]
    steps = hierarchy.consecutive_steps()
    assert steps["vram_to_pcie"] == Fraction(1792, 64)
    assert steps["pcie_to_ddr5"] == Fraction(64) / Fraction("89.6")  # below one: the memory is the faster
    assert steps["ddr5_to_nvme"] == Fraction("89.6") / 8


def test_the_dispute_holds_on_the_data_as_shipped(hierarchy, disputed_figure: Printed) -> None:  # type: ignore[no-untyped-def]
    assert len(disputed_figure.value) == len(hierarchy.STEPS)  # type: ignore[arg-type]
    assert not disputed_figure.holds(hierarchy.step_range())


def test_a_changed_lane_count_moves_the_last_step(hierarchy) -> None:  # type: ignore[no-untyped-def]
    before = hierarchy.step("ddr5_to_nvme")
    with inputs.overridden("links.toml", "nvme_lanes", 8):
        assert hierarchy.step("ddr5_to_nvme") == before / 2
        assert hierarchy.step_range()[2] == before / 2


def test_data_that_put_every_step_in_range_would_make_the_disputed_figure_hold(  # type: ignore[no-untyped-def]
    hierarchy, disputed_figure: Printed
) -> None:
    # a 256 GB/s link under the RTX 5090 (7 times), DDR5 at 4,000 MT/s behind it (64 GB/s: 4 times),
    # a Gen4 drive below that (8 GB/s: 8 times): the source's sentence would be true, and the
    # verifier would fail the book's 'disputed' mark
    with (
        inputs.overridden("links.toml", "pcie_gen5_x16_per_direction", 256),
        inputs.overridden("links.toml", "pcie_gen4_x16_per_direction", 32),
        inputs.overridden("links.toml", "ddr5_5600_transfer_rate", 4000),
    ):
        assert hierarchy.step_range() == (7, 4, 8)
        assert disputed_figure.holds(hierarchy.step_range())
    with inputs.overridden("hardware/rtx5090.toml", "memory_bandwidth", 2600):
        assert hierarchy.step("vram_to_pcie") == Fraction(2600, 64)


def test_the_spans_cover_every_part_the_chapter_names(hierarchy) -> None:  # type: ignore[no-untyped-def]
    # the first step's span is over every catalogued Track N card on its own link: the RTX 5070's
    # 672 GB/s over Gen5 x16 at the low end, the RTX 5090 in a Gen3 x16 slot at the high end
    assert hierarchy.step_span("vram_to_pcie", "low") == Fraction(672, 64)
    assert hierarchy.step_span("vram_to_pcie", "high") == Fraction(1792, 16)
    assert hierarchy.step_span("ddr5_to_nvme", "low") == Fraction("89.6") / 16
    for name in hierarchy.STEPS:
        assert hierarchy.step_span(name, "low") <= hierarchy.step(name) <= hierarchy.step_span(name, "high")


def test_a_card_runs_at_its_own_link_or_an_older_slots(hierarchy) -> None:  # type: ignore[no-untyped-def]
    # an x8 Gen4 card (an RTX 4060) in a Gen5 x16 slot still moves eight Gen4 lanes: 16 GB/s, not 64
    assert hierarchy.card_links("pcie_gen4_x8") == [Fraction(8), Fraction(16)]
    assert hierarchy.card_links("pcie_gen5_x16") == [Fraction(16), Fraction(32), Fraction(64)]
    steps = dict(hierarchy.card_steps())
    assert min(ratio for name, ratio in hierarchy.card_steps() if name == "GeForce RTX 4060") == Fraction(272, 16)
    assert "GeForce RTX 3090" not in steps  # the source's floor is a card of the generation before


def test_no_track_n_card_on_its_own_link_brings_the_first_step_inside_four_to_ten(hierarchy) -> None:  # type: ignore[no-untyped-def]
    # the prose says so; a catalogued card that did (an x16 Gen5 card at 640 GB/s or less) must move the span
    assert hierarchy.step_span("vram_to_pcie", "low") > 10
    with inputs.overridden("devices.toml", "rtx_5070.bandwidth", 600):
        assert hierarchy.step_span("vram_to_pcie", "low") == Fraction(600, 64)
