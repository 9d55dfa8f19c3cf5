"""What status a printed figure shows, decided from the records machines wrote.

The site draws a figure, its panel, the Machines page and the legend from the answers here;
the decision itself knows no HTML. Where a record judged the figure as printed (same file, line
and text), its verdict stands; where the text has changed since, the recorded value is compared
with the new text the way the engine compares them (`verified_book.engine.check.judge`); a
record computed from an older claim or input is outdated (`provenance.outdated_reason`), and
one measured beside another run or under a heavy load is contended. Nothing here computes a
claim.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from verified_book.authoring.inputs import Read
from verified_book.authoring.registry import Claim
from verified_book.book.bindings import Binding
from verified_book.engine.check import COMPUTED, HELD, judge
from verified_book.engine.evidence import evidence
from verified_book.engine.machine import Machine
from verified_book.engine.outcome import Outcome
from verified_book.engine.provenance import outdated_reason, versions_of_run
from verified_book.engine.recorded import recorded_reads
from verified_book.engine.verdicts import once
from verified_book.records.conditions import contended
from verified_book.records.errors import ResultsError
from verified_book.records.fleet import read_all
from verified_book.records.record import ClaimMeta, Exact, FigureVerdict, Record
from verified_book.records.results import CHECKED_RESULTS, ResultsFile, from_json
from verified_book.records.store import read_history
from verified_book.vocabulary import RECORDED, SHOWN_ORDER, STATUSES, Shown, Status

#: the statuses a record can carry, as the report, the results file and the site name them
VOCABULARY = STATUSES
#: a figure shows the first of these that any machine found (skipped counts as no result)
DISPLAY_ORDER = tuple(s.value for s in SHOWN_ORDER) + (Shown.UNVERIFIED,)
_STATUS_NAME = re.compile(r"^[a-z][a-z_-]{0,30}$")
SOURCE_PATTERN = re.compile(r"^(?P<path>[A-Za-z0-9_][A-Za-z0-9_./-]*\.py):(?P<line>\d{1,7})$")
MAX_TEXT = 400


def short(value: Any, limit: int = MAX_TEXT) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def show_value(value: Any) -> str:
    """A recorded value as a reader wants it: grouped integers, exact fractions with their decimal."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return "NaN" if value != value else f"{value:.6g}"
    if isinstance(value, Exact):
        return short(f"{value.exact} ≈ {value.float:.6g}", 120)
    if isinstance(value, dict) and "exact" in value:
        decimal = value.get("float")
        tail = f" ≈ {decimal:.6g}" if isinstance(decimal, (int, float)) and not isinstance(decimal, bool) else ""
        return short(f"{value['exact']}{tail}", 120)
    if isinstance(value, list):
        return short("(" + ", ".join(show_value(v) for v in value) + ")", 200)
    if isinstance(value, str) and isinstance(from_json(value), float):  # a NaN or an infinity, kept as its text
        return show_value(from_json(value))
    return short(value, 200)


def status_of(value: Any) -> str:
    """A recorded status as the site shows it: a status of the vocabulary, or any other plain name as
    itself (a newer writer's status gets its own class and label), anything else as failed."""
    if value in VOCABULARY or value in STATUSES:
        return str(value)
    return value if isinstance(value, str) and _STATUS_NAME.match(value) else Status.FAILED


def shown_status(statuses: Iterable[str]) -> str:
    """The status a reader sees: the worst across machines; skipped counts as no result.

    A status outside the vocabulary ranks just before "not yet verified", so it shows.
    """
    return _worst(frozenset(statuses) - {Status.SKIPPED})


@functools.lru_cache(maxsize=4096)  # a site asks at every figure and machine, about a few sets of statuses
def _worst(found: frozenset[str]) -> str:
    known = next((s for s in DISPLAY_ORDER if s in found), None)
    if known is not None and known != Shown.UNVERIFIED:
        return known
    other = sorted(found - set(DISPLAY_ORDER) - {Shown.BROKEN_BINDING})
    return other[0] if other else Shown.UNVERIFIED


