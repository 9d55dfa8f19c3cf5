"""Each record's footprint in a machine's store: written with the record the merge took, gone with a record
written without one, and read back as which records an edit may have changed (`records.footprints`)."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verified_book.records import footprints
from verified_book.records.results import ResultsFile, merge_into
from verified_book.records.store import Store, place

MACHINE = {"slug": "box", "id": "abcd1234abcd", "fingerprint": {"cpu": "AMD EPYC", "cores": 2}, "markers": []}
DAY = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).isoformat()
QUIET, BUSY = {"load_before": 0.1, "cores": 2}, {"load_before": 9.0, "load_after": 9.0, "cores": 2}


def _run(records: dict[str, dict[str, Any]], date: str = DAY) -> ResultsFile:
    return ResultsFile(
        "box",
        MACHINE,
        {"date": date, "dates": {c: {b: date for b in per} for c, per in records.items()}},
        records,
        claims={c: {"kind": "library", "code": "v1"} for c in records},
    )


def _rows(path: Path) -> set[tuple[str, str, str, str]]:
    with sqlite3.connect(path) as db:
        query = "SELECT f.claim, f.backend, s.source, s.digest FROM footprints f JOIN sources s ON s.id = f.source"
        return set(db.execute(query))


def _merge(path: Path, update: ResultsFile, prints: footprints.Footprints | None) -> None:
    with mock.patch("os.fsync"):
        merge_into(path, update, footprints=prints)


def test_a_record_is_written_with_its_footprint_and_one_written_without_has_none(tmp_path: Path) -> None:
    path = place(tmp_path, "box")
    first = {("a.one", "numpy"): {"file:page.md": "p1", "library:numpy": "2.0"}, ("a.two", "numpy"): {"engine": "e"}}
    _merge(
        path,
        _run({"a.one": {"numpy": {"status": "verified", "value": 1}}, "a.two": {"numpy": {"status": "verified"}}}),
        first,
    )
    assert _rows(path) == {
        ("a.one", "numpy", "file:page.md", "p1"),
        ("a.one", "numpy", "library:numpy", "2.0"),
        ("a.two", "numpy", "engine", "e"),
    }
    _merge(path, _run({"a.one": {"numpy": {"status": "verified", "value": 2}}}), {("a.one", "numpy"): {"engine": "e2"}})
    assert _rows(path) == {("a.one", "numpy", "engine", "e2"), ("a.two", "numpy", "engine", "e")}, "replaced whole"
    _merge(path, _run({"a.two": {"numpy": {"status": "verified"}}}), None)
    assert _rows(path) == {("a.one", "numpy", "engine", "e2")}, "a record written without a footprint keeps none"
    with sqlite3.connect(path) as db:
        assert set(db.execute("SELECT source, digest FROM sources")) == {("engine", "e2")}, "none unused is kept"


def test_a_contended_measurement_the_merge_refuses_leaves_the_quiet_one_s_footprint(tmp_path: Path) -> None:
    path = place(tmp_path, "box")
    quiet = _run({"m.t": {"numpy": {"status": "verified", "value": 1, "conditions": QUIET}}})
    _merge(path, quiet, {("m.t", "numpy"): {"engine": "quiet"}})
    busy = _run({"m.t": {"numpy": {"status": "verified", "value": 2, "conditions": BUSY}}})
    _merge(path, busy, {("m.t", "numpy"): {"engine": "busy"}})
    assert Store(path).read().records["m.t"]["numpy"].value == 1
    assert _rows(path) == {("m.t", "numpy", "engine", "quiet")}


sources = st.dictionaries(
    st.sampled_from(["engine", "file:a.md", "file:b.md", "code:m.py", "library:numpy"]),
    st.sampled_from(["1", "2", ""]),
    min_size=1,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.dictionaries(st.sampled_from(["c.a", "c.b", "c.c", "c.d"]), sources, min_size=1),
    st.dictionaries(
        st.sampled_from(["engine", "file:a.md", "file:b.md", "code:m.py", "library:numpy"]),
        st.sampled_from(["1", "2", ""]),
    ),
    st.sets(st.sampled_from(["c.a", "c.b", "c.c", "c.d"])),
)
def test_a_record_is_held_exactly_while_every_source_has_its_digest(
    tmp_path_factory: pytest.TempPathFactory, kept: dict[str, dict[str, str]], now: dict[str, str], bare: set[str]
) -> None:
    """Held: every source of its footprint has the digest `now` gives (a source `now` lacks has moved; one written
    with no digest never holds); a record with no footprint is never held."""
    path = place(tmp_path_factory.mktemp("held"), "box")
    claims = set(kept) | bare
    _merge(
        path,
        _run({c: {"numpy": {"status": "verified"}} for c in claims}),
        {(c, "numpy"): kept[c] for c in kept if c not in bare},
    )
    found = Store(path).held(lambda asked: {s: now[s] for s in asked if s in now})
    expected = {c for c, per in kept.items() if c not in bare and all(d and now.get(s) == d for s, d in per.items())}
    assert {c for c, _ in found.held} == expected
    assert {c for c, _ in found.moved} == claims - expected
    assert all(date == DAY for _, date in found.held.values())


def test_a_store_written_before_footprints_were_kept_holds_nothing(tmp_path: Path) -> None:
    """A store of layout 1 has no footprints: every record is judged, until a run writes it with one."""
    path = place(tmp_path, "box")
    _merge(path, _run({"a.one": {"numpy": {"status": "verified"}}}), {("a.one", "numpy"): {"engine": "e"}})
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE footprints")
        db.execute("DROP TABLE sources")
        db.execute("PRAGMA user_version=1")
    found = Store(path).held(lambda asked: dict.fromkeys(asked, "e"))
    assert not found.held and found.moved == {("a.one", "numpy")}
    _merge(path, _run({"a.two": {"numpy": {"status": "verified"}}}), {("a.two", "numpy"): {"engine": "e"}})
    assert set(Store(path).held(lambda asked: dict.fromkeys(asked, "e")).held) == {("a.two", "numpy")}


def test_a_store_of_layout_2_lets_its_footprints_go_and_keeps_them_anew(tmp_path: Path) -> None:
    """Layout 2 kept a footprint's source and digest in each row: read, it holds nothing; written, its table is
    let go and the records written keep theirs in the tables of layout 3."""
    path = place(tmp_path, "box")
    _merge(path, _run({"a.one": {"numpy": {"status": "verified"}}}), {("a.one", "numpy"): {"engine": "e"}})
    with sqlite3.connect(path) as db:
        db.executescript(
            "DROP TABLE footprints; DROP TABLE sources; CREATE TABLE footprints (claim TEXT NOT NULL, "
            "backend TEXT NOT NULL, source TEXT NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (claim, backend, source)) "
            "WITHOUT ROWID; INSERT INTO footprints VALUES ('a.one', 'numpy', 'engine', 'e'); PRAGMA user_version=2;"
        )
    assert not Store(path).held(lambda asked: dict.fromkeys(asked, "e")).held
    _merge(path, _run({"a.two": {"numpy": {"status": "verified"}}}), {("a.two", "numpy"): {"engine": "e"}})
    assert _rows(path) == {("a.two", "numpy", "engine", "e")}
    assert set(Store(path).held(lambda asked: dict.fromkeys(asked, "e")).held) == {("a.two", "numpy")}
