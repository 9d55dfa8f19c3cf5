"""The library claims computed on the oldest and the newest version of each library pip can install here.

A figure that one supported version answers differently from another must say which versions it is
stated for (`stated_for`), or a reader of the site sees the book fail where a library moved. For numpy,
ml_dtypes, JAX and MLX this installs each version into a temporary folder with pip (`--target`, from the
package index pip is configured with, the rest of the environment as it is), computes every library claim
on that library's CPU backend (for ml_dtypes, those numpy claims that use it), and records what moves:
`<library>-moves.json` in the test's temporary folder, and the test's output. A value that moves while its
printed figures still hold (a float's last digits) is recorded; a printed figure judged otherwise on one
version fails the test unless its claim states the versions it holds for. A measured claim moves from run
to run, so only library claims are computed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness.paths import ROOT


@dataclass(frozen=True)
class Library:
    """A library the book's claims compute with, as pip installs it and as its claims are found."""

    name: str  # as `stated_for` and `uses_of` name it
    module: str  # what reports its version
    backend: str  # the backend its claims are computed on here
    versions: tuple[str, str]  # the oldest pyproject allows, and the newest pip installs here
    packages: tuple[str, ...]  # what pip installs for a version, `{v}` standing for it
    only_users: bool = False  # only the backend's claims that use this library (ml_dtypes, under numpy)


#: pyproject's lower bounds (numpy>=2.0, ml_dtypes>=0.5, jax[cpu]>=0.4.35, mlx[cpu]>=0.31 on Linux) and the
#: newest each `pip index versions` lists here; JAX's scipy and opt_einsum come in their newest versions
LIBRARIES = (
    Library("numpy", "numpy", "numpy", ("2.0.0", "2.4.6"), ("numpy=={v}",)),
    Library("ml_dtypes", "ml_dtypes", "numpy", ("0.5.4", "0.7.0"), ("ml_dtypes=={v}",), only_users=True),
    Library("jax", "jax", "jax:cpu", ("0.4.35", "0.10.2"), ("jax=={v}", "jaxlib=={v}", "scipy", "opt_einsum")),
    Library("mlx", "mlx.core", "mlx:cpu", ("0.31.0", "0.32.4"), ("mlx=={v}", "mlx-cpu=={v}")),
)

COMPUTE = r"""
import importlib, json, sys
from pathlib import Path
from verified_book.authoring.registry import REGISTRY
from verified_book.backends import detect
from verified_book.book.bindings import Book
from verified_book.engine.check import COMPUTED, evaluate, judge
from verified_book.engine.config import open_book, read_config
from verified_book.engine.machine import Machine
from verified_book.engine.provenance import uses_of
from verified_book.records.results import to_json

root, name, module, backend_name, only_users = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "1"
version = importlib.import_module(module).__version__
backend = detect((backend_name,))[backend_name]
found = {}
config = read_config(Path(root))
with open_book(config).opened():
    bound = Book.read(config.pages, config.root).by_claim()
    for claim in REGISTRY if backend.available else ():
        if claim.kind.value != "library" or not claim.runs_on(backend_name):
            continue
        if only_users and name not in (uses_of(claim, backend_name) or ()):
            continue
        outcome = evaluate(claim, backend)
        said = repr(to_json(outcome.value)) if outcome.status == COMPUTED else outcome.message[:200]
        here = Machine({}, "here", ())
        figures = [f"{b.where} {b.text}: {judge(b, outcome, here).status}" for b in bound.get(claim.id, ())]
        found[claim.id] = {"value": said.replace(version, "<version>"), "figures": figures}
print(json.dumps({"version": version, "available": backend.available, "claims": found}))
"""


def _install(library: Library, version: str, folder: Path) -> Path:
    target = folder / f"{library.name}-{version}"
    packages = [p.format(v=version) for p in library.packages]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), *packages],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        pytest.skip(f"pip cannot install {' '.join(packages)} here: {done.stderr.strip()[-400:]}")
    return target


def _values_under(library: Library, version: str, folder: Path) -> dict[str, object]:
    target = _install(library, version, folder)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)])}
    args = [ROOT, library.name, library.module, library.backend, "1" if library.only_users else "0"]
    done = subprocess.run(
        [sys.executable, "-c", COMPUTE, *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["version"] == version, f"asked for {library.name} {version}, computed with {found['version']}"
    assert found["available"], f"{library.backend} is not available with {library.name} {version}"
    return dict(found["claims"])


#: what a printed figure can be judged as that still holds it; a figure a version skips (its backend cannot
#: compute it there) is no judgement, and shows as nothing on the site
HOLDS = {"verified", "cited", "premise", "unsourced", "reference", "disputed"}


def _judged_otherwise(old: list[str], new: list[str]) -> bool:
    """Whether a claim's printed figures are judged otherwise on two versions: one holds or skips a figure the
    other finds stale or failed (skipped beside holding is no move: the site shows the figure held)."""
    for a, b in zip(old, new, strict=True):
        statuses = {a.rsplit(": ", 1)[1], b.rsplit(": ", 1)[1]}
        if len(statuses) > 1 and not statuses <= HOLDS | {"skipped"}:
            return True
    return False


@pytest.mark.slow
@pytest.mark.parametrize("library", LIBRARIES, ids=[lib.name for lib in LIBRARIES])
def test_what_moves_between_library_versions_is_stated(
    library: Library, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from verified_book.authoring.registry import REGISTRY
    from verified_book.engine.config import open_book, read_config

    folder = tmp_path_factory.mktemp("versions")
    (old, new) = library.versions
    oldest, newest = (_values_under(library, v, folder) for v in library.versions)
    assert oldest and set(oldest) == set(newest)
    moves = {cid: {old: oldest[cid], new: newest[cid]} for cid in oldest if oldest[cid] != newest[cid]}
    (folder / f"{library.name}-moves.json").write_text(json.dumps(moves, indent=2, sort_keys=True))
    figures = sorted(cid for cid in moves if _judged_otherwise(oldest[cid]["figures"], newest[cid]["figures"]))
    print(
        f"{library.name} {old} -> {new}: {len(moves)} of {len(oldest)} claims' values move, the printed figures "
        f"of {len(figures)}: {figures}"
    )
    open_book(read_config(ROOT))
    unstated = [cid for cid in figures if library.name not in REGISTRY[cid].stated_for]
    assert not unstated, (
        f"the printed figures of these claims judge differently on {library.name} {old} and {new}, and the claims "
        f"state no versions (stated_for): {json.dumps({cid: moves[cid] for cid in unstated}, indent=2)}"
    )
