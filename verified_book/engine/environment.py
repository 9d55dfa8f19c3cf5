"""A broken environment, told apart from a failed claim.

A claim that cannot import a library, whose distribution's metadata is gone, or whose
interpreter or virtual environment has disappeared has not been shown wrong: the run could not
ask it. Such an outcome is not recorded (the machine's earlier record stands), the run ends with
one line saying what the environment lost and how to mend it, and `contribute` refuses a run
that had one.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from dataclasses import dataclass
from pathlib import Path

#: how a reader mends it, said at the end of every run that met a broken environment
REMEDY = "reinstall with python3 run.py setup (or pip install the project again), then run it again"


@dataclass(frozen=True)
class Broken:
    """What the environment lost: a library (its import name) or the interpreter's folder."""

    lost: str
    detail: str

    def line(self) -> str:
        return f"the environment lost {self.lost} during the run ({self.detail}): {REMEDY}"


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def interpreter_gone() -> Broken | None:
    """The running interpreter's own folder (the virtual environment) has been removed."""
    prefix = Path(sys.prefix)
    if not prefix.exists() or not Path(sys.executable).exists():
        return Broken(f"its virtual environment {prefix}", f"{sys.executable} no longer exists")
    return None


def broken_by(error: BaseException) -> Broken | None:
    """Whether `error` says the environment broke rather than the claim: a module that will not
    import, a distribution whose metadata is gone, or a missing interpreter; None otherwise."""
    gone = interpreter_gone()
    if gone is not None:
        return gone
    for cause in _chain(error):
        if isinstance(cause, importlib.metadata.PackageNotFoundError):
            name = cause.args[0] if cause.args else "a distribution"
            return Broken(str(name), f"PackageNotFoundError: no metadata for {name}")
        if isinstance(cause, ImportError):
            name = cause.name or "a module"
            return Broken(name.split(".")[0] if cause.name else name, f"{type(cause).__name__}: {cause}")
    return None


_LAST_ERROR = re.compile(
    r"^(?P<kind>ModuleNotFoundError|ImportError|importlib\.metadata\.PackageNotFoundError|"
    r"PackageNotFoundError): (?P<text>.*)$",
    re.MULTILINE,
)
_MODULE = re.compile(r"No module named '(?P<name>[^']+)'|from '(?P<origin>[^']+)'")


def broken_in(stderr: str) -> Broken | None:
    """Whether a script that failed (a snippet run as a script) failed because the environment broke,
    read from the traceback it printed: its interpreter gone, or an import error as its last error."""
    gone = interpreter_gone()
    if gone is not None:
        return gone
    errors = list(_LAST_ERROR.finditer(stderr))
    if not errors:
        return None
    last = errors[-1]
    named = _MODULE.search(last.group("text"))
    name = (named.group("name") or named.group("origin")) if named else last.group("text").strip() or "a module"
    return Broken(name.split(".")[0] if named else name, f"{last.group('kind')}: {last.group('text').strip()}")