def machine_of(results: ResultsFile) -> Machine:
    """The machine a results file speaks for, as the engine's judge needs it."""
    return Machine(dict(results.machine.fingerprint), results.slug, tuple(results.machine.markers))


def status_now(results: ResultsFile, claim_id: str, record: Record, backend: str | None = None) -> str:
    """A record's status as the book stands now: outdated where its claim or inputs changed since, or (given its
    backend) a library it was computed with is not the one the machine's latest run found; another version where
    it does not hold and came from a library version outside the one its figures are stated for."""
    status = record.status
    if status == Status.SKIPPED:
        return str(status)
    from verified_book.authoring.registry import REGISTRY

    claim = REGISTRY.get(claim_id)
    if status in (Status.FAILED, Status.STALE) and backend and version_outside(claim, backend, record):
        return Shown.ANOTHER_VERSION  # before outdated, as a figure's measurement decides (`_measure_now`)
    why = outdated_reason(claim, results.claims.get(claim_id), record, backend, versions_of_run(results))
    if why:
        return Status.OUTDATED
    return Shown.CONTENDED if contended_why(str(status), record) else str(status)


def contended_why(status: str, record: Record) -> str | None:
    """Why a record shows as contended instead of as the machine's figure (measured beside another run,
    or under a heavy load); None where it does not, and always for a failed or skipped one."""
    if status in (Status.SKIPPED, Status.FAILED):
        return None
    return contended(record.conditions)


def on_machine(statuses: Iterable[str]) -> str:
    """A machine's status for a figure or a claim, from its backends' statuses: the worst of those that ran,
    skipped where every one skipped, not yet verified where it has none."""
    found = frozenset(statuses)
    ran = found - {Status.SKIPPED}
    return _worst(ran) if ran or not found else Status.SKIPPED


def claim_status_on(per_backend: Mapping[str, Record], results: ResultsFile | None = None, claim_id: str = "") -> str:
    """A claim's status on one machine: the worst over its backends; skipped only if all are.
    Given the results file, a record computed from an older claim or input counts as outdated."""
    return on_machine(
        status_of(status_now(results, claim_id, r, b) if results is not None else r.status)
        for b, r in per_backend.items()
    )


@dataclass(frozen=True)
class Measurement:
    """What one machine recorded for a figure's claim on one backend, and the figure's status there."""

    machine: str
    backend: str
    status: str
    value: Any
    date: str
    version: str
    message: str
    rejudged: bool = False


@dataclass(frozen=True)
class FigureView:
    """Everything shown at one printed figure."""

    binding: Binding
    status: str
    measurements: tuple[Measurement, ...]
    claim: Claim | None
    source: str | None


def _entry_for(binding: Binding, record: Record) -> FigureVerdict | None:
    """The record's verdict on exactly this printed figure, if it judged this text at this place."""
    for entry in record.figures or []:
        if entry.file != binding.file or entry.line != binding.line:
            continue
        stated = entry.stated if "stated" in entry.model_fields_set else binding.stated
        if entry.printed != binding.text or stated != binding.stated:
            continue
        status = entry.status
        if status not in RECORDED:
            continue
        if (status == Status.DISPUTED and not binding.disputed) or (status == Status.STALE and binding.disputed):
            continue
        return entry
    return None


def measure(
    binding: Binding, claim: Claim | None, results: ResultsFile, backend: str, record: Record, machine: str
) -> Measurement:
    """The figure's status on one (machine, backend), from that machine's record; `machine` is the name its file is
    shown as (this clone's run of a machine with a committed file is one of its own). Within
    `verdicts.judged_once` each is measured once: the pages and the machines page show the same."""
    return once(
        "measure",
        (binding, claim, results, record),
        lambda: _measure_now(binding, claim, results, backend, record, machine),
        backend,
        machine,
    )


