"""Measurements know their conditions: the book's run lock, the load threshold, and two real runs at once.

The fast tests drive `verified_book.records.conditions.RunLock` directly, two holders in one process (flock
is per open file, so they meet as two processes would); the slow ones start two pytest runs of a
sample book together and read who waited for whom from what the runs did and recorded, never from
how long anything took.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness.faults import conditions_of, shown_status, spawn, timed_book, wait_for_line

from verified_book.records import conditions
from verified_book.records.conditions import RUN_ENV, RunConditions, RunLock
from verified_book.records.results import ResultsError, ResultsFile, read, validate
from verified_book.vocabulary import CONTENDED


def test_the_load_threshold_is_one_and_a_half_times_the_cores() -> None:
    assert not conditions.heavy(3.0, 2) and conditions.heavy(3.01, 2)
    assert not conditions.heavy(None, 2) and not conditions.heavy(5.0, None)
    quiet = {"load_before": 0.4, "load_after": 1.9, "cores": 2, "beside": None}
    assert conditions.contended(quiet) is None
    loaded = conditions.contended({**quiet, "load_after": 3.5})
    assert loaded is not None and "3.5 on 2 cores" in loaded
    beside = conditions.contended({**quiet, "beside": "pid 12 (pytest)"})
    assert beside is not None and "pid 12 (pytest)" in beside


def test_a_conditions_entry_is_checked_by_the_results_schema() -> None:
    good = RunConditions(cores=4, load_before=0.5, load_after=0.7, beside=["pid 9 (pytest)"]).entry()
    assert good == {"load_before": 0.5, "load_after": 0.7, "cores": 4, "beside": "pid 9 (pytest)"}
    assert conditions.is_entry(good)
    for bad in (
        {**good, "cores": 0},
        {**good, "load_before": "high"},
        {**good, "beside": 3},
        {**good, "extra": 1},
        [1],
    ):
        assert not conditions.is_entry(bad), bad
    record = {"status": "verified", "value": 1.0, "figures": [], "conditions": {**good, "cores": "four"}}
    with pytest.raises(ResultsError) as refused:  # the record's type refuses it where it is built
        ResultsFile("m", records={"a.one": {"numpy": record}})
    assert any("a.one" in p and "conditions" in p and "cores" in p for p in str(refused.value).splitlines()), (
        refused.value
    )
    data = ResultsFile("m", records={"a.one": {"numpy": {**record, "conditions": good}}}).to_dict()
    data["records"]["a.one"]["numpy"]["conditions"]["cores"] = "four"
    problems = validate(data, "m.json")
    assert any("a.one" in p and "conditions" in p and "cores" in p for p in problems), problems


class Said(list[str]):
    def __call__(self, line: str) -> None:
        self.append(line)


def two_runs(
    folder: Path, monkeypatch: pytest.MonkeyPatch, *, limit: float = 0.3, beside: bool = False
) -> tuple[RunLock, Said, RunLock, Said]:
    """Two holders of one lock folder, as two processes would be (the second under another pid's name)."""
    said_a, said_b = Said(), Said()
    a = RunLock(folder, said_a, limit=limit, job="verify")
    b = RunLock(folder, said_b, beside_others=beside, limit=limit, job="test")
    b.pid = a.pid + 100000
    b.describe = f"pid {b.pid} (test)"
    monkeypatch.delenv(RUN_ENV, raising=False)
    return a, said_a, b, said_b


def start(lock: RunLock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RUN_ENV, raising=False)  # each holder stands for a process of its own
    lock.start()


def test_runs_that_time_nothing_share_the_lock_and_a_timing_run_waits_for_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, said_a, b, said_b = two_runs(tmp_path, monkeypatch)
    start(a, monkeypatch)
    start(b, monkeypatch)
    assert said_a == [] and said_b == []  # neither times yet: neither waits
    a.before_timing()  # b is still going on: a waits for it, then (its wait bounded) times beside it
    assert said_a[0] == "another run of this book is in progress; waiting for it before timing the machine"
    assert "timing beside it" in said_a[1]
    assert "another run of this book" in (a.seen().entry()["beside"] or "")
    assert a.describe in (b.seen().entry()["beside"] or "")
    assert conditions.contended(a.seen().entry()) is not None
    b.release()
    a.release()


def test_a_run_started_while_another_times_waits_and_one_that_is_told_to_runs_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, said_a, b, said_b = two_runs(tmp_path, monkeypatch)
    start(a, monkeypatch)
    a.before_timing()
    assert said_a == [] and a.exclusive and a.seen().entry()["beside"] is None
    start(b, monkeypatch)
    assert said_b[0] == f"another run of this book is timing the machine ({a.describe}); waiting for it before starting"
    assert b.beside and a.describe in (b.seen().entry()["beside"] or "")
    b.release()

    said_told = Said()
    told = RunLock(tmp_path, said_told, beside_others=True, limit=60, job="test")
    told.pid = a.pid + 200000
    told.describe = f"pid {told.pid} (test)"
    start(told, monkeypatch)
    assert said_told == []  # told to run beside: no wait, however long the limit
    assert told.describe in (a.seen().entry()["beside"] or "") and a.describe in (told.seen().entry()["beside"] or "")
    told.release()
    a.release()


def test_once_the_other_run_is_gone_the_machine_is_free_and_the_lock_file_alone_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, said_a, b, said_b = two_runs(tmp_path, monkeypatch)
    start(a, monkeypatch)
    start(b, monkeypatch)
    b.release()
    a.before_timing()
    assert said_a == [] and a.exclusive and a.seen().entry()["beside"] is None
    assert a.seen().load_before is not None or not hasattr(os, "getloadavg")
    a.release()
    assert sorted(p.name for p in tmp_path.iterdir()) == [conditions.LOCK_NAME]
    assert (tmp_path / conditions.LOCK_NAME).read_text() == ""  # the holder's name goes with it
    start(b, monkeypatch)
    b.before_timing()
    assert said_b == [] and b.exclusive and b.seen().entry()["beside"] is None
    b.release()


def test_a_run_inside_a_run_of_the_same_book_takes_no_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, _, b, said_b = two_runs(tmp_path, monkeypatch)
    start(a, monkeypatch)
    a.before_timing()
    b.start()  # the environment says b belongs to a's run, as a test of the book run by the book's suite would
    b.before_timing()
    assert b.passive and said_b == []
    a.release()


# ---------------------------------------------------------------- two real runs


@pytest.mark.slow  # two pytest processes
def test_a_second_run_waits_for_the_one_timing_the_machine(tmp_path: Path) -> None:
    book = timed_book(tmp_path / "book")
    log, gate = tmp_path / "log", tmp_path / "gate"
    first = spawn(book, tmp_path / "first", log, gate=gate)
    assert wait_for_line(log, f"start {first.proc.pid}"), first.text
    second = spawn(book, tmp_path / "second", log)
    waiting = f"another run of this book is timing the machine (pid {first.proc.pid} (pytest)); waiting for it"
    assert second.wait_for(waiting), second.text
    gate.touch()
    assert first.finish() == 0, first.text
    assert second.finish() == 0, second.text
    # the second timed nothing until the first was done, and neither saw the other beside it
    assert log.read_text().split() == [
        "start",
        str(first.proc.pid),
        "end",
        str(first.proc.pid),
        "start",
        str(second.proc.pid),
        "end",
        str(second.proc.pid),
    ]
    assert conditions_of(tmp_path / "first").beside is None
    assert conditions_of(tmp_path / "second").beside is None


@pytest.mark.slow  # two pytest processes
def test_a_run_told_to_run_beside_marks_both_runs_measurements_contended(tmp_path: Path) -> None:
    book = timed_book(tmp_path / "book")
    log, gate = tmp_path / "log", tmp_path / "gate"
    first = spawn(book, tmp_path / "first", log, gate=gate)
    assert wait_for_line(log, f"start {first.proc.pid}"), first.text
    second = spawn(book, tmp_path / "second", log, "--beside-other-runs")
    assert second.finish() == 0, second.text  # it did not wait: the first still holds the machine
    gate.touch()
    assert first.finish() == 0, first.text
    assert "waiting for it" not in second.text
    assert log.read_text().split() == [
        "start",
        str(first.proc.pid),
        "start",
        str(second.proc.pid),
        "end",
        str(second.proc.pid),
        "end",
        str(first.proc.pid),
    ]
    first_seen, second_seen = conditions_of(tmp_path / "first"), conditions_of(tmp_path / "second")
    assert f"pid {second.proc.pid} (pytest)" in first_seen.beside
    assert f"pid {first.proc.pid} (pytest)" in second_seen.beside
    # recorded as measured, and as contended: the site shows neither as the machine's figure
    for results, seen in ((tmp_path / "first", first_seen), (tmp_path / "second", second_seen)):
        assert read(results / "sample.json").records["timed.wait"]["numpy"].status == "verified"
        assert conditions.contended(seen) is not None
        assert shown_status(book, results) == CONTENDED
