"""A machine's own history in its store: merged by the JSON file's rules, record by record; exported as that file
would be; a bad row costing that row; a write costing the rows the run touched, whatever the history's size."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from verified_book.records.errors import NewerSchema, OtherMachine
from verified_book.records.record import SCHEMA_VERSION
from verified_book.records.results import ResultsFile, dumps, merge_into, read
from verified_book.records.store import Store, place

MACHINE = {"slug": "box", "id": "abcd1234abcd", "fingerprint": {"cpu": "AMD EPYC", "cores": 2}, "markers": []}
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
CLAIMS = ("a.one", "a.two", "b.three", "m.timed")  # m.* are measured claims: their volatile part sits in the header
BACKENDS = ("none", "numpy", "torch:cpu")
QUIET, BUSY = {"load_before": 0.1, "cores": 2}, {"load_before": 9.0, "load_after": 9.0, "cores": 2}

records = st.builds(
    lambda status, value, busy: {
        "status": status,
        "value": value,
        **({"conditions": BUSY if busy else QUIET} if status != "skipped" else {}),
    },
    st.sampled_from(["verified", "failed", "skipped", "stale"]),
    st.one_of(st.none(), st.integers(-1000, 1000), st.text(max_size=8)),
    st.booleans(),
)
runs = st.tuples(
    st.dictionaries(st.sampled_from(CLAIMS), st.dictionaries(st.sampled_from(BACKENDS), records, min_size=1)),
    st.sets(st.sampled_from(BACKENDS[1:])),  # backends this run lacked
    st.dictionaries(st.sampled_from(("a.py", "b.py")), st.text(max_size=10), max_size=1),  # snippets it ran
)


def _run(recs: dict[str, dict[str, Any]], absent: set[str], outputs: dict[str, str], day: int) -> ResultsFile:
    """One run's records, dated and timed by its run, as a run writes them."""
    date = (START + dt.timedelta(days=day)).isoformat()
    return ResultsFile(
        "box",
        MACHINE,
        {
            "date": date,
            "versions": {"python": "3.11.7", "numpy": "2.4.6"},  # not in sorted order, as a run writes them
            "backends": {b: (None if b in absent else "1.0") for b in BACKENDS[1:]},
            "dates": {c: {b: date for b in per} for c, per in recs.items()},
            "seconds": {c: {b: 0.5 + day for b in per} for c, per in recs.items()},
        },
        recs,
        {name: {"text": text, "date": date} for name, text in outputs.items()},
        {c: {"kind": "measured" if c.startswith("m.") else "library", "code": f"v{day}"} for c in recs},
    )


def _without_fsync() -> Any:
    return mock.patch("os.fsync")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(runs, min_size=1, max_size=4))
@example(
    [
        ({"a.one": {"numpy": {"status": "skipped"}}}, set(), {}),
        ({"a.two": {"none": {"status": "verified"}}}, {"numpy"}, {}),
    ]
)  # a run that lacks a backend removes the skipped records on it
@example(
    [
        ({"m.timed": {"numpy": {"status": "verified", "value": 1, "conditions": QUIET}}}, set(), {}),
        ({"m.timed": {"numpy": {"status": "verified", "value": 2, "conditions": BUSY}}}, set(), {"a.py": "x"}),
    ]
)  # a contended measurement never replaces a quiet one
def test_a_store_holds_what_the_json_history_would_hold_after_any_runs(
    tmp_path_factory: pytest.TempPathFactory, sequence: list[Any]
) -> None:
    """The merge rules (which record wins, what a run lacking a backend removes, a contended measurement never
    replacing a quiet one) are the JSON file's, applied row by row: the exported store is that file, byte for
    byte."""
    folder = tmp_path_factory.mktemp("runs")
    json_history, store = folder / "file" / "box.json", place(folder / "store", "box")
    with _without_fsync():
        for day, (recs, absent, outputs) in enumerate(sequence):
            merge_into(json_history, _run(recs, absent, outputs, day))
            merge_into(store, _run(recs, absent, outputs, day))
        exported = Store(store).export(folder / "out" / "box.json")
    assert exported.read_text() == json_history.read_text()
    in_order = json.dumps(Store(store).read().to_dict()), json.dumps(read(json_history).to_dict())
    assert in_order[0] == in_order[1], "what the site walks, in the order it walks it"


