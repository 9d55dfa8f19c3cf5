"""The results store: merging keeps every record, writes are atomic, bad files are refused loudly."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from verified_book.records import fleet
from verified_book.records.fleet import read_all
from verified_book.records.results import (
    SCHEMA_VERSION,
    ResultsError,
    ResultsFile,
    merge_into,
    read,
    validate,
)


def _file(slug: str, **records: str) -> ResultsFile:
    return ResultsFile(
        slug,
        machine={"slug": slug},
        run={"date": "2026-11-29T00:00:00+00:00"},
        records={cid: {"numpy": {"status": status, "value": 1.0, "figures": []}} for cid, status in records.items()},
    )


def test_two_subsets_leave_one_file_with_both(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    merge_into(path, _file("m", **{"a.one": "verified"}))
    merge_into(path, _file("m", **{"b.two": "stale"}))
    merged = read(path)
    assert set(merged.records) == {"a.one", "b.two"}
    assert merged.records["b.two"]["numpy"].status == "stale"


def test_a_later_run_replaces_only_its_own_records(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    merge_into(path, _file("m", **{"a.one": "verified", "b.two": "verified"}))
    merge_into(path, _file("m", **{"a.one": "stale"}))
    merged = read(path)
    assert merged.records["a.one"]["numpy"].status == "stale"
    assert merged.records["b.two"]["numpy"].status == "verified"


def test_files_are_stable_for_diffs(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    merge_into(path, _file("m", **{"b.two": "verified", "a.one": "verified"}))
    text = path.read_text()
    data = json.loads(text)
    assert data["schema_version"] == SCHEMA_VERSION
    assert text == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_a_corrupt_file_is_kept_aside_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text('{"schema_version": 1, "records": {')
    warnings: list[str] = []
    merge_into(path, _file("m", **{"a.one": "verified"}), warn=warnings.append)
    aside = list(tmp_path.glob("m.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text().startswith('{"schema_version": 1')
    assert "not valid JSON" in warnings[0] and str(path) in warnings[0]
    assert set(read(path).records) == {"a.one"}


def test_a_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    original = json.dumps({"schema_version": SCHEMA_VERSION + 1, "slug": "m", "records": {}})
    path.write_text(original)
    with pytest.raises(ResultsError, match="update the project"):
        merge_into(path, _file("m", **{"a.one": "verified"}))
    assert path.read_text() == original


def test_an_older_schema_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(
        json.dumps({"slug": "m", "records": [{"claim": "a.one", "backend": "numpy", "status": "verified", "value": 2}]})
    )
    migrated = read(path)
    assert {
        c: {b: r.model_dump(exclude_unset=True) for b, r in per.items()} for c, per in migrated.records.items()
    } == {"a.one": {"numpy": {"status": "verified", "value": 2}}}


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda d: d.update(slug="../../etc/passwd"), "not a safe machine name"),
        (lambda d: d["records"]["a.one"]["numpy"].update(status="great"), "is not one of"),
        (lambda d: d["records"]["a.one"].update({"gpu:9": {"status": "verified"}}), "unknown backend"),
        (lambda d: d["records"].update({"no.such.claim": {}}), "names no claim"),
        (lambda d: d.update(records=[]), "'records' must be an object"),
        (lambda d: d.update(outputs={"shapes.py": {"text": "", "seconds": -1}}), "not a plausible duration"),
        (lambda d: d.update(outputs={"shapes.py": {"text": "", "how": "by hand"}}), "not 'script' or 'in process'"),
        (lambda d: d.update(outputs={"../x.py": {"text": ""}}), "not a snippet file name"),
    ],
)
def test_validation_names_each_problem(mutate, problem: str) -> None:
    data = _file("m", **{"a.one": "verified"}).to_dict()
    mutate(data)
    problems = validate(data, "results/m.json", known_claims={"a.one"})
    assert any(problem in p for p in problems), problems
    assert all(p.startswith("results/m.json") for p in problems)


def test_readers_warn_and_skip_a_bad_file(tmp_path: Path) -> None:
    merge_into(tmp_path / "good.json", _file("good", **{"a.one": "verified"}))
    (tmp_path / "bad.json").write_text("not json")
    warnings: list[str] = []
    found = read_all(tmp_path, warnings.append)
    assert list(found) == ["good"]
    assert len(warnings) == 1 and "bad.json:1" in warnings[0]


def test_a_rerun_that_changes_nothing_but_the_measurements_changes_only_the_run_header(tmp_path: Path) -> None:
    """What a rerun changes by its nature (the date, timings, measured values, what the snippets
    printed) is in the run header; the verdicts below it stay byte for byte."""

    def run(measured: float, date: str) -> ResultsFile:
        return ResultsFile(
            "m",
            machine={"slug": "m"},
            run={"date": date, "seconds": {"a.one": {"numpy": measured / 100}}},
            claims={"a.one": {"kind": "exact"}, "b.probe": {"kind": "measured"}},
            records={
                "a.one": {"numpy": {"status": "verified", "value": 2, "figures": [], "message": ""}},
                "b.probe": {
                    "numpy": {
                        "status": "reference",
                        "value": measured,
                        "figures": [],
                        "message": f"this machine measured {measured}",
                    }
                },
            },
            outputs={"lab.py": {"text": f"took {measured} s\n"}},
        )

    path = tmp_path / "m.json"
    merge_into(path, run(1.5, "2026-11-29T00:00:00+00:00"))
    first = json.loads(path.read_text())
    merge_into(path, run(2.5, "2026-11-30T00:00:00+00:00"))
    second = json.loads(path.read_text())
    assert {k for k in first if first[k] != second[k]} == {"run"}
    assert second["run"]["measured"]["b.probe"]["numpy"] == {"value": 2.5, "message": "this machine measured 2.5"}
    again = read(path)
    assert again.records["b.probe"]["numpy"].value == 2.5 and again.outputs["lab.py"].text == "took 2.5 s\n"


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files `read` parsed and checked, in order (a file taken back from `kept_in` is not among them)."""
    from verified_book.records import results

    checked: list[Path] = []
    check = results.check_bytes
    monkeypatch.setattr(
        results, "check_bytes", lambda raw, path, known: checked.append(path) or check(raw, path, known)
    )
    return checked


