"""`-m <machine>` runs exactly what applies there, and `--plan <machine>` says what that is, on any machine.

Each of the book's profiles is held against its plan: every planned check on a backend the
profile lists, no claim about another machine, every general claim that can run there present.
On a sample book the plan is held against what pytest's own `-m` selects, one profile at a time.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from harness import faults
from harness.paths import ROOT

from verified_book.authoring.registry import REGISTRY
from verified_book.backends import NAMES, NO_BACKEND
from verified_book.book.bindings import Book, book_pages, read_page
from verified_book.engine import machine
from verified_book.engine.config import read_config
from verified_book.engine.plan import PLAN_UNPRINTED, plan_lines, plan_of
from verified_book.vocabulary import NO_BACKEND_LABEL, NO_BACKEND_NAME

pytest_plugins = ["pytester"]

MARKERS = ("dgx_spark", "h100", "h200", "m4_max", "rtx5080", "rtx5090", "ryzen_ai_max")


@functools.cache
def project_pages() -> Book:
    book = read_config(ROOT)
    return Book(book.root, [read_page(p, book.root) for p in book_pages(book.pages)], [])


def test_the_book_has_the_seven_profiles_the_plans_are_held_against(project_book: None) -> None:
    assert tuple(sorted(machine.profiles())) == MARKERS


@pytest.mark.parametrize("marker", MARKERS)
def test_each_profiles_plan_is_its_backends_its_own_claims_and_every_general_claim(
    project_book: None, marker: str
) -> None:
    profile = machine.profiles()[marker]
    pages = project_pages()
    plan = plan_of(profile, pages)
    planned: dict[str, set[str]] = {}
    for entries in plan.values():
        for claim, backends in entries:
            planned.setdefault(claim.id, set()).update(backends)
    allowed = {*profile.backends, NO_BACKEND.name}
    wrong = {c: sorted(b - allowed) for c, b in planned.items() if b - allowed}
    assert not wrong, f"{marker}: planned on backends {profile.file} does not list: {wrong}"
    elsewhere = sorted(c for c in planned if REGISTRY[c].hardware not in (None, marker))
    assert not elsewhere, f"{marker}: claims about other machines in its plan: {elsewhere}"
    for claim in REGISTRY:
        if claim.hardware not in (None, marker):
            continue
        there = (
            {b for b in NAMES if b in profile.backends and claim.runs_on(b)}
            if claim.needs_backend
            else {NO_BACKEND.name}
        )
        assert planned.get(claim.id, set()) == there, (
            f"{marker}: {claim.id} planned on {planned.get(claim.id)}, runs on {there}"
        )
    printed = {b.claim_id: b.file for b in pages.bindings()}
    for page, entries in plan.items():
        for claim, _ in entries:
            assert page == PLAN_UNPRINTED and claim.id not in printed or page != PLAN_UNPRINTED and claim.id in printed


def test_the_plan_names_the_machine_and_its_size(project_book: None) -> None:
    lines = plan_lines("m4_max", project_pages())
    assert re.match(
        r"plan for m4_max \(.*backends numpy, torch:cpu, torch:mps, mlx:cpu, mlx:gpu.*\): \d+ checks of \d+ "
        r"claims; nothing was run$",
        lines[0],
    ), lines[0]
    assert "torch:mps" in "\n".join(lines[1:])
    assert "torch:mps" not in "\n".join(plan_lines("rtx5080", project_pages())[1:])


CLAIMS = '''
from verified_book.authoring.registry import claim

@claim("plan.exact", kind="exact")
def exact():
    """Arithmetic: on every machine, on no backend."""
    return 4

@claim("plan.library", kind="library", backends=("numpy", "torch:cpu", "torch:cuda", "torch:mps", "torch:rocm"))
def library(backend):
    """A library's answer: on each machine, on the backends it has."""
    return int((backend.tensor([2]) ** 2).sum())

@claim("plan.apple", kind="library", backends=("torch:mps",))
def apple(backend):
    """Only Apple's GPU runs it."""
    return 4

@claim("plan.vram", kind="measured", hardware="rtx5080")
def vram(backend):
    """About one machine only."""
    return 16
