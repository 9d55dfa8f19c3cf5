"""The results store: one JSON file per machine that has verified the book.

`results/<machine-slug>.json` holds a schema version, the machine's fingerprint, the
environment of its latest run, and one record per (claim, backend). A run merges its
records into the file under a lock and replaces it atomically, so a run of a subset
keeps every other record, and a crash mid-write leaves the previous file whole.
Readers (the site) warn about a bad file and skip it; writers refuse to overwrite
one and set it aside instead.
"""

from __future__ import annotations

import copy
import datetime as _dt
import functools
import hashlib
import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Container, Mapping

from filelock import FileLock, Timeout
from pydantic import ValidationError

from verified_book.errors import BookError
from verified_book.records import conditions, identity, kept, record, salvage, unsaved
from verified_book.records.record import (
    BACKEND_NAMES,
    BOOK_PATH_PATTERN,
    EXACT_PATTERN,
    MARKER_PATTERN,
    MAX_KEY_CHARS,
    MAX_LINE,
    MAX_SECONDS,
    MAX_STRING_CHARS,
    OUTPUT_NAME_PATTERN,
    SCHEMA_VERSION,
    SLUG_PATTERN,
    VOLATILE,
    ClaimMeta,
    Exact,
    Machine,
    Measured,
    Record,
    ResultsDocument,
    RunHeader,
    RunOnDisk,
    SnippetOutput,
)
from verified_book.vocabulary import NO_BACKEND_NAME, RECORDED, Status

__all__ = [
    "BACKEND_NAMES",
    "BOOK_PATH_PATTERN",
    "EXACT_PATTERN",
    "MARKER_PATTERN",
    "MAX_LINE",
    "MAX_SECONDS",
    "OUTPUT_NAME_PATTERN",
    "SCHEMA_VERSION",
    "SLUG_PATTERN",
]

# Limits on a results file, which may come from anyone, checked before it is parsed: past them a file
# is refused, not rendered. The limits on each field are the models' (verified_book.records.record).
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 32
MAX_STRING_CHARS_BY_KEY = {"message": record.MAX_MESSAGE_CHARS, "text": record.MAX_TEXT_CHARS}
MAX_INT_BITS = 4000


class ResultsError(BookError):
    """A results file that cannot be used: corrupt, from a newer schema, or invalid."""


class OtherMachine(ResultsError):
    """A merge of one machine's records into another machine's file: refused, naming both."""


class NewerSchema(ResultsError):
    """A results file written by a newer verified-book: left alone, never overwritten or set aside."""


