"""A figure stated for some library versions shows a record from another as that version's answer.

The H200's committed records were computed with torch 2.11, which casts inf to NaN in E4M3 (pattern 127)
and records 4 graph nodes where the book, stated for torch 2.13, prints 448, 126 and 9: the site shows
those records as another version, with their value and version, never as the book failing.
"""

from __future__ import annotations

import math

import pytest
from harness.paths import ROOT

from verified_book.authoring.registry import REGISTRY
from verified_book.book.bindings import Book
from verified_book.engine.config import open_book, read_config
from verified_book.engine.figure_status import figure_view, satisfies, shown_otherwise
from verified_book.records.results import read
from verified_book.vocabulary import ANOTHER_VERSION, WORDS, Status

H200 = ROOT / "results" / "nvidia-h200-6d6e.json"


@pytest.mark.parametrize(
    ("version", "specifier", "holds"),
    [
        ("2.13.0+cpu", ">=2.13", True),
        ("2.11.0+cu130", ">=2.13", False),
        ("2.13", ">=2.13.0", True),
        ("2.4.6", ">=2.0, <2.3", False),
        ("2.2.1", ">=2.0, <2.3", True),
        ("1.0", "~=nonsense", True),  # a clause it cannot read never makes a record another version
    ],
)
def test_versions_meet_their_specifier(version: str, specifier: str, holds: bool) -> None:
    assert satisfies(version, specifier) is holds


@pytest.fixture(scope="module")
def views() -> list:  # type: ignore[type-arg]
    config = read_config(ROOT)
    open_book(config)
    book = Book.read(config.pages, config.root)
    results = {"nvidia-h200-6d6e": read(H200)}
    wanted = (
        "autograd.recorded.grad.graph_nodes",
        "formats.special.e4m3.inf_bits.torch",
        "formats.special.e4m3.inf_value.torch",
    )
    return [figure_view(b, REGISTRY.get(b.claim_id), results) for b in book.bindings() if b.claim_id in wanted]


def test_torch_2_11_records_show_as_another_version(views: list) -> None:  # type: ignore[type-arg]
    assert views and all(v.status == ANOTHER_VERSION for v in views), [(v.binding.text, v.status) for v in views]
    found = {(b.text, m.backend): m for b, m in shown_otherwise(views)}
    nan = found[("448", "torch:cpu")]
    assert isinstance(nan.value, float) and math.isnan(nan.value)  # a computed NaN is a value
    assert nan.message.startswith("torch 2.11.0+cu130 gives NaN; the book states this figure for torch >=2.13")
    assert found[("9", "torch:cuda")].value == 4
    assert all(m.status != Status.FAILED for v in views for m in v.measurements)


def test_another_version_is_a_word_of_the_vocabulary() -> None:
    word = WORDS[ANOTHER_VERSION]
    assert not word.recorded and word.shape and word.glyph


def test_the_machines_table_shows_another_versions_records_as_such(views: list) -> None:  # type: ignore[type-arg]
    """The Machines page's claim-by-machine cell decides as the panel does: torch 2.11's answer is another version."""
    from verified_book.engine.figure_status import claim_status_on

    h200 = read(H200)
    for claim_id in ("formats.special.e4m3.inf_value.torch", "autograd.recorded.grad.graph_nodes"):
        torch_only = {b: r for b, r in h200.records[claim_id].items() if b.startswith("torch")}
        assert claim_status_on(torch_only, h200, claim_id) == ANOTHER_VERSION, claim_id
