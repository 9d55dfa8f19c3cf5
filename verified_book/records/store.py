"""A machine's own history, kept so that a run writes the records it produced and nothing else.

Design: SQLite (the standard library's sqlite3), one file where the single JSON file lay,
`<local results>/<machine>.sqlite`. One row per (claim, backend) record holds that record's validated
JSON; the run header (its fields, and its timing and date per claim and backend), each claim's metadata
and each snippet's output have rows of their own. Chosen over one JSON file per claim module or page:
one file is one lock and one transaction, a write of any set of records is atomic (a crash leaves the
last committed state, as the JSON file's rename did), and WAL lets the site and `--changed` read while a
run writes. A write costs what the run touched: the rows its records name are read, merged by the
rules of `ResultsFile.merge` (applied to those rows alone), and written back in one transaction.

Every row is validated when written and when read, as its part of a results file would be; a bad row
is set aside alone (to `<name>.set-aside-<time>`, as `verified_book.records.salvage` sets a file's bad
parts aside), reported with its key, and the rest read. A file that is not such a store at all is moved
aside whole (`.corrupt-<time>`); one of a newer schema is left alone.

The exchange format stays the versioned JSON file: `export` writes exactly the text the JSON history
would hold (`verified_book.records.writing.dumps`), which `verified-book contribute` checks and merges.
A `<machine>.json` history found beside a new store is taken in when the store is first written, its
bad parts set aside as a writer does today, and removed only once the store has committed it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Iterator, Mapping

from filelock import FileLock, Timeout
from pydantic import ValidationError

from verified_book.records import footprints as footprints_mod
from verified_book.records import salvage
from verified_book.records.errors import NewerSchema, OtherMachine, ResultsError
from verified_book.records.migrate import migrate
from verified_book.records.record import (
    SCHEMA_VERSION,
    Check,
    ClaimMeta,
    MachineRecord,
    Record,
    RunHeader,
    SnippetOutput,
)
from verified_book.records.results import (
    PER_RECORD,
    ResultsFile,
    no_json_constants,
    read,
    same_machine,
)
from verified_book.records.store_rows import RECORDS, Rows, parsed

SUFFIX = ".sqlite"
#: the layout of the tables below; a store of another layout is not read as this one
LAYOUT = 3  # 2: footprints (verified_book.records.footprints); 3: their sources in a table of their own
_TABLES = (
    footprints_mod.TABLES
    + """