def _too_large(value: int | Fraction) -> str:
    """A number whose digits JSON cannot carry (Python refuses past 4300 digits), kept as its size."""
    sign = "-" if value < 0 else ""
    bits = abs(value.numerator if isinstance(value, Fraction) else value).bit_length()
    return f"{sign}about 2^{bits - 1} (too many digits to store)"


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def to_json(value: Any) -> Any:
    """A claim's value as JSON: exact fractions keep their exact text beside the float."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= MAX_INT_BITS else _too_large(value)
    if isinstance(value, Fraction):
        if value.denominator == 1:
            return to_json(int(value))
        if max(value.numerator.bit_length(), value.denominator.bit_length()) > MAX_INT_BITS:
            return _too_large(value)
        return {"exact": f"{value.numerator}/{value.denominator}", "float": float(value)}
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return to_json(tolist())
    if type(value).__module__.partition(".")[0] == "sympy":  # asked of its type: no other value loads sympy
        import sympy

        if isinstance(value, sympy.Basic):
            return to_json(Fraction(int(value.p), int(value.q))) if value.is_Rational else float(value)
    return str(value)


def from_json(value: Any) -> Any:
    """A recorded value back as the engine had it: exact fractions exact, `inf`/`nan` as floats."""
    if isinstance(value, Exact):
        try:
            return Fraction(value.exact)
        except (ValueError, ZeroDivisionError):
            return value.float
    if isinstance(value, dict) and isinstance(value.get("exact"), str):  # an input's value, kept as JSON
        try:
            return Fraction(value["exact"])
        except (ValueError, ZeroDivisionError):
            return value.get("float")
    if isinstance(value, list):
        return [from_json(v) for v in value]
    if isinstance(value, str) and value.strip().lower() in ("inf", "-inf", "nan"):
        return float(value)
    return value


def _typed(model: Any, value: Any, where: str) -> Any:
    """A part given as plain data (by hand, or by a test) as its model; one that is not sound is refused."""
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as e:
        raise ResultsError("\n".join(record.problems(e, where))) from None


@dataclass
class ResultsFile:
    """One machine's results, as read from or written to `results/<slug>.json`: typed parts
    (verified_book.records.record), the measurements of the run header folded into their records."""

    slug: str
    machine: Machine = field(default_factory=Machine)
    #: the latest run: date, commit, dirty, os, driver, versions, backends; `seconds` and `dates` per claim and backend
    run: RunHeader = field(default_factory=RunHeader)
    #: verdicts: claim id -> backend -> status, value, figures, message, inputs, version
    records: dict[str, dict[str, Record]] = field(default_factory=dict)
    outputs: dict[str, SnippetOutput] = field(default_factory=dict)
    #: what each claim is, once: kind, source, citation, hardware, code (its fingerprint), skipped (why not here)
    claims: dict[str, ClaimMeta] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"{self.slug} (records given to the store)"
        self.machine = _typed(Machine, self.machine, f"{where}: machine")
        self.run = _typed(RunHeader, self.run, f"{where}: run")
        self.records = {
            cid: {b: _typed(Record, r, f"{where}: records[{cid!r}][{b!r}]") for b, r in per.items()}
            for cid, per in self.records.items()
        }
        self.outputs = {
            name: _typed(SnippetOutput, o, f"{where}: outputs[{name!r}]") for name, o in self.outputs.items()
        }
        self.claims = {cid: _typed(ClaimMeta, m, f"{where}: claims[{cid!r}]") for cid, m in self.claims.items()}

    def to_document(self) -> ResultsDocument:
        """The file's layout: what changes from run to run with nothing else changed (the date, the
        timings, what the measured claims measured, what the snippets printed) sits in the run header,
        so a rerun that changes nothing else changes only that header in `git diff`."""
        records: dict[str, dict[str, Record]] = {}
        measured: dict[str, dict[str, Measured]] = {}
        for claim_id, per_backend in self.records.items():
            meta = self.claims.get(claim_id)
            if meta is not None and meta.kind == MEASURED:
                for backend, rec in per_backend.items():
                    measured.setdefault(claim_id, {})[backend] = Measured.model_validate(
                        rec.model_dump(include=set(VOLATILE), exclude_unset=True)
                    )
                    records.setdefault(claim_id, {})[backend] = Record.model_validate(
                        rec.model_dump(exclude=set(VOLATILE), exclude_unset=True)
                    )
            else:
                records[claim_id] = per_backend
        run = RunOnDisk.model_validate(
            {**self.run.model_dump(exclude_unset=True), "measured": measured, "outputs": self.outputs}
        )
        return ResultsDocument(
            schema_version=SCHEMA_VERSION,
            slug=self.slug,
            machine=self.machine,
            run=run,
            claims=self.claims,
            records=records,
        )

    def to_dict(self) -> dict[str, Any]:
        """The file as JSON data: exactly the fields each part was given, no defaults added."""
        return self.to_document().model_dump(mode="json", exclude_unset=True)

    @classmethod
    def from_document(cls, doc: ResultsDocument) -> "ResultsFile":
        """A file as it lies on disk, its run header's measurements folded back into the records and
        the snippets' outputs beside them: the form every check and reader works on."""
        records = {cid: dict(per) for cid, per in doc.records.items()}
        for claim_id, per_backend in doc.run.measured.items():
            for backend, volatile in per_backend.items():
                records[claim_id][backend] = records[claim_id][backend].model_copy(
                    update={k: getattr(volatile, k) for k in volatile.model_fields_set}
                )
        run = RunHeader.model_validate(doc.run.model_dump(exclude={"measured", "outputs"}, exclude_unset=True))
        return cls(doc.slug, doc.machine, run, records, {**doc.outputs, **doc.run.outputs}, dict(doc.claims))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ResultsFile":
        """A file as `to_dict` lays it out (of the current schema), checked by the models."""
        try:
            return cls.from_document(ResultsDocument.model_validate(data))
        except ValidationError as e:
            raise ResultsError("\n".join(record.problems(e, str(data.get("slug"))))) from None

    def current(self, known: Container[str]) -> dict[str, dict[str, Record]]:
        """The records of claims the book still declares; a retired claim's stay in the file, unshown."""
        return {cid: per for cid, per in self.records.items() if cid in known}

    def date_of(self, claim_id: str, backend: str) -> str | None:
        """When the run that made a record ran: records merged from several runs keep their own date."""
        return self.run.dates.get(claim_id, {}).get(backend) or self.run.date

    def counts(self, known: Container[str] | None = None) -> dict[str, int]:
        out = {s: 0 for s in RECORDED}
        records = self.records if known is None else self.current(known)
        for per_backend in records.values():
            for rec in per_backend.values():
                out[rec.status] = out.get(rec.status, 0) + 1
        return out

    def merge(self, other: "ResultsFile") -> None:
        """Take every record of `other`, keeping ours where it has none; the run header is the latest
        run's, its timings merged like the records. A measurement taken on a contended machine does
        not replace one taken on a quiet machine: the quiet one stays the machine's figure."""
        kept = {
            (cid, b)
            for cid, per in other.records.items()
            for b, rec in per.items()
            if conditions.contended(rec.conditions)
            and b in self.records.get(cid, {})
            and not conditions.contended(self.records[cid][b].conditions)
            and self.records[cid][b].status not in (Status.FAILED.value, Status.SKIPPED.value)
        }
        if other.machine.model_fields_set and not identity.absent(hardware(self), hardware(other)):
            self.machine = other.machine  # a run that lacked the GPU does not make the file's machine GPU-less
        per_record = {}
        for key in PER_RECORD:
            merged = {cid: dict(per) for cid, per in getattr(self.run, key).items()}
            for claim_id, per_backend in getattr(other.run, key).items():
                merged.setdefault(claim_id, {}).update(
                    {b: v for b, v in per_backend.items() if (claim_id, b) not in kept}
                )
            per_record[key] = merged
        latest = other.run if other.run.model_fields_set else self.run
        self.run = RunHeader.model_validate({**latest.model_dump(exclude_unset=True), **per_record})
        for claim_id, per_backend in other.records.items():
            self.records.setdefault(claim_id, {}).update(
                {b: r for b, r in per_backend.items() if (claim_id, b) not in kept}
            )
        absent = {name for name, version in (self.run.backends or {}).items() if version is None}
        for claim_id in list(self.records):  # a backend this machine lacks leaves no record, only a skip
            per_backend = self.records[claim_id]
            for name in [b for b, r in per_backend.items() if b in absent and r.status == Status.SKIPPED.value]:
                del per_backend[name]
            if not per_backend:
                del self.records[claim_id]
        for claim_id, meta in other.claims.items():
            if claim_id in other.records or claim_id not in self.claims:
                self.claims[claim_id] = meta
            else:  # a claim this run could not compute here: keep what earlier runs recorded of it
                self.claims[claim_id] = ClaimMeta.model_validate(
                    {**self.claims[claim_id].model_dump(exclude_unset=True), **meta.model_dump(exclude_unset=True)}
                )
        self.outputs.update(other.outputs)