def _history(count: int) -> ResultsFile:
    claims = [f"item.c{i}" for i in range(count)]
    return ResultsFile(
        "box",
        MACHINE,
        {"date": START.isoformat(), "dates": {c: {"numpy": START.isoformat()} for c in claims}},
        {c: {"numpy": {"status": "verified", "value": i}} for i, c in enumerate(claims)},
        claims={c: {"kind": "library"} for c in claims},
    )


@pytest.mark.parametrize("edited", [1, 3])
def test_a_runs_write_costs_the_rows_it_touched_whatever_the_size_of_the_history(tmp_path: Path, edited: int) -> None:
    """The loop's scaling, without timing: a run that rechecked `edited` claims rewrites the same number of rows
    into a history of 1x and of 4x the records."""
    written = {}
    for scale in (1, 4):
        path = place(tmp_path / f"x{scale}", "box")
        with _without_fsync():
            merge_into(path, _history(250 * scale))
        store = Store(path)
        update = _history(edited)
        with _without_fsync():
            merged = store.merge(update)
        written[scale] = (store.records_written, store.rows_written)
        assert set(merged.records) == set(update.records)  # what the merge returns is what it touched
        assert len(store.read().records) == 250 * scale
    assert written[1] == written[4]
    assert written[1][0] == edited


def test_a_bad_row_is_set_aside_alone_and_named_with_its_claim(tmp_path: Path) -> None:
    path = place(tmp_path, "box")
    merge_into(path, _history(20))
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE records SET record = ? WHERE claim = 'item.c7'", (json.dumps({"status": "verifed", "value": 7}),)
        )
        db.execute("UPDATE records SET record = 'not json' WHERE claim = 'item.c9'")
    said: list[str] = []
    found = Store(path).read(said.append)
    assert set(found.records) == {f"item.c{i}" for i in range(20)} - {"item.c7", "item.c9"}
    (text,) = said
    assert f"{path}['records']['item.c7']['numpy']" in text and "status" in text
    assert f"{path}['records']['item.c9']['numpy']" in text
    (side,) = tmp_path.glob("box.sqlite.set-aside-*")
    parts = {p["at"]: p["value"] for p in json.loads(side.read_text())}
    assert parts["['records']['item.c7']['numpy']"] == {"status": "verifed", "value": 7}
    assert parts["['records']['item.c9']['numpy']"] == "not json"
    said.clear()
    assert len(Store(path).read(said.append).records) == 18 and not said  # set aside once, not every read


def test_a_bad_row_the_run_rewrites_is_replaced_and_still_kept_aside(tmp_path: Path) -> None:
    path = place(tmp_path, "box")
    merge_into(path, _history(5))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE records SET record = '{\"status\": 3}' WHERE claim = 'item.c0'")
    said: list[str] = []
    merge_into(path, _history(1), warn=said.append)
    assert Store(path).read().records["item.c0"]["numpy"].status == "verified"
    assert len(said) == 1 and "item.c0" in said[0] and list(tmp_path.glob("box.sqlite.set-aside-*"))


def test_the_json_history_is_taken_in_on_the_first_write_and_nothing_is_lost(tmp_path: Path) -> None:
    legacy = tmp_path / "box.json"
    merge_into(legacy, _history(30))
    before = read(legacy)
    said: list[str] = []
    merge_into(place(tmp_path, "box"), _history(2), warn=said.append)
    assert not legacy.exists() and any("taken into box.sqlite" in line for line in said)
    after = Store(place(tmp_path, "box")).read()
    assert after.records == before.records and after.claims == before.claims


