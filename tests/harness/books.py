"""Books opened for a test: a sample book made current for a block, or the open book with one part replaced."""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Iterator

from verified_book.authoring.inputs import Inputs
from verified_book.authoring.registry import Registry
from verified_book.engine.config import OpenBook, current_book, open_book, read_config


@contextlib.contextmanager
def opened(root: Path, *, sound: bool = True) -> Iterator[OpenBook]:
    """The book at `root` opened and current for the block (its topics loading with no error, where `sound`)."""
    book = open_book(read_config(root))
    if sound:
        assert not book.load_errors, book.load_errors
    with book.opened():
        yield book


@contextlib.contextmanager
def fresh_registry() -> Iterator[Registry]:
    """The open book with an empty registry for the block: a test's own claims, and none of the book's."""
    book = copy.copy(current_book())
    book.registry = Registry()
    with book.opened():
        yield book.registry


@contextlib.contextmanager
def with_data(folder: Path, shown_as: str = "data") -> Iterator[Inputs]:
    """The open book reading its inputs from `folder` for the block, named `shown_as` in messages."""
    book = copy.copy(current_book())
    book.inputs = Inputs(folder, shown_as)
    with book.opened():
        yield book.inputs
