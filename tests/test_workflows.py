"""The fleet and site workflows agree with the book: a runner label for every hardware profile,
each machine verifying its own marker into the artifact the merge checks, results files checked
before a site is built from them."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from verified_book.machine import profiles

WORKFLOWS = Path(__file__).resolve().parent.parent / ".github" / "workflows"


def workflow(name: str) -> dict[str, Any]:
    path = WORKFLOWS / name
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict), f"{path}: not a workflow mapping"
    return loaded


def runs(job: dict[str, Any]) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def uses(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [step for step in job["steps"] if str(step.get("uses", "")).startswith(action)]


def test_every_hardware_profile_has_a_runner_in_the_fleet() -> None:
    matrix = workflow("fleet.yml")["jobs"]["verify"]["strategy"]["matrix"]["machine"]
    assert sorted(matrix) == sorted(profiles()), (
        f".github/workflows/fleet.yml: the matrix lists {sorted(matrix)}; the book's hardware profiles "
        f"(claims/data/hardware/) are {sorted(profiles())}")


def test_each_machine_verifies_its_own_marker_into_its_artifact() -> None:
    verify = workflow("fleet.yml")["jobs"]["verify"]
    assert verify["runs-on"] == ["self-hosted", "${{ matrix.machine }}"]
    assert verify["strategy"]["fail-fast"] is False, "one machine offline must not cancel the others"
    command = next(r for r in runs(verify) if "pytest" in r)
    assert "-m ${{ matrix.machine }}" in command
    results_dir = command.split("--results-dir", 1)[1].split()[0]
    upload = uses(verify, "actions/upload-artifact")
    assert upload and upload[0]["with"]["path"] == f"{results_dir}/*.json"
    assert upload[0]["if"] == "always()", "a machine whose figures fail still hands in what it found"


def test_the_merge_checks_every_file_before_the_site_is_built() -> None:
    merge = workflow("fleet.yml")["jobs"]["merge"]
    assert merge["needs"] == "verify" and "!cancelled()" in merge["if"]
    commands = runs(merge)
    merged = next(i for i, r in enumerate(commands) if "scripts/merge-results" in r)
    built = next(i for i, r in enumerate(commands) if "mkdocs build --strict" in r)
    assert merged < built
    assert "--check-only" not in commands[merged], "the fleet's merge writes the merged files"


@pytest.mark.parametrize("name", ["site.yml", "fleet.yml"])
def test_a_site_is_built_only_from_checked_results(name: str) -> None:
    for job in workflow(name)["jobs"].values():
        commands = runs(job) if "steps" in job else []
        builds = [i for i, r in enumerate(commands) if "mkdocs build" in r]
        checks = [i for i, r in enumerate(commands) if "scripts/merge-results" in r]
        for build in builds:
            assert checks and min(checks) < build, f"{name}: a site is built before any results file is checked"
