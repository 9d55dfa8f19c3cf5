"""Records a run cannot write are kept in the user's state folder, named by the verdict's last words, and taken
back by the next run that can write them; the verdict tells the book holding apart from the records not saved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness.paths import ROOT

from verified_book.engine import kept_records
from verified_book.engine.config import read_config
from verified_book.integration import cli
from verified_book.records import unsaved
from verified_book.records.results import ResultsError, ResultsFile, keep_unsaved, merge_into, read

MACHINE = {"slug": "box", "id": "abcd1234abcd", "fingerprint": {"cpu": "AMD EPYC", "cores": 2}, "markers": []}


def _run(day: int, claim: str = "a.one") -> ResultsFile:
    date = f"2026-12-0{day}T10:00:00+00:00"
    return ResultsFile(
        "box",
        MACHINE,
        {"date": date, "dates": {claim: {"numpy": date}}},
        {claim: {"numpy": {"status": "verified", "value": day}}},
        claims={claim: {"kind": "library"}},
    )


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(unsaved.STATE_VARIABLE, str(tmp_path / "state"))
    return tmp_path / "state"


def test_the_state_folder_follows_xdg_and_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(unsaved.STATE_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert unsaved.folder() == tmp_path / "xdg" / "verified-book" / "unsaved"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert unsaved.folder() == Path.home() / ".local" / "state" / "verified-book" / "unsaved"
    monkeypatch.setenv(unsaved.STATE_VARIABLE, str(tmp_path / "mine"))
    assert unsaved.folder() == tmp_path / "mine" / "unsaved"


def test_a_folder_that_cannot_be_written_keeps_the_records_in_the_state_folder(state: Path, tmp_path: Path) -> None:
    blocked = tmp_path / "results.local"
    blocked.write_text("a file where the folder should be\n")
    target = blocked / "box.json"
    with pytest.raises(OSError) as why:
        merge_into(target, _run(1))
    kept = keep_unsaved(target, _run(1), why.value)
    assert kept.kept_in is not None and kept.kept_in.is_relative_to(state) and kept.kept_in.name == "box.json"
    assert kept.words.endswith(f"kept in {kept.kept_in}") and str(target) in kept.words
    assert read(kept.kept_in).records["a.one"]["numpy"].value == 1
    assert unsaved.meant_for(target) == [kept.kept_in]
    assert unsaved.meant_for(tmp_path / "elsewhere" / "box.json") == [], "records are taken back where they belong"


def test_a_refused_merge_keeps_its_records_beside_the_file(state: Path, tmp_path: Path) -> None:
    kept = keep_unsaved(tmp_path / "box.json", _run(1), ResultsError("another machine's file"))
    assert kept.kept_in is not None and kept.kept_in.parent == tmp_path and ".unmerged-" in kept.kept_in.name
    assert not state.exists()


def test_the_next_run_that_can_write_takes_the_records_in_and_says_so(state: Path, tmp_path: Path) -> None:
    target = tmp_path / "results.local" / "box.json"
    merge_into(target, _run(1))
    first = keep_unsaved(target, _run(2, "b.two"), OSError("read-only"))
    second = keep_unsaved(target, _run(3), OSError("read-only"))
    os.utime(target)
    said: list[str] = []
    merged = merge_into(target, _run(4, "c.three"), warn=said.append)
    assert sorted(merged.records) == ["a.one", "b.two", "c.three"]
    assert merged.records["a.one"]["numpy"].value == 3, "an unsaved run is newer than the file it could not write"
    assert not first.kept_in or not first.kept_in.exists()
    assert second.kept_in is not None and not second.kept_in.parent.exists()
    (line,) = said
    assert "took in the records of 2 earlier runs that could not write them" in line and str(second.kept_in) in line


def test_an_unsaved_file_of_another_machine_is_left_where_it_is(state: Path, tmp_path: Path) -> None:
    target = tmp_path / "box.json"
    other = ResultsFile("box", {**MACHINE, "id": "ffff0000ffff"}, records={"a.one": {"numpy": {"status": "verified"}}})
    kept = keep_unsaved(target, other, OSError("read-only"))
    said: list[str] = []
    merge_into(target, _run(1), warn=said.append)
    assert kept.kept_in is not None and kept.kept_in.exists() and "left where it is" in said[0]


def test_the_verdict_says_the_book_holds_and_the_records_were_not_saved(tmp_path: Path) -> None:
    book = read_config(ROOT)
    outcome = cli._Outcome()
    outcome.bound, outcome.figures, outcome.slug = 3, {"verified": 3}, "box"
    kept_in = tmp_path / "state" / "unsaved" / "x" / "box.json"
    outcome.unkept = f"{book.writes_to / 'box.json'} cannot be written; this run's records are kept in {kept_in}"
    line = cli.verdict(outcome, kept_records.RECORDS_NOT_SAVED, 0, book)
    first, *rest = line.splitlines()
    assert first == "verified-book: verified on box" and "records NOT saved: " in line
    assert rest[-1].endswith(str(kept_in)), "the last line ends with the file that keeps the records"
    assert cli.verdict(outcome, 1, 0, book).startswith("verified-book: NOT all verified"), "a failed check is one"
    assert not kept_records.book_held(kept_records.RECORDS_NOT_SAVED, None)
