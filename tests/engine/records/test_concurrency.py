"""The results store under concurrency and crashes: real processes, xdist workers, a kill mid-write.

Each test runs a scenario of `harness.faults` on a sample book in a temporary folder (the
runs use `--results-dir`-style isolation: the sample book's own `results/`), and the
scenario counts the records expected and kept; `scripts/fault-table` runs the same ones.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from harness import faults

import verified_book.records.results as results
import verified_book.records.writing as writing
from verified_book.records.results import ResultsError, ResultsFile, merge_into, read


@pytest.mark.slow  # a second process
def test_two_pytest_processes_at_once_keep_every_record(tmp_path: Path) -> None:
    tally = faults.concurrent_processes(tmp_path)
    assert tally.ok, str(tally)
    assert tally.expected == 24 and tally.lost == 0


@pytest.mark.slow
def test_xdist_workers_each_merge_their_records_and_the_controller_counts_them(tmp_path: Path) -> None:
    tally = faults.xdist_workers(tmp_path)
    assert tally.ok, str(tally)


@pytest.mark.slow  # a second process
def test_a_kill_mid_write_leaves_the_previous_file_whole(tmp_path: Path) -> None:
    tally = faults.killed_mid_write(tmp_path, tries=1, pytest_runs=1)
    assert tally.ok, str(tally)


def test_threads_racing_keep_every_record(tmp_path: Path) -> None:
    tally = faults.locked_threads(tmp_path)
    assert tally.ok, str(tally)


def test_without_the_lock_the_same_race_loses_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: the race the lock prevents is real, so the tests above can see a loss."""
    write = writing._atomic_write

    def slow_write(path: Path, text: str) -> None:
        time.sleep(0.05)
        write(path, text)

    monkeypatch.setattr(writing, "_atomic_write", slow_write)
    monkeypatch.setattr(writing, "FileLock", lambda *a, **k: contextlib.nullcontext())
    tally = faults.locked_threads(tmp_path, count=4)
    assert tally.lost > 0, str(tally)


def test_a_held_lock_times_out_with_a_message_and_touches_nothing(tmp_path: Path) -> None:
    from filelock import FileLock

    path = tmp_path / "m.json"
    merge_into(path, ResultsFile("m", records={"a.one": {"numpy": {"status": "verified", "value": 1}}}))
    before = path.read_bytes()
    with FileLock(str(path) + ".lock"):
        with pytest.raises(ResultsError, match=r"m\.json: another run has held its lock .* nothing was merged"):
            merge_into(
                path, ResultsFile("m", records={"b.two": {"numpy": {"status": "verified", "value": 2}}}), timeout=0.2
            )
    assert path.read_bytes() == before


def test_corrupt_files_are_reported_and_kept_aside(tmp_path: Path) -> None:
    tally = faults.corrupt_files(tmp_path)
    assert tally.ok and tally.tried == len(faults.CORRUPT_FILES), str(tally)


def test_a_newer_schema_is_refused_and_the_run_keeps_its_records_beside_it(tmp_path: Path) -> None:
    tally = faults.newer_schema(tmp_path)
    assert tally.ok, str(tally)


def test_an_older_schema_is_migrated_with_its_records(tmp_path: Path) -> None:
    tally = faults.older_schema(tmp_path)
    assert tally.ok, str(tally)


def test_a_record_that_cannot_be_stored_costs_only_itself(tmp_path: Path) -> None:
    """Huge integers (more digits than JSON text may hold) are stored as their size; the file stays valid."""
    path = tmp_path / "m.json"
    value = results.to_json(10**5000)
    merge_into(path, ResultsFile("m", records={"a.one": {"numpy": {"status": "verified", "value": value}}}))
    assert read(path).records["a.one"]["numpy"].value.startswith("about 2^")
