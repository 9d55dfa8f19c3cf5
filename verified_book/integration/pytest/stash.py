"""Where the run keeps its state between pytest's hooks: the session and what the run found on the way."""

from __future__ import annotations

import contextlib

import pytest

from verified_book.engine import selection as selection_mod
from verified_book.engine.rewrite import Reread, Rewrite
from verified_book.engine.session import Session
from verified_book.records import conditions as conditions_mod

STATE = pytest.StashKey[Session]()
LOCK = pytest.StashKey[conditions_mod.RunLock]()
OPENED = pytest.StashKey[contextlib.ExitStack]()  # the book held open from the session's start to its end
NARROWED = pytest.StashKey[selection_mod.Said]()  # what --changed or --reading says at the end of the run
#: what a whole-book --changed run collects (`selection.to_collect`): the rest is unchanged, not collected
COLLECTED = pytest.StashKey[selection_mod.ToCollect]()

REWRITTEN = pytest.StashKey[tuple[list[Rewrite], list[str], list[Reread]]]()

#: what writing the records made the reader owe a line for, said in the summary (after pytest ends -q's line of
#: dots) or, where no summary is printed, when the run ends
UNTOLD = pytest.StashKey[list[str]]()


def state(config: pytest.Config) -> Session:
    """The run's session, opened when pytest's session started."""
    return config.stash[STATE]
