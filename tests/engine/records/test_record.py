"""The results file's types: statuses from the vocabulary, the published schema, the file as written."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest
from harness.paths import ROOT

from verified_book.book.snippet_output import STATUSES as OUTPUT_STATUSES
from verified_book.records import record
from verified_book.records.results import dumps, read, validate
from verified_book.vocabulary import KINDS, RECORDED

COMMITTED = sorted((ROOT / "results").glob("*.json"))


def test_the_statuses_a_record_takes_are_the_vocabularys() -> None:
    """A status added to the vocabulary is one a record may carry, without a second list to forget."""
    assert typing.get_args(record.RecordedStatus) == RECORDED
    assert "cited" in typing.get_args(record.RecordedStatus)
    assert typing.get_args(record.KindName) == KINDS
    assert typing.get_args(record.OutputStatus) == OUTPUT_STATUSES


def test_the_published_schema_is_the_models() -> None:
    committed = json.loads((ROOT / record.SCHEMA_FILE).read_text(encoding="utf-8"))
    assert committed == record.ResultsDocument.model_json_schema(), (
        f"{record.SCHEMA_FILE} differs from verified_book/records/record.py's models: run scripts/results-schema"
    )


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_a_committed_file_is_written_back_byte_for_byte(path: Path) -> None:
    assert dumps(read(path)) == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_the_published_schema_takes_a_committed_file_and_refuses_a_bad_one(path: Path) -> None:
    """A contributor's validator, given the published schema, says what the engine's check says."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / record.SCHEMA_FILE).read_text(encoding="utf-8"))
    validator = jsonschema.validators.validator_for(schema)(schema)
    data = json.loads(path.read_text(encoding="utf-8"))
    validator.validate(data)
    claim_id, per_backend = next(iter(data["records"].items()))
    backend = next(iter(per_backend))
    # the schema judges each record alone, so a file cut to its first record shows what it makes of one
    # (a whole file takes it seconds); the engine, which also checks the records against the run's header,
    # judges the whole file
    validator.validate({**data, "records": {claim_id: {backend: per_backend[backend]}}})
    for field, bad in (("status", "great"), ("figures", [{"file": "/etc/passwd", "line": 1}]), ("extra", 1)):
        made_bad = {**per_backend[backend], field: bad}
        with pytest.raises(jsonschema.ValidationError):
            validator.validate({**data, "records": {claim_id: {backend: made_bad}}})
        changed = {**data, "records": {**data["records"], claim_id: {**per_backend, backend: made_bad}}}
        assert validate(changed, "r.json"), f"the engine takes {field} = {bad!r}, which the schema refuses"


def test_a_record_names_the_place_of_each_problem() -> None:
    data = json.loads(COMMITTED[0].read_text(encoding="utf-8"))
    claim_id, per_backend = next(iter(data["records"].items()))
    backend = next(iter(per_backend))
    data["records"][claim_id][backend]["figures"] = [{"file": "book/x.md", "line": "3", "printed": 3}]
    data["records"][claim_id][backend]["surprise"] = True
    problems = validate(data, "r.json")
    at = f"r.json: records[{claim_id!r}][{backend!r}]: "
    assert f"{at}figures[0]: line '3' is not a positive integer" in problems
    assert f"{at}figures[0]: printed must be a string" in problems
    assert f"{at}surprise is not a field of a results file here" in problems


def test_a_record_built_by_the_engine_refuses_what_a_file_may_not_hold() -> None:
    with pytest.raises(ValueError, match="status\n  is not one of verified, cited"):
        record.Record(status="great")
    with pytest.raises(ValueError, match="exact value 1/3 and float 0.5 disagree"):
        record.Record(status="verified", value={"exact": "1/3", "float": 0.5})
    with pytest.raises(ValueError, match="status is 'verified' while a figure of it is stale"):
        record.Record(status="verified", figures=[record.FigureVerdict(file="book/x.md", line=1, status="stale")])
    assert record.Record(status="verified", value=1).model_dump(exclude_unset=True) == {
        "status": "verified",
        "value": 1,
    }
