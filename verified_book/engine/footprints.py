"""What a record was computed and judged from, by source, and each source's digest now: how `--changed` tells
the records an edit may have changed from those it cannot have, without reading or judging the rest.

A record's sources (`sources_of`): the files of the modules its claim's fingerprint reads
(`provenance.code_modules`), the data files and snippets it read, the pages its figures are printed on, the
versions of the libraries it computed with, and the engine's code that reads all of these. Each is written with
its digest beside the record (`verified_book.records.footprints`). While every digest holds, the one rule
(`provenance.outdated_reason`, and the figures' text and places) gives the answer it gave when the record was
written, so the record is unchanged; where one moved, the records it names are read and judged by that rule. A
file that may not be what the run read (a page, data file or snippet saved after the run opened the book, a module
saved after the process loaded it) has no digest: its records are judged.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from verified_book.authoring import inputs
from verified_book.authoring.registry import Claim, Registry
from verified_book.book.bindings import Binding
from verified_book.engine import provenance
from verified_book.records import kept, store
from verified_book.records.errors import ResultsError
from verified_book.records.record import Check, DataInput, Record, SnippetInput
from verified_book.records.results import ResultsFile
from verified_book.vocabulary import NO_BACKEND_NAME, Status, fingerprint

ENGINE = "engine"  # the engine's code that reads a record's sources and judges it
LIBRARY = "library:"  # a library's version, by the backend's or the library's name
CODE, FILE = "code:", "file:"  # a Python file of the claims' code; a page, data file or snippet
#: statuses of a record that did not hold: such a check is judged again by `--changed` although nothing moved
NOT_HELD = (Status.STALE, Status.FAILED)
#: the engine's modules whose code decides what a record's sources say
RULE = ["verified_book.engine.provenance", "verified_book.engine.source", "verified_book.book.bindings", __name__]


class Digests:
    """Each source's digest as the book is now, read once: a file's `fingerprint`, "" where it
    is missing or may not be what the run read (a page, data file or snippet saved after `since`, when the run
    opened the book; a module saved after this process loaded its modules, `kept.newer_than_this_process`); a
    library's version as `versions` knows it (None: absent), "?" where it is not known here; the engine's code by
    its source."""

    def __init__(self, root: Path, versions: Mapping[str, str | None], since: float) -> None:
        self.root = root
        self.versions = versions
        self.since = since
        self._known: dict[str, str] = {}

    def __call__(self, source: str) -> str:
        if source not in self._known:
            self._known[source] = self._read(source)
        return self._known[source]

    def of(self, sources: Iterable[str]) -> dict[str, str]:
        return {source: self(source) for source in sources}

    def _read(self, source: str) -> str:
        if source == ENGINE:
            code = kept.code_of(RULE, {"verified_book"})
            return "" if code is None else fingerprint(code)
        if source.startswith(LIBRARY):
            name = source[len(LIBRARY) :]
            return _version(self.versions[name]) if name in self.versions else "?"
        kind, _, where = source.partition(":")
        path = self.root / where
        try:
            if kept.newer_than_this_process(path) if kind + ":" == CODE else path.stat().st_mtime > self.since:
                return ""
            return fingerprint(path.read_bytes())
        except OSError:
            return ""


def _version(version: str | None) -> str:
    return "" if version is None else str(version)


def _relative(path: Path, root: Path) -> str:
    path = path if path.is_absolute() else root / path
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def code_files(claim: Claim, root: Path) -> set[str]:
    """The files of a claim's code as sources: those of the modules its fingerprint reads (`provenance.code_modules`);
    a module with no file is a source never held."""
    files = set()
    for name in provenance.code_modules(claim):
        file = getattr(sys.modules.get(name), "__file__", None)
        files.add(CODE + (_relative(Path(file), root) if file else f"<{name}>"))
    return files


def sources_of(claim: Claim, backend: str, record: Record, root: Path) -> dict[str, str | None]:
    """A record's sources, each with the version the record names where it is a library (else None: a file, or
    the engine's code, digested as it is now)."""
    found: dict[str, str | None] = dict.fromkeys([ENGINE, *sorted(code_files(claim, root))])
    for entry in record.inputs or ():
        if isinstance(entry, DataInput):
            found[FILE + _relative(inputs.data_dir() / entry.file, root)] = None
        elif isinstance(entry, SnippetInput):
            found[FILE + _relative(Path(entry.snippet), root)] = None
    found.update(dict.fromkeys(FILE + f.file for f in record.figures or ()))
    if backend != NO_BACKEND_NAME:
        found[LIBRARY + backend] = _version(record.version)
    for name in provenance.uses_of(claim, backend):
        found[LIBRARY + name] = _version((record.uses or {}).get(name))
    return found