def test_a_file_that_is_no_store_is_kept_aside_whole_and_a_new_one_begun(tmp_path: Path) -> None:
    path = place(tmp_path, "box")
    path.write_bytes(b"this is not a database" * 100)
    said: list[str] = []
    merge_into(path, _history(3), warn=said.append)
    (aside,) = tmp_path.glob("box.sqlite.corrupt-*")
    assert aside.read_bytes() == b"this is not a database" * 100
    assert str(path) in said[0] and "kept aside" in said[0]
    assert len(Store(path).read().records) == 3


def test_a_newer_store_is_left_alone(tmp_path: Path) -> None:
    path = place(tmp_path, "box")
    merge_into(path, _history(3))
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(NewerSchema, match="newer verified-book"):
        merge_into(path, _history(1))
    assert not list(tmp_path.glob("box.sqlite.corrupt-*"))


def test_another_machines_records_are_refused(tmp_path: Path) -> None:
    path = place(tmp_path, "box")
    merge_into(path, _history(3))
    other = _history(1)
    other.machine = other.machine.model_copy(update={"id": "ffff0000ffff"})
    with pytest.raises(OtherMachine, match="another machine"):
        merge_into(path, other)


def test_a_per_claim_read_reads_only_those_claims(tmp_path: Path) -> None:
    path = place(tmp_path, "box")
    merge_into(path, _history(10))
    some = Store(path).read_claims(["item.c2", "item.c5", "item.nothing"])
    assert set(some.records) == set(some.claims) == {"item.c2", "item.c5"}
    assert some.run.dates == {c: {"numpy": START.isoformat()} for c in ("item.c2", "item.c5")}
    assert dumps(Store(path).read()) == dumps(read(Store(path).export(tmp_path / "out" / "box.json")))


def test_what_a_run_left_is_read_without_what_it_redid(tmp_path: Path) -> None:
    """The end of a run counts the records it did not redo: their rows, timings and metadata are read, the
    redone ones are not, and a run that redid nothing leaves the whole history."""
    path = place(tmp_path, "box")
    merge_into(path, _history(6))
    redone = {("item.c1", "numpy"), ("item.c4", "numpy"), ("item.gone", "numpy")}
    left = Store(path).read_except(redone)
    assert set(left.records) == set(left.claims) == {"item.c0", "item.c2", "item.c3", "item.c5"}
    assert left.run.dates == {c: {"numpy": START.isoformat()} for c in left.records}
    assert dumps(Store(path).read_except(set())) == dumps(Store(path).read())


def test_a_store_of_an_older_schema_is_migrated_when_next_written_and_nothing_is_lost(tmp_path: Path) -> None:
    path = place(tmp_path, "box")
    merge_into(path, _history(12))
    before = Store(path).read()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE header SET value = ? WHERE key = 'schema_version'", (json.dumps(SCHEMA_VERSION - 1),))
    said: list[str] = []
    merge_into(path, _history(1), warn=said.append)
    after = Store(path).read()
    assert after.records == before.records and after.claims == before.claims
    assert any("taken into box.sqlite" in line for line in said), said
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == ["box.sqlite"]


def test_runs_writing_at_once_lose_no_record(tmp_path: Path) -> None:
    """Runs merging into one store at once (xdist's workers, serve beside a run) each keep every record: the
    store's lock and one transaction per merge, as the JSON file's lock and rename did."""
    path = place(tmp_path, "box")
    merge_into(path, _history(1))
    runs = [
        ResultsFile(
            "box",
            MACHINE,
            {"date": START.isoformat()},
            {f"run{n}.c{i}": {"numpy": {"status": "verified", "value": i}} for i in range(20)},
            claims={f"run{n}.c{i}": {"kind": "library"} for i in range(20)},
        )
        for n in range(8)
    ]
    failed: list[BaseException] = []

    def write(update: ResultsFile) -> None:
        try:
            merge_into(path, update)
        except BaseException as e:  # noqa: BLE001 - what the assertion below reports
            failed.append(e)

    threads = [threading.Thread(target=write, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failed
    assert len(Store(path).read().records) == 1 + 8 * 20
