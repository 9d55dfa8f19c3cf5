"""What a run holds for its whole length is kept out of the collector's passes, and let go when the next run in the
same process opens: nothing frozen outlives its use for long (`verified_book.engine.long_lived`)."""

from __future__ import annotations

import gc
import weakref
from typing import Any, Iterator

import pytest

from verified_book.engine.long_lived import let_go, long_lived, made_as_it_goes


class Node:
    """An object in a reference cycle: only the collector frees it, never its reference count."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    let_go()
    yield
    let_go()
    gc.enable()


@long_lived
def opened(held: list[Any]) -> weakref.ref[Node]:
    node = Node()
    held.append(node)
    return weakref.ref(node)


def test_what_a_run_made_is_frozen_with_the_collector_as_it_was() -> None:
    before = gc.get_freeze_count()
    assert gc.isenabled()
    opened([])
    assert gc.isenabled() and gc.get_freeze_count() > before
    gc.disable()
    opened([])
    assert not gc.isenabled(), "a collector kept off by the caller stays off"


def test_the_next_run_lets_go_of_what_the_last_froze_and_freezes_nothing() -> None:
    held: list[Any] = []
    first = opened(held)
    held.clear()  # the run is over: its objects are garbage, but frozen
    gc.collect()
    assert first() is not None, "frozen, a cycle is not collected"
    second = opened(later := [])
    assert gc.get_freeze_count() == 0, "let go, and nothing frozen in its place"
    later.clear()
    gc.collect()
    assert first() is None and second() is None, "both runs' garbage collected as any other"
    opened([])
    assert gc.get_freeze_count() > 0, "the run after freezes again"


def test_what_a_run_makes_piece_by_piece_is_made_with_the_collector_off_then_frozen() -> None:
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with made_as_it_goes():
        assert not gc.isenabled()
        made = opened([])  # what a long-lived maker makes within is the run's too
        node = Node()
        kept = weakref.ref(node)
    assert gc.isenabled() and gc.get_freeze_count() > 0
    del node
    gc.collect()
    assert made() is not None and kept() is not None, "frozen, so no pass walks it, the last one at exit included"


def test_a_run_made_piece_by_piece_after_another_lets_go_of_it_and_freezes_nothing() -> None:
    held: list[Any] = []
    first = opened(held)
    held.clear()
    with made_as_it_goes():
        assert gc.get_freeze_count() == 0 and not gc.isenabled()
        node = Node()
        later = weakref.ref(node)
        del node
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.collect()
    assert first() is None and later() is None, "the earlier run's garbage and this one's collected as any other"
    gc.disable()
    with made_as_it_goes():
        pass
    assert not gc.isenabled(), "a collector kept off by the caller stays off"
