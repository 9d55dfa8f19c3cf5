"""Claims' code fingerprints and the libraries their code names, kept between runs of an unchanged book.

A claim's fingerprint (`provenance.code_fingerprint`) and the libraries it names (`provenance.libraries_of`)
are read from its code and from everything in the book's claim packages it reaches: a parse of each
function's source, for every claim, in every process that asks (`--changed`, the site, `serve`'s start).
Both follow from the packages' sources and the claim's declaration alone, so they are kept, in one file
per state of the sources, `<root>/.cache/verified-book/fingerprints/<sources>.pickle`: the SHA-256 of every
Python file of the book's claim packages and of the engine's code that reads them. An edit to any of them
names another file, and every claim is read again. A package file changed since this process loaded its
modules may not be the code loaded (a preview imported it before the save): then nothing is kept or taken
back.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Hashable, Iterable

from verified_book.records import kept

FOLDER = Path(".cache") / "verified-book" / "fingerprints"
KEEP_STATES = 8  # states of the sources a book's folder keeps


class KeptFingerprints:
    """The kept answers of one open book, read from disk the first time one is asked for."""

    def __init__(self, root: Path, packages: Iterable[str]) -> None:
        self.root = root
        self.packages = sorted(set(packages))
        self._place: Path | None = None
        self._table: dict[Hashable, Any] | None = None
        self._grown = False

    def get(self, key: Hashable) -> Any | None:
        """The answer kept for `key`; None where none is (or the sources cannot name one)."""
        return self._loaded().get(key)

    def put(self, key: Hashable, value: Any) -> None:
        table = self._loaded()
        if self._place is not None and table.get(key) != value:
            table[key] = value
            self._grown = True

    def save(self) -> None:
        """Write what was added since the last save."""
        if self._grown and self._place is not None and self._table is not None:
            kept.keep(self._place, self._table, KEEP_STATES)
            self._grown = False

    def _loaded(self) -> dict[Hashable, Any]:
        if self._table is None:
            self._place = self._where()
            found = kept.taken(self._place) if self._place is not None else None
            self._table = found if isinstance(found, dict) else {}
        return self._table

    def _where(self) -> Path | None:
        """The file of the sources as they are, or None where a source cannot be read or changed since this
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
        return kept.named(self.root / FOLDER, digest.hexdigest())