def _measure_now(
    binding: Binding, claim: Claim | None, results: ResultsFile, backend: str, record: Record, machine: str
) -> Measurement:
    measured = _another_version(claim, record, _measure(binding, claim, results, backend, record, machine))
    if measured.status == Shown.ANOTHER_VERSION:
        return measured
    if measured.status in (Status.SKIPPED, Status.FAILED) and record.value is None:
        return measured
    why = outdated_reason(claim, results.claims.get(binding.claim_id), record, backend, versions_of_run(results))
    if why is None:
        return _contended(measured, record)
    return replace(
        measured,
        status=Status.OUTDATED,
        rejudged=False,
        message=f"recorded {measured.status} with {show_value(measured.value)}; outdated: {why}",
    )


_CLAUSE = re.compile(r"^\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<version>\d+(?:\.\d+)*)\s*$")
_OPERATORS = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def _release(version: str) -> tuple[int, ...]:
    """A version's release numbers ("2.11.0+cu130" is (2, 11, 0)), padded so 2.13 and 2.13.0 compare equal."""
    numbers = re.match(r"\d+(?:\.\d+)*", version.strip())
    parts = tuple(int(n) for n in numbers.group(0).split(".")) if numbers else ()
    return parts + (0,) * (4 - len(parts))


def satisfies(version: str, specifier: str) -> bool:
    """Whether a library version meets a figure's stated versions: comma-separated clauses such as ">=2.13" or
    ">=2.0, <2.3" on release numbers (a local tag such as +cu130 is not compared). A clause this cannot read
    counts as met: a version the book states wrongly never shows a record as another version."""
    for clause in specifier.split(","):
        match = _CLAUSE.match(clause)
        if match and not _OPERATORS[match.group("op")](_release(version), _release(match.group("version"))):
            return False
    return True


def version_outside(claim: Claim | None, backend: str, record: Record) -> tuple[str, str, str] | None:
    """(library, version the record was computed with, versions the figure is stated for) where a record comes
    from a version the claim's `stated_for` excludes; None where it does not, or the claim states none."""
    if claim is None or not claim.stated_for:
        return None
    versions: dict[str, str] = {k: v for k, v in (record.uses or {}).items() if v}
    if record.version:
        versions.setdefault(backend.split(":")[0], record.version)
    for library, specifier in sorted(claim.stated_for.items()):
        found = versions.get(library)
        if found and not satisfies(found, specifier):
            return library, found, specifier
    return None


def _another_version(claim: Claim | None, record: Record, measured: Measurement) -> Measurement:
    """A figure a record from another library version does not hold shows as another version: that version's
    value (a computed NaN is a value) and version, never the book failing."""
    if measured.status not in (Status.FAILED, Status.STALE):
        return measured
    outside = version_outside(claim, measured.backend, record)
    if outside is None:
        return measured
    library, found, specifier = outside
    return replace(
        measured,
        status=Shown.ANOTHER_VERSION,
        message=f"{library} {found} gives {show_value(measured.value)}; the book states this figure for {library} "
        f"{specifier}",
    )


def shown_otherwise(views: Iterable[FigureView]) -> list[tuple[Binding, Measurement]]:
    """Each figure a machine's records show otherwise because they come from another library version than the
    one the figure is stated for, with that machine's measurement: what the verdict counts."""
    return [(v.binding, m) for v in views for m in v.measurements if m.status == Shown.ANOTHER_VERSION]


#: what another machine's record of a figure that holds here can show instead: a value that misses the printed
#: figure, a claim that fails there, another library version's answer
OTHERWISE: frozenset[str] = frozenset({Status.STALE, Status.FAILED, Shown.ANOTHER_VERSION})


