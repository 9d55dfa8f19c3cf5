"""Results that stay true from any reader's machine: a broken environment is not a failed claim, a
machine has an identity of its own, and a run that could not keep its records says so and fails."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest
from harness import faults
from harness.paths import ROOT

from verified_book.engine import environment
from verified_book.records import identity
from verified_book.records.results import (
    SCHEMA_VERSION,
    OtherMachine,
    ResultsError,
    ResultsFile,
    dumps,
    machine_id,
    merge_into,
    migrate,
    read,
)
from verified_book.site import machines as site_machines

INFO = {"cpu": "AMD EPYC", "arch": "x86_64", "cores": 2, "memory_gb": 25.3, "gpu": None, "numpy": "2.4.6"}


# ---------------------------------------------------------------- a broken environment


def _raised(error: BaseException) -> BaseException:
    try:
        raise error
    except BaseException as e:  # noqa: BLE001 - the exception as a claim would raise it, with its traceback
        return e


@pytest.mark.parametrize(
    ("error", "lost"),
    [
        (ModuleNotFoundError("No module named 'gguf'", name="gguf"), "gguf"),
        (ModuleNotFoundError("No module named 'mlx.nn'", name="mlx.nn"), "mlx"),
        (importlib.metadata.PackageNotFoundError("httpx2"), "httpx2"),
    ],
)
def test_an_import_that_breaks_is_the_environment_not_the_claim(error: BaseException, lost: str) -> None:
    broken = environment.broken_by(_raised(error))
    assert broken is not None and broken.lost == lost
    assert (
        broken.line().startswith(f"the environment lost {lost} during the run") and environment.REMEDY in broken.line()
    )


def test_an_import_error_behind_another_error_is_found() -> None:
    try:
        try:
            raise ModuleNotFoundError("No module named 'transformers'", name="transformers")
        except ImportError as inner:
            raise RuntimeError("the model could not be built") from inner
    except RuntimeError as outer:
        broken = environment.broken_by(outer)
    assert broken is not None and broken.lost == "transformers"


@pytest.mark.parametrize(
    "error", [ValueError("a wrong shape"), ZeroDivisionError("division by zero"), KeyError("bf16")]
)
def test_a_claims_own_error_is_not_the_environment(error: BaseException) -> None:
    assert environment.broken_by(_raised(error)) is None


def test_a_script_s_traceback_tells_a_lost_library_from_its_own_fault() -> None:
    lost = (
        'Traceback (most recent call last):\n  File "shapes.py", line 3\n'
        "ModuleNotFoundError: No module named 'numpy'\n"
    )
    assert (environment.broken_in(lost) or environment.Broken("", "")).lost == "numpy"
    assert environment.broken_in("Traceback ...\nValueError: matmul: Input operand 1 has a mismatch\n") is None


def test_contribute_refuses_a_run_whose_environment_broke(tmp_path: Path) -> None:
    from verified_book.engine.merge import problems_of

    data = json.loads((ROOT / "results" / next(p.name for p in (ROOT / "results").glob("*.json"))).read_text())
    data["run"]["environment_errors"] = [
        environment.Broken("gguf", "ModuleNotFoundError: No module named 'gguf'").line()
    ]
    path = tmp_path / f"{data['slug']}.json"
    path.write_text(json.dumps(data))
    from verified_book.engine.config import open_book, read_config

    book = open_book(read_config(ROOT))
    with book.opened():
        results, problems = problems_of(path, set(book.registry.ids()))
    assert results is None and any("did not check everything, because the environment lost gguf" in p for p in problems)


# ---------------------------------------------------------------- a machine's identity


def test_a_machine_is_named_once_and_keeps_its_name(tmp_path: Path) -> None:
    path = tmp_path / "config" / "machine.json"
    made, notice = identity.this_machine("cpu-x86_64-2c", INFO, path)
    assert made.name.startswith("cpu-x86_64-2c-") and len(made.name) == len("cpu-x86_64-2c-") + 4
    assert notice is not None and str(path) in notice
    again, quiet = identity.this_machine("cpu-x86_64-2c", {**INFO, "numpy": "2.5.0", "memory_gb": 25.1}, path)
    assert (again.name, again.id, quiet) == (made.name, made.id, None), "a new library version is not a new machine"


def test_new_hardware_is_a_new_machine_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "machine.json"
    old, _ = identity.this_machine("cpu-x86_64-2c", INFO, path)
    card = {**INFO, "gpu": "NVIDIA GeForce RTX 5080", "gpu_memory_gb": 16.6, "compute_capability": "12.0"}
    new, notice = identity.this_machine("nvidia-geforce-rtx-5080", card, path)
    assert new.id != old.id and new.name.startswith("nvidia-geforce-rtx-5080-")
    assert notice is not None and "hardware changed" in notice and "gpu None → NVIDIA GeForce RTX 5080" in notice
    assert identity.read(path).previous[0]["id"] == old.id


def test_a_bad_identity_file_is_said_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "machine.json"
    path.write_text('{"name": "Bad Name!", "id": "x"}')
    with pytest.raises(identity.IdentityError, match=str(path)):
        identity.this_machine("cpu", INFO, path)


def _file(slug: str, machine: dict[str, Any]) -> ResultsFile:
    return ResultsFile(
        slug,
        {"slug": slug, "markers": [], **machine},
        {"date": "2026-12-01T10:00:00+00:00"},
        {
            "basic.ratio": {
                "none": {
                    "status": "verified",
                    "value": "273/16",
                    "figures": [],
                    "message": "",
                    "inputs": [],
                    "version": None,
                }
            }
        },
    )


def test_two_machines_never_share_a_results_file(tmp_path: Path) -> None:
    path = tmp_path / "box.json"
    merge_into(path, _file("box", {"id": "aaaa1111", "fingerprint": INFO}))
    before = path.read_bytes()
    with pytest.raises(OtherMachine) as refused:
        merge_into(path, _file("box", {"id": "bbbb2222", "fingerprint": INFO}))
    assert "aaaa1111" in str(refused.value) and "bbbb2222" in str(refused.value) and "AMD EPYC" in str(refused.value)
    assert path.read_bytes() == before
    merge_into(path, _file("box", {"id": "aaaa1111", "fingerprint": {**INFO, "numpy": "2.5.0"}}))  # the same machine
    other_card = {**INFO, "gpu": "NVIDIA H100"}
    with pytest.raises(OtherMachine, match="other hardware"):
        merge_into(path, _file("box", {"id": "aaaa1111", "fingerprint": other_card}))


def test_a_file_from_before_identities_migrates_to_the_same_id_every_time() -> None:
    committed = next((ROOT / "results").glob("*.json"))
    data = json.loads(committed.read_text(encoding="utf-8"))
    data.pop("schema_version", None) if data.get("schema_version") == SCHEMA_VERSION else None
    old = {**data, "schema_version": 2, "machine": {k: v for k, v in data["machine"].items() if k != "id"}}
    first, second = migrate(json.loads(json.dumps(old)), "a"), migrate(json.loads(json.dumps(old)), "b")
    assert first["schema_version"] == SCHEMA_VERSION and first["machine"]["id"] == second["machine"]["id"]
    assert first["machine"]["id"].startswith("legacy-")


def test_the_committed_machines_have_identities() -> None:
    for path in sorted((ROOT / "results").glob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        assert raw["schema_version"] == SCHEMA_VERSION and raw["machine"].get("id"), f"{path.name} names no machine id"
        assert machine_id(read(path)) == raw["machine"]["id"]


def test_a_bad_machine_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="is not a machine id"):  # refused where it is built
        _file("box", {"id": "../etc", "fingerprint": INFO})
    data = _file("box", {"id": "aaaa1111", "fingerprint": INFO}).to_dict()
    data["machine"]["id"] = "../etc"
    (tmp_path / "box.json").write_text(json.dumps(data))
    with pytest.raises(ResultsError, match="is not a machine id"):  # and where it is read
        read(tmp_path / "box.json")
    (tmp_path / "box.json").unlink()
    assert not (tmp_path / "box.json").exists()
    assert '"id"' in dumps(_file("box", {"id": "aaaa1111"}))


# ---------------------------------------------------------------- the machines page


def test_the_machines_page_tells_this_clone_s_run_from_the_committed_machine() -> None:
    from verified_book.book.bindings import Book

    committed = _file("box", {"id": "aaaa1111", "fingerprint": INFO})
    mine = site_machines.local_name("box")
    page = site_machines.render_machines(
        {"box": committed, mine: _file("box", {"id": "aaaa1111", "fingerprint": INFO})},
        Book(ROOT, [], []),
        ["basic.ratio"],
        {},
        local={mine: "results.local/box.json"},
    )
    html = "".join(page.blocks.values())
    assert f"## {site_machines.markdown_text(mine)}" in page.markdown and "## box " in page.markdown
    assert html.count("this clone's run, not contributed") == 1 and "results.local/box.json" in html
    assert html.count("data-local") == 3, "the overview row, its label and the section's note mark the clone's run"


# ---------------------------------------------------------------- the faults, injected


@pytest.mark.slow
@pytest.mark.parametrize(
    "scenario",
    [
        "library_fails_to_import",
        "venv_removed_mid_run",
        "unwritable_results",
        "bad_record_among_hundreds",
        "gpu_lost_and_regained",
        "second_machine",
    ],
)
def test_each_fault_ends_as_stated_and_no_record_is_replaced_by_a_worse_one(scenario: str, tmp_path: Path) -> None:
    tally = getattr(faults, scenario)(tmp_path)
    assert tally.ok, str(tally)


@pytest.mark.slow
def test_a_migrated_results_file_renders_the_same_site(tmp_path: Path) -> None:
    """The committed results as schema 2 wrote them, and as schema 3 rewrites them with the machine's
    identity, build the same site, byte for byte."""
    import filecmp
    import os
    import subprocess
    import sys

    committed = next((ROOT / "results").glob("*.json"))
    old = json.loads(committed.read_text(encoding="utf-8"))
    old["schema_version"], old["machine"] = 2, {k: v for k, v in old["machine"].items() if k != "id"}
    folders = {name: tmp_path / name for name in ("schema2", "schema3")}
    for folder in folders.values():
        folder.mkdir()
    (folders["schema2"] / committed.name).write_text(json.dumps(old), encoding="utf-8")
    (folders["schema3"] / committed.name).write_text(dumps(read(folders["schema2"] / committed.name)), encoding="utf-8")
    assert json.loads((folders["schema3"] / committed.name).read_text())["machine"]["id"].startswith("legacy-")
    for name, folder in folders.items():
        done = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "-q", "-d", str(tmp_path / f"site-{name}")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            env={
                **os.environ,
                "NO_MKDOCS_2_WARNING": "1",
                "CLAIMS_RESULTS_DIR": str(folder),
                "CLAIMS_TODAY": "2026-12-02",
            },
        )
        assert done.returncode == 0, done.stderr[-2000:]
    differ = []

    def compare(c: filecmp.dircmp[str]) -> None:
        differ.extend(c.diff_files + c.left_only + c.right_only)
        for sub in c.subdirs.values():
            compare(sub)

    compare(filecmp.dircmp(tmp_path / "site-schema2", tmp_path / "site-schema3"))
    assert differ == [], f"the sites differ in {differ}"


def test_a_contended_measurement_does_not_replace_a_quiet_one() -> None:
    quiet = {
        "status": "verified",
        "value": 14.1,
        "figures": [],
        "message": "",
        "inputs": [],
        "version": "2.4.6",
        "conditions": {"load_before": 0.3, "load_after": 0.5, "cores": 2, "beside": None},
    }
    busy = {
        **quiet,
        "value": 8.1,
        "conditions": {"load_before": 0.3, "load_after": 0.5, "cores": 2, "beside": "pid 42 (verify)"},
    }
    mine = ResultsFile(
        "box",
        records={"probe.bandwidth.copy": {"numpy": quiet}},
        run={"dates": {"probe.bandwidth.copy": {"numpy": "2026-12-01T10:00:00+00:00"}}},
    )
    mine.merge(
        ResultsFile(
            "box",
            records={"probe.bandwidth.copy": {"numpy": busy}},
            run={"dates": {"probe.bandwidth.copy": {"numpy": "2026-12-02T10:00:00+00:00"}}},
        )
    )
    assert mine.records["probe.bandwidth.copy"]["numpy"].value == 14.1
    assert mine.date_of("probe.bandwidth.copy", "numpy") == "2026-12-01T10:00:00+00:00", (
        "the quiet record keeps its date"
    )
    mine.merge(ResultsFile("box", records={"probe.bandwidth.copy": {"numpy": {**quiet, "value": 15.0}}}))
    assert mine.records["probe.bandwidth.copy"]["numpy"].value == 15.0, "a quiet one replaces it as before"


def test_contribute_into_a_folder_it_cannot_write_fails_and_keeps_the_file(tmp_path: Path) -> None:
    from verified_book.engine import merge
    from verified_book.engine.config import read_config

    source = tmp_path / "local"
    source.mkdir()
    committed = next((ROOT / "results").glob("*.json"))
    mine = source / committed.name
    mine.write_bytes(committed.read_bytes())
    blocked = tmp_path / "results"
    blocked.write_text("a file where the results folder should be\n")
    code = merge.main([str(mine), "--into", str(blocked)], book=read_config(ROOT))
    assert code != 0 and mine.read_bytes() == committed.read_bytes()


def test_where_the_records_would_go_is_checked_before_anything_is_computed(tmp_path: Path) -> None:
    """A --results-dir that cannot hold a folder, or a --machine no results file can carry, is refused at the
    start: found at the end, the run's records would be lost."""
    book = faults.SampleBook.basic(tmp_path / "book")
    (book.root / "notes.txt").write_text("a file, not a folder\n")
    refused = {
        ("--results-dir", "notes.txt"): "ERROR: --results-dir notes.txt: is a file; expected a folder to write this "
        "machine's <machine>.json in (made where missing)",
        ("--results-dir", "notes.txt/records"): f"ERROR: --results-dir notes.txt/records: {book.root / 'notes.txt'} "
        "is a file, so no folder can be made under it",
        ("--machine", "../elsewhere"): "ERROR: --machine ../elsewhere: expected a safe machine name (lower-case "
        "letters, digits, '-', '_'), starting with a letter or digit",
    }
    for arguments, said in refused.items():
        run = book.run(*arguments)
        assert run.ret == pytest.ExitCode.USAGE_ERROR and said in run.output, run.output[-3000:]
        assert " passed" not in run.output and not book.results_dir.exists(), "nothing ran, nothing was written"
    assert book.run("--no-results", "--results-dir", "notes.txt").ret == 0, "with no results written, no folder"
    kept = book.run("--results-dir", "records/here", "--machine", "lab-2")
    assert kept.ret == 0 and (book.root / "records" / "here" / "lab-2.json").is_file()
