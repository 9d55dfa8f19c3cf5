"""The book that is open: what `claim`, `vendor`, `given` and the registry's lookups read from.

A process may open several books one after the other, or one inside another (a run inside a run, a
sample book in a test, a live preview reloading its claims). Each opened book is one object
(`verified_book.engine.config.OpenBook`, built on `BookState`); `with book.opened():` makes it the
current one in a `contextvars.ContextVar` and gives the outer one back on the way out. Nothing here
or in the authoring functions keeps a book in a module global: a thread that should see the book runs
in its context (`contextvars.copy_context().run`) or enters `book.opened()` itself.
"""

from __future__ import annotations

import contextlib
import contextvars
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, TypeVar

from verified_book.errors import BookError

if TYPE_CHECKING:
    from verified_book.authoring.inputs import Inputs
    from verified_book.authoring.registry import Registry


class NoBookOpen(BookError):
    """A claim was declared or an input read with no book open: nothing says where its data or registry is."""


B = TypeVar("B", bound="BookState")


class BookState:
    """What the authoring functions need of an open book: its root (claims' files are named relative to
    it), its claim registry and its inputs (the data folder and what was read of it)."""

    def __init__(self, root: Path, registry: Registry, inputs: Inputs) -> None:
        self.root = Path(root).resolve()
        self.registry = registry
        self.inputs = inputs

    @contextlib.contextmanager
    def opened(self: B) -> Iterator[B]:
        """Make this the current book for the block; the book current before is current again after."""
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(token)


_CURRENT: contextvars.ContextVar[BookState | None] = contextvars.ContextVar("verified_book_open_book", default=None)


def current() -> BookState:
    """The book open in this context; `NoBookOpen` where none is."""
    book = _CURRENT.get()
    if book is None:
        raise NoBookOpen(
            "no book is open: open one with `verified_book.engine.config.open_book(config)` and "
            "enter `with book.opened():` (the pytest and MkDocs plugins do so for a book's run and build)"
        )
    return book


def current_or_none() -> BookState | None:
    """The book open in this context, or None (for code that works with or without one)."""
    return _CURRENT.get()
