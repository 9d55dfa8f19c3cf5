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
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Container, Mapping

from pydantic import ValidationError

from verified_book.records import conditions, identity, kept, salvage, wording
from verified_book.records.document_walk import walk
from verified_book.records.errors import NewerSchema, OtherMachine, ResultsError
from verified_book.records.errors import show as _show
from verified_book.records.migrate import MIGRATIONS, migrate
from verified_book.records.record import (
    BACKEND_NAMES,
    BOOK_PATH_PATTERN,
    EXACT_PATTERN,
    MARKER_PATTERN,
    MAX_LINE,
    MAX_SECONDS,
    OUTPUT_NAME_PATTERN,
    SCHEMA_VERSION,
    SLUG_PATTERN,
    VOLATILE,
    ClaimMeta,
    MachineRecord,
    Measured,
    Record,
    ResultsDocument,
    RunHeader,
    RunOnDisk,
    SnippetOutput,
    revised,
)
from verified_book.records.values import from_json, to_json
from verified_book.vocabulary import RECORDED, Status

__all__ = [  # the store's names, wherever in the package they are defined
    "MIGRATIONS",
    "NewerSchema",
    "OtherMachine",
    "ResultsError",
    "dumps",
    "from_json",
    "to_json",
    "folder_problem",
    "keep_unsaved",
    "merge_into",
    "migrate",
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
# The size limit guards against what others send (a contributed file, a file in the committed results
# folder); a machine's own history, written by its own runs, is read whatever its size (`own`), so a
# large book never loses its records to it.
MAX_FILE_BYTES = 64 * 1024 * 1024


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def _typed(model: Any, value: Any, where: str) -> Any:
    """A part given as plain data (by hand, or by a test) as its model; one that is not sound is refused."""
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError as e:
        raise ResultsError("\n".join(wording.problems(e, where))) from None


@dataclass
class ResultsFile:
    """One machine's results, as read from or written to `results/<slug>.json`: typed parts
    (verified_book.records.record), the measurements of the run header folded into their records."""

    slug: str
    machine: MachineRecord = field(default_factory=MachineRecord)
    #: the latest run: date, commit, dirty, os, driver, versions, backends; `seconds` and `dates` per claim and backend
    run: RunHeader = field(default_factory=RunHeader)
    #: verdicts: claim id -> backend -> status, value, figures, message, inputs, version
    records: dict[str, dict[str, Record]] = field(default_factory=dict)
    outputs: dict[str, SnippetOutput] = field(default_factory=dict)
    #: what each claim is, once: kind, source, citation, hardware, code (its fingerprint), skipped (why not here)
    claims: dict[str, ClaimMeta] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"{self.slug} (records given to the store)"
        self.machine = _typed(MachineRecord, self.machine, f"{where}: machine")
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
                records[claim_id][backend] = revised(
                    records[claim_id][backend], **{k: getattr(volatile, k) for k in volatile.model_fields_set}
                )
        # the header's parts as the document holds them, validated with it: not dumped and checked again
        given = doc.run.model_fields_set & set(RunHeader.model_fields)
        run = RunHeader.model_construct(_fields_set=given, **{name: getattr(doc.run, name) for name in given})
        return cls(doc.slug, doc.machine, run, records, {**doc.outputs, **doc.run.outputs}, dict(doc.claims))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ResultsFile":
        """A file as `to_dict` lays it out (of the current schema), checked by the models."""
        try:
            return cls.from_document(ResultsDocument.model_validate(data))
        except ValidationError as e:
            raise ResultsError("\n".join(wording.problems(e, str(data.get("slug"))))) from None

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
            and self.records[cid][b].status not in (Status.FAILED, Status.SKIPPED)
        }
        if other.machine.model_fields_set and not identity.absent(hardware(self), hardware(other)):
            self.machine = other.machine  # a run that lacked the GPU does not make the file's machine GPU-less
        per_record = {}
        for key in PER_RECORD:  # ours taken over, and merged in place: the run's timings, not the whole history's
            merged = getattr(self.run, key)
            for claim_id, per_backend in getattr(other.run, key).items():
                merged[claim_id] = {
                    **merged.get(claim_id, {}),
                    **{b: v for b, v in per_backend.items() if (claim_id, b) not in kept},
                }
            per_record[key] = merged
        latest = other.run if other.run.model_fields_set else self.run
        self.run = RunHeader.model_validate(latest.model_dump(exclude_unset=True, exclude=set(PER_RECORD)))
        for key in PER_RECORD:  # each timing was checked when its header was made: the union is checked already
            setattr(self.run, key, per_record[key])
        for claim_id, per_backend in other.records.items():
            self.records.setdefault(claim_id, {}).update(
                {b: r for b, r in per_backend.items() if (claim_id, b) not in kept}
            )
        absent = {name for name, version in (self.run.backends or {}).items() if version is None}
        for claim_id in list(self.records) if absent else ():  # a backend this machine lacks leaves no record
            per_backend = self.records[claim_id]
            for name in [b for b, r in per_backend.items() if b in absent and r.status == Status.SKIPPED]:
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


MEASURED = "measured"


#: what the run header keeps per claim and backend, merged like the records: so a rerun that
#: changes nothing changes the header only
PER_RECORD = ("seconds", "dates")


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
    walk(data, where, problems)
    if problems:
        return None, problems
    try:
        data = migrate(data, where)
    except ResultsError as e:
        return None, str(e).splitlines()
    try:
        doc = ResultsDocument.model_validate(data)
    except ValidationError as e:
        return None, wording.problems(e, where)
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


