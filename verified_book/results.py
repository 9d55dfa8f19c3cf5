"""The results store: one JSON file per machine that has verified the book.

`results/<machine-slug>.json` holds a schema version, the machine's fingerprint, the
environment of its latest run, and one record per (claim, backend). A run merges its
records into the file under a lock and replaces it atomically, so a run of a subset
keeps every other record, and a crash mid-write leaves the previous file whole.
Readers (the site) warn about a bad file and skip it; writers refuse to overwrite
one and set it aside instead.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Container, Mapping

from filelock import FileLock, Timeout

from verified_book import conditions, identity
from verified_book.backends import NAMES
from verified_book.errors import BookError
from verified_book.snippet_output import STATUSES as OUTPUT_STATUSES
from verified_book.vocabulary import ID_PATTERN, KINDS, RECORDED, Status

SCHEMA_VERSION = 3
SLUG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,80}$")
BACKEND_NAMES = ("none", *NAMES)

# Limits on a results file, which may come from anyone: past them a file is refused, not rendered.
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 32
MAX_KEY_CHARS = 200
MAX_STRING_CHARS = 10_000
MAX_STRING_CHARS_BY_KEY = {"message": 100_000, "text": 1_000_000}
MAX_INT_BITS = 4000
MAX_LINE = 1_000_000
MAX_SECONDS = 7 * 24 * 3600
MARKER_PATTERN = re.compile(r"^[a-z0-9_]{1,60}$")
OUTPUT_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,120}$")
BOOK_PATH_PATTERN = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.(?:/|$))[A-Za-z0-9_][A-Za-z0-9_./-]{0,300}$")
EXACT_PATTERN = re.compile(r"^-?\d{1,1300}/\d{1,1300}$")


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
    try:
        import sympy

        if isinstance(value, sympy.Basic):
            return to_json(Fraction(int(value.p), int(value.q))) if value.is_Rational else float(value)
    except ImportError:
        pass
    return str(value)


@dataclass
class ResultsFile:
    """One machine's results, as read from or written to `results/<slug>.json`."""

    slug: str
    machine: dict[str, Any] = field(default_factory=dict)
    #: the latest run: date, commit, dirty, os, driver, versions, backends; `seconds` per claim and backend
    run: dict[str, Any] = field(default_factory=dict)
    #: verdicts: claim id -> backend -> status, value, figures, message, inputs, version
    records: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: what each claim is, once: kind, source, citation, hardware, code (its fingerprint), skipped (why not here)
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The file's layout: what changes from run to run with nothing else changed (the date, the
        timings, what the measured claims measured, what the snippets printed) sits in the run header,
        so a rerun that changes nothing else changes only that header in `git diff`."""
        records: dict[str, dict[str, Any]] = {}
        measured: dict[str, dict[str, Any]] = {}
        for claim_id, per_backend in self.records.items():
            if (self.claims.get(claim_id) or {}).get("kind") == MEASURED:
                for backend, record in per_backend.items():
                    measured.setdefault(claim_id, {})[backend] = {k: record[k] for k in VOLATILE if k in record}
                    records.setdefault(claim_id, {})[backend] = {k: v for k, v in record.items() if k not in VOLATILE}
            else:
                records[claim_id] = per_backend
        run = {**self.run, "measured": measured, "outputs": self.outputs}
        return {
            "schema_version": SCHEMA_VERSION,
            "slug": self.slug,
            "machine": self.machine,
            "run": run,
            "claims": self.claims,
            "records": records,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ResultsFile":
        """A file as `to_dict` lays it out, its run header's measurements folded back into the records."""
        folded = folded_in(data)
        return cls(folded["slug"], folded.get("machine", {}), folded.get("run", {}), folded.get("records", {}),
                   folded.get("outputs", {}), folded.get("claims", {}))

    def current(self, known: Container[str]) -> dict[str, dict[str, dict[str, Any]]]:
        """The records of claims the book still declares; a retired claim's stay in the file, unshown."""
        return {cid: per for cid, per in self.records.items() if cid in known}

    def date_of(self, claim_id: str, backend: str) -> str | None:
        """When the run that made a record ran: records merged from several runs keep their own date."""
        dates = (self.run.get("dates") or {}).get(claim_id) or {}
        date = dates.get(backend) if isinstance(dates, dict) else None
        return date if isinstance(date, str) else (self.run.get("date") if isinstance(self.run.get("date"), str) else None)

    def counts(self, known: Container[str] | None = None) -> dict[str, int]:
        out = {s: 0 for s in RECORDED}
        records = self.records if known is None else self.current(known)
        for per_backend in records.values():
            for record in per_backend.values():
                out[record.get("status", "failed")] = out.get(record.get("status", "failed"), 0) + 1
        return out

    def merge(self, other: "ResultsFile") -> None:
        """Take every record of `other`, keeping ours where it has none; the run header is the latest
        run's, its timings merged like the records. A measurement taken on a contended machine does
        not replace one taken on a quiet machine: the quiet one stays the machine's figure."""
        kept = {(cid, b) for cid, per in other.records.items() for b, record in per.items()
                if conditions.contended(record.get("conditions")) and isinstance(self.records.get(cid, {}).get(b), dict)
                and not conditions.contended(self.records[cid][b].get("conditions"))
                and self.records[cid][b].get("status") not in (Status.FAILED.value, Status.SKIPPED.value)}
        self.machine = other.machine or self.machine
        per_record = {}
        for key in PER_RECORD:
            merged = {cid: dict(per) for cid, per in (self.run.get(key) or {}).items()}
            for claim_id, per_backend in (other.run.get(key) or {}).items():
                merged.setdefault(claim_id, {}).update({b: v for b, v in per_backend.items() if (claim_id, b) not in kept})
            per_record[key] = merged
        self.run = {**(other.run or self.run), **per_record}
        for claim_id, per_backend in other.records.items():
            self.records.setdefault(claim_id, {}).update({b: r for b, r in per_backend.items() if (claim_id, b) not in kept})
        absent = {name for name, version in (self.run.get("backends") or {}).items() if version is None}
        for claim_id in list(self.records):  # a backend this machine lacks leaves no record, only a skip
            per_backend = self.records[claim_id]
            for name in [b for b, r in per_backend.items() if b in absent and r.get("status") == "skipped"]:
                del per_backend[name]
            if not per_backend:
                del self.records[claim_id]
        for claim_id, meta in other.claims.items():
            if claim_id in other.records:
                self.claims[claim_id] = meta
            else:  # a claim this run could not compute here: keep what earlier runs recorded of it
                self.claims[claim_id] = {**self.claims.get(claim_id, {}), **meta}
        self.outputs.update(other.outputs)


