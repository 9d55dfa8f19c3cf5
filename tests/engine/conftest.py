"""Fixtures the engine's tests alone use: the project's own book, opened afresh for a module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from harness.paths import ROOT


@pytest.fixture(scope="module")
def project_book() -> Iterator[Any]:
    """The project's own book opened afresh and current for the module's tests (data folder, hardware profiles,
    claims): whatever another test left in the book the run opened, these read the book as it is on disk."""
    from verified_book.engine import config

    book = config.open_book(config.read_config(ROOT))
    assert not book.load_errors, book.load_errors
    with book.opened():
        yield book
