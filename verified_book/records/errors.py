"""What can be wrong with a results file, as errors that say where (the store's read, migrate and write raise them)."""

from __future__ import annotations

from typing import Any

from verified_book.errors import BookError


class ResultsError(BookError):
    """A results file that cannot be used: corrupt, from a newer schema, or invalid."""


class OtherMachine(ResultsError):
    """A merge of one machine's records into another machine's file: refused, naming both."""


class NewerSchema(ResultsError):
    """A results file written by a newer verified-book: left alone, never overwritten or set aside."""


def show(value: Any) -> str:
    """A value from a file, quoted in a message at most 80 characters long."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
