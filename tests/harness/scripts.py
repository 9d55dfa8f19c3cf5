"""The repository's scripts (run.py, docs/hooks.py) as modules: they are files to run, not parts of a package."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from harness.paths import ROOT


def script_module(path: Path, name: str) -> ModuleType:
    """The script at `path`, loaded afresh as the module `name`."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, f"{path}: not a Python file"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_py() -> ModuleType:
    """run.py, the set-up and jobs script at the repository's root."""
    return script_module(ROOT / "run.py", "run_py")
