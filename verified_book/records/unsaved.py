"""Records a run could not write into its results file, kept in the user's state folder until a run can.

A run whose results folder cannot be written (read-only, immutable, its path taken by a file) still
computed its records: they are kept in `$XDG_STATE_HOME/verified-book/unsaved/` (by default
`~/.local/state/verified-book/unsaved/`; `VERIFIED_BOOK_STATE_DIR` names another state folder), one
folder per run, the file named after the machine as a results file is. The folder's name begins with
a hash of the results folder the records were meant for, so the next run that writes that file takes
them back (`taken_into`), and `verified-book contribute` finds them (`meant_for`).
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
from dataclasses import dataclass
from pathlib import Path

from verified_book.vocabulary import fingerprint

STATE_VARIABLE = "VERIFIED_BOOK_STATE_DIR"
_RUNS = itertools.count()  # a process that keeps records twice in one microsecond (a live preview) keeps both


def state_folder() -> Path:
    """This user's verified-book state: outside every clone, so a clone that cannot be written keeps nothing."""
    named = os.environ.get(STATE_VARIABLE)
    if named:
        return Path(named).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "verified-book"


def folder() -> Path:
    """Where unsaved records are kept."""
    return state_folder() / "unsaved"


def _folder_key(results_dir: Path) -> str:
    """The results folder a kept run was meant for, as a folder name can say it."""
    return fingerprint(str(results_dir.absolute()))


def place_for(target: Path, slug: str) -> Path:
    """A new file for one run's records meant for `target`; its folder is this run's alone."""
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S%f")
    return folder() / f"{_folder_key(target.parent)}-{stamp}-{os.getpid()}-{next(_RUNS)}" / f"{slug}.json"


def meant_for(target: Path) -> list[Path]:
    """The unsaved records meant for the results file (or store) `target`, oldest first: JSON files, either way."""
    return sorted(folder().glob(f"{_folder_key(target.parent)}-*/{target.stem}.json"), key=lambda p: p.parent.name)


def meant_for_folder(results_dir: Path) -> list[Path]:
    """The unsaved records meant for any results file in `results_dir`, oldest first."""
    return sorted(folder().glob(f"{_folder_key(results_dir)}-*/*.json"), key=lambda p: p.parent.name)


def remove(path: Path) -> None:
    """Let go of one run's unsaved records, taken into a results file: the file and its run's folder."""
    path.unlink(missing_ok=True)
    try:
        path.parent.rmdir()
    except OSError:  # something else lies there: left as it is
        pass


@dataclass(frozen=True)
class Unsaved:
    """Where a run's records went when its results file could not take them: the run prints `line`; the
    verdict says `words` and names `kept_in` last."""

    kept_in: Path | None
    line: str
    words: str