def update_to_1(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 0 (no version field, records as a flat list) to schema 1."""
    records: dict[str, dict[str, Any]] = {}
    for item in data.get("records", []) if isinstance(data.get("records"), list) else []:
        records.setdefault(item["claim"], {})[item.get("backend", "none")] = {k: v for k, v in item.items() if k not in ("claim", "backend")}
    if isinstance(data.get("records"), dict):
        records = data["records"]
    return {**data, "schema_version": 1, "records": records, "outputs": data.get("outputs", {})}


CLAIM_FIELDS = ("kind", "source", "citation", "hardware")
MEASURED = "measured"
#: what a measured claim's record holds that a rerun changes (its value, message and the load it was
#: measured under): kept in the run header on disk
VOLATILE = ("value", "message", "conditions")


def folded_in(data: Mapping[str, Any]) -> dict[str, Any]:
    """The records with the run header's measurements put back, and the snippets' outputs beside
    them: the form every check and reader works on. Leaves `data` as it is."""
    out = dict(data)
    run = dict(out.get("run") or {}) if isinstance(out.get("run"), dict) else out.get("run")
    if not isinstance(run, dict):
        return out
    measured = run.pop("measured", None)
    outputs = run.pop("outputs", None)
    out["run"] = run
    if isinstance(outputs, dict):
        out["outputs"] = {**(out.get("outputs") or {}), **outputs} if isinstance(out.get("outputs", {}), dict) else outputs
    records = out.get("records")
    if isinstance(measured, dict) and isinstance(records, dict):
        records = {cid: dict(per) if isinstance(per, dict) else per for cid, per in records.items()}
        for claim_id, per_backend in measured.items():
            if not isinstance(per_backend, dict):
                continue
            for backend, volatile in per_backend.items():
                target = records.get(claim_id, {}).get(backend) if isinstance(records.get(claim_id), dict) else None
                if isinstance(target, dict) and isinstance(volatile, dict):
                    records[claim_id][backend] = {**target, **{k: v for k, v in volatile.items() if k in VOLATILE}}
        out["records"] = records
    return out
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
    for claim_id, per_backend in (data.get("records") or {}).items():
        for backend, record in per_backend.items():
            record = dict(record)
            meta = {k: record.pop(k) for k in CLAIM_FIELDS if k in record}
            claims.setdefault(claim_id, meta)
            if record.get("seconds") is not None:
                seconds.setdefault(claim_id, {})[backend] = record["seconds"]
            record.pop("seconds", None)
            if record.get("date") is not None:
                dates.setdefault(claim_id, {})[backend] = record["date"]
            record.pop("date", None)
            records.setdefault(claim_id, {})[backend] = record
    run["seconds"], run["dates"] = seconds, dates
    rest = {k: v for k, v in data.items() if k not in ("environment", "records")}
    return {**rest, "schema_version": 2, "run": run, "claims": claims, "records": records}


def update_to_3(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 to 3: the machine gets an identity (verified_book.identity). A file written before
    machines had one is given an id made from its slug and hardware, the same every time, so its
    history stays its own; a run of another machine of that name is refused, not merged into it."""
    machine = dict(data.get("machine") or {})
    fingerprint = machine.get("fingerprint") if isinstance(machine.get("fingerprint"), dict) else {}
    if identity.hardware_of(fingerprint):  # a file that never said its hardware names no machine to keep apart
        machine.setdefault("id", identity.legacy_id(str(data.get("slug")), fingerprint))
    return {**data, "schema_version": 3, "machine": machine}


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: update_to_1, 2: update_to_2, 3: update_to_3}


