"""One bad record costs that record: a results file with bad parts keeps every sound record when a run merges
into it, and each bad part is set aside with its key path and reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from verified_book.records.results import ResultsFile, dumps, merge_into, read

MACHINE = {"slug": "box", "id": "abcd1234abcd", "fingerprint": {"cpu": "AMD EPYC", "cores": 2}, "markers": []}


def _file(count: int, prefix: str = "item") -> ResultsFile:
    return ResultsFile(
        "box",
        MACHINE,
        {"date": "2026-12-01T10:00:00+00:00"},
        {f"{prefix}.r{i}": {"numpy": {"status": "verified", "value": i}} for i in range(count)},
        claims={f"{prefix}.r{i}": {"kind": "library"} for i in range(count)},
    )


def _written(path: Path, count: int, spoil: Any) -> dict[str, Any]:
    data = json.loads(dumps(_file(count)))
    spoil(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    return data


def _merge(path: Path) -> tuple[ResultsFile, list[str]]:
    warnings: list[str] = []
    return merge_into(path, _file(2, prefix="fresh"), warn=warnings.append), warnings


def test_one_misspelt_status_among_hundreds_sets_aside_that_record_alone(tmp_path: Path) -> None:
    path = tmp_path / "box.json"
    _written(path, 717, lambda d: d["records"]["item.r300"]["numpy"].update(status="verifed"))
    merged, warnings = _merge(path)
    assert len(merged.records) == 716 + 2 and "item.r300" not in merged.records
    assert len(read(path).records) == 718
    (side,) = tmp_path.glob("box.json.set-aside-*")
    (part,) = json.loads(side.read_text())
    assert part["at"] == "['records']['item.r300']['numpy']" and part["value"]["status"] == "verifed"
    assert "status" in part["why"] and "verifed" in part["why"]
    (said,) = warnings
    assert said.startswith(f"{path}: 716 records kept, 1 set aside") and side.name in said
    assert f"{path}['records']['item.r300']['numpy']: " in said


def test_a_part_too_large_to_read_sets_aside_its_record_and_the_measurement_with_it(tmp_path: Path) -> None:
    path = tmp_path / "box.json"

    def spoil(data: dict[str, Any]) -> None:
        deep: Any = 1
        for _ in range(40):
            deep = [deep]
        data["records"]["item.r1"]["numpy"]["value"] = deep
        data["records"]["item.r2"]["numpy"]["value"] = {"a": {"b": 1}}
        data["claims"]["item.r3"]["kind"] = "guessed"
        data["claims"]["item.r4"]["kind"] = "measured"  # its value kept in the run header, as a measured one is
        data["run"]["measured"] = {"item.r4": {"numpy": {"value": "x" * 100_000}}}

    _written(path, 5, spoil)
    merged, warnings = _merge(path)
    assert sorted(merged.records) == ["fresh.r0", "fresh.r1", "item.r0", "item.r3"]
    assert "item.r3" not in merged.claims, "a claim's bad metadata goes alone; its records stay"
    assert "2 records kept, 3 set aside (4 parts in all)" in warnings[0], warnings
    assert "item.r4" not in json.loads(path.read_text())["run"].get("measured", {})


def test_a_file_that_is_not_json_is_still_set_aside_whole(tmp_path: Path) -> None:
    path = tmp_path / "box.json"
    path.write_text('{"schema_version": 7, "records": {', encoding="utf-8")
    merged, warnings = _merge(path)
    assert sorted(merged.records) == ["fresh.r0", "fresh.r1"]
    assert len(list(tmp_path.glob("box.json.corrupt-*"))) == 1 and "kept aside" in warnings[0]


def test_a_bad_part_outside_the_records_sets_the_file_aside_whole(tmp_path: Path) -> None:
    path = tmp_path / "box.json"
    _written(path, 5, lambda d: d["machine"].update(markers="all of them"))
    _, warnings = _merge(path)
    assert len(list(tmp_path.glob("box.json.corrupt-*"))) == 1 and "kept aside" in warnings[0]
    assert not list(tmp_path.glob("box.json.set-aside-*"))


def test_a_sound_file_sets_nothing_aside(tmp_path: Path) -> None:
    path = tmp_path / "box.json"
    _written(path, 5, lambda d: None)
    merged, warnings = _merge(path)
    assert len(merged.records) == 7 and warnings == [] and not list(tmp_path.glob("box.json.*-*"))
