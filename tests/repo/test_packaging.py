"""The engine as an installed package: inert in other projects, and shipped without the test harness."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from harness.paths import ROOT

pytest_plugins = ["pytester"]


UNRELATED_TEST = """
import os
import sys


def test_nothing_of_the_book_is_here():
    assert "verified_book" not in sys.modules, "the engine was imported"
    assert "torch" not in sys.modules and "mlx.core" not in sys.modules, "a numerics library was imported"
    assert "HF_HUB_OFFLINE" not in os.environ, "the hub was switched off"
    import inspect
    import socket
    assert not inspect.isfunction(socket.socket.connect), "the network guard is installed"
"""


@pytest.mark.slow
def test_an_unrelated_project_runs_as_if_the_engine_were_not_installed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine is installed in this environment; a project that does not ask for its plugin
    (in its conftest.py, as a book does) gets a pytest run with no book, no markers, no network guard."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    pytester.makepyfile(test_unrelated=UNRELATED_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    assert "claims:" not in output and "verified book" not in output and "machine:" not in output


@pytest.mark.slow
def test_the_wheel_ships_the_engine_and_nothing_of_the_book_or_its_tests(tmp_path: Path) -> None:
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-v",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    # setuptools' warning for a folder of package data it was not told is a package (the template's, once)
    absent = [line for line in (built.stdout + built.stderr).splitlines() if "is absent from the" in line]
    assert not absent, "\n".join(absent)
    (wheel,) = tmp_path.glob("verified_book-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {name.split("/", 1)[0] for name in names if not name.split("/", 1)[0].endswith(".dist-info")}
    assert packages == {"verified_book"}, f"the wheel holds {sorted(packages)}"
    assert not [n for n in names if "harness" in n or n.startswith(("tests/", "claims/"))]
    assert "verified_book/integration/pytest/hooks.py" in names and "verified_book/engine/config.py" in names


def test_the_engine_imports_nothing_of_a_book_or_of_the_test_harness() -> None:
    """The engine knows no book: no module of `verified_book` imports this book's `claims` or the
    test harness (a book's content reaches the engine only through book.toml)."""
    import ast

    found = []
    for path in sorted((ROOT / "verified_book").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno}: imports {n}"
                for n in names
                if n.split(".")[0] in ("claims", "harness", "tests")
            ]
    assert found == []
