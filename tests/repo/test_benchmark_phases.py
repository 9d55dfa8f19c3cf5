"""The benchmark's account of a run: each item under its heading, and the least a split could take."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from harness import faults

from benchmarks import phases as phases_plugin
from benchmarks import run as bench

CLAIMS = '''\
from verified_book.authoring.registry import claim


@claim("work.plain.{i}", kind="exact", over={"i": (0, 1)})
def plain(i):
    """Arithmetic: any worker, any time."""
    return i


@claim("work.timed", kind="measured", backends=("numpy",))
def timed(backend):
    """Stands for a probe: held back to run alone, and busy for a fifth of a CPU second."""
    import time

    started = time.process_time()
    while time.process_time() - started < 0.2:
        pass
    return 1
'''

MACHINERY = """\
def test_machinery():
    pass
"""


def test_each_item_is_counted_under_its_heading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    book = faults.SampleBook(tmp_path / "phases")
    book.claims("work", CLAIMS)
    book.page("page.md", "Zero is [0](claim:work.plain.0), one [1](claim:work.plain.1) and [1](claim:work.timed).\n")
    (book.root / "tests" / "test_machinery.py").write_text(MACHINERY)
    out = tmp_path / "phases.json"
    monkeypatch.setenv(phases_plugin.OUT_ENV, str(out))
    run = book.run("-p", "benchmarks.phases", "--no-results")
    assert run.ret == 0, run.output[-2000:]
    recorded = json.loads(out.read_text(encoding="utf-8"))
    counts = {name: row["items"] for name, row in recorded["items"].items()}
    # timed: the claim on numpy and its figure; book: two exact claims, two figures, the page's
    # unbound-number check; machinery: the plain test and the sample's topic-loading test
    assert counts == {"timed": 2, "book": 5, "machinery": 2}
    slowest = recorded["items"]["timed"]["slowest"]
    assert [nodeid for nodeid, _ in slowest] and all("work.timed" in nodeid for nodeid, _ in slowest)
    assert [s for _, s in slowest] == sorted((s for _, s in slowest), reverse=True)
    stamps = recorded["stamps"]
    assert stamps["session_start"] <= stamps["collected"] <= stamps["session_finish"]
    cpu = {name: row["cpu_seconds"] for name, row in recorded["items"].items()}
    assert cpu["timed"] >= 0.2, f"the timed claim's busy fifth of a second is counted under its heading: {cpu}"
    assert cpu["book"] < 0.2, f"and under no other: {cpu}"


def test_the_floor_runs_the_timed_part_alone_and_shares_out_every_other_cpu_second() -> None:
    recorded = {
        "stamps": {"session_start": 104.0, "collected": 105.0, "session_finish": 131.0},
        "items": {
            "timed": {"items": 3, "seconds": 10.0, "cpu_seconds": 12.0},
            "book": {"items": 9, "seconds": 8.0, "cpu_seconds": 8.0},
            "machinery": {"items": 4, "seconds": 6.0, "cpu_seconds": 6.0},
        },
    }
    out = bench.phases(recorded, launched=100.0, ended=132.0, cores=2, cpu_seconds=40.0)
    assert out["seconds"] == {
        "start_up": 4.0,
        "collection": 1.0,
        "timed_items": 10.0,
        "book_items": 8.0,
        "machinery_items": 6.0,
        "between_items": 2.0,
        "close": 1.0,
    }
    # 40 CPU seconds in all (a snippet's child among them), 12 of them in the timed items' 10 s, which run
    # alone; the other 28 could at best be shared by two cores
    assert out["cpu_seconds"] == {"all": 40.0, "timed_items": 12.0}
    assert out["floor_seconds"] == 24.0
    assert bench.phases(recorded, launched=100.0, ended=132.0, cores=1, cpu_seconds=40.0)["floor_seconds"] == 38.0
    assert "floor_seconds" not in bench.phases(recorded, launched=100.0, ended=132.0, cores=2), (
        "without the command's CPU seconds there is no floor"
    )


def test_a_run_spread_over_workers_counts_their_seconds_and_collects_when_the_first_did() -> None:
    """Under xdist the items' seconds add up over the workers, and the controller collects nothing: collection
    ends when the first worker's did (the stamp phases.py takes then), or, unstamped, when the session began."""
    recorded = {
        "stamps": {"session_start": 104.0, "collected": 106.0, "session_finish": 126.0},
        "items": {
            "timed": {"items": 3, "seconds": 4.0, "cpu_seconds": 0.0},
            "book": {"items": 9, "seconds": 14.0, "cpu_seconds": 0.0},
            "machinery": {"items": 4, "seconds": 18.0, "cpu_seconds": 0.0},
        },
        "workers": 2,
    }
    out = bench.phases(recorded, launched=100.0, ended=127.0, cores=2)
    assert out["workers"] == 2 and out["seconds"]["collection"] == 2.0
    assert out["seconds"]["between_items"] == 4.0, "20 s of two workers, 36 s of it in the items"
    del recorded["stamps"]["collected"]
    assert bench.phases(recorded, launched=100.0, ended=127.0, cores=2)["seconds"]["collection"] == 0.0


