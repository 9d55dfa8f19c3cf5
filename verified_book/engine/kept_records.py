"""What a run's verdict says of its records, apart from what it says of the book.

A run whose every figure held but whose records could not be written to its results file did not
find the book wanting: it exits non-zero, so that no one takes its records for saved, and its
verdict says both that the book holds and where the records are (verified_book.records.unsaved).
"""

from __future__ import annotations

#: the exit of a run whose checks held but whose records could not be written (pytest's INTERNAL_ERROR, as
#: the plugin sets it): not the exit of a failed check
RECORDS_NOT_SAVED = 3


def book_held(exit_code: int, unkept: str | None) -> bool:
    """Whether the run found the book holding: it passed, or its only fault was that its records were not saved."""
    return exit_code == 0 or (unkept is not None and exit_code == RECORDS_NOT_SAVED)


def records_words(written: str | None, unkept: str | None) -> str:
    """The verdict's part about the records: where they were written, or that they were not saved and where
    they are kept instead (its last words name that file)."""
    if unkept:
        return f"records NOT saved: {unkept}"
    if written:
        return f"results: {written}"
    return "no results written"
