"""The library claims computed with ml_dtypes, on its oldest and newest supported versions.

A figure that one supported version answers differently from another must say which versions it is
stated for (`stated_for`), or a reader of the site sees the book fail where a library moved. This
installs each version into a temporary folder with pip (from the package index pip is configured
with), computes every numpy library claim that uses ml_dtypes under it (a measured one moves from
run to run), and records what moves: `ml_dtypes-moves.json` in the test's temporary folder, and the
test's output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness.paths import ROOT

#: the oldest supported version (pyproject's `ml_dtypes>=0.5`) and the newest this machine can install
VERSIONS = ("0.5.4", "0.6.0")

COMPUTE = r"""
import json, sys
from pathlib import Path
import ml_dtypes
from verified_book.authoring.registry import REGISTRY
from verified_book.backends import detect
from verified_book.engine.check import COMPUTED, evaluate
from verified_book.engine.config import open_book, read_config
from verified_book.engine.provenance import uses_of
from verified_book.records.results import to_json

numpy = detect(("numpy",))["numpy"]
values = {}
with open_book(read_config(Path(sys.argv[1]))).opened():
    for claim in REGISTRY:
        if claim.kind.value == "library" and claim.runs_on("numpy") and "ml_dtypes" in (uses_of(claim, "numpy") or ()):
            outcome = evaluate(claim, numpy)
            values[claim.id] = repr(to_json(outcome.value)) if outcome.status == COMPUTED else outcome.message[:200]
print(json.dumps({"version": ml_dtypes.__version__, "values": values}))
"""


def _values_under(version: str, folder: Path) -> dict[str, object]:
    target = folder / f"ml_dtypes-{version}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            f"ml_dtypes=={version}",
        ],
        check=True,
        timeout=180,
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", COMPUTE, str(ROOT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["version"] == version, f"asked for ml_dtypes {version}, computed with {found['version']}"
    return dict(found["values"])


@pytest.mark.slow
def test_what_moves_between_ml_dtypes_versions_is_stated(tmp_path_factory: pytest.TempPathFactory) -> None:
    from verified_book.authoring.registry import REGISTRY
    from verified_book.engine.config import open_book, read_config

    folder = tmp_path_factory.mktemp("versions")
    oldest, newest = (_values_under(v, folder) for v in VERSIONS)
    assert oldest and set(oldest) == set(newest)
    moves = {cid: {VERSIONS[0]: oldest[cid], VERSIONS[1]: newest[cid]} for cid in oldest if oldest[cid] != newest[cid]}
    (folder / "ml_dtypes-moves.json").write_text(json.dumps(moves, indent=2, sort_keys=True))
    print(f"ml_dtypes {VERSIONS[0]} -> {VERSIONS[1]}: {len(moves)} of {len(oldest)} claims move: {sorted(moves)}")
    open_book(read_config(ROOT))
    unstated = [cid for cid in moves if "ml_dtypes" not in REGISTRY[cid].stated_for]
    assert not unstated, (
        f"these claims answer differently on ml_dtypes {VERSIONS[0]} and {VERSIONS[1]} and state no versions "
        f"(stated_for): {json.dumps({cid: moves[cid] for cid in unstated}, indent=2)}"
    )
