"""Bad input in the book and in claims: one clear error each, at its place; every other claim is recorded.

One sample book holds every kind of bad input at once (see `harness.faults.bad_input`), so
the test also shows that the faults do not hide one another.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import faults


@pytest.fixture(scope="module")
def tallies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, faults.Tally]:
    return {t.fault: t for t in faults.bad_input(tmp_path_factory.mktemp("bad"))}


@pytest.mark.parametrize("fault", [*faults.BAD_INPUTS, "all of the above in one book"])
def test_each_bad_input_is_one_clear_error_and_nothing_is_lost(tallies: dict[str, faults.Tally], fault: str) -> None:
    tally = tallies[fault]
    assert tally.ok, str(tally)


def test_a_claim_that_raises_keeps_its_place_in_the_results(tmp_path: Path) -> None:
    book = faults.SampleBook.basic(tmp_path / "one")
    book.claims(
        "broken",
        """
        from verified_book.authoring.registry import claim


        @claim("broken.one", kind="exact")
        def one():
            raise ValueError("x" * 100_000)
    """,
    )
    run = book.run()
    record = run.records["broken.one"]["none"]
    assert record["status"] == "failed" and len(record["message"]) < 5000
    assert "more characters" in record["message"]
    assert run.records["basic.ratio"]["none"]["status"] == "verified"
