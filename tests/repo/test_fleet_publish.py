"""The fleet's publication, driven as the workflows drive it: two machines push their results to a
results branch of a real (bare) repository in turn, then the site's results are gathered from it and
the site is built from them. What is committed is exactly what is published."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from harness.paths import ROOT

from verified_book.records.results import ResultsFile, dumps, read

PUBLISH = [sys.executable, str(ROOT / "scripts" / "publish-results")]
COMMITTED = sorted((ROOT / "results").glob("*.json"))


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def machine_file(folder: Path, slug: str, date: str, marker: str, value: float) -> Path:
    """A results file as a fleet machine writes it: the committed file's records under another slug and date."""
    committed = read(COMMITTED[0])
    kept = ("probe.bandwidth.read", "formats.finfo.bf16.bits")
    records = {cid: dict(committed.records[cid]) for cid in kept}
    records["probe.bandwidth.read"]["numpy"] = records["probe.bandwidth.read"]["numpy"].model_copy(
        update={"value": value}
    )
    run = committed.run.model_copy(
        update={"date": date, "seconds": {}, "dates": {cid: {b: date for b in records[cid]} for cid in kept}}
    )
    machine = committed.machine.model_copy(update={"slug": slug, "markers": [marker]})
    made = ResultsFile(slug, machine, run, records, {}, {cid: committed.claims[cid] for cid in kept})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{slug}.json"
    path.write_text(dumps(made), encoding="utf-8")
    return path


def publish(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PUBLISH, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.skipif(not COMMITTED, reason="no committed results file to model the machines' files on")
def test_two_machines_publish_and_the_site_shows_exactly_what_was_committed(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    first = machine_file(tmp_path / "runner-a", "fleet-a", "2026-11-30T03:17:00+00:00", "rtx5080", 60.0)
    second = machine_file(tmp_path / "runner-b", "fleet-b", "2026-11-30T03:20:00+00:00", "m4_max", 400.0)

    for path in (first, second):
        done = publish("push", "--remote", str(remote), str(path))
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"results/{path.name}" in done.stdout
    log = git("log", "--format=%s", "results", cwd=remote).splitlines()
    assert log == ["Results of fleet-b", "Results of fleet-a"], log
    assert sorted(git("ls-tree", "--name-only", "results", "results/", cwd=remote).split()) == [
        "results/fleet-a.json",
        "results/fleet-b.json",
    ]

    stale = machine_file(tmp_path / "runner-a-old", "fleet-a", "2026-11-01T03:17:00+00:00", "rtx5080", 1.0)
    done = publish("push", "--remote", str(remote), str(stale))
    assert done.returncode == 0 and "nothing to push" in done.stdout, done.stdout + done.stderr

    site_results = tmp_path / "published-results"
    done = publish("gather", "--remote", str(remote), "--into", str(site_results))
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in site_results.iterdir()) == sorted(
        [p.name for p in COMMITTED] + ["fleet-a.json", "fleet-b.json"]
    )
    for slug in ("fleet-a", "fleet-b"):
        committed = git("show", f"results:results/{slug}.json", cwd=remote)
        assert (site_results / f"{slug}.json").read_text(encoding="utf-8") == committed, (
            f"the site's {slug}.json is not the file committed on the results branch"
        )
    assert read(site_results / "fleet-a.json").records["probe.bandwidth.read"]["numpy"].value == 60.0
    for path in COMMITTED:
        assert (site_results / path.name).read_bytes() == path.read_bytes()

    from test_site import build

    site = tmp_path / "site"
    result = build(ROOT, site, env={"CLAIMS_RESULTS_DIR": str(site_results), "CLAIMS_TODAY": "2026-12-12"})
    assert result.returncode == 0, result.stdout + result.stderr
    machines = (site / "machines.html").read_text(encoding="utf-8")
    for slug in ("fleet-a", "fleet-b", *(p.stem for p in COMMITTED)):
        assert f'data-machine="{slug}"' in machines, f"{slug} is not on the machines page"
    assert 'data-machine="fleet-a" data-quiet' in machines, "a machine quiet for twelve days is not marked"
    assert machines.count("not reported this week") >= 2
