"""A record changed after it is built is validated as a new one (verified_book.records.record.revised)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from verified_book.records.record import ClaimMeta, revised


def test_a_revised_record_keeps_what_was_set_and_adds_the_change() -> None:
    meta = ClaimMeta(kind="exact", defined_at="claims/a.py:3")
    changed = revised(meta, skipped="needs a GPU")
    assert changed.skipped == "needs a GPU" and changed.defined_at == "claims/a.py:3"
    assert changed.model_fields_set == {"kind", "defined_at", "skipped"}  # what the file writes (exclude_unset)
    assert meta.skipped is None  # the original is left as it was


@pytest.mark.parametrize(
    "change",
    [{"kind": "guessed"}, {"skipped": 3}, {"unknown": "x"}],
    ids=["a kind no claim has", "a number for text", "a field the file does not name"],
)
def test_a_change_no_results_file_could_hold_is_refused(change: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        revised(ClaimMeta(kind="exact"), **change)
