"""A copy of the book `verified-book init` writes, opened in this process, kept warm
(`verified_book.engine.live.Live`), and its files saved as an editor saves them: what the tests of the warm
book and of `serve` drive."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

from harness.paths import ROOT
from verified_book.engine.config import read_config
from verified_book.engine.live import Live
from verified_book.engine.live_report import Report

EXAMPLE = ROOT / "verified_book" / "template"  # what `verified-book init` writes
SLUG = "serve-test"


@contextlib.contextmanager
def opened_copy(into: Path) -> Iterator[Path]:
    """A copy of the book `verified-book init` writes at `into` (its `Live` opens the book of its own); its
    claims modules are forgotten after."""
    shutil.copytree(EXAMPLE, into, ignore=shutil.ignore_patterns("__pycache__", "results", "site", ".cache"))
    try:
        yield into
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == "book_claims"]:
            del sys.modules[name]


def started(book: Path, *, measured: bool = False) -> Live:
    """The warm book at `book`, every claim computed once (the measured ones too, where `measured`)."""
    live = Live(read_config(book), measured=measured, machine_info=lambda info: {**info, "slug": SLUG})
    live.start()
    return live


def touch(path: Path) -> None:
    """A new modification time for `path`, later than any before, even on a coarse clock."""
    later = time.time_ns() + 10**9
    os.utime(path, ns=(later, later))


def write(path: Path, text: str) -> None:
    """`path` saved with `text`, as an editor saves it."""
    path.write_text(text)
    touch(path)


def saving(live: Live, path: Path) -> Callable[[str], Report]:
    """Saving `path` with a text: the warm book's answer."""

    def save(text: str) -> Report:
        write(path, text)
        return live.apply(live.changed())

    return save