def to_keep(
    history: Path, results: ResultsFile, registry: Registry, root: Path, since: float
) -> dict[tuple[str, str], dict[str, str]] | None:
    """What a run (or `serve`) merging `results` into this machine's `history` keeps of each record's sources:
    `of_records` where the history is a store, None where it is a results file, which has no place for them."""
    return of_records(results, registry, root, since) if store.is_store(history) else None


def of_records(
    results: ResultsFile, registry: Registry, root: Path, since: float
) -> dict[tuple[str, str], dict[str, str]]:
    """The footprint of each record of `results` whose claim the book declares (`of`)."""
    return of({Check(c, b): r for c, per in results.records.items() for b, r in per.items()}, registry, root, since)


def of(
    records: Mapping[Check, Record], registry: Registry, root: Path, since: float
) -> dict[tuple[str, str], dict[str, str]]:
    """The footprint of each of `records` (by claim and backend) whose claim the book declares: its sources and
    their digests, a library's as the record names it, a file's as it is now (`Digests`; `since`: when the run
    read the book)."""
    digests = Digests(root, {}, since)
    out: dict[tuple[str, str], dict[str, str]] = {}
    for (claim_id, backend), record in records.items():
        claim = registry.get(claim_id)
        if claim is None:
            continue
        sources = sources_of(claim, backend, record, root)
        out[(claim_id, backend)] = {s: digests(s) if v is None else v for s, v in sources.items()}
    return out


@dataclass
class Unchanged:
    """What no edit since this machine's records were written can have changed: the records (with their status and
    date), and the pages that did change or are new to the records (`pages`), whose figures are judged again."""

    records: dict[Check, tuple[str, str | None]] = field(default_factory=dict)
    pages: set[str] = field(default_factory=set)
    judged: set[str] = field(default_factory=set)  # the claims with a record here that is not held


def held(
    path: Path, root: Path, versions: Mapping[str, str | None], bound: Mapping[str, list[Binding]], since: float
) -> Unchanged | None:
    """The records of this machine's store that no edit can have changed, with their status and date: every
    source has the digest it had (`versions`: each backend's and library's version here), the record held, and
    no page its claim is printed on now moved or is new to the footprints. None where the history is no store,
    or does not read (then every record is judged)."""
    if not (store.is_store(path) and path.is_file()):
        return None
    digests = Digests(root, versions, since)
    try:
        found = store.Store(path).held(digests.of)
    except ResultsError:
        return None
    printed = {b.file for per in bound.values() for b in per}
    out = Unchanged(pages={p for p in printed if FILE + p in found.moved_sources or FILE + p not in found.sources})
    out.judged = {claim_id for claim_id, _ in found.moved}
    printed_on_moved = {b.claim_id for per in bound.values() for b in per if b.file in out.pages}
    for (claim_id, backend), (status, date) in found.held.items():
        if status in NOT_HELD or claim_id in printed_on_moved:
            out.judged.add(claim_id)
            continue
        out.records[Check(claim_id, backend)] = (status, date)
    return out