def held_here_shown_otherwise(
    bindings: Iterable[Binding], here: ResultsFile, others: Mapping[str, ResultsFile]
) -> list[Binding]:
    """Each printed figure this machine's records hold (`check.HELD`) that another machine's records show
    otherwise (`OTHERWISE`), each judged as its panel judges it: what the verdict of a run counts, so a run
    that holds here does not hide what the Machines page shows of other machines."""
    return _judged_otherwise(_may_be_shown_otherwise(bindings, others, here.slug), here, others)


def _may_be_shown_otherwise(bindings: Iterable[Binding], others: Mapping[str, ResultsFile], here: str) -> list[Binding]:
    """The figures whose claim the records of a machine other than `here` may show otherwise (`_may_show_otherwise`):
    the only ones worth judging."""
    return [
        b
        for b in bindings
        if any(slug != here and b.claim_id in r.records and _may_show_otherwise(b, r) for slug, r in others.items())
    ]


def _judged_otherwise(candidates: list[Binding], here: ResultsFile, others: Mapping[str, ResultsFile]) -> list[Binding]:
    from verified_book.authoring.registry import REGISTRY

    found = []
    for binding in candidates:
        claim = REGISTRY.get(binding.claim_id)
        if claim is None or figure_view(binding, claim, {here.slug: here}).status not in HELD:
            continue
        elsewhere = {slug: r for slug, r in others.items() if slug != here.slug and binding.claim_id in r.records}
        if any(m.status in OTHERWISE for m in figure_view(binding, claim, elsewhere).measurements):
            found.append(binding)
    return found


def _may_show_otherwise(binding: Binding, results: ResultsFile) -> bool:
    """Whether a machine's records of a figure's claim can show it otherwise (`OTHERWISE`), as `_measure` decides:
    only a record that judged this figure as printed now stale or failed, or that judged it otherwise printed or
    not at all (judged again here). One that held it shows it held, outdated or contended, never otherwise."""
    for record in results.records[binding.claim_id].values():
        if record.status == Status.SKIPPED:
            continue
        entry = None if _nan_recorded_as_failure(record) else _entry_for(binding, record)
        if entry is None or entry.status in (Status.STALE, Status.FAILED):
            return True
    return False


def shown_otherwise_after(
    bindings: Iterable[Binding], written: Path | None, committed: Path, root: Path
) -> list[Binding]:
    """`held_here_shown_otherwise` after a run: this machine's records as the run left them in `written`,
    the other machines' as the committed results folder holds them, each taken unchecked where the book at
    `root` keeps it found sound (`CHECKED_RESULTS`); a file that cannot be read is the site's to report, and
    here shows nothing."""
    if written is None or not written.is_file():
        return []
    others = read_all(committed, lambda _: None, kept_in=root / CHECKED_RESULTS) if committed.is_dir() else {}
    candidates = _may_be_shown_otherwise(bindings, others, written.stem)
    if not candidates:
        return []
    try:
        here = read_history(written, claims={b.claim_id for b in candidates})  # a store reads those claims' rows only
    except ResultsError:
        return []
    return _judged_otherwise(candidates, here, others)


def otherwise_words(count: int) -> str | None:
    """The verdict's clause for the figures `held_here_shown_otherwise` found; None where there are none."""
    if not count:
        return None
    held = "1 figure holds" if count == 1 else f"{count} figures hold"
    return f"{held} here that other machines' records show otherwise (see the Machines page)"


def _contended(measured: Measurement, record: Record) -> Measurement:
    """A measurement taken beside another run or under a heavy load is shown as contended, not as the
    machine's figure: it counts as verified (or stale) nowhere."""
    why = contended_why(measured.status, record)
    if why is None:
        return measured
    return replace(
        measured,
        status=Shown.CONTENDED,
        message=f"recorded {measured.status}, but measured while {why}: "
        "not this machine's figure until a quiet run measures it again",
    )


def _reads(record: Record) -> list[Read]:
    """The inputs a record names (`recorded_reads`), read once per record within `verdicts.judged_once`."""
    return once("reads", (record,), lambda: recorded_reads(record))


