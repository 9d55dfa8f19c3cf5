"""The results store's general promises, over generated files: merging with --keep-newer does not depend on the
order files arrive in and changes nothing the second time; every schema version migrates to a document that
validates; a results file survives JSON unchanged."""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verified_book.engine.merge import newer_only
from verified_book.records.record import SCHEMA_VERSION, ResultsDocument
from verified_book.records.results import MIGRATIONS, ResultsFile, dumps, merge_into, migrate, read
from verified_book.vocabulary import RECORDED

CLAIMS = ("a.one", "a.two", "b.three", "c.four.x")
BACKENDS = ("none", "numpy", "torch:cpu", "mlx:cpu")
MACHINE = {"slug": "box", "id": "abcd1234abcd", "fingerprint": {"cpu": "AMD EPYC", "cores": 2}, "markers": []}
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

values = st.one_of(
    st.none(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.lists(st.integers(-100, 100), max_size=3),
)
records = st.builds(
    lambda status, value, message: {"status": status, "value": value, **({"message": message} if message else {})},
    st.sampled_from([s for s in RECORDED if s not in ("outdated",)]),
    values,
    st.one_of(st.none(), st.text(min_size=1, max_size=30)),
)
per_claim = st.dictionaries(st.sampled_from(BACKENDS), records, min_size=1, max_size=3)
record_sets = st.dictionaries(st.sampled_from(CLAIMS), per_claim, min_size=1, max_size=4)


def _results(recs: dict[str, dict[str, Any]], day: int) -> ResultsFile:
    """One run's file: every record dated by its run, as a run writes them."""
    date = (START + dt.timedelta(days=day)).isoformat()
    return ResultsFile(
        "box",
        MACHINE,
        {"date": date, "dates": {c: {b: date for b in per} for c, per in recs.items()}},
        recs,
        claims={c: {"kind": "library"} for c in recs},
    )


def _kept(path: Path) -> dict[tuple[str, str], tuple[str | None, str]]:
    """What a merged file says of each claim and backend: its record and that record's date."""
    found = read(path)
    return {
        (c, b): (found.date_of(c, b), r.model_dump_json(exclude_unset=True))
        for c, per in found.records.items()
        for b, r in per.items()
    }


def _merged(files: list[ResultsFile], into: Path) -> dict[tuple[str, str], tuple[str | None, str]]:
    """The files merged into `into` as `merge-results --keep-newer` merges them, one after another (without
    syncing each write to the disk, which only makes a merge durable and would make the examples slow)."""
    with mock.patch("os.fsync"):
        for results in files:
            newer = newer_only(results, into)
            if newer.records:
                merge_into(into, newer)
    return _kept(into)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record_sets, min_size=2, max_size=4), st.randoms(use_true_random=False))
def test_keep_newer_merges_the_same_whatever_the_order_the_files_arrive_in(
    runs: list[dict[str, dict[str, Any]]], random: Any
) -> None:
    files = [_results(recs, day) for day, recs in enumerate(runs)]
    orders = list(itertools.permutations(files))
    random.shuffle(orders)
    with tempfile.TemporaryDirectory() as folder:
        outcomes = [_merged(list(order), Path(folder) / f"{n}" / "box.json") for n, order in enumerate(orders[:3])]
    assert all(outcome == outcomes[0] for outcome in outcomes)
    newest = {(c, b): day for day, recs in enumerate(runs) for c, per in recs.items() for b in per}
    assert {key: date for key, (date, _) in outcomes[0].items()} == {
        key: (START + dt.timedelta(days=day)).isoformat() for key, day in newest.items()
    }


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record_sets, min_size=1, max_size=3), st.data())
def test_keep_newer_merging_a_file_again_changes_no_record(runs: list[dict[str, dict[str, Any]]], data: Any) -> None:
    files = [_results(recs, day) for day, recs in enumerate(runs)]
    with tempfile.TemporaryDirectory() as folder:
        into = Path(folder) / "box.json"
        once = _merged(files, into)
        again = _merged([data.draw(st.sampled_from(files)) for _ in range(2)], into)
    assert again == once


# ---------------------------------------------------------------- every schema version migrates


def _downgrade(doc: dict[str, Any], version: int) -> dict[str, Any]:
    """A current document as schema `version` wrote it: each `update_to_<n>` undone, newest first."""
    data = copy.deepcopy(doc)
    for target in range(SCHEMA_VERSION, version, -1):
        if target == 4:  # schema 3 called where a claim's code is `source`
            data["claims"] = {
                c: {("source" if k == "defined_at" else k): v for k, v in m.items()} for c, m in data["claims"].items()
            }
        elif target == 3:  # no machine had an identity
            data["machine"].pop("id", None)
        elif target == 2:  # the environment, and each record with its claim's metadata, timing and date
            run = data.pop("run")
            seconds, dates = run.pop("seconds", {}), run.pop("dates", {})
            claims = data.pop("claims")
            for c, per in data["records"].items():
                for b, rec in per.items():
                    rec.update(claims.get(c, {}))
                    if c in seconds and b in seconds[c]:
                        rec["seconds"] = seconds[c][b]
                    if c in dates and b in dates[c]:
                        rec["date"] = dates[c][b]
            data["environment"] = run
        elif target == 1:  # no version, the records as a list
            data.pop("schema_version")
            data["records"] = [
                {"claim": c, "backend": b, **rec} for c, per in data["records"].items() for b, rec in per.items()
            ]
        data["schema_version"] = target - 1
    if version == 0:
        data.pop("schema_version", None)
    return data


@settings(max_examples=40, deadline=None)
@given(record_sets, st.integers(0, 30), st.integers(0, SCHEMA_VERSION - 1), st.booleans())
def test_every_schema_version_migrates_to_a_document_that_validates(
    recs: dict[str, dict[str, Any]], day: int, version: int, seconds: bool
) -> None:
    current = _results(recs, day).to_dict()
    if seconds:
        current["run"]["seconds"] = {c: {b: 0.5 for b in per} for c, per in recs.items()}
    old = _downgrade(current, version)
    assert old.get("schema_version", 0) == version
    migrated = migrate(old, f"schema {version}")
    doc = ResultsDocument.model_validate(migrated)
    assert {c: set(per) for c, per in doc.records.items()} == {c: set(per) for c, per in recs.items()}
    assert all(doc.records[c][b].status == rec["status"] for c, per in recs.items() for b, rec in per.items())


def test_every_migration_is_tried() -> None:
    assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION + 1))


# ---------------------------------------------------------------- JSON round trip


@settings(max_examples=60, deadline=None)
@given(record_sets, st.integers(0, 30))
def test_a_results_file_survives_json_unchanged(recs: dict[str, dict[str, Any]], day: int) -> None:
    results = _results(recs, day)
    text = dumps(results)
    again = ResultsFile.from_dict(json.loads(text))
    assert dumps(again) == text
    assert again.records == results.records and again.run == results.run
