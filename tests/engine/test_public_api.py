"""The authoring API is the package root: a book imports `from verified_book import ...` and nothing deeper."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from harness.paths import ROOT

import verified_book

#: the code a book's author writes: this book's claims, the book `verified-book init` writes, the minimal example
AUTHORED = (ROOT / "claims", ROOT / "verified_book" / "template", ROOT / "examples" / "minimal")
OLD_PATHS = ("cli", "markdown_ext", "mkdocs_plugin", "pytest_plugin", "snippet_figures", "inputs", "registry")


def test_every_public_name_is_its_modules_own_object() -> None:
    assert sorted(verified_book.__all__) == sorted(set(verified_book.__all__)), "a name listed twice"
    for name in verified_book.__all__:
        value = getattr(verified_book, name)
        home = importlib.import_module(verified_book._WHERE[name])
        assert value is getattr(home, name), name
    assert set(dir(verified_book)) >= set(verified_book.__all__)


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'verified_book' has no attribute 'clam'"):
        verified_book.clam  # noqa: B018


def test_importing_the_package_loads_no_runner_site_or_array_library() -> None:
    script = (
        "import sys, verified_book\n"
        "heavy = ('pytest', 'torch', 'mlx', 'jax', 'mkdocs', 'numpy', 'pydantic')\n"
        "print(' '.join(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "", f"import verified_book loaded {done.stdout.strip()}"


def _engine_imports(path: Path, root: Path = ROOT) -> list[str]:
    """Each `import verified_book.x` or `from verified_book.x import ...` in a file, as file:line: statement."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("verified_book."):
            found.append(f"{path.relative_to(root)}:{node.lineno}: from {node.module} import ...")
        if isinstance(node, ast.Import):
            found += [
                f"{path.relative_to(root)}:{node.lineno}: import {alias.name}"
                for alias in node.names
                if alias.name.startswith("verified_book.")
            ]
    return found


def test_a_books_code_imports_the_engine_from_its_root_alone() -> None:
    files = [path for folder in AUTHORED for path in sorted(folder.rglob("*.py"))]
    assert len(files) > 30, "the scan finds the claims, the template and the example"
    offenders = [line for path in files for line in _engine_imports(path)]
    assert not offenders, "expected `from verified_book import ...`, found:\n" + "\n".join(offenders)


def test_the_scan_finds_an_import_below_the_root(tmp_path: Path) -> None:
    topic = ROOT / "claims" / "topics" / "formats.py"
    assert not _engine_imports(topic)
    deep = tmp_path / "deep.py"
    deep.write_text("from verified_book.authoring.registry import claim\nimport verified_book.backends\n")
    assert _engine_imports(deep, tmp_path) == [
        "deep.py:1: from verified_book.authoring.registry import ...",
        "deep.py:2: import verified_book.backends",
    ]


@pytest.mark.parametrize("name", OLD_PATHS)
def test_the_old_module_paths_are_gone(name: str) -> None:
    assert importlib.util.find_spec(f"verified_book.{name}") is None
