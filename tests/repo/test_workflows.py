"""The workflows agree with the book: a runner label for every hardware profile, each machine
verifying its own marker into the artifact the merge checks, results files checked before a site
is built from them; and every push and pull request linted, type-checked and tested, as .ci/run and
pre-commit do it."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from harness.paths import ROOT

from verified_book.engine.machine import profiles

WORKFLOWS = ROOT / ".github" / "workflows"


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
        f"(claims/data/hardware/) are {sorted(profiles())}"
    )


def test_each_machine_verifies_its_own_marker_into_its_artifact() -> None:
    verify = workflow("fleet.yml")["jobs"]["verify"]
    assert verify["runs-on"] == ["self-hosted", "${{ matrix.machine }}"]
    assert verify["strategy"]["fail-fast"] is False, "one machine offline must not cancel the others"
    assert verify["env"]["MACHINE"] == "${{ matrix.machine }}"
    command = next(r for r in runs(verify) if "pytest" in r)
    assert '-m "$MACHINE"' in command
    results_dir = command.split("--results-dir", 1)[1].split()[0]
    upload = uses(verify, "actions/upload-artifact")
    assert upload and upload[0]["with"]["path"] == f"{results_dir}/*.json"
    assert upload[0]["if"] == "always()", "a machine whose figures fail still hands in what it found"


def test_each_machine_publishes_its_own_results_without_waiting_for_the_others() -> None:
    verify = workflow("fleet.yml")["jobs"]["verify"]
    publish = next(step for step in verify["steps"] if "publish-results push" in step.get("run", ""))
    assert "fleet-results/*.json" in publish["run"] and publish["if"].startswith("always()")
    assert "actions/workflows/site.yml/dispatches" in publish["run"], "the machine does not ask for a publication"
    assert verify["permissions"] == {"contents": "write", "actions": "write"}


def test_the_site_is_built_from_the_gathered_results_after_they_are_checked() -> None:
    for name, job in (("fleet.yml", "publish"), ("site.yml", "build")):
        commands = runs(workflow(name)["jobs"][job])
        gathered = next(i for i, r in enumerate(commands) if "publish-results gather --into published-results" in r)
        checked = next(i for i, r in enumerate(commands) if "merge-results --check-only" in r)
        built = next(i for i, r in enumerate(commands) if "mkdocs build --strict" in r)
        assert gathered < checked < built, f"{name}: gather, check, build out of order"
        assert "published-results/*.json" in commands[checked]
        assert "CLAIMS_RESULTS_DIR=published-results" in commands[built]
    publish = workflow("fleet.yml")["jobs"]["publish"]
    assert publish["needs"] == "verify" and "!cancelled()" in publish["if"]


@pytest.mark.parametrize("name", ["site.yml", "fleet.yml"])
def test_a_site_is_built_only_from_checked_results(name: str) -> None:
    for job in workflow(name)["jobs"].values():
        commands = runs(job) if "steps" in job else []
        builds = [i for i, r in enumerate(commands) if "mkdocs build" in r]
        checks = [i for i, r in enumerate(commands) if "scripts/merge-results" in r]
        for build in builds:
            assert checks and min(checks) < build, f"{name}: a site is built before any results file is checked"


def test_every_pages_deployment_shares_one_group_and_none_is_cancelled() -> None:
    fleet = workflow("fleet.yml")["jobs"]["publish"]["concurrency"]
    assert fleet == {"group": "pages", "cancel-in-progress": False}
    site = workflow("site.yml")["concurrency"]
    assert "|| 'pages' }}" in site["group"] and "github.event_name == 'pull_request'" in site["group"]
    assert site["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}", (
        "a push's deployment must never be cancelled; only a pull request's build may be replaced"
    )


SHA = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


@pytest.mark.parametrize("name", ["site.yml", "fleet.yml", "tests.yml"])
def test_actions_are_pinned_credentials_dropped_and_python_recent(name: str) -> None:
    text = (WORKFLOWS / name).read_text(encoding="utf-8")
    for job_name, job in workflow(name)["jobs"].items():
        where = f".github/workflows/{name}: job {job_name}"
        for step in job["steps"]:
            action = step.get("uses")
            if action:
                assert SHA.match(action), f"{where}: {action} is not pinned to a commit"
                assert re.search(re.escape(action) + r" # v\d+\.\d+\.\d+", text), (
                    f"{where}: {action} has no version comment"
                )
            if str(action).startswith("actions/checkout"):
                assert step["with"]["persist-credentials"] is False, f"{where}: checkout keeps its credentials"
            if str(action).startswith("actions/setup-python"):
                major, minor = map(int, step["with"]["python-version"].split(".")[:2])
                assert (major, minor) >= (3, 11), f"{where}: Python {step['with']['python-version']}"
        if any("python" in r for r in runs(job)):
            assert uses(job, "actions/setup-python"), f"{where}: runs Python without setting up 3.11 or newer"


def test_the_fleets_virtual_environment_lives_outside_the_checkout() -> None:
    verify = workflow("fleet.yml")["jobs"]["verify"]
    setup = "\n".join(runs(verify))
    assert "VERIFIED_BOOK_VENV=${RUNNER_TOOL_CACHE}/" in setup and "PIP_CACHE_DIR=${RUNNER_TOOL_CACHE}/" in setup
    assert "$VERIFIED_BOOK_VENV/bin/pytest" in setup


def test_every_runner_label_is_declared_for_actionlint() -> None:
    config = yaml.safe_load((WORKFLOWS.parent / "actionlint.yaml").read_text(encoding="utf-8"))
    assert sorted(config["self-hosted-runner"]["labels"]) == sorted(profiles())


def test_the_tests_workflow_runs_lint_types_and_the_default_run_on_every_push_and_pull_request() -> None:
    tests = workflow("tests.yml")
    triggers = tests.get(True, tests.get("on"))  # YAML 1.1 reads the key `on` as true
    assert {"push", "pull_request"} <= set(triggers), (
        ".github/workflows/tests.yml: not run on every push and pull request"
    )
    assert tests["permissions"] == {"contents": "read"}
    job = tests["jobs"]["check"]
    assert job["runs-on"] == "ubuntu-latest"
    commands = runs(job)
    order = [
        "python run.py setup",
        ".venv/bin/ruff check",
        ".venv/bin/ruff format --check",
        ".venv/bin/mypy",
        ".venv/bin/lint-imports",
        "mkdocs build --strict -f docs/config/mkdocs.yml",
        "python run.py test",
    ]
    places = [next((i for i, r in enumerate(commands) if step in r), -1) for step in order]
    assert -1 not in places, f"tests.yml lacks {[s for s, p in zip(order, places, strict=True) if p == -1]}"
    assert places == sorted(places), f"tests.yml: expected {order} in this order, found {commands}"


def test_ci_runs_lint_and_types_before_the_tests_and_builds_the_docs_strictly() -> None:
    script = (WORKFLOWS.parent.parent / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line for line in script.splitlines() if line and not line.startswith("#")]
    first_test = next(i for i, line in enumerate(commands) if "run.py test" in line)
    for check in (".venv/bin/ruff check", ".venv/bin/ruff format --check", ".venv/bin/mypy", ".venv/bin/lint-imports"):
        place = next((i for i, line in enumerate(commands) if line.startswith(check)), None)
        assert place is not None and place < first_test, f".ci/run: {check} must run before the tests"
    assert any("mkdocs build --strict -f docs/config/mkdocs.yml" in line for line in commands)


def test_pre_commit_runs_the_lock_s_linters_at_pinned_revisions() -> None:
    config = yaml.safe_load((WORKFLOWS.parent.parent / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    hooks = {hook["id"]: repo for repo in config["repos"] for hook in repo["hooks"]}
    assert {"ruff", "ruff-format", "actionlint", "zizmor"} <= set(hooks)
    for hook, repo in hooks.items():
        assert re.fullmatch(r"v\d+\.\d+\.\d+|[0-9a-f]{40}", repo["rev"]), f"{hook}: rev {repo['rev']!r} is not pinned"
    lock = (WORKFLOWS.parent.parent / "requirements" / "lock.txt").read_text(encoding="utf-8")
    for hook, package in (("ruff", "ruff"), ("zizmor", "zizmor")):
        pinned = re.search(rf"^{package}==(\S+)$", lock, re.MULTILINE)
        assert pinned and hooks[hook]["rev"] == f"v{pinned[1]}", (
            f".pre-commit-config.yaml: {hook} at {hooks[hook]['rev']}, the lock has {package}=={pinned and pinned[1]}"
        )
