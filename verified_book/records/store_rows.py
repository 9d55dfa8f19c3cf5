"""Reading a store's rows (`verified_book.records.store`): each checked as its part of a results file would be,
the sound ones gathered as the parts of a results file, the bad ones kept to be set aside with their keys."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Iterable

from pydantic import TypeAdapter, ValidationError

from verified_book.records import salvage
from verified_book.records.record import (
    BackendName,
    ClaimId,
    ClaimMeta,
    MachineRecord,
    OutputName,
    Record,
    RunHeader,
    SnippetOutput,
)
from verified_book.records.results import PER_RECORD, ResultsFile, no_json_constants
from verified_book.vocabulary import Status

Key = tuple[str, str]
RECORDS: TypeAdapter[dict[str, dict[str, Record]]] = TypeAdapter(dict[ClaimId, dict[BackendName, Record]])
CLAIMS: TypeAdapter[dict[str, ClaimMeta]] = TypeAdapter(dict[ClaimId, ClaimMeta])
OUTPUTS: TypeAdapter[dict[str, SnippetOutput]] = TypeAdapter(dict[OutputName, SnippetOutput])


class Found:
    """Rows read and checked: the sound ones as the parts of a results file, the bad ones to set aside."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Record]] = {}
        self.per_record: dict[str, dict[str, dict[str, Any]]] = {k: {} for k in PER_RECORD}
        self.claims: dict[str, ClaimMeta] = {}
        self.outputs: dict[str, SnippetOutput] = {}
        self.keys: set[Key] = set()  # every record key read, sound or not: a merge writes each back
        self.bad: list[salvage.SetAside] = []

    def results(self, slug: str, machine: MachineRecord, run: RunHeader) -> ResultsFile:
        header = RunHeader.model_validate({**run.model_dump(exclude_unset=True), **self.per_record})
        return ResultsFile(slug, machine, header, self.records, self.outputs, self.claims)


class Rows:
    """Reading rows of one store, each checked as its part of a results file."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def _wanted(self, pairs: Iterable[Key], claims: Iterable[str]) -> None:
        """The rows a read asks for, in temporary tables the queries below are driven by (never a scan)."""
        db = self.db
        db.execute("CREATE TEMP TABLE IF NOT EXISTS wanted (claim TEXT NOT NULL, backend TEXT NOT NULL)")
        db.execute("CREATE TEMP TABLE IF NOT EXISTS wanted_claims (claim TEXT PRIMARY KEY)")
        db.execute("DELETE FROM temp.wanted")
        db.execute("DELETE FROM temp.wanted_claims")
        db.executemany("INSERT INTO temp.wanted VALUES (?, ?)", pairs)
        db.executemany("INSERT OR IGNORE INTO temp.wanted_claims VALUES (?)", [(c,) for c in claims])

    def take(
        self,
        pairs: Iterable[Key] | None,
        claims: Iterable[str] = (),
        *,
        whole_claims: bool = False,
        absent: Iterable[str] = (),
        outputs: bool = False,
    ) -> Found:
        """Every row (`pairs` None), or the records and timings of `pairs` and the metadata of `claims` (with
        `whole_claims`, every record and timing of those claims too); with `absent`, every skipped record on
        those backends (a merge removes them); with `outputs`, every snippet's output."""
        db = self.db
        if pairs is None:
            records = db.execute("SELECT claim, backend, record FROM records").fetchall()
            per = db.execute("SELECT field, claim, backend, value FROM per_record").fetchall()
            metas = db.execute("SELECT claim, meta FROM claims").fetchall()
        else:
            self._wanted(pairs, claims)
            records = db.execute(
                "SELECT r.claim, r.backend, r.record FROM temp.wanted w CROSS JOIN records r "
                "ON r.claim = w.claim AND r.backend = w.backend"
            ).fetchall()
            per = db.execute(
                "SELECT p.field, p.claim, p.backend, p.value FROM temp.wanted w CROSS JOIN per_record p "
                "ON p.claim = w.claim AND p.backend = w.backend"
            ).fetchall()
            if whole_claims:
                records += db.execute(
                    "SELECT r.claim, r.backend, r.record FROM temp.wanted_claims w CROSS JOIN records r "
                    "ON r.claim = w.claim"
                ).fetchall()
                per += db.execute(
                    "SELECT p.field, p.claim, p.backend, p.value FROM temp.wanted_claims w CROSS JOIN per_record p "
                    "ON p.claim = w.claim"
                ).fetchall()
            metas = db.execute(
                "SELECT c.claim, c.meta FROM temp.wanted_claims w CROSS JOIN claims c ON c.claim = w.claim"
            ).fetchall()
            for name in absent:
                records += db.execute(
                    "SELECT claim, backend, record FROM records WHERE backend = ? AND status = ?",
                    (name, str(Status.SKIPPED)),
                ).fetchall()
        found = Found()
        for claim, backend, text in dict.fromkeys(records):
            found.keys.add((claim, backend))
            rec = self._checked(RECORDS, ("records", claim, backend), {claim: {backend: text}}, found)
            if rec is not None:
                found.records.setdefault(claim, {})[backend] = rec[claim][backend]
        for field, claim, backend, text in dict.fromkeys(per):
            if field in PER_RECORD and self._sound_timing(field, claim, backend, text, found):
                found.per_record[field].setdefault(claim, {})[backend] = json.loads(text)
        for claim, text in metas:
            meta = self._checked(CLAIMS, ("claims", claim), {claim: text}, found)
            if meta is not None:
                found.claims[claim] = meta[claim]
        for name, text in db.execute("SELECT name, output FROM outputs").fetchall() if outputs else ():
            out = self._checked(OUTPUTS, ("outputs", name), {name: text}, found)
            if out is not None:
                found.outputs[name] = out[name]
        return found

    @staticmethod
    def _checked(adapter: TypeAdapter[Any], at: salvage.Place, raw: dict[str, Any], found: Found) -> Any:
        """One row checked as its part of a results file; a bad one added to `found.bad` (None returned)."""
        try:
            return adapter.validate_python(parsed(raw))
        except ValidationError as e:
            depth = len(at) - 1
            why = "; ".join(
                "".join(f"[{k!r}]" for k in err["loc"][depth:]) + f"{': ' if len(err['loc']) > depth else ''}"
                f"{err['msg']}"
                for err in e.errors(include_url=False)
            )
        except (ValueError, RecursionError) as e:
            why = f"not valid JSON ({e})"
        found.bad.append(salvage.SetAside(at, why, unparsed(raw)))
        return None

    @staticmethod
    def _sound_timing(field: str, claim: str, backend: str, text: str, found: Found) -> bool:
        try:
            RunHeader.model_validate({field: {claim: {backend: json.loads(text, parse_constant=no_json_constants)}}})
            return True
        except (ValueError, ValidationError) as e:
            found.bad.append(salvage.SetAside(("run", field, claim, backend), str(e).splitlines()[0], text))
            return False


def parsed(node: Any) -> Any:
    """A row's key paths down to its JSON text, the text parsed: {claim: {backend: text}} -> the data."""
    if isinstance(node, dict):
        return {k: parsed(v) for k, v in node.items()}
    return json.loads(node, parse_constant=no_json_constants)


def unparsed(node: Any) -> Any:
    """A bad row's value for the side file: its JSON where it parses, else its text."""
    while isinstance(node, dict) and len(node) == 1:
        node = next(iter(node.values()))
    try:
        return json.loads(node, parse_constant=no_json_constants)
    except (TypeError, ValueError, RecursionError):
        return node