def no_json_constants(name: str) -> Any:
    """`json.loads`'s `parse_constant`: NaN and Infinity are not JSON, and no results file holds them."""
    raise ValueError(f"{name} is not a JSON number")


#: sound files `read` keeps checked in a `kept_in` folder, the oldest used going first; `read_all` keeps twice the
#: files it reads where that is more, or a fleet larger than this would be checked again at every read
KEEP_CHECKED = 50


#: where the results files found sound are kept, so that the next read of an unchanged file (a site build, the
#: verdict's other machines) takes it without checking it again (`read`), relative to the book's root
CHECKED_RESULTS = Path(".cache") / "verified-book" / "results"


def read(
    path: Path,
    known_claims: set[str] | None = None,
    kept_in: Path | None = None,
    *,
    own: bool = False,
    let_go: bool = True,
) -> ResultsFile:
    """Read and check one results file; raise ResultsError saying what is wrong and where.

    A file from others is refused past MAX_FILE_BYTES before it is read; `own` says the file is this
    machine's own history (its local results, records an earlier run kept), read whatever its size.
    With `kept_in`, a file read and found sound before (the same bytes, checked by the same code) is
    taken from there instead of checked again, which a site build does at every build for files that
    change only when a machine contributes (see `kept_place`); keeping one lets go of the folder's oldest past
    `KEEP_CHECKED`, unless `let_go` is False (the caller lets go, once for many files)."""
    where = str(path)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise ResultsError(f"{where}: cannot be read ({e.strerror})") from None
    if not within_limit(size, own):
        raise ResultsError(
            f"{where}: {size} bytes, more than a results file from another machine may hold ({MAX_FILE_BYTES}); "
            "the limit guards contributed files and the committed results folder, never a machine's own history"
        )
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ResultsError(f"{where}: cannot be read ({e.strerror})") from None
    code = checking_code() if kept_in is not None else None
    place = kept_place(kept_in, raw, known_claims, code) if kept_in is not None and code is not None else None
    if place is not None:
        found = kept.taken(place)
        if isinstance(found, ResultsFile) and found.slug == path.stem:  # the same bytes under another name are not
            return found
    results = check_bytes(raw, path, known_claims)
    if place is not None:
        kept.keep(place, results, KEEP_CHECKED if let_go else None)
    return results


def within_limit(size: int, own: bool) -> bool:
    """Whether a results file of `size` bytes is read: a machine's `own` history whatever its size, a file from others
    up to `MAX_FILE_BYTES`."""
    return own or size <= MAX_FILE_BYTES


def kept_place(folder: Path, raw: bytes, known_claims: set[str] | None, code: str) -> Path:
    """Where a sound file of these bytes is kept: named by the bytes, the claims it was checked against and
    the code that checks it (`checking_code`), so a change to any of them checks the file again."""
    h = hashlib.sha256(raw)
    h.update(code.encode())
    h.update(repr(sorted(known_claims) if known_claims is not None else None).encode())
    return kept.named(folder, h.hexdigest())


@functools.cache
def checking_code() -> str | None:
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
        return json.loads(raw.decode("utf-8"), parse_constant=no_json_constants)
    except json.JSONDecodeError as e:
        raise ResultsError(f"{where}:{e.lineno}: not valid JSON ({e.msg})") from None
    except UnicodeDecodeError as e:
        raise ResultsError(f"{where}: not UTF-8 text ({e.reason})") from None
    except RecursionError:
        raise ResultsError(f"{where}: nested too deeply to read") from None
    except ValueError as e:  # NaN or Infinity literals, integers of thousands of digits
        raise ResultsError(f"{where}: not a valid results file ({e})") from None


def check_bytes(raw: bytes, path: Path, known_claims: set[str] | None) -> ResultsFile:
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
    walk(data, where, problems, places)
    aside: list[salvage.SetAside] = []
    data = copy.deepcopy(data)
    if problems:
        units = [salvage.unit(place) for place in places]
        if data.get("schema_version") != SCHEMA_VERSION or None in units:
            return None, [], problems[:51]
        grouped: dict[tuple[str | int, ...], list[str]] = {}
        for part, text in zip(units, problems, strict=True):
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
                    return None, [], wording.problems(e, where)
                inner = "".join(f"[{k!r}]" for k in loc[len(part) :] if k != "[key]")
                found = f" (found {_show(error['input'])})" if error["type"] != "missing" else ""
                grouped.setdefault(part, []).append(f"{inner or 'the part'}: {error['msg']}{found}")
            taken = salvage.set_aside(data, grouped)
            if not taken:  # nothing left to take: the problem is not the parts'
                return None, [], wording.problems(e, where)
            aside += taken


def read_salvaging(path: Path) -> tuple[ResultsFile, list[salvage.SetAside]]:
    """A results file for a writer to merge into: every sound record kept, each bad part set aside (see
    `salvaged`); a file that is not a results file at all raises ResultsError, as `read` does. The file is
    the one the writer keeps, so no size limit applies: a large book's history is never set aside for its size."""
    where = str(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ResultsError(f"{where}: cannot be read ({e.strerror})") from None
    data = _loaded(raw, where)
    doc, aside, problems = salvaged(data, where)
    return _as_results(data, doc, problems, path), aside


# the writer, which reads through this module: imported last, so that each of them finds the other whole
from verified_book.records.writing import dumps, folder_problem, keep_unsaved, merge_into  # noqa: E402