def test_a_command_s_cpu_seconds_take_in_the_children_it_started() -> None:
    """What `run_job` adds up: a child's CPU seconds, and its own child's, once each is waited for."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
    nested = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {burn!r}], check=True)\n"
    before = phases_plugin.cpu_seconds(children_only=True)
    subprocess.run([sys.executable, "-c", nested], check=True)
    assert phases_plugin.cpu_seconds(children_only=True) - before >= 0.3


def test_verify_and_the_snippets_alternate_and_the_median_round_is_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy spell slows one round of both; the round with the median ratio is the one judged."""
    order: list[str] = []
    verify_s, snippets_s = iter([20.0, 40.0, 21.0]), iter([10.0, 30.0, 12.0])  # ratios 2.0, 1.33, 1.75

    def verify(cores: int) -> dict[str, object]:
        order.append("verify")
        seconds = next(verify_s)
        return {
            "seconds": seconds,
            "exit_status": 0,
            "verdict": "v",
            "command": "c",
            "phases": {"cores": cores, "round_of": seconds},
        }

    def snippets() -> dict[str, object]:
        order.append("snippets")
        return {"seconds": next(snippets_s), "count": 6, "each": {}}

    monkeypatch.setattr(bench, "run_verify", verify)
    monkeypatch.setattr(bench, "run_snippets", snippets)
    judged, scripts = bench.verify_against_snippets(3, cores=2)
    assert order == ["verify", "snippets"] * 3
    assert judged["phases"] == {"cores": 2, "round_of": 21.0}, "the phases shown are the judged round's"
    assert judged["over_snippets"] == 1.75 and [r["ratio"] for r in judged["each_round"]] == [2.0, 1.33, 1.75]
    assert (judged["seconds"], scripts["seconds"]) == (21.0, 12.0)


def test_the_grown_fleet_is_the_committed_machines_and_copies_the_site_shows_apart(tmp_path: Path) -> None:
    from verified_book.records.fleet import read_all

    committed = bench.ROOT / "results"
    written = bench.fleet_of(committed, tmp_path, copies=2)
    read = read_all(tmp_path, lambda problem: pytest.fail(problem))
    originals = {p.stem for p in committed.glob("*.json")}
    assert written == len(read) == 3 * len(originals)
    assert {slug for slug in read if "-copy" not in slug} == originals
    assert len({rf.machine.id for rf in read.values()}) == len(read), "each copy is a machine of its own"
    for slug, results in read.items():
        original = read[slug.split("-copy")[0]]
        assert results.records == original.records


FAKE_RUN_PY = """\
import os, sys, time
used = "pip" if os.environ.get("VERIFIED_BOOK_INSTALLER") == "pip" else "uv"
print(f"run.py: set-up: installing with {'uv 1.2.3 (its lock)' if used == 'uv' else 'pip'}", flush=True)
time.sleep(0.3)
print(f"run.py: set-up done (installed with {used})", flush=True)
time.sleep(0.6)
print("figures (all 3 bound figures selected): 3 verified", flush=True)
sys.exit(0 if sys.argv[1:] == ["verify"] else 2)
"""


def test_a_fresh_clone_s_set_up_and_verdict_are_timed_apart_with_the_installer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository whose run.py sets up in 0.3 s and verifies in 0.6 s: the clone runs it, the split follows."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "run.py").write_text(FAKE_RUN_PY, encoding="utf-8")
    for command in (
        ["init", "-q"],
        ["add", "run.py"],
        ["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "x"],
    ):
        subprocess.run(["git", *command], cwd=repo, check=True)
    monkeypatch.setattr(bench, "ROOT", repo)
    result = bench.clone_to_verdict()
    assert result["exit_status"] == 0 and result["installer"] == "uv 1.2.3"
    assert result["setup_s"] >= 0.3 and result["verdict_s"] >= 0.6, "split where set-up says it is done"
    assert result["verdict"] == ["figures (all 3 bound figures selected): 3 verified"]
    assert result["seconds"] >= result["clone_s"] + result["setup_s"] + result["verdict_s"] - 0.05
    forced = bench.clone_to_verdict("pip")
    assert forced["installer"] == "pip", "VERIFIED_BOOK_INSTALLER=pip reaches the clone's set-up"