def update_to_1(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 0 (no version field, records as a flat list) to schema 1."""
    records: dict[str, dict[str, Any]] = {}
    for item in data.get("records", []) if isinstance(data.get("records"), list) else []:
        records.setdefault(item["claim"], {})[item.get("backend", NO_BACKEND_NAME)] = {
            k: v for k, v in item.items() if k not in ("claim", "backend")
        }
    if isinstance(data.get("records"), dict):
        records = data["records"]
    return {**data, "schema_version": 1, "records": records, "outputs": data.get("outputs", {})}


CLAIM_FIELDS = ("kind", "source", "citation", "hardware")
MEASURED = "measured"


#: what the run header keeps per claim and backend, merged like the records: so a rerun that
#: changes nothing changes the header only
PER_RECORD = ("seconds", "dates")


def update_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 to 2: the environment becomes the run header, timings leave the records for it,
    each claim's metadata is kept once, and per-record dates go (the run header dates the run).

    A migrated record carries no code fingerprint, so it reads as outdated until its machine
    runs again: nothing says it still matches the book.
    """
    run = dict(data.get("environment") or {})
    run.setdefault("commit", None)
    run.setdefault("dirty", None)
    seconds: dict[str, dict[str, Any]] = {}
    dates: dict[str, dict[str, Any]] = {}
    claims: dict[str, dict[str, Any]] = {}
    records: dict[str, dict[str, Any]] = {}
    given = data.get("records")
    if given is not None and not isinstance(given, dict):  # not records at all: left for the check to refuse
        return {**data, "schema_version": 2}
    for claim_id, per_backend in (given or {}).items():
        if not isinstance(per_backend, dict):
            records[claim_id] = per_backend
            continue
        records.setdefault(claim_id, {})
        for backend, item in per_backend.items():
            if not isinstance(item, dict):
                records.setdefault(claim_id, {})[backend] = item
                continue
            item = dict(item)
            meta = {k: item.pop(k) for k in CLAIM_FIELDS if k in item}
            claims.setdefault(claim_id, meta)
            if item.get("seconds") is not None:
                seconds.setdefault(claim_id, {})[backend] = item["seconds"]
            item.pop("seconds", None)
            if item.get("date") is not None:
                dates.setdefault(claim_id, {})[backend] = item["date"]
            item.pop("date", None)
            records.setdefault(claim_id, {})[backend] = item
    run["seconds"], run["dates"] = seconds, dates
    rest = {k: v for k, v in data.items() if k not in ("environment", "records")}
    return {**rest, "schema_version": 2, "run": run, "claims": claims, "records": records}


def update_to_3(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 to 3: the machine gets an identity (verified_book.records.identity). A file written before
    machines had one is given an id made from its slug and hardware, the same every time, so its
    history stays its own; a run of another machine of that name is refused, not merged into it."""
    machine = dict(data.get("machine") or {})
    fingerprint: dict[str, Any] = machine["fingerprint"] if isinstance(machine.get("fingerprint"), dict) else {}
    if identity.hardware_of(fingerprint):  # a file that never said its hardware names no machine to keep apart
        machine.setdefault("id", identity.legacy_id(str(data.get("slug")), fingerprint))
    return {**data, "schema_version": 3, "machine": machine}


def update_to_4(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 3 to 4: where a claim's code is, which schema 3 called `source` beside the claim's `citation`,
    is `defined_at`, so that `source` names one thing nowhere and the record says what it means."""
    claims = data.get("claims")
    if isinstance(claims, dict):
        claims = {
            cid: (
                {("defined_at" if k == "source" else k): v for k, v in meta.items()} if isinstance(meta, dict) else meta
            )
            for cid, meta in claims.items()
        }
        data = {**data, "claims": claims}
    return {**data, "schema_version": 4}


def update_to_5(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 4 to 5: a snippet's output keeps a hash of the source that printed it (`sha256`). An output
    recorded before has none: which version of the snippet printed it is not known, and is not guessed."""
    return {**data, "schema_version": 5}


def update_to_6(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 5 to 6: each output block's check keeps a hash of the block's text as compared (`sha256`). A check
    recorded before has none: `--changed` goes by the page's time for it, as before."""
    return {**data, "schema_version": 6}


def update_to_7(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 6 to 7: a record keeps the versions of the libraries beyond its backend's that its value was
    computed with (`uses`). A record made before has none: `--changed` computes a claim whose code uses such a
    library again once, rather than guess which versions made it."""
    return {**data, "schema_version": 7}


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: update_to_1,
    2: update_to_2,
    3: update_to_3,
    4: update_to_4,
    5: update_to_5,
    6: update_to_6,
    7: update_to_7,
}


def hardware(results: "ResultsFile") -> dict[str, Any]:
    """The hardware a file's machine fingerprint names (verified_book.records.identity.HARDWARE); empty where it names
    none."""
    return identity.hardware_of(results.machine.fingerprint)


def machine_id(results: "ResultsFile") -> str:
    """The id of the machine a file holds; a file with none is a machine from before identities."""
    return results.machine.id or identity.legacy_id(results.slug, results.machine.fingerprint)


def machine_words(results: "ResultsFile") -> str:
    """A file's machine, named for a message: its name, its hardware and its id."""
    return f"{results.slug} ({identity.describe(hardware(results))}; id {machine_id(results)})"


def same_machine(current: "ResultsFile", update: "ResultsFile") -> str | None:
    """Why `update` may not be merged into `current`: another machine (its id), or other hardware; None if it is the
    one."""
    old, new = hardware(current), hardware(update)
    if not ((old or current.machine.id) and (new or update.machine.id)):
        return None  # one of them does not say which machine it is (records made by hand): nothing to tell apart
    if machine_id(current) != machine_id(update):
        why = "another machine"
    else:
        changes = identity.differences(old, new) if old and new else []
        if not changes or identity.absent(old, new):
            return None  # the same machine, its GPU missing this run (verified_book.records.identity.absent)
        why = f"the same id on other hardware ({'; '.join(changes)})"
    return (
        f"holds the records of {machine_words(current)}, and this is {machine_words(update)}: {why}. Two machines "
        "never share a results file: give this machine a name of its own (its identity file, "
        f"{identity.default_path()}, or --machine=NAME), or, if it is that machine and lost its identity, "
        "take it back with  verified-book machine --adopt FILE"
    )


def migrate(data: dict[str, Any], where: str) -> dict[str, Any]:
    version = data.get("schema_version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ResultsError(
            f"{where}: schema_version is {_show(version)}, expected a whole number from 0 to {SCHEMA_VERSION}"
        )
    if version > SCHEMA_VERSION:
        raise NewerSchema(
            f"{where}: written by schema version {version} (a newer verified-book), this checkout reads up to "
            f"{SCHEMA_VERSION}; update the project (git pull, then `python3 run.py setup`, which reinstalls "
            "verified-book) to read it"
        )
    while version < SCHEMA_VERSION:
        version += 1
        try:
            data = MIGRATIONS[version](data)
        except Exception as e:  # a malformed old file is refused, not half-migrated
            raise ResultsError(
                f"{where}: cannot be migrated to schema version {version}: {type(e).__name__}: {_show(str(e))}"
            ) from None
    return data


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and _finite(value)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _walk(node: Any, where: str, problems: list[str], places: list[tuple[str | int, ...]] | None = None) -> None:
    """Checks every part of a parsed file must pass: depth, key types, string sizes, finite numbers.

    A problem names its place (`where['records']['a.b'][0]`); the place is spelled out only for a
    problem, as a sound file has a hundred thousand parts. Given `places`, each problem's place is added to it
    as a key path, for `salvage` to set that part aside."""
    path: list[str | int] = []

    def at(key: Any = None) -> str:
        if places is not None:
            places.append((*path, *([] if key is None else [str(key)])))
        return where + "".join(f"[{k!r}]" for k in path)

    def visit(node: Any, depth: int, key: str) -> None:
        if len(problems) > 50 and places is None:
            return
        if depth > MAX_DEPTH:
            problems.append(f"{at()}: nested deeper than {MAX_DEPTH} levels")
            return
        if isinstance(node, dict):
            for k, v in node.items():
                if not isinstance(k, str):
                    problems.append(f"{at(k)}: key {_show(k)} is not a string")
                    continue
                if len(k) > MAX_KEY_CHARS:
                    problems.append(f"{at(k)}: a key of {len(k)} characters (at most {MAX_KEY_CHARS})")
                    continue
                path.append(k)
                visit(v, depth + 1, k)
                path.pop()
        elif isinstance(node, list):
            for i, v in enumerate(node):
                path.append(i)
                visit(v, depth + 1, key)
                path.pop()
        elif isinstance(node, str):
            limit = MAX_STRING_CHARS_BY_KEY.get(key, MAX_STRING_CHARS)
            if len(node) > limit:
                problems.append(f"{at()}: a string of {len(node)} characters (at most {limit})")
        elif isinstance(node, float):
            if not math.isfinite(node):
                problems.append(f"{at()}: {node!r} is not a finite number")
        elif _is_int(node):
            if node.bit_length() > MAX_INT_BITS:
                problems.append(f"{at()}: an integer of {node.bit_length()} bits (at most {MAX_INT_BITS})")
        elif node is not None and not isinstance(node, bool):
            problems.append(f"{at()}: a {type(node).__name__}, which JSON does not hold")

    visit(node, 1, "")


def parse(data: Any, where: str, known_claims: set[str] | None = None) -> tuple[ResultsDocument | None, list[str]]:
    """A parsed results file as its model (older schemas migrated), or every problem with it as
    'where: what' lines.

    A results file may come from a pull request, so nothing in it is taken on trust: first what
    every part must pass before it is looked at as a results file (bounded sizes and depth, string
    keys, finite numbers), then the models' types and limits (verified_book.records.record: the shape,
    every type, plausible numbers, ISO dates, safe names and paths), and, given `known_claims`,
    claim ids this book declares.
    """
    if not isinstance(data, dict):
        return None, [f"{where}: expected a JSON object at the top, found {type(data).__name__}"]
    problems: list[str] = []
    _walk(data, where, problems)
    if problems:
        return None, problems
    try:
        data = migrate(data, where)
    except ResultsError as e:
        return None, str(e).splitlines()
    try:
        doc = ResultsDocument.model_validate(data)
    except ValidationError as e:
        return None, record.problems(e, where)
    if known_claims is not None:
        problems += [
            f"{where}: records[{claim_id!r}] names no claim of this book"
            for claim_id in doc.records
            if claim_id not in known_claims
        ]
    return (doc if not problems else None), problems


def validate(data: Any, where: str, known_claims: set[str] | None = None) -> list[str]:
    """Every problem with a parsed results file, as 'where: what' lines; empty when sound (see `parse`)."""
    return parse(data, where, known_claims)[1]


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


KEEP_CHECKED = 50  # sound files `read` keeps checked in a `kept_in` folder; the oldest used go first


def read(path: Path, known_claims: set[str] | None = None, kept_in: Path | None = None) -> ResultsFile:
    """Read and check one results file; raise ResultsError saying what is wrong and where.

    With `kept_in`, a file read and found sound before (the same bytes, checked by the same code) is
    taken from there instead of checked again, which a site build does at every build for files that
    change only when a machine contributes (see `_kept`)."""
    where = str(path)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise ResultsError(f"{where}: cannot be read ({e.strerror})") from None
    if size > MAX_FILE_BYTES:
        raise ResultsError(f"{where}: {size} bytes, more than a results file can hold ({MAX_FILE_BYTES})")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ResultsError(f"{where}: cannot be read ({e.strerror})") from None
    code = _checking_code() if kept_in is not None else None
    place = _kept(kept_in, raw, known_claims, code) if kept_in is not None and code is not None else None
    if place is not None:
        found = kept.taken(place)
        if isinstance(found, ResultsFile) and found.slug == path.stem:  # the same bytes under another name are not
            return found
    results = _checked(raw, path, known_claims)
    if place is not None:
        kept.keep(place, results, KEEP_CHECKED)
    return results


def _kept(folder: Path, raw: bytes, known_claims: set[str] | None, code: str) -> Path:
    """Where a sound file of these bytes is kept: named by the bytes, the claims it was checked against and
    the code that checks it (`_checking_code`), so a change to any of them checks the file again."""
    h = hashlib.sha256(raw)
    h.update(code.encode())
    h.update(repr(sorted(known_claims) if known_claims is not None else None).encode())
    return folder / f"{h.hexdigest()[:32]}.pickle"


@functools.cache
def _checking_code() -> str | None:
    """What decides whether a file is sound: this package's modules and the engine's modules they import,
    with pydantic's version (`kept.code_of`); None where a source cannot be read as the code running here."""
    import pydantic

    package = __name__.rpartition(".")[0]
    ours = sorted(name for name in sys.modules if name.startswith(package + "."))
    code = kept.code_of(ours, {"verified_book"})
    return None if code is None else f"{SCHEMA_VERSION} {pydantic.VERSION}\n{code}"


def _loaded(raw: bytes, where: str) -> Any:
    """A file's bytes as JSON data; what keeps them from being JSON said as a ResultsError."""
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_no_constants)
    except json.JSONDecodeError as e:
        raise ResultsError(f"{where}:{e.lineno}: not valid JSON ({e.msg})") from None
    except UnicodeDecodeError as e:
        raise ResultsError(f"{where}: not UTF-8 text ({e.reason})") from None
    except RecursionError:
        raise ResultsError(f"{where}: nested too deeply to read") from None
    except ValueError as e:  # NaN or Infinity literals, integers of thousands of digits
        raise ResultsError(f"{where}: not a valid results file ({e})") from None


def _checked(raw: bytes, path: Path, known_claims: set[str] | None) -> ResultsFile:
    """The file's bytes parsed and checked (see `parse`), as the results of the machine its name gives."""
    where = str(path)
    data = _loaded(raw, where)
    doc, problems = parse(data, where, known_claims)
    return _as_results(data, doc, problems, path)


def _as_results(data: Any, doc: ResultsDocument | None, problems: list[str], path: Path) -> ResultsFile:
    """A checked document as the results of the machine the file's name gives; its problems raised."""
    where = str(path)
    if doc is not None and doc.slug != path.stem:
        problems.append(
            f"{where}: holds the results of machine {_show(doc.slug)}; "
            f"a machine's file is named after its slug ({doc.slug}.json)"
        )
    if problems or doc is None:
        if (
            isinstance(data, dict)
            and isinstance(data.get("schema_version"), int)
            and data["schema_version"] > SCHEMA_VERSION
        ):
            migrate(data, where)  # raises NewerSchema: a newer file is left alone, never set aside
        raise ResultsError("\n".join(problems))
    return ResultsFile.from_document(doc)


def salvaged(data: Any, where: str) -> tuple[ResultsDocument | None, list[salvage.SetAside], list[str]]:
    """`parse`, setting aside each bad part that can go alone (verified_book.records.salvage) and keeping the rest:
    the document of what is sound, the parts set aside, and, where the file as a whole is bad, every problem
    (then there is no document)."""
    if not isinstance(data, dict):
        return None, [], parse(data, where)[1]
    problems: list[str] = []
    places: list[tuple[str | int, ...]] = []
    _walk(data, where, problems, places)
    aside: list[salvage.SetAside] = []
    data = copy.deepcopy(data)
    if problems:
        units = [salvage.unit(place) for place in places]
        if data.get("schema_version") != SCHEMA_VERSION or None in units:
            return None, [], problems[:51]
        grouped: dict[tuple[str | int, ...], list[str]] = {}
        for part, text in zip(units, problems):
            grouped.setdefault(part, []).append(text.removeprefix(where))  # type: ignore[arg-type]
        aside += salvage.set_aside(data, grouped)
    try:
        data = migrate(data, where)
    except ResultsError as e:
        return None, [], str(e).splitlines()
    while True:
        try:
            return ResultsDocument.model_validate(data), aside, []
        except ValidationError as e:
            grouped = {}
            for error in e.errors(include_url=False):
                loc = tuple(error["loc"])
                part = salvage.unit(loc)
                if part is None:
                    return None, [], record.problems(e, where)
                inner = "".join(f"[{k!r}]" for k in loc[len(part) :] if k != "[key]")
                found = f" (found {_show(error['input'])})" if error["type"] != "missing" else ""
                grouped.setdefault(part, []).append(f"{inner or 'the part'}: {error['msg']}{found}")
            taken = salvage.set_aside(data, grouped)
            if not taken:  # nothing left to take: the problem is not the parts'
                return None, [], record.problems(e, where)
            aside += taken


def read_salvaging(path: Path) -> tuple[ResultsFile, list[salvage.SetAside]]:
    """A results file for a writer to merge into: every sound record kept, each bad part set aside (see
    `salvaged`); a file that is not a results file at all raises ResultsError, as `read` does."""
    where = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ResultsError(f"{where}: {size} bytes, more than a results file can hold ({MAX_FILE_BYTES})")
        raw = path.read_bytes()
    except OSError as e:
        raise ResultsError(f"{where}: cannot be read ({e.strerror})") from None
    data = _loaded(raw, where)
    doc, aside, problems = salvaged(data, where)
    return _as_results(data, doc, problems, path), aside


def _keep_set_aside(path: Path, kept: ResultsFile, aside: list[salvage.SetAside]) -> str:
    """Write the parts set aside from `path` to a side file beside it; the lines that say so."""
    side = path.with_name(f"{path.name}.set-aside-{_dt.datetime.now().strftime('%Y%m%dT%H%M%S%f')}")
    text = json.dumps([part.to_json() for part in aside], indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    _atomic_write(side, text)
    kept_count = sum(len(per) for per in kept.records.values())
    head = (
        f"{path}: {kept_count} records kept, {salvage.records_among(aside)} set aside "
        f"({len(aside)} part{'s' if len(aside) != 1 else ''} in all) in {side.name}:"
    )
    return "\n".join([head, *(f"  {path}{part.where()}: {part.why}" for part in aside[:50])])


def read_all(
    results_dir: Path, warn: Callable[[str], None], known_claims: set[str] | None = None, kept_in: Path | None = None
) -> dict[str, ResultsFile]:
    """Every readable results file by slug; a bad file is reported through `warn` and skipped (`kept_in`: see
    `read`)."""
    out: dict[str, ResultsFile] = {}
    for path in sorted(results_dir.glob("*.json")):
        try:
            out[path.stem] = read(path, known_claims, kept_in)
        except ResultsError as e:
            warn(str(e))
    return out


def folder_problem(folder: Path) -> str | None:
    """Why no results file could be written in `folder`, found before a run computes anything; None where one
    can (a missing folder is made when the file is written)."""
    if folder.exists() and not folder.is_dir():
        return "is a file; expected a folder to write this machine's <machine>.json in (made where missing)"
    existing = next(p for p in (folder.absolute(), *folder.absolute().parents) if p.exists())
    if not existing.is_dir():
        return f"{existing} is a file, so no folder can be made under it"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} cannot be written to here"
    return None


def _atomic_write(path: Path, text: str) -> None:
    """Write beside the file and rename over it: a reader, or a crash, sees the old file or the new one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would make the committed file private
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:
        folder = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(folder)
    except OSError:  # some file systems cannot sync a folder; the rename is done all the same
        pass
    finally:
        os.close(folder)


def _remove_leftovers(path: Path) -> list[Path]:
    """Temporary files of a writer killed mid-write; only the lock holder writes them, so none is live."""
    leftovers = sorted(path.parent.glob(f".{path.name}.*.tmp"))
    for item in leftovers:
        item.unlink(missing_ok=True)
    return leftovers


def dumps(results: ResultsFile) -> str:
    """The file's text: the document's fields as given, keys sorted, two spaces deep, so a rerun's diff is small."""
    return json.dumps(results.to_dict(), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def merge_into(
    path: Path, update: ResultsFile, warn: Callable[[str], None] = lambda _: None, timeout: float = 120
) -> ResultsFile:
    """Merge `update` into the file at `path` under a lock, atomically; return what was written.

    An existing file with bad parts keeps every sound record: each bad part is set aside to
    `<name>.set-aside-<time>` (JSON) with its key path and reason, and reported. A file that is
    not a results file at all is moved aside whole to `<name>.corrupt-<time>` and reported, never
    silently replaced; a file from a newer schema is left alone and the merge refused. Records an
    earlier run could not write to `path` (verified_book.records.unsaved) are merged first, then
    let go, and the merge says so.
    The lock is filelock's: an OS lock the kernel releases when its holder dies, so a
    killed run leaves no stale lock, only a temporary file that the next merge removes.
    """
    problems = validate(update.to_dict(), f"{path} (this run's records)")
    if problems:
        raise ResultsError("\n".join(problems))
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(path) + ".lock", timeout=timeout):
            _remove_leftovers(path)
            current = ResultsFile(update.slug)
            if path.exists():
                try:
                    current, parts = read_salvaging(path)
                except NewerSchema:
                    raise
                except ResultsError as e:
                    aside = path.with_name(f"{path.name}.corrupt-{_dt.datetime.now().strftime('%Y%m%dT%H%M%S%f')}")
                    os.replace(path, aside)
                    warn(f"{e}\n{path}: kept aside as {aside.name}; a new file holds this run's records")
                    current = ResultsFile(update.slug)
                else:
                    other = same_machine(current, update)
                    if other is not None:
                        raise OtherMachine(f"{path}: {other}")
                    if parts:
                        warn(_keep_set_aside(path, current, parts))
            taken = _take_unsaved(path, current, update, warn)
            current.merge(update)
            _atomic_write(path, dumps(current))
            for earlier in taken:
                unsaved.remove(earlier)
            if taken:
                runs = "an earlier run" if len(taken) == 1 else f"{len(taken)} earlier runs"
                warn(
                    f"{path}: took in the records of {runs} that could not write them, kept in "
                    f"{', '.join(map(str, taken))} (removed from there now)"
                )
            return current
    except Timeout:
        raise ResultsError(
            f"{path}: another run has held its lock ({path.name}.lock) for {timeout:.0f} s; nothing was merged"
        ) from None


def _take_unsaved(path: Path, current: ResultsFile, update: ResultsFile, warn: Callable[[str], None]) -> list[Path]:
    """Merge into `current` the records earlier runs kept in the state folder because they could not write `path`
    (oldest first, so this run's own records still come last); the files taken. One that cannot be read, or is
    another machine's, is left where it is and said."""
    taken = []
    for earlier in unsaved.meant_for(path):
        try:
            records = read(earlier)
        except ResultsError as e:
            warn(f"{e}\n{earlier}: left where it is; it was kept for {path}")
            continue
        other = same_machine(records, update) if records.slug == update.slug else "another machine's name"
        if other is not None:
            warn(f"{earlier}: left where it is; it was kept for {path}, but {other}")
            continue
        current.merge(records)
        taken.append(earlier)
    return taken


def keep_unsaved(path: Path, update: ResultsFile, why: BaseException) -> unsaved.Unsaved:
    """Where a run keeps the records its results file `path` would not take, so that nothing it computed is lost.

    A merge refused (another machine's file, a lock held too long) keeps them beside the file, to be merged by
    hand once the cause is fixed; a folder that cannot be written keeps them in the user's state folder
    (verified_book.records.unsaved), where the next run that can write `path` and `verified-book contribute` take
    them from."""
    text = dumps(update)
    places = [path.with_name(f"{path.name}.unmerged-{_dt.datetime.now().strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")]
    if not isinstance(why, ResultsError):
        places = []
    places.append(unsaved.place_for(path, update.slug))
    failed = []
    for place in places:
        try:
            place.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(place, text)
        except OSError as e:
            failed.append(f"{place}: {e.strerror or e}")
            continue
        if place.parent == path.parent:
            return unsaved.Unsaved(
                place,
                f"this run's records are kept in {place}; merge them by hand once the cause is fixed",
                f"this run's records could not be written to {path}; they are kept in {place}",
            )
        return unsaved.Unsaved(
            place,
            f"{path} cannot be written, so this run's records are kept in {place}: the next run that can write "
            f"{path.name} takes them in, and `verified-book contribute` finds them there",
            f"{path} cannot be written; this run's records are kept in {place}",
        )
    return unsaved.Unsaved(
        None,
        "this run's records could not be kept either: " + "; ".join(failed),
        f"this run's records could not be written to {path}, nor kept anywhere else: they are lost",
    )
