"""Claims' code fingerprints and the libraries their code names, kept between runs of an unchanged book.

A claim's fingerprint (`provenance.code_fingerprint`) and the libraries it names (`provenance.libraries_of`)
are read from its code and from everything in the book's claim packages it reaches: a parse of each
function's source, for every claim, in every process that asks (`--changed`, the site, `serve`'s start).
Both follow from the packages' sources and the claim's declaration alone, so they are kept, in one folder
per state of the sources, `<root>/.cache/verified-book/fingerprints/<sources>/`, named by the SHA-256 of every
Python file of the book's claim packages and of the engine's code that reads them, one file in it for the
claims of each module, so that a process that asks about a few claims reads only their modules' answers. An
edit to any source names another folder, and every claim is read again. A package file changed since this
process loaded its modules may not be the code loaded (a preview imported it before the save): then nothing is
kept or taken back.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Any, Hashable, Iterable

from verified_book.records import kept

FOLDER = Path(".cache") / "verified-book" / "fingerprints"
KEEP_STATES = 8  # states of the sources a book's folder keeps


class KeptFingerprints:
    """The kept answers of one open book, each module's read from disk the first time one of them is asked for.
    A key's second part is the module of the claim it is about."""

    def __init__(self, root: Path, packages: Iterable[str]) -> None:
        self.root = root
        self.packages = sorted(set(packages))
        self._state: Path | None = None
        self._found_state = False
        self._tables: dict[str, dict[Hashable, Any]] = {}
        self._grown: set[str] = set()

    def get(self, key: tuple[Hashable, ...]) -> Any | None:
        """The answer kept for `key`; None where none is (or the sources cannot name one)."""
        return self._loaded(str(key[1])).get(key)

    def put(self, key: tuple[Hashable, ...], value: Any) -> None:
        module = str(key[1])
        table = self._loaded(module)
        if self._state is not None and table.get(key) != value:
            table[key] = value
            self._grown.add(module)

    def save(self) -> None:
        """Write each module's answers that grew since the last save, and let go of the oldest states."""
        if self._state is None or not self._grown:
            return
        for module in sorted(self._grown):
            kept.keep(self._state / f"{module}.pickle", self._tables[module], at_most=None)
        self._grown.clear()
        with contextlib.suppress(OSError):
            os.utime(self._state)  # in use: the last state to be let go
        kept.let_go_oldest(self._state.parent, KEEP_STATES)

    def _loaded(self, module: str) -> dict[Hashable, Any]:
        if not self._found_state:
            self._state, self._found_state = self._where(), True
        if module not in self._tables:
            found = kept.taken(self._state / f"{module}.pickle") if self._state is not None else None
            self._tables[module] = found if isinstance(found, dict) else {}
        return self._tables[module]

    def _where(self) -> Path | None:
        """The folder of the sources as they are, or None where a source cannot be read or changed since this
        process loaded its modules."""
        from verified_book.engine import provenance, source

        code = kept.code_of([provenance.__name__, source.__name__], {"verified_book"})
        if code is None:
            return None
        digest = hashlib.sha256(code.encode())
        for package in self.packages:
            folder = self.root / package
            for path in sorted(folder.rglob("*.py")) if folder.is_dir() else []:
                try:
                    if kept.newer_than_this_process(path):
                        return None
                    digest.update(str(path.relative_to(self.root)).encode() + b"\0" + path.read_bytes() + b"\0")
                except OSError:
                    return None
        return self.root / FOLDER / digest.hexdigest()[:32]