def test_a_sound_file_read_again_unchanged_is_taken_back_not_checked_again(tmp_path: Path, checks: list[Path]) -> None:
    path, kept = tmp_path / "m.json", tmp_path / "kept"
    merge_into(path, _file("m", **{"a.one": "verified"}))
    first = read(path, kept_in=kept)
    again = read(path, kept_in=kept)
    assert again == first == read(path)
    assert checks == [path, path], "the second read with kept_in checked nothing"
    assert read_all(tmp_path, pytest.fail, kept_in=kept) == {"m": first}
    assert len(checks) == 2


def test_a_fleet_larger_than_the_keep_limit_is_taken_back_whole(
    tmp_path: Path, checks: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read again, every file of a fleet is taken back: a folder that kept only the last `KEEP_CHECKED` files read
    would let go of the first ones read, and each read in the same order would check every file again."""
    from verified_book.records import results

    monkeypatch.setattr(results, "KEEP_CHECKED", 2)
    monkeypatch.setattr(fleet, "_checking_ahead", lambda *args: contextlib.nullcontext({}))  # checked one by one
    folder, kept = tmp_path / "fleet", tmp_path / "kept"
    folder.mkdir()
    for slug in ("a", "b", "c", "d", "e"):
        merge_into(folder / f"{slug}.json", _file(slug, **{"a.one": "verified"}))
    first = read_all(folder, pytest.fail, kept_in=kept)
    assert len(checks) == 5 and len(list(kept.glob("*.pickle"))) == 5
    assert read_all(folder, pytest.fail, kept_in=kept) == first
    assert len(checks) == 5, "the second read checked files again"


def test_files_not_kept_yet_are_checked_side_by_side_and_read_as_one_by_one(tmp_path: Path, checks: list[Path]) -> None:
    """Where there are cores to spare, the files not kept yet are checked in worker processes first; what the read
    returns and says of a bad file is what reading them one by one returns and says."""
    import os

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: nothing is checked ahead")
    folder, kept = tmp_path / "fleet", tmp_path / "kept"
    folder.mkdir()
    for slug in ("a", "b", "c"):
        merge_into(folder / f"{slug}.json", _file(slug, **{"a.one": "verified"}))
    (folder / "bad.json").write_text('{"schema_version": 1, "slug": 3}', encoding="utf-8")
    said: list[str] = []
    found = read_all(folder, said.append, kept_in=kept)
    assert checks == [folder / "bad.json"], "the sound files were checked in the workers, and taken back here"
    alone: list[str] = []
    assert found == read_all(folder, alone.append) and said == alone and "bad.json" in said[0]
    assert len(list(kept.glob("*.pickle"))) == 3


def test_a_script_read_from_standard_input_reads_its_fleet_without_noise(tmp_path: Path) -> None:
    """A worker starts by running the caller's main module again; a script piped to Python has none on disk, so its
    files are checked one by one, with nothing said on standard error."""
    import subprocess
    import sys

    folder, kept = tmp_path / "fleet", tmp_path / "kept"
    folder.mkdir()
    for slug in ("a", "b", "c"):
        merge_into(folder / f"{slug}.json", _file(slug, **{"a.one": "verified"}))
    script = (
        "from pathlib import Path\n"
        "from verified_book.records.fleet import read_all\n"
        f"print(sorted(read_all(Path({str(folder)!r}), print, kept_in=Path({str(kept)!r}))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-"], input=script, capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert (done.returncode, done.stderr, done.stdout) == (0, "", "['a', 'b', 'c']\n")


def test_where_no_worker_starts_each_file_is_checked_as_it_is_read(
    tmp_path: Path, checks: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:

    def no_processes(method: str) -> None:
        raise OSError(38, "no processes here")

    monkeypatch.setattr(fleet.multiprocessing, "get_context", no_processes)
    folder, kept = tmp_path / "fleet", tmp_path / "kept"
    folder.mkdir()
    for slug in ("a", "b", "c"):
        merge_into(folder / f"{slug}.json", _file(slug, **{"a.one": "verified"}))
    assert sorted(read_all(folder, pytest.fail, kept_in=kept)) == ["a", "b", "c"]
    assert sorted(p.name for p in checks) == ["a.json", "b.json", "c.json"]


def test_what_a_kept_file_was_checked_by_moving_checks_it_again(
    tmp_path: Path, checks: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from verified_book.records import results

    path, kept = tmp_path / "m.json", tmp_path / "kept"
    merge_into(path, _file("m", **{"a.one": "verified"}))
    read(path, kept_in=kept)
    read(path, known_claims={"a.one"}, kept_in=kept)  # checked against the book's claims
    with pytest.raises(ResultsError, match="names no claim of this book"):
        read(path, known_claims={"b.two"}, kept_in=kept)
    monkeypatch.setattr(results, "checking_code", lambda: "another version of the checks")
    read(path, kept_in=kept)
    assert len(checks) == 4


def test_a_changed_or_renamed_file_is_checked_as_it_is_now(tmp_path: Path, checks: list[Path]) -> None:
    path, kept = tmp_path / "m.json", tmp_path / "kept"
    merge_into(path, _file("m", **{"a.one": "verified"}))
    read(path, kept_in=kept)
    text = path.read_text()
    path.write_text(text.replace('"verified"', '"not a status"', 1))
    with pytest.raises(ResultsError, match="m.json"):
        read(path, kept_in=kept)
    path.write_text(text)
    renamed = tmp_path / "other.json"
    renamed.write_text(text)  # the bytes a sound file had, under another machine's name
    with pytest.raises(ResultsError, match="holds the results of machine 'm'"):
        read(renamed, kept_in=kept)
    assert len(list(kept.glob("*.pickle"))) == 1, "only the sound file is kept"


def test_an_unreadable_kept_file_is_checked_again(tmp_path: Path, checks: list[Path]) -> None:
    path, kept = tmp_path / "m.json", tmp_path / "kept"
    merge_into(path, _file("m", **{"a.one": "verified"}))
    first = read(path, kept_in=kept)
    (kept_file,) = kept.glob("*.pickle")
    kept_file.write_bytes(b"\x80 not a pickle")
    assert read(path, kept_in=kept) == first
    assert len(checks) == 2


def test_the_checking_code_takes_in_every_engine_module_the_checks_import() -> None:
    """A status added to the vocabulary, or a backend's name, changes what a sound file is: a file kept as
    sound under the old words is checked again."""
    import re

    from verified_book.records import results

    results.checking_code.cache_clear()
    named = set(re.findall(r"^(verified_book[\w.]*)$", results.checking_code(), re.MULTILINE))
    assert {
        "verified_book.records.record",
        "verified_book.records.results",
        "verified_book.vocabulary",
        "verified_book.backends",
        "verified_book.book.snippet_output",
        "verified_book.errors",
    } <= named


def test_nothing_is_kept_while_the_checks_source_changed_since_this_process_started(
    tmp_path: Path, checks: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that loaded the checks before their file was edited cannot name the code it runs: it checks
    every file, and keeps none."""
    from verified_book.records import kept, results

    path, kept_folder = tmp_path / "m.json", tmp_path / "kept"
    merge_into(path, _file("m", **{"a.one": "verified"}))
    monkeypatch.setattr(kept, "_LOADED_AT", 0.0)
    results.checking_code.cache_clear()
    try:
        read(path, kept_in=kept_folder)
        read(path, kept_in=kept_folder)
    finally:
        results.checking_code.cache_clear()
    assert len(checks) == 2
    assert not kept_folder.exists()