def hardware(results: "ResultsFile") -> dict[str, Any]:
    """The hardware a file's machine fingerprint names (verified_book.identity.HARDWARE); empty where it names none."""
    fingerprint = results.machine.get("fingerprint")
    return identity.hardware_of(fingerprint if isinstance(fingerprint, dict) else {})


def machine_id(results: "ResultsFile") -> str:
    """The id of the machine a file holds; a file with none is a machine from before identities."""
    given = results.machine.get("id")
    fingerprint = results.machine.get("fingerprint")
    return given if isinstance(given, str) and given else identity.legacy_id(
        results.slug, fingerprint if isinstance(fingerprint, dict) else {})


def machine_words(results: "ResultsFile") -> str:
    """A file's machine, named for a message: its name, its hardware and its id."""
    return f"{results.slug} ({identity.describe(hardware(results))}; id {machine_id(results)})"


def same_machine(current: "ResultsFile", update: "ResultsFile") -> str | None:
    """Why `update` may not be merged into `current`: another machine (its id), or other hardware; None if it is the one."""
    old, new = hardware(current), hardware(update)
    if not ((old or current.machine.get("id")) and (new or update.machine.get("id"))):
        return None  # one of them does not say which machine it is (records made by hand): nothing to tell apart
    if machine_id(current) != machine_id(update):
        why = "another machine"
    else:
        changes = identity.differences(old, new) if old and new else []
        if not changes:
            return None
        why = f"the same id on other hardware ({'; '.join(changes)})"
    return (f"holds the records of {machine_words(current)}, and this is {machine_words(update)}: {why}. Two machines "
            "never share a results file: give this machine a name of its own (its identity file, "
            f"{identity.default_path()}, or --machine=NAME), or, if it is that machine and lost its identity, "
            "take it back with  verified-book machine --adopt FILE")


