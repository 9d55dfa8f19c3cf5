"""What a run holds for its whole length (the open book's claims and pages, a preview's values and site), kept out
of the garbage collector's passes.

A collection walks every object it tracks: at 64 times this book's size, the objects an opened book holds made each
full pass take seconds, and passes came again as the run allocated. While such objects are made, the collector is
kept off (it would find nothing to free among them); once made, they are frozen (`gc.freeze`), so that later passes
walk only what came after, and so does the full collection at the process's exit. Where an earlier run in the same
process froze what it made (a test suite opening many books in one process), the next run lets that go and freezes
nothing itself, so that the collector frees the earlier run's garbage as it goes; a preview lets go before it
replaces what it froze (loading the claims' code again). Nothing frozen outlives its use for long.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from typing import Callable, Iterator, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


def long_lived(make: Callable[P, T]) -> Callable[P, T]:
    """`make`, whose objects live as long as the run: made with the collector off, then frozen (unless an earlier
    run froze what it made: then that is let go, and nothing is frozen)."""

    @functools.wraps(make)
    def made(*args: P.args, **kwargs: P.kwargs) -> T:
        if gc.get_freeze_count():  # an earlier run's, in this process: collected as it goes from now on
            let_go()
            return make(*args, **kwargs)
        was_on = gc.isenabled()
        gc.disable()
        try:
            return make(*args, **kwargs)
        finally:
            if was_on:
                gc.enable()
            gc.freeze()

    return made


@contextlib.contextmanager
def made_as_it_goes() -> Iterator[None]:
    """Within, what a run holds for its whole length is made piece by piece (a site build judges each record once,
    page after page, and keeps every judgement for the machines page): the collector is kept off, as while
    `long_lived` makes its objects, since it would find next to nothing to free, and its full passes would walk the
    judgements made so far again and again as they grow. On leaving, the collector is as it was, and what was made
    is frozen, so that no later pass walks it, the full one at the process's exit included. Where an earlier run in
    the same process froze what it made, that is let go and nothing frozen, as `long_lived` does."""
    earlier = gc.get_freeze_count() > 0
    if earlier:
        let_go()
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
        if not earlier:
            gc.freeze()


def settle() -> None:
    """Everything made so far is to live as long as the process's work: what is garbage among it collected, the
    rest frozen."""
    gc.collect()
    gc.freeze()


def let_go() -> None:
    """What was frozen is collected again as any other object."""
    gc.unfreeze()