'''
PAGE = "Four is [4](claim:plan.exact), [4](claim:plan.library) and [4](claim:plan.apple).\n"


@pytest.fixture
def book(pytester: pytest.Pytester) -> pytest.Pytester:
    return faults.sample_book(pytester, CLAIMS, PAGE, "plan.py")


run = faults.run_book


NAMED = {NO_BACKEND_LABEL: NO_BACKEND_NAME}


def planned_pairs(output: str) -> set[tuple[str, str]]:
    pairs = set()
    for line in output.splitlines():
        found = re.match(r"^  (plan\.[a-z_.]+)\s+(.+)$", line)
        if found:
            # the plan names the exact kinds' backend `none` as what it means
            pairs.update((found[1], NAMED.get(b.strip(), b.strip())) for b in found[2].split(","))
    return pairs


@pytest.mark.parametrize("marker", MARKERS)
def test_the_plan_is_what_the_marker_selects(book: pytest.Pytester, marker: str) -> None:
    plan = run(book, "--plan", marker)
    assert plan.ret == 0, plan.stdout.str()
    collected = run(book, "--collect-only", "-q", "-m", marker)
    selected = set(re.findall(r"^book\.toml::(plan\.[a-z_.]+)\[([^\]]+)\]$", collected.stdout.str(), re.M))
    assert planned_pairs(plan.stdout.str()) == selected
    assert (
        ("plan.apple", "torch:mps") in selected if marker == "m4_max" else all(c != "plan.apple" for c, _ in selected)
    )
    assert ("plan.vram" in {c for c, _ in selected}) == (marker == "rtx5080")
    assert ("plan.exact", "none") in selected


def test_a_figure_under_a_machine_marker_counts_only_that_machines_backends(book: pytest.Pytester) -> None:
    """A figure's item carries every backend's marks; under `-m rtx5080` it is checked, and counted, on
    the backends an RTX 5080 desktop has, never on Apple's or AMD's."""
    rows = faults.summary_rows(run(book, "-m", "rtx5080").stdout.str())
    assert {"torch:mps", "torch:rocm"}.isdisjoint(rows) and "numpy" in rows, rows
    rows = faults.summary_rows(run(book, "-m", "m4_max").stdout.str())
    assert "torch:mps" in rows and "torch:cuda" not in rows and "torch:rocm" not in rows, rows


def test_an_unknown_machine_is_refused_with_the_known_ones(book: pytest.Pytester) -> None:
    result = run(book, "--plan", "rtx9999")
    assert result.ret != 0
    assert "--plan rtx9999: not one of the book's machines; expected one of dgx_spark, h100" in result.stderr.str()


@pytest.mark.slow  # a separate interpreter, so that what the plan imports is its own
def test_the_plan_loads_no_array_library() -> None:
    code = (
        "import sys, pytest; code = pytest.main(['-q', '-p', 'no:cacheprovider', '--plan', 'rtx5080']); "
        "print('LOADED', sorted(m for m in ('torch', 'mlx', 'jax', 'transformers') if m in sys.modules)); "
        "sys.exit(code)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "LOADED []" in done.stdout and done.stdout.startswith("plan for rtx5080"), done.stdout[-2000:]


#: put on PYTHONPATH, it makes `import pytest` (and pytest's internals) fail in that interpreter
NO_PYTEST = """\
import sys


class NoPytest:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pytest", "_pytest"):
            raise ImportError(f"{name} is not importable in this interpreter")
        return None


sys.meta_path.insert(0, NoPytest())
"""


@pytest.mark.slow  # a separate interpreter, so that what the plan imports is its own
def test_verified_book_plan_answers_with_pytest_unimportable(tmp_path: Path) -> None:
    """`verified-book plan` asks the engine, not pytest: with pytest unimportable it still prints the plan."""
    (tmp_path / "sitecustomize.py").write_text(NO_PYTEST, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])}
    blocked = subprocess.run(
        [sys.executable, "-c", "import pytest"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert blocked.returncode != 0 and "not importable" in blocked.stderr, "the shim keeps pytest out"
    code = (
        "import sys\n"
        "from verified_book.integration.cli import main\n"
        "code = main(['plan', 'rtx5080'])\n"
        "print('LOADED', sorted(m for m in ('pytest', '_pytest', 'torch', 'mlx', 'jax') if m in sys.modules))\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.startswith("plan for rtx5080 ("), done.stdout[:500]
    assert re.search(r"^  \S+\s+.*torch:cuda", done.stdout, re.M), done.stdout[-2000:]
    assert "LOADED []" in done.stdout, done.stdout[-300:]
