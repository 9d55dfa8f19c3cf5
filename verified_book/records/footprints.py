"""What each record of a machine's store was computed and judged from, by source: the table behind `--changed`.

A record's footprint names every source its answer depends on, each with its digest when the record was written:
the book's files (the claim's module and every module its code reaches, the data files it read, the pages its
figures are printed on, a snippet it took a figure from) and the versions of the libraries it computed with. While
every source of a record still has the digest it had, the record speaks for the book as it did when written, and
`--changed` need not read it; a source whose digest moved names, through an index, the records it may have
changed, and only those are read and judged by the one rule (`verified_book.engine.provenance.outdated_reason`).

The engine says what a source is and what its digest is now (`verified_book.engine.footprints`); this module
only keeps the rows. A record written without a footprint (one taken in from a JSON history) has none: it is
read and judged, as every record was before footprints were kept.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

Key = tuple[str, str]
#: a record's sources and their digests, by (claim, backend)
Footprints = Mapping[Key, Mapping[str, str]]
#: the digests now of the sources asked for
Digester = Callable[[list[str]], Mapping[str, str]]

TABLES = """
CREATE TABLE IF NOT EXISTS sources (
    id INTEGER PRIMARY KEY, source TEXT NOT NULL, digest TEXT NOT NULL, UNIQUE (source, digest));
CREATE TABLE IF NOT EXISTS footprints (
    claim TEXT NOT NULL, backend TEXT NOT NULL, source INTEGER NOT NULL,
    PRIMARY KEY (claim, backend, source)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS footprints_by_source ON footprints (source);
"""


def write(db: sqlite3.Connection, written: Iterable[Key], footprints: Footprints) -> int:
    """The footprints of the records a merge `written`: each replaced by the one given, or removed where none is
    (a record whose footprint is not known is read and judged, never taken as unchanged); a (source, digest) no
    footprint names any more let go. Returns rows written."""
    keys = sorted(written)
    db.executemany("DELETE FROM footprints WHERE claim = ? AND backend = ?", keys)
    pairs = {pair for key in keys for pair in footprints.get(key, {}).items()}
    db.executemany("INSERT OR IGNORE INTO sources (source, digest) VALUES (?, ?)", sorted(pairs))
    ids = {(source, digest): i for i, source, digest in db.execute("SELECT id, source, digest FROM sources")}
    rows = [(c, b, ids[pair]) for c, b in keys for pair in sorted(footprints.get((c, b), {}).items())]
    db.executemany("INSERT INTO footprints VALUES (?, ?, ?)", rows)
    db.execute("DELETE FROM sources WHERE NOT EXISTS (SELECT 1 FROM footprints f WHERE f.source = sources.id)")
    return len(rows) + len(pairs)


def kept(db: sqlite3.Connection) -> bool:
    """Whether the store keeps footprints (one written before they were kept has no such tables)."""
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sources'").fetchone() is not None


@dataclass
class Footprinted:
    """Of a store's records, by (claim, backend): those whose every source has the digest it had when written
    (`held`, with their status and date), and those that may have changed (`moved`: a source moved, or no
    footprint is kept)."""

    held: dict[Key, tuple[str, str | None]] = field(default_factory=dict)
    moved: set[Key] = field(default_factory=set)
    sources: set[str] = field(default_factory=set)  # every source a footprint names
    moved_sources: set[str] = field(default_factory=set)  # those with a digest other than now's


def held(db: sqlite3.Connection, digests: Digester, run_date: str | None) -> Footprinted:
    """Which records' footprints hold against the digests now of the sources they name (`digests`, asked once for
    all of them; a source missing from its answer has moved, and one written with no digest, "", never holds); a
    record's date is its own where the run header keeps one, else `run_date`."""
    found = Footprinted()
    if not kept(db):
        found.moved = set(db.execute("SELECT claim, backend FROM records"))
        return found
    rows = db.execute("SELECT id, source, digest FROM sources").fetchall()
    now = digests(sorted({source for _, source, _ in rows}))
    moved = []
    for i, source, digest in rows:
        found.sources.add(source)
        if not digest or now.get(source) != digest:  # "": no digest could be read when written
            found.moved_sources.add(source)
            moved.append((i,))
    for (i,) in moved:
        found.moved.update(db.execute("SELECT claim, backend FROM footprints WHERE source = ?", (i,)))
    found.moved.update(
        db.execute(
            "SELECT r.claim, r.backend FROM records r WHERE NOT EXISTS "
            "(SELECT 1 FROM footprints f WHERE f.claim = r.claim AND f.backend = r.backend)"
        )
    )
    records = db.execute(
        "SELECT r.claim, r.backend, r.status, CASE WHEN json_valid(p.value) AND json_type(p.value) = 'text' "
        "THEN json_extract(p.value, '$') END, p.value IS NULL OR json_valid(p.value) FROM records r "
        "LEFT JOIN per_record p ON p.claim = r.claim AND p.backend = r.backend AND p.field = 'dates'"
    )
    for claim, backend, status, date, ok in records:
        key = (claim, backend)
        if key in found.moved:
            continue
        if not ok:  # a bad row: read and judged, which sets it aside
            found.moved.add(key)
            continue
        found.held[key] = (status, date if isinstance(date, str) else run_date)
    return found