#: what a record written before a computed NaN was kept as a value says in its place (failed, with no value)
NAN_BEFORE = "returned NaN"


def _nan_recorded_as_failure(record: Record) -> bool:
    """Whether a record is one from before a computed NaN was kept as a value: failed, its NaN only in its message
    (`NAN_BEFORE`), so its figures are judged again from that NaN."""
    return record.value is None and recorded_value(record) is not None


def recorded_value(record: Record) -> Any:
    """A record's value as a panel shows and judges it: a NaN or an infinity (kept as its text) as the float it
    is, and the NaN of a record from before a computed NaN was kept as a value (`NAN_BEFORE`) as that NaN."""
    if record.value is None and record.status == Status.FAILED and (record.message or "").startswith(NAN_BEFORE):
        return math.nan
    return from_json(record.value) if isinstance(record.value, str) else record.value


def _measure(
    binding: Binding, claim: Claim | None, results: ResultsFile, backend: str, record: Record, machine: str
) -> Measurement:
    raw_status = record.status
    value = recorded_value(record)
    before = _nan_recorded_as_failure(record)  # judged again
    message = record.message or ""
    date = results.date_of(binding.claim_id, backend) or ""
    version = record.version or ""
    base: dict[str, Any] = dict(machine=machine, backend=backend, value=value, date=date, version=version)
    if raw_status == Status.SKIPPED:
        return Measurement(status=Status.SKIPPED, message=message, **base)
    entry = None if before else _entry_for(binding, record)
    if entry is not None:
        status = str(entry.status)
        if status in HELD and claim is not None:
            # what a figure that held is evidence of, said from the claim and the record's inputs (a record
            # from before cited and inherited reference were told apart says only that it held)
            held, why = evidence(claim, _reads(record))
            if held is not Status.VERIFIED or status == Status.VERIFIED:
                return Measurement(status=held.value, message=why or message, **base)
        return Measurement(status=status, message=message, **base)
    if raw_status == Status.FAILED and value is None:
        return Measurement(status=Status.FAILED, message=message, **base)
    if claim is not None and value is not None and binding.printed is not None:
        outcome = Outcome(claim, backend, COMPUTED, value=from_json(value), inputs=_reads(record))
        verdict = judge(binding, outcome, machine_of(results))
        why = (
            "recorded as failed before a computed NaN was kept as a value"
            if before
            else "the text changed since this run"
        )
        note = f"{why}; its recorded value {show_value(value)} " + (
            "rounds to the printed figure"
            if verdict.status == Status.VERIFIED
            else f"makes the figure {verdict.status}"
        )
        return Measurement(status=verdict.status, message=note, rejudged=True, **base)
    return Measurement(status=status_of(raw_status), message=message, **base)


def claim_source(claim: Claim | None, metas: Iterable[ClaimMeta]) -> str | None:
    """Where the claim's code lives, `path.py:line`: the registry's, else a machine's record of it if well formed."""
    if claim is not None and claim.defined_in and claim.defined_line:
        return claim.defined_at
    for meta in metas:
        source = meta.defined_at
        if isinstance(source, str) and SOURCE_PATTERN.match(source) and ".." not in source:
            return source
    return None


def figure_view(binding: Binding, claim: Claim | None, results: Mapping[str, ResultsFile]) -> FigureView:
    """Judge one printed figure from every machine's records."""
    found: list[Measurement] = []
    metas: list[ClaimMeta] = []
    for slug in sorted(results):
        per_backend = results[slug].records.get(binding.claim_id)
        if per_backend is None:
            continue
        meta = results[slug].claims.get(binding.claim_id)
        metas += [meta] if meta is not None else []
        for backend in sorted(per_backend):
            found.append(measure(binding, claim, results[slug], backend, per_backend[backend], slug))
    status = shown_status(m.status for m in found if m.status != Status.SKIPPED)
    return FigureView(binding, status, tuple(found), claim, claim_source(claim, metas))