CREATE TABLE IF NOT EXISTS header (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    claim TEXT NOT NULL, backend TEXT NOT NULL, status TEXT NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (claim, backend)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_by_status ON records (backend, status);
CREATE TABLE IF NOT EXISTS per_record (
    field TEXT NOT NULL, claim TEXT NOT NULL, backend TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (claim, backend, field)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS claims (claim TEXT PRIMARY KEY, meta TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS outputs (name TEXT PRIMARY KEY, output TEXT NOT NULL) WITHOUT ROWID;
"""
)


Warn = Callable[[str], None]
Key = tuple[str, str]
RECORD_ROW = "SELECT record FROM records WHERE claim = ? AND backend = ?"


def is_store(path: Path) -> bool:
    """Whether a machine's history at `path` is a store (else the JSON file, the exchange format)."""
    return path.suffix == SUFFIX


def read_history(
    path: Path, warn: Callable[[str], None] = lambda _: None, claims: Iterable[str] | None = None
) -> ResultsFile:
    """A machine's own history, whichever form holds it: its store, or its results file (read whatever its size);
    with `claims`, a store reads only those claims' rows (a results file is one text, read whole)."""
    if not is_store(path):
        return read(path, own=True)
    history = Store(path)
    return history.read(warn) if claims is None else history.read_claims(claims, warn)


def place(folder: Path, slug: str) -> Path:
    """Where a machine's own history is kept in `folder`."""
    return folder / f"{slug}{SUFFIX}"


def _json(model: Any) -> str:
    """A part's row: its JSON, keys sorted as the results file sorts them, so a read gives what that file gives."""
    data = model.model_dump(mode="json", exclude_unset=True)
    return json.dumps(data, ensure_ascii=False, allow_nan=False, sort_keys=True)


def _keys(records: dict[str, dict[str, Record]]) -> set[Key]:
    return {(c, b) for c, per in records.items() for b in per}


def _timed(run: RunHeader) -> dict[str, set[Key]]:
    """The (claim, backend) pairs a run header times and dates, by field."""
    return {k: {(c, b) for c, per in getattr(run, k).items() for b in per} for k in PER_RECORD}


def _stamp() -> str:
    return _dt.datetime.now().strftime("%Y%m%dT%H%M%S%f")


class Store:
    """One machine's own history in SQLite (see the module's docstring). `rows_written` counts every row this
    object has written since it was made: what a write cost, for the tests that pin it to what a run touched."""

    def __init__(self, path: Path, slug: str | None = None) -> None:
        self.path = path
        self.slug = slug or path.stem
        self.rows_written = 0
        self.records_written = 0

    @property
    def legacy(self) -> Path:
        """The single JSON file this store replaces, where one is still there."""
        return self.path.with_suffix(".json")

    # -- opening

    @contextlib.contextmanager
    def _db(self, *, read_only: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection; `read_only` opens the file as it lies, for a folder that cannot be written (where no
        writer can be either: the last writer's close folded its log into the file)."""
        if read_only:
            db = sqlite3.connect(f"{self.path.absolute().as_uri()}?immutable=1", uri=True, isolation_level=None)
        else:
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        try:
            yield db
        finally:
            db.close()

    def _layout(self, db: sqlite3.Connection, *, write: bool = True) -> None:
        """The tables made where missing (given `write`); a file that is not a store of this layout raises
        ResultsError."""
        try:
            found = db.execute("PRAGMA user_version").fetchone()[0]
            if found > LAYOUT:
                raise NewerSchema(
                    f"{self.path}: a store of layout {found} (a newer verified-book), this checkout reads up to "
                    f"{LAYOUT}; update the project (git pull, then `python3 run.py setup`) to read it"
                )
            if not write or found == LAYOUT:
                return
            if found == 2:  # footprints of one row a source: let go, and kept again as records are written
                db.execute("DROP TABLE IF EXISTS footprints")
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_TABLES)
            db.execute(f"PRAGMA user_version={LAYOUT}")
        except sqlite3.DatabaseError as e:
            raise ResultsError(f"{self.path}: not a results store ({e})") from None

    def _header(self, db: sqlite3.Connection) -> tuple[MachineRecord, RunHeader] | None:
        """The machine and the run header (less its per-record timings); None for a store not yet written."""
        rows = dict(db.execute("SELECT key, value FROM header").fetchall())
        if not rows:
            return None
        where = str(self.path)
        version = json.loads(rows.get("schema_version", "0"))
        if version != SCHEMA_VERSION:
            migrate({"schema_version": version}, where) if version > SCHEMA_VERSION else None  # NewerSchema
            raise _Older(f"{where}: holds records of schema version {version}; this checkout writes {SCHEMA_VERSION}")
        slug = json.loads(rows.get("slug", "null"))
        if slug != self.slug:
            raise ResultsError(
                f"{where}: holds the records of machine {slug!r}; a machine's store is named after its slug "
                f"({slug}{SUFFIX})"
            )
        try:
            machine = MachineRecord.model_validate(json.loads(rows["machine"], parse_constant=no_json_constants))
            run = RunHeader.model_validate(json.loads(rows["run"], parse_constant=no_json_constants))
        except (KeyError, ValueError, ValidationError) as e:
            raise ResultsError(f"{where}: its machine or run header does not read ({e})") from None
        return machine, run

    def _writable(self) -> bool:
        """Whether this process may write the store (else it is read as it lies: a reader's read-only clone)."""
        return os.access(self.path.parent, os.W_OK | os.X_OK) and os.access(self.path, os.W_OK)

    # -- reading

    def exists(self) -> bool:
        return self.path.is_file()

    def read(self, warn: Warn = lambda _: None) -> ResultsFile:
        """The whole history as a results file, as the judging, the site and `--changed` read it; each bad row
        set aside (and said through `warn`), the rest read."""
        return self._read(None, warn)

    def read_claims(self, claims: Iterable[str], warn: Warn = lambda _: None) -> ResultsFile:
        """The history of some claims only (their records, timings and metadata; the machine, run header and
        outputs whole): what a caller that needs only these claims reads, at the cost of these rows."""
        return self._read(set(claims), warn)

    def read_except(self, keys: Collection[Key], warn: Warn = lambda _: None) -> ResultsFile:
        """Every record but those of `keys` (claim, backend), with their claims' metadata and timings: what a run
        that redid `keys` left as it was, at the cost of those rows and of listing the store's keys."""
        return self._read(None, warn, leaving=keys)

    def _read(self, claims: set[str] | None, warn: Warn, leaving: Collection[Key] = ()) -> ResultsFile:
        """The rows asked for (`claims`, or all but the records `leaving` names); before the store's first
        write, the JSON history it will take in, read whole."""
        if not self.exists():
            return read(self.legacy, own=True) if self.legacy.is_file() else ResultsFile(self.slug)
        writable = self._writable()
        try:
            with self._db(read_only=not writable) as db:
                self._layout(db, write=writable)
                header = self._header(db)
                if header is None:
                    return ResultsFile(self.slug)
                rows = Rows(db)
                if leaving:
                    pairs = [k for k in db.execute("SELECT claim, backend FROM records") if k not in leaving]
                    found = rows.take(pairs, {c for c, _ in pairs}, outputs=True)
                else:
                    found = rows.take(None if claims is None else [], claims or (), whole_claims=True, outputs=True)
        except sqlite3.Error as e:
            raise ResultsError(f"{self.path}: does not read as a results store ({e})") from None
        self._set_aside(found.bad, warn)
        return found.results(self.slug, *header)

    # -- writing

    def merge(
        self,
        update: ResultsFile,
        warn: Warn = lambda _: None,
        timeout: float = 120,
        footprints: footprints_mod.Footprints | None = None,
    ) -> ResultsFile:
        """Merge `update` (checked by the caller) into the store, under a lock, in one transaction: the rows its
        records, timings, claims and outputs name are read, merged by `ResultsFile.merge`, and written back, each
        record the merge took with its footprint from `footprints` (none given: none kept). What the store now
        holds of those rows is returned. A merge of another machine's records is refused."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with FileLock(str(self.path) + ".lock", timeout=timeout):
                self._open_for_writing(warn)
                with self._db() as db:
                    self._layout(db)
                    merged, bad = self._merge(db, update, footprints or {})
                self._set_aside(bad, warn, removed=True)
                return merged
        except Timeout:
            raise ResultsError(
                f"{self.path}: another run has held its lock ({self.path.name}.lock) for {timeout:.0f} s; "
                "nothing was merged"
            ) from None

    def footprint_again(self, records: Mapping[Check, Record], footprints: footprints_mod.Footprints) -> int:
        """Write anew the footprints of `records`, each one the engine read from this store and found speaking
        for the book as it is now, where the store still holds that very record (one written since by another
        run keeps its own footprint); nothing where another run holds the store or it cannot be written. Returns
        the rows written."""
        if not self.exists():
            return 0
        try:
            with FileLock(str(self.path) + ".lock", timeout=0), self._db() as db:
                if db.execute("PRAGMA user_version").fetchone()[0] != LAYOUT:
                    return 0  # a store of another layout is the next merge's to bring up to date
                with _transaction(db):
                    same = [
                        key
                        for key, record in records.items()
                        if (row := db.execute(RECORD_ROW, key).fetchone()) and row[0] == _json(record)
                    ]
                    return footprints_mod.write(db, same, footprints)
        except (Timeout, OSError, sqlite3.Error):
            return 0

    def _open_for_writing(self, warn: Warn) -> None:
        """A store that does not read as one set aside whole (said); one of an older schema migrated; the JSON
        history beside a new store taken in."""
        older = None
        if self.exists():
            try:
                with self._db() as db:
                    self._layout(db)
                    self._header(db)
            except NewerSchema:
                raise
            except _Older:
                older = self._as_legacy()
            except ResultsError as e:
                aside = self.path.with_name(f"{self.path.name}.corrupt-{_stamp()}")
                os.replace(self.path, aside)
                for extra in ("-wal", "-shm"):
                    Path(f"{self.path}{extra}").unlink(missing_ok=True)
                warn(f"{e}\n{self.path}: kept aside as {aside.name}; a new store holds this run's records")
        if not self.exists() and self.legacy.is_file():
            self._take_in_legacy(warn)
        if older is not None and self.exists():
            older.unlink()

    def _as_legacy(self) -> Path:
        """A store of an older schema written out as the JSON history it holds (rows as they lie), for
        `_take_in_legacy` to migrate as it migrates any older results file; the store kept aside (returned) until
        the migrated history is committed."""
        from verified_book.records.writing import write_text

        with self._db() as db:
            data = _raw_document(db)
        write_text(self.legacy, json.dumps(data, ensure_ascii=False))
        aside = self.path.with_name(f"{self.path.name}.older-{_stamp()}")
        os.replace(self.path, aside)
        for extra in ("-wal", "-shm"):
            Path(f"{self.path}{extra}").unlink(missing_ok=True)
        return aside

    def _take_in_legacy(self, warn: Warn) -> None:
        """The single JSON history taken into the store in one transaction, then removed: its bad parts set aside
        as a writer of that file sets them aside, a file that does not read at all kept aside whole."""
        from verified_book.records.writing import read_keeping_aside

        legacy = self.legacy
        old = read_keeping_aside(legacy, warn, "the store begins without it")
        if old is None:
            return
        with self._db() as db:
            self._layout(db)
            with _transaction(db):
                self._write_header(db, old)
                self._write(db, old, _keys(old.records), _timed(old.run), old.claims, old.outputs)
        legacy.unlink()
        warn(f"{legacy}: taken into {self.path.name} ({len(_keys(old.records))} records); the store holds them now")

    def _merge(
        self, db: sqlite3.Connection, update: ResultsFile, footprints: footprints_mod.Footprints
    ) -> tuple[ResultsFile, list[salvage.SetAside]]:
        with _transaction(db):
            header = self._header(db)
            current = ResultsFile(update.slug) if header is None else ResultsFile(update.slug, *header)
            why = same_machine(current, update) if header is not None else None
            if why is not None:
                raise OtherMachine(f"{self.path}: {why}")
            keys, timed = _keys(update.records), _timed(update.run)
            absent = [name for name, version in (update.run.backends or {}).items() if version is None]
            found = Rows(db).take(keys | set().union(*timed.values()), update.claims, absent=absent)
            if header is not None:
                current = found.results(update.slug, *header)
            for part in found.bad:  # set aside (said by the caller); one this merge writes again is written below
                _remove(db, part.at)
            current.merge(update)
            self._write_header(db, current)
            claims = {c: current.claims[c] for c in update.claims}
            self._write(db, current, keys | found.keys, timed, claims, update.outputs)
            taken = {(c, b) for c, b in keys if current.records.get(c, {}).get(b) is update.records[c][b]}
            gone = {(c, b) for c, b in keys | found.keys if b not in current.records.get(c, {})}
            self.rows_written += footprints_mod.write(db, taken | gone, footprints)
        return current, found.bad

    def _write_header(self, db: sqlite3.Connection, results: ResultsFile) -> None:
        run = results.run.model_dump(mode="json", exclude_unset=True, exclude=set(PER_RECORD))
        values = {
            "schema_version": json.dumps(SCHEMA_VERSION),
            "slug": json.dumps(results.slug),
            "machine": _json(results.machine),
            "run": json.dumps(run, ensure_ascii=False, allow_nan=False, sort_keys=True),
        }
        db.executemany("INSERT OR REPLACE INTO header (key, value) VALUES (?, ?)", values.items())
        self.rows_written += len(values)

    def _write(
        self,
        db: sqlite3.Connection,
        results: ResultsFile,
        keys: set[Key],
        timed: dict[str, set[Key]],
        claims: dict[str, ClaimMeta],
        outputs: dict[str, SnippetOutput],
    ) -> None:
        """The rows of `keys`, `timed`, `claims` and `outputs` as `results` holds them: written, or removed where
        it holds none. Each record is checked as its part of a results file before it is written."""
        upserts, gone = [], []
        for claim, backend in sorted(keys):
            rec = results.records.get(claim, {}).get(backend)
            if rec is None:
                gone.append((claim, backend))
            else:
                text = _json(rec)
                RECORDS.validate_python(parsed({claim: {backend: text}}))
                upserts.append((claim, backend, str(rec.status), text))
        db.executemany("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?)", upserts)
        db.executemany("DELETE FROM records WHERE claim = ? AND backend = ?", gone)
        per = [
            (k, c, b, json.dumps(getattr(results.run, k)[c][b], allow_nan=False))
            for k, pairs in timed.items()
            for c, b in sorted(pairs)
            if b in getattr(results.run, k).get(c, {})
        ]
        db.executemany("INSERT OR REPLACE INTO per_record VALUES (?, ?, ?, ?)", per)
        db.executemany("INSERT OR REPLACE INTO claims VALUES (?, ?)", [(c, _json(m)) for c, m in claims.items()])
        db.executemany("INSERT OR REPLACE INTO outputs VALUES (?, ?)", [(n, _json(o)) for n, o in outputs.items()])
        written = len(upserts) + len(gone)
        self.records_written += written
        self.rows_written += written + len(per) + len(claims) + len(outputs)

    def _set_aside(self, bad: list[salvage.SetAside], warn: Warn, *, removed: bool = False) -> None:
        """Bad rows written to a side file and removed from the store (`removed`: the caller removed them), each
        said with its key; where the store cannot be written (a reader's read-only clone) they are only said, and
        left out of what was read."""
        if not bad:
            return
        from verified_book.records.writing import write_side_file

        head = f"{self.path}: {len(bad)} row{'s' if len(bad) != 1 else ''} that do not read set aside"
        try:
            side = self.path.with_name(f"{self.path.name}.set-aside-{_stamp()}")
            write_side_file(side, bad)
            if not removed:
                with FileLock(str(self.path) + ".lock", timeout=10), self._db() as db, _transaction(db):
                    for part in bad:
                        _remove(db, part.at)
            head += f" in {side.name}:"
        except (OSError, sqlite3.Error, Timeout) as e:
            head += f" (left in the store, which cannot be written here: {e}):"
        warn("\n".join([head, *(f"  {self.path}{part.where()}: {part.why}" for part in bad[:50])]))

    def held(self, digests: footprints_mod.Digester) -> footprints_mod.Footprinted:
        """Which records still speak for the book by their footprints, given the `digests` now of the sources
        footprints name (`verified_book.records.footprints`); every record moved before the store's first write."""
        if not self.exists():
            return footprints_mod.Footprinted()
        try:
            with self._db(read_only=not self._writable()) as db:
                self._layout(db, write=False)
                header = self._header(db)
                run_date = header[1].date if header is not None else None
                return footprints_mod.held(db, digests, run_date)
        except sqlite3.Error as e:
            raise ResultsError(f"{self.path}: does not read as a results store ({e})") from None

    # -- the exchange file

    def export(self, to: Path, warn: Warn = lambda _: None) -> Path:
        """The history as the exchange file `to` (named `<slug>.json`), the text the JSON history would hold,
        checked as a contributed file is; the path written."""
        from verified_book.records.writing import dumps, write_text

        to.parent.mkdir(parents=True, exist_ok=True)
        write_text(to, dumps(self.read(warn)))
        read(to, own=True)  # what was written reads back as a results file
        return to


class _Older(ResultsError):
    """A store written by an older schema: migrated when next written (`Store._as_legacy`)."""


def _raw_document(db: sqlite3.Connection) -> dict[str, Any]:
    """A store's rows as the results document they make, unchecked (each record with its measured part in it)."""
    header = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM header")}
    run = dict(header.get("run") or {})
    for field, claim, backend, value in db.execute("SELECT field, claim, backend, value FROM per_record"):
        run.setdefault(field, {}).setdefault(claim, {})[backend] = json.loads(value)
    records: dict[str, dict[str, Any]] = {}
    for claim, backend, text in db.execute("SELECT claim, backend, record FROM records"):
        records.setdefault(claim, {})[backend] = json.loads(text)
    return {
        **{k: v for k, v in header.items() if k in ("schema_version", "slug", "machine")},
        "run": run,
        "records": records,
        "claims": {c: json.loads(m) for c, m in db.execute("SELECT claim, meta FROM claims")},
        "outputs": {n: json.loads(o) for n, o in db.execute("SELECT name, output FROM outputs")},
    }


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _remove(db: sqlite3.Connection, at: salvage.Place) -> None:
    """The row a part set aside came from, removed."""
    table, *key = at
    if table == "records":
        db.execute("DELETE FROM records WHERE claim = ? AND backend = ?", key)
    elif table == "run":
        db.execute("DELETE FROM per_record WHERE field = ? AND claim = ? AND backend = ?", key)
    elif table == "claims":
        db.execute("DELETE FROM claims WHERE claim = ?", key)
    elif table == "outputs":
        db.execute("DELETE FROM outputs WHERE name = ?", key)
