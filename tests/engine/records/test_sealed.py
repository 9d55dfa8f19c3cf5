"""The parts a results file holds by the thousand share their set of fields given, and stay as made
(verified_book.records.record.Sealed): the site holds every machine's records at once."""

from __future__ import annotations

import tracemalloc

import pytest
from pydantic import ValidationError

from verified_book.records.record import ClaimMeta, FigureVerdict, Record, RunHeader


def _verdict(line: int) -> FigureVerdict:
    return FigureVerdict(line=line, file="pages/a.md", printed="1.5", status="verified")


def test_parts_given_the_same_fields_share_one_set_of_them() -> None:
    first, second = _verdict(3), _verdict(9)
    assert first.model_fields_set == {"line", "file", "printed", "status"}
    assert first.model_fields_set is second.model_fields_set
    assert ClaimMeta(kind="exact").model_fields_set is not ClaimMeta(kind="exact", code="ab").model_fields_set
    assert second.model_dump(exclude_unset=True) == {
        "line": 9,
        "file": "pages/a.md",
        "printed": "1.5",
        "status": "verified",
    }


def test_the_same_short_text_in_two_parts_is_held_once() -> None:
    def made(text: str) -> str:
        return "".join(text)  # a string of its own, as each file's JSON gives it

    first, second = (
        FigureVerdict(line=1, file=made("pages/a.md"), printed=made("1.5"), status="verified") for _ in range(2)
    )
    assert first.file is second.file and first.printed is second.printed
    dates = [RunHeader(date=made("2026-12-01T10:00:00+00:00")).date for _ in range(2)]
    assert dates[0] is dates[1]


def test_no_change_reaches_the_set_the_others_share() -> None:
    first, second = _verdict(3), _verdict(9)
    with pytest.raises(ValidationError, match="frozen"):
        first.stated = "1.5"  # type: ignore[misc]
    copied = first.model_copy(update={"stated": "1.50"})
    assert copied.model_fields_set == {"line", "file", "printed", "status", "stated"}
    assert second.model_fields_set == {"line", "file", "printed", "status"}


def test_a_thousand_records_hold_no_set_of_their_own() -> None:
    def records() -> list[Record]:
        return [Record(status="verified", value=n, figures=[_verdict(n + 1)], message="") for n in range(1000)]

    records()  # the shared sets, and whatever the first validation makes once
    tracemalloc.start()
    try:
        held = records()
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # each record and its verdict: two objects and their two dicts and a list, under 1 KB; a set of its own
    # for each (pydantic's way, 216 bytes and more each) would take it past that
    assert size / len(held) < 1000, f"{size / len(held):.0f} bytes a record"
    assert len({id(r.model_fields_set) for r in held}) == 1
