"""A machine is its hardware over time: hardware it had before takes back its identity, and a GPU that is only
missing this run changes nothing; the suite never touches the reader's identity file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from verified_book.records import identity
from verified_book.records.results import ResultsFile, merge_into, read, same_machine

CPU = {"cpu": "AMD EPYC 9654", "arch": "x86_64", "cores": 2, "memory_gb": 8.0}
CARD = {**CPU, "gpu": "NVIDIA GeForce RTX 5080", "gpu_memory_gb": 16.6, "compute_capability": "12.0"}
OTHER_CARD = {**CPU, "gpu": "NVIDIA GeForce RTX 5090", "gpu_memory_gb": 31.8, "compute_capability": "12.0"}


def test_a_gpu_missing_for_one_run_keeps_the_machine_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "machine.json"
    made, _ = identity.this_machine("nvidia-geforce-rtx-5080", CARD, path)
    written = path.read_bytes()
    without, notice = identity.this_machine("cpu-x86_64-2c", CPU, path)
    assert (without.name, without.id) == (made.name, made.id)
    assert notice is not None and notice.startswith("no GPU this run") and made.name in notice
    assert path.read_bytes() == written, "a GPU that is only absent neither mints nor retires an identity"
    back, quiet = identity.this_machine("nvidia-geforce-rtx-5080", CARD, path)
    assert (back.name, back.id, quiet) == (made.name, made.id, None)


def test_hardware_had_before_takes_back_its_identity(tmp_path: Path) -> None:
    path = tmp_path / "machine.json"
    first, _ = identity.this_machine("nvidia-geforce-rtx-5080", CARD, path)
    second, changed = identity.this_machine("nvidia-geforce-rtx-5090", OTHER_CARD, path)
    assert second.id != first.id and changed is not None and "hardware changed" in changed
    back, notice = identity.this_machine("nvidia-geforce-rtx-5080", CARD, path)
    assert (back.name, back.id) == (first.name, first.id)
    assert notice is not None and f"it is {first.name} again" in notice
    kept = identity.read(path)
    assert [p["id"] for p in kept.previous] == [second.id], "each identity is listed once, the current one not"
    again, _ = identity.this_machine("nvidia-geforce-rtx-5090", OTHER_CARD, path)
    assert (again.name, again.id) == (second.name, second.id)


def test_a_new_cpu_is_no_absence(tmp_path: Path) -> None:
    path = tmp_path / "machine.json"
    made, _ = identity.this_machine("nvidia-geforce-rtx-5080", CARD, path)
    other, notice = identity.this_machine("cpu-x86_64-4c", {**CPU, "cores": 4}, path)
    assert other.id != made.id and notice is not None and "hardware changed" in notice
    assert identity.absent(CARD, CPU) == ["gpu", "gpu_memory_gb", "compute_capability"]
    assert identity.absent(CARD, {**CPU, "cores": 4}) == [] and identity.absent(CPU, CARD) == []


def _run(machine_id: str, hardware: dict[str, Any], status: str = "verified") -> ResultsFile:
    return ResultsFile(
        "box",
        {"slug": "box", "id": machine_id, "fingerprint": hardware, "markers": []},
        {"date": "2026-12-01T10:00:00+00:00"},
        {"basic.ratio": {"none": {"status": status, "value": 16.6}}},
        claims={"basic.ratio": {"kind": "exact"}},
    )


def test_a_run_without_its_gpu_merges_into_its_machines_file_which_keeps_the_gpu(tmp_path: Path) -> None:
    path = tmp_path / "box.json"
    merge_into(path, _run("abcd1234abcd", CARD))
    assert same_machine(read(path), _run("abcd1234abcd", CPU)) is None
    merge_into(path, _run("abcd1234abcd", CPU))
    assert read(path).machine.fingerprint["gpu"] == CARD["gpu"]
    assert same_machine(read(path), _run("abcd1234abcd", OTHER_CARD)) is not None


def test_the_suite_keeps_its_own_identity_and_never_changes_the_readers(own_machine_and_state: dict[str, Any]) -> None:
    """Every run the suite starts names its machine from the suite's own identity file, in this process and in
    one of its own; the reader's file is byte for byte as it was."""
    real: Path = own_machine_and_state["real"]
    assert identity.default_path() != real
    made, _ = identity.this_machine("cpu-x86_64-2c", {"cpu": "Other CPU", "cores": 3})
    spawned = subprocess.run(
        [sys.executable, "-c", "from verified_book.records import identity; print(identity.default_path())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(spawned.stdout.strip()) == identity.default_path()
    assert identity.read(identity.default_path()).id == made.id
    assert (real.read_bytes() if real.exists() else None) == own_machine_and_state["before"]
