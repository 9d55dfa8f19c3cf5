#!/usr/bin/env python3
"""Set up on first use and run the book's jobs; needs only Python 3.11+.

    python3 run.py verify    verify the book on this machine, then build the site
    python3 run.py test      run the test suite (arguments after `test` go to pytest)
    python3 run.py site      build the site from the committed results only

The first call makes `.venv/` and installs the project into it. Where no NVIDIA GPU is
present, torch's CPU build is installed first, so nothing pulls the multi-GB CUDA wheel.
The install is redone only when pyproject.toml changes. VERIFIED_BOOK_VENV puts the virtual
environment elsewhere (the fleet's runners keep it outside the checkout, which their clean empties).
"""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("VERIFIED_BOOK_VENV") or ROOT / ".venv").resolve()
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".installed"
CPU_TORCH = "torch==2.13.0"


def _say(message: str) -> None:
    print(f"run.py: {message}", flush=True)


def _run(*cmd: str | Path, check: bool = True) -> int:
    return subprocess.run([str(c) for c in cmd], cwd=ROOT, check=check, env=_tool_env()).returncode


def _tool_env() -> dict[str, str]:
    """The environment of the tools run here, with Python's bytecode cache allowed.

    pytest rewrites the assertions of every plugin's modules (hypothesis alone brings about
    seventy) and keeps the result only as cached bytecode; where PYTHONDONTWRITEBYTECODE is
    set it redoes that work on every run, seconds each time. The cache lands in __pycache__
    folders, which git ignores.
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _has_nvidia_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True, text=True).returncode == 0


def _wanted() -> str:
    recipe = (ROOT / "pyproject.toml").read_bytes() + Path(__file__).read_bytes()
    return hashlib.sha256(recipe).hexdigest()


def setup() -> None:
    """Make the virtual environment and install what the project needs, once."""
    if sys.version_info < (3, 11):
        sys.exit(f"run.py: Python 3.11 or newer is needed; this is {platform.python_version()}")
    if not (BIN / "python").exists():
        _say(f"creating {VENV}")
        _run(sys.executable, "-m", "venv", VENV)
        _run(BIN / "python", "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    if STAMP.exists() and STAMP.read_text() == _wanted():
        return
    pip = [BIN / "python", "-m", "pip", "install", "--quiet"]
    if platform.system() == "Linux" and not _has_nvidia_gpu():
        _say(f"no NVIDIA GPU found: installing torch's CPU build first ({CPU_TORCH})")
        _run(*pip, CPU_TORCH)
    _say("installing the project and its dependencies")
    _run(*pip, "-e", ".")
    STAMP.write_text(_wanted())


def main(argv: list[str]) -> int:
    job, rest = (argv[0], argv[1:]) if argv else ("help", [])
    if job in ("help", "-h", "--help"):
        print(__doc__)
        return 0
    setup()
    if job == "setup":
        return 0
    if job == "test":
        return _run(BIN / "pytest", *rest, check=False)
    if job == "site":
        return _run(BIN / "mkdocs", "build", "--strict", *rest, check=False)
    if job == "verify":
        tested = _run(BIN / "pytest", "-p", "no:cacheprovider", *rest, check=False)
        built = _run(BIN / "mkdocs", "build", "--strict", check=False)
        _say(f"site in {ROOT / 'site'} (open site/index.html); results in {ROOT / 'results'}")
        if tested:
            _say("some figures did not verify on this machine: the test report above and the site say which")
        return tested or built
    sys.exit(f"run.py: unknown job {job!r}; expected verify, test, site or setup")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