def migrate(data: dict[str, Any], where: str) -> dict[str, Any]:
    version = data.get("schema_version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ResultsError(f"{where}: schema_version is {_show(version)}, expected a whole number from 0 to {SCHEMA_VERSION}")
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
            raise ResultsError(f"{where}: cannot be migrated to schema version {version}: "
                               f"{type(e).__name__}: {_show(str(e))}") from None
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


def _iso_date(value: Any) -> str | None:
    """Why `value` is not an ISO date or date-time of a plausible moment; None when it is one."""
    if not isinstance(value, str) or len(value) > 40:
        return f"{_show(value)} is not an ISO date (expected like 2026-11-29T13:22:18+00:00)"
    try:
        when = _dt.datetime.fromisoformat(value)
    except ValueError:
        return f"{_show(value)} is not an ISO date (expected like 2026-11-29T13:22:18+00:00)"
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    latest = _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(days=2)
    if not (_dt.datetime(2000, 1, 1, tzinfo=_dt.timezone.utc) <= when <= latest):
        return f"{_show(value)} is not a plausible date (before 2000 or in the future)"
    return None


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _walk(node: Any, at: str, depth: int, key: str, problems: list[str]) -> None:
    """Checks every part of a parsed file must pass: depth, key types, string sizes, finite numbers."""
    if len(problems) > 50:
        return
    if depth > MAX_DEPTH:
        problems.append(f"{at}: nested deeper than {MAX_DEPTH} levels")
        return
    if isinstance(node, dict):
        for k, v in node.items():
            if not isinstance(k, str):
                problems.append(f"{at}: key {_show(k)} is not a string")
                continue
            if len(k) > MAX_KEY_CHARS:
                problems.append(f"{at}: a key of {len(k)} characters (at most {MAX_KEY_CHARS})")
                continue
            _walk(v, f"{at}[{k!r}]", depth + 1, k, problems)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _walk(v, f"{at}[{i}]", depth + 1, key, problems)
    elif isinstance(node, str):
        limit = MAX_STRING_CHARS_BY_KEY.get(key, MAX_STRING_CHARS)
        if len(node) > limit:
            problems.append(f"{at}: a string of {len(node)} characters (at most {limit})")
    elif isinstance(node, float):
        if not math.isfinite(node):
            problems.append(f"{at}: {node!r} is not a finite number")
    elif _is_int(node):
        if node.bit_length() > MAX_INT_BITS:
            problems.append(f"{at}: an integer of {node.bit_length()} bits (at most {MAX_INT_BITS})")
    elif node is not None and not isinstance(node, bool):
        problems.append(f"{at}: a {type(node).__name__}, which JSON does not hold")


def _optional(record: dict[str, Any], key: str, check: Callable[[Any], bool]) -> bool:
    return key not in record or record[key] is None or check(record[key])


def _is_input(item: Any) -> bool:
    if isinstance(item, str):
        return True
    if isinstance(item, dict) and "setting" in item:
        return isinstance(item["setting"], str) and isinstance(item.get("where"), str)
    if isinstance(item, dict) and "snippet" in item:
        return (isinstance(item["snippet"], str) and BOOK_PATH_PATTERN.match(item["snippet"]) is not None
                and isinstance(item.get("sha256"), str) and isinstance(item.get("where"), str)
                and isinstance(item.get("value"), str))
    return (isinstance(item, dict) and isinstance(item.get("file"), str) and BOOK_PATH_PATTERN.match(item["file"]) is not None
            and isinstance(item.get("key"), str) and _optional(item, "line", lambda v: _is_int(v) and 0 <= v <= MAX_LINE))


def _check_value(value: Any, at: str, problems: list[str]) -> None:
    if isinstance(value, dict):
        exact, approx = value.get("exact"), value.get("float")
        if set(value) != {"exact", "float"} or not isinstance(exact, str) or not EXACT_PATTERN.match(exact) \
                or not _is_number(approx):
            problems.append(f"{at}: value must be a number, a string, a list, or {{'exact': 'p/q', 'float': x}}")
            return
        numerator, denominator = (int(part) for part in exact.split("/"))
        if denominator == 0:
            problems.append(f"{at}: exact value {exact!r} divides by zero")
            return
        try:
            expected = numerator / denominator
        except OverflowError:
            expected = math.copysign(math.inf, numerator)
        if not math.isclose(expected, approx, rel_tol=1e-9, abs_tol=1e-300):
            problems.append(f"{at}: exact value {exact} and float {approx!r} disagree")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_value(item, f"{at}[{i}]", problems)
    elif not _finite(value):
        problems.append(f"{at}: value is not finite")


def _check_record(record: dict[str, Any], at: str, problems: list[str]) -> None:
    if record.get("status") not in RECORDED:
        problems.append(f"{at}: status {_show(record.get('status'))} is not one of {', '.join(RECORDED)}")
    if not _optional(record, "kind", lambda k: k in KINDS):
        problems.append(f"{at}: kind {_show(record.get('kind'))} is not one of {', '.join(KINDS)}")
    _check_value(record.get("value"), at, problems)
    for key in ("message", "source", "citation", "hardware", "version"):
        if not _optional(record, key, lambda v: isinstance(v, str)):
            problems.append(f"{at}: {key} must be a string")
    if not _optional(record, "inputs", lambda v: isinstance(v, list) and all(_is_input(i) for i in v)):
        problems.append(f"{at}: inputs must be a list of {{file, key, value, line}}, {{setting, value, where}} or "
                        "{snippet, sha256, where, value} (or, migrated, strings)")
    if not _optional(record, "seconds", lambda v: _is_number(v) and 0 <= v <= MAX_SECONDS):
        problems.append(f"{at}: seconds {_show(record.get('seconds'))} is not a duration between 0 and {MAX_SECONDS}")
    if not _optional(record, "conditions", conditions.is_entry):
        problems.append(f"{at}: conditions {_show(record.get('conditions'))} is not an object of load_before and "
                        "load_after (load averages or null), cores (a positive integer) and beside (text or null)")
    if record.get("date") is not None:
        problem = _iso_date(record["date"])
        if problem:
            problems.append(f"{at}: date {problem}")
    figures = record.get("figures", [])
    if figures is None:
        figures = []
    if not isinstance(figures, list):
        problems.append(f"{at}: figures must be a list")
        return
    for i, fig in enumerate(figures):
        where = f"{at}: figures[{i}]"
        if not isinstance(fig, dict):
            problems.append(f"{where}: must be an object with file, line, printed")
            continue
        problems += _line_problem(fig.get("line"), where) + _file_problem(fig.get("file"), where)
        for key in ("printed", "stated"):
            if not _optional(fig, key, lambda v: isinstance(v, str)):
                problems.append(f"{where}: {key} must be a string")
        if not _optional(fig, "status", lambda v: v in RECORDED):
            problems.append(f"{where}: status {_show(fig.get('status'))} is not one of {', '.join(RECORDED)}")
    statuses = {f.get("status") for f in figures if isinstance(f, dict)}
    if record.get("status") == "verified" and statuses & {"stale", "failed"}:
        problems.append(f"{at}: status is 'verified' while a figure of it is {', '.join(sorted(statuses & {'stale', 'failed'}))}")


def _check_machine(data: dict[str, Any], where: str, problems: list[str]) -> None:
    machine = data.get("machine", {})
    if isinstance(machine, dict):
        if machine.get("slug") not in (None, data.get("slug")):
            problems.append(f"{where}: machine slug {_show(machine.get('slug'))} differs from the file's slug {_show(data.get('slug'))}")
        if not _optional(machine, "id", lambda v: isinstance(v, str) and identity.ID_PATTERN.match(v) is not None):
            problems.append(f"{where}: machine id {_show(machine.get('id'))} is not a machine id "
                            "(4 to 64 lower-case letters, digits, '-')")
        markers = machine.get("markers", [])
        if not isinstance(markers, list) or not all(isinstance(m, str) and MARKER_PATTERN.match(m) for m in markers):
            problems.append(f"{where}: machine markers must be a list of lower-case marker names")
        fingerprint = machine.get("fingerprint", {})
        if not isinstance(fingerprint, dict) or not all(
                v is None or isinstance(v, (str, bool)) or _is_number(v) for v in fingerprint.values()):
            problems.append(f"{where}: machine fingerprint must be an object of strings and numbers")
    for header in ("run", "environment"):  # `environment` is schema 1's run header, checked before migrating
        table_of_run = data.get(header, {})
        if not isinstance(table_of_run, dict):
            continue
        if table_of_run.get("date") is not None:
            problem = _iso_date(table_of_run["date"])
            if problem:
                problems.append(f"{where}: {header} date {problem}")
        for key in ("versions", "backends"):
            table = table_of_run.get(key, {})
            if table is not None and (not isinstance(table, dict) or not all(v is None or isinstance(v, str) for v in table.values())):
                problems.append(f"{where}: {header} {key} must be an object of version strings")
    run = data.get("run", {})
    if isinstance(run, dict):
        if not _optional(run, "commit", lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{7,64}", v) is not None):
            problems.append(f"{where}: run commit {_show(run.get('commit'))} is not a commit hash")
        if not _optional(run, "dirty", lambda v: isinstance(v, bool)):
            problems.append(f"{where}: run dirty must be true or false")
        if not _optional(run, "environment_errors", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)):
            problems.append(f"{where}: run environment_errors must be a list of sentences")
        seconds = run.get("seconds") or {}
        if not isinstance(seconds, dict) or not all(
                isinstance(per, dict) and all(_is_number(v) and 0 <= v <= MAX_SECONDS for v in per.values())
                for per in seconds.values()):
            problems.append(f"{where}: run seconds must map claims to backends to durations")
        dates = run.get("dates") or {}
        if not isinstance(dates, dict) or not all(isinstance(per, dict) for per in dates.values()):
            problems.append(f"{where}: run dates must map claims to backends to dates")
        else:
            for claim_id, per in dates.items():
                for backend, date in per.items():
                    problem = _iso_date(date)
                    if problem:
                        problems.append(f"{where}: run dates[{_show(claim_id)}][{_show(backend)}] {problem}")
    claims = data.get("claims", {})
    if isinstance(claims, dict):
        for claim_id, meta in claims.items():
            at = f"{where}: claims[{_show(claim_id)}]"
            if not isinstance(meta, dict):
                problems.append(f"{at}: must be an object")
                continue
            if not _optional(meta, "kind", lambda k: k in KINDS):
                problems.append(f"{at}: kind {_show(meta.get('kind'))} is not one of {', '.join(KINDS)}")
            for key in ("source", "citation", "hardware", "code", "skipped"):
                if not _optional(meta, key, lambda v: isinstance(v, str)):
                    problems.append(f"{at}: {key} must be a string")
    outputs = data.get("outputs", {})
    if isinstance(outputs, dict):
        for name, output in outputs.items():
            at = f"{where}: outputs[{_show(name)}]"
            if not isinstance(name, str) or not OUTPUT_NAME_PATTERN.match(name):
                problems.append(f"{at}: not a snippet file name")
            if not isinstance(output, dict) or not isinstance(output.get("text", ""), str):
                problems.append(f"{at}: must be an object with a text string")
                continue
            if output.get("date") is not None:
                problem = _iso_date(output["date"])
                if problem:
                    problems.append(f"{at}: date {problem}")
            if not _optional(output, "seconds", lambda v: _is_number(v) and 0 <= v <= MAX_SECONDS):
                problems.append(f"{at}: seconds {_show(output.get('seconds'))} is not a plausible duration")
            if not _optional(output, "how", lambda v: v in ("script", "in process")):
                problems.append(f"{at}: how {_show(output.get('how'))} is not 'script' or 'in process'")
            _check_output_checks(output.get("checked"), at, problems)


def _file_problem(file: Any, where: str) -> list[str]:
    """A place's file: a relative path inside the book, or the problem with it."""
    if isinstance(file, str) and BOOK_PATH_PATTERN.match(file):
        return []
    return [f"{where}: file {_show(file)} is not a relative path inside the book"]


def _line_problem(line: Any, where: str) -> list[str]:
    """A place's line: a positive integer up to MAX_LINE, or the problem with it."""
    if _is_int(line) and 1 <= line <= MAX_LINE:
        return []
    return [f"{where}: line {_show(line)} is not a positive integer"]


def _check_output_checks(checked: Any, at: str, problems: list[str]) -> None:
    """An output's `checked`: how each of the book's blocks showing the snippet compared with this run."""
    if checked is None:
        return
    if not isinstance(checked, list):
        problems.append(f"{at}: checked must be a list of the book's output blocks and how each compared")
        return
    for i, check in enumerate(checked):
        where = f"{at}: checked[{i}]"
        if not isinstance(check, dict):
            problems.append(f"{where}: must be an object with file, line, status")
            continue
        problems += _file_problem(check.get("file"), where) + _line_problem(check.get("line"), where)
        if check.get("status") not in OUTPUT_STATUSES:
            problems.append(f"{where}: status {_show(check.get('status'))} is not one of {', '.join(OUTPUT_STATUSES)}")
        if not _optional(check, "message", lambda v: isinstance(v, str)):
            problems.append(f"{where}: message must be a string")


def validate(data: Any, where: str, known_claims: set[str] | None = None) -> list[str]:
    """Every problem with a parsed results file, as 'where: what' lines; empty when sound.

    A results file may come from a pull request, so nothing in it is taken on trust: the
    shape, every type, finite and plausible numbers, ISO dates, safe names and paths,
    bounded sizes and depth, and (given `known_claims`) claim ids this book declares.
    """
    problems: list[str] = []
    if not isinstance(data, dict):
        return [f"{where}: expected a JSON object at the top, found {type(data).__name__}"]
    _walk(data, where, 1, "", problems)
    if problems:
        return problems
    run = data.get("run")
    if isinstance(run, dict):
        measured, outputs = run.get("measured", {}), run.get("outputs", {})
        if not isinstance(outputs, dict):
            problems.append(f"{where}: run outputs must be an object of snippets")
        if not isinstance(measured, dict) or not all(
                isinstance(per, dict) and all(isinstance(v, dict) and set(v) <= set(VOLATILE) for v in per.values())
                for per in measured.values()):
            problems.append(f"{where}: run measured must map claims to backends to {{value, message, conditions}}")
        else:
            records = data.get("records") if isinstance(data.get("records"), dict) else {}
            for claim_id, per_backend in measured.items():
                for backend in per_backend:
                    if not isinstance(records.get(claim_id), dict) or backend not in records[claim_id]:
                        problems.append(f"{where}: run measured[{_show(claim_id)}][{_show(backend)}] has no record")
        if problems:
            return problems
    data = folded_in(data)

    slug = data.get("slug")
    if not isinstance(slug, str) or not SLUG_PATTERN.match(slug):
        problems.append(f"{where}: slug {_show(slug)} is not a safe machine name (lower-case letters, digits, '-', '_')")
    for key in ("machine", "run", "claims", "records", "outputs"):
        if not isinstance(data.get(key, {}), dict):
            problems.append(f"{where}: {key!r} must be an object")
    _check_machine(data, where, problems)
    records = data.get("records", {})
    if isinstance(records, dict):
        for claim_id, per_backend in records.items():
            if not isinstance(per_backend, dict):
                problems.append(f"{where}: records[{claim_id!r}] must be an object of backends")
                continue
            if known_claims is not None and claim_id not in known_claims:
                problems.append(f"{where}: records[{claim_id!r}] names no claim of this book")
            elif not ID_PATTERN.match(claim_id):
                problems.append(f"{where}: records[{_show(claim_id)}] is not a claim id")
            for backend, record in per_backend.items():
                at = f"{where}: records[{claim_id!r}][{backend!r}]"
                if backend not in BACKEND_NAMES:
                    problems.append(f"{at}: unknown backend (expected one of {', '.join(BACKEND_NAMES)})")
                if not isinstance(record, dict):
                    problems.append(f"{at}: must be an object")
                    continue
                _check_record(record, at, problems)
    return problems


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read(path: Path, known_claims: set[str] | None = None) -> ResultsFile:
    """Read and check one results file; raise ResultsError saying what is wrong and where."""
    where = str(path)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise ResultsError(f"{where}: cannot be read ({e.strerror})") from None
    if size > MAX_FILE_BYTES:
        raise ResultsError(f"{where}: {size} bytes, more than a results file can hold ({MAX_FILE_BYTES})")
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constants)
    except json.JSONDecodeError as e:
        raise ResultsError(f"{where}:{e.lineno}: not valid JSON ({e.msg})") from None
    except UnicodeDecodeError as e:
        raise ResultsError(f"{where}: not UTF-8 text ({e.reason})") from None
    except RecursionError:
        raise ResultsError(f"{where}: nested too deeply to read") from None
    except ValueError as e:  # NaN or Infinity literals, integers of thousands of digits
        raise ResultsError(f"{where}: not a valid results file ({e})") from None
    except OSError as e:
        raise ResultsError(f"{where}: cannot be read ({e.strerror})") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{where}: expected a JSON object at the top, found {type(data).__name__}")
    data = migrate(data, where)
    problems = validate(data, where, known_claims)
    if not problems and data.get("slug") != path.stem:
        problems.append(f"{where}: holds the results of machine {_show(data.get('slug'))}; "
                        f"a machine's file is named after its slug ({data.get('slug')}.json)")
    if problems:
        raise ResultsError("\n".join(problems))
    return ResultsFile.from_dict(data)


def read_all(results_dir: Path, warn: Callable[[str], None], known_claims: set[str] | None = None) -> dict[str, ResultsFile]:
    """Every readable results file by slug; a bad file is reported through `warn` and skipped."""
    out: dict[str, ResultsFile] = {}
    for path in sorted(results_dir.glob("*.json")):
        try:
            out[path.stem] = read(path, known_claims)
        except ResultsError as e:
            warn(str(e))
    return out


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
    return json.dumps(results.to_dict(), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def merge_into(path: Path, update: ResultsFile, warn: Callable[[str], None] = lambda _: None,
               timeout: float = 120) -> ResultsFile:
    """Merge `update` into the file at `path` under a lock, atomically; return what was written.

    A corrupt existing file is moved aside to `<name>.corrupt-<time>` and reported, never
    silently replaced; a file from a newer schema is left alone and the merge refused.
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
                    current = read(path)
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
            current.merge(update)
            _atomic_write(path, dumps(current))
            return current
    except Timeout:
        raise ResultsError(f"{path}: another run has held its lock ({path.name}.lock) for {timeout:.0f} s; "
                           "nothing was merged") from None
