"""The verdict of `verify` says how many figures that hold here other machines' records show otherwise: a run
that holds on this machine does not hide what the Machines page shows of the others."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness.faults.common import BASIC_CLAIMS, BASIC_PAGE, SLUG
from harness.faults.integrity import ReaderBook

from verified_book.records import store
from verified_book.records.writing import dumps

OTHER = "other-box"


def _committed_disagreeing(book: ReaderBook) -> None:
    """This clone's records, committed as another machine's whose record of the ceiling misses its figure."""
    data = json.loads(dumps(store.read_history(store.place(book.local, SLUG))))
    data["slug"] = data["machine"]["slug"] = OTHER
    record = data["records"]["basic.ratio"]["none"]
    record.update(value=17, status="stale")
    for figure in record["figures"]:
        figure["status"] = "stale"
    (book.root / "results").mkdir(exist_ok=True)
    (book.root / "results" / f"{OTHER}.json").write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.slow  # runs `verified-book verify` twice, each in a process of its own
def test_the_verdict_counts_figures_other_machines_show_otherwise(tmp_path: Path) -> None:
    book = ReaderBook(tmp_path / "book")
    book.claims("basic", BASIC_CLAIMS)
    book.page("page.md", BASIC_PAGE)
    alone = book.cli("verify", "-q")
    assert alone.returncode == 0, alone.stdout[-3000:]
    assert "show otherwise" not in alone.stdout
    _committed_disagreeing(book)
    beside = book.cli("verify", "-q")
    assert beside.returncode == 0, beside.stdout[-3000:]
    said = " ".join(beside.stdout.split())
    verdict = said[said.rindex("verified-book: verified") :]
    assert "1 figure holds here that other machines' records show otherwise (see the Machines page)" in verdict
