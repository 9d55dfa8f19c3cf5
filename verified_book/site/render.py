"""Bindings + results → HTML: what a reader sees at each printed figure.

A page's Markdown goes in with its bindings (from `verified_book.book.bindings`) and every
machine's results file; out come Markdown in which each binding is a placeholder
token, and the HTML each token stands for. The site generator converts the Markdown
and `fill` puts the HTML back, so no `claim:` link ever reaches the generator.

Nothing here computes a claim: a figure's status comes from the records that
machines wrote. Where a record judged the figure as printed (same file, line and
text), its verdict stands; where the text has changed since, the recorded value is
compared with the new text the way the engine compares them. Every string read from
a results file is untrusted (results arrive by pull request): the HTML is built as
markupsafe's `Markup`, with `markup` (or `Markup.format`) and `Markup.join`, which escape every
string that is not already `Markup`, so nothing reaches the page unescaped.
"""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import PurePosixPath
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence
from urllib.parse import quote

from markupsafe import Markup, escape

from verified_book.authoring.inputs import Read
from verified_book.authoring.registry import Claim
from verified_book.book import snippet_display
from verified_book.book.bindings import BINDING, Binding, Page, unknown_claim
from verified_book.engine.check import COMPUTED, HELD, Outcome, evidence, judge
from verified_book.engine.machine import Machine
from verified_book.engine.provenance import once, outdated_reason
from verified_book.engine.recorded import recorded_reads
from verified_book.errors import Problem
from verified_book.records.conditions import contended
from verified_book.records.record import ClaimMeta, Exact, FigureVerdict, Record
from verified_book.records.results import ResultsFile, from_json
from verified_book.vocabulary import (
    BROKEN_BINDING,
    CONTENDED,
    LABELS,
    MEANINGS,
    NO_BACKEND_NAME,
    NOT_REPORTED,
    RECORDED,
    SHAPES,
    SHOWN_ORDER,
    STATUSES,
    UNVERIFIED,
    Status,
)

#: the statuses a record can carry, as the report, the results file and the site name them
VOCABULARY = STATUSES
#: a figure shows the first of these that any machine found (skipped counts as no result)
DISPLAY_ORDER = tuple(s.value for s in SHOWN_ORDER) + (UNVERIFIED,)
_STATUS_NAME = re.compile(r"^[a-z][a-z_-]{0,30}$")
SOURCE_PATTERN = re.compile(r"^(?P<path>[A-Za-z0-9_][A-Za-z0-9_./-]*\.py):(?P<line>\d{1,7})$")
_LEFTOVER = re.compile(r"(?:\[[^\[\]]*)?\]\(\s*claim:[^)]*\)?")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_INCLUDE = re.compile(r"""--8<--\s*["']?(?P<path>[^"'\s]+\.py)\b""")
_POWER = re.compile(r"(?<=\d)\^\{?(?P<exp>[+\-−]?\d+)\}?")
MAX_TEXT = 400

#: how a snippet's output was produced, as the caption says it (verified_book.engine.snippet_run)
RUN_HOW = {"script": "as a script", "in process": "inside the test process, its libraries already loaded"}


def markup(template: str, *args: Any, **kwargs: Any) -> Markup:
    """`Markup(template).format(...)`: each value escaped unless it is `Markup` already. The values are
    escaped first and `str.format` places them, which costs a third of `Markup.format` at every figure
    of a build; so a field takes no format spec (`{:.1f}`): format the value before."""
    return Markup(template.format(*map(escape, args), **{k: escape(v) for k, v in kwargs.items()}))


def short(value: Any, limit: int = MAX_TEXT) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------------------
# Values and statuses as recorded


def show_value(value: Any) -> str:
    """A recorded value as a reader wants it: grouped integers, exact fractions with their decimal."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, Exact):
        return short(f"{value.exact} ≈ {value.float:.6g}", 120)
    if isinstance(value, dict) and "exact" in value:
        decimal = value.get("float")
        tail = f" ≈ {decimal:.6g}" if isinstance(decimal, (int, float)) and not isinstance(decimal, bool) else ""
        return short(f"{value['exact']}{tail}", 120)
    if isinstance(value, list):
        return short("(" + ", ".join(show_value(v) for v in value) + ")", 200)
    return short(value, 200)


def status_of(value: Any) -> str:
    """A recorded status as the site shows it: a status of the vocabulary, or any other plain name as
    itself (a newer writer's status gets its own class and label), anything else as failed."""
    if value in VOCABULARY or value in STATUSES:
        return str(value)
    return value if isinstance(value, str) and _STATUS_NAME.match(value) else Status.FAILED.value


def label(status: str) -> str:
    return LABELS.get(status, status.replace("_", " ").replace("-", " "))


def shown_status(statuses: Iterable[str]) -> str:
    """The status a reader sees: the worst across machines; skipped counts as no result.

    A status outside the vocabulary ranks just before "not yet verified", so it shows.
    """
    found = set(statuses) - {Status.SKIPPED.value}
    known = next((s for s in DISPLAY_ORDER if s in found), None)
    if known is not None and known != UNVERIFIED:
        return known
    other = sorted(found - set(DISPLAY_ORDER) - {BROKEN_BINDING})
    return other[0] if other else UNVERIFIED


def number(value: Any) -> float | None:
    """A recorded scalar as a float, for plots; None for anything else."""
    value = from_json(value)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float, Fraction)):
        result = float(value)
        return result if result == result and abs(result) != float("inf") else None
    return None


def machine_of(results: ResultsFile) -> Machine:
    """The machine a results file speaks for, as the engine's judge needs it."""
    return Machine(dict(results.machine.fingerprint), results.slug, tuple(results.machine.markers))


def status_now(results: ResultsFile, claim_id: str, record: Record) -> str:
    """A record's status as the book stands now: outdated where its claim or inputs changed since."""
    status = record.status
    if status == Status.SKIPPED:
        return str(status)
    from verified_book.authoring.registry import REGISTRY

    why = outdated_reason(REGISTRY.get(claim_id), results.claims.get(claim_id), record)
    if why:
        return Status.OUTDATED.value
    return CONTENDED if contended_why(str(status), record) else str(status)


def contended_why(status: str, record: Record) -> str | None:
    """Why a record shows as contended instead of as the machine's figure (measured beside another run,
    or under a heavy load); None where it does not, and always for a failed or skipped one."""
    if status in (Status.SKIPPED, Status.FAILED):
        return None
    return contended(record.conditions)


def claim_status_on(per_backend: Mapping[str, Record], results: ResultsFile | None = None, claim_id: str = "") -> str:
    """A claim's status on one machine: the worst over its backends; skipped only if all are.
    Given the results file, a record computed from an older claim or input counts as outdated."""
    statuses = [(status_now(results, claim_id, r) if results is not None else r.status) for r in per_backend.values()]
    statuses = [status_of(s) for s in statuses]
    if not statuses:
        return UNVERIFIED
    ran = [s for s in statuses if s != Status.SKIPPED]
    return shown_status(ran) if ran else Status.SKIPPED.value


# ---------------------------------------------------------------------------
# One figure


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
    `provenance.judged_once` each is measured once: the pages and the machines page show the same."""
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
    measured = _measure(binding, claim, results, backend, record, machine)
    if measured.status in (Status.SKIPPED, Status.FAILED) and record.value is None:
        return measured
    why = outdated_reason(claim, results.claims.get(binding.claim_id), record)
    if why is None:
        return _contended(measured, record)
    return replace(
        measured,
        status=Status.OUTDATED.value,
        rejudged=False,
        message=f"recorded {measured.status} with {show_value(measured.value)}; outdated: {why}",
    )


def _contended(measured: Measurement, record: Record) -> Measurement:
    """A measurement taken beside another run or under a heavy load is shown as contended, not as the
    machine's figure: it counts as verified (or stale) nowhere."""
    why = contended_why(measured.status, record)
    if why is None:
        return measured
    return replace(
        measured,
        status=CONTENDED,
        message=f"recorded {measured.status}, but measured while {why}: "
        "not this machine's figure until a quiet run measures it again",
    )


def _reads(record: Record) -> list[Read]:
    """The inputs a record names (`recorded_reads`), read once per record within `provenance.judged_once`."""
    return once("reads", (record,), lambda: recorded_reads(record))


def _measure(
    binding: Binding, claim: Claim | None, results: ResultsFile, backend: str, record: Record, machine: str
) -> Measurement:
    raw_status = record.status
    value = record.value
    message = record.message or ""
    date = results.date_of(binding.claim_id, backend) or ""
    version = record.version or ""
    base: dict[str, Any] = dict(machine=machine, backend=backend, value=value, date=date, version=version)
    if raw_status == Status.SKIPPED:
        return Measurement(status=Status.SKIPPED.value, message=message, **base)
    entry = _entry_for(binding, record)
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
        return Measurement(status=Status.FAILED.value, message=message, **base)
    if claim is not None and value is not None and binding.printed is not None:
        outcome = Outcome(claim, backend, COMPUTED, value=from_json(value), inputs=_reads(record))
        verdict = judge(binding, outcome, machine_of(results))
        note = f"the text changed since this run; its recorded value {show_value(value)} " + (
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


def source_link(source: str | None, repo_url: str | None) -> Markup:
    """A link to the claim's code on the repository, or the bare place when no link can be made."""
    if not source:
        return Markup()
    match = SOURCE_PATTERN.match(source)
    if not match or ".." in PurePosixPath(match.group("path")).parts:
        return markup('<span class="vb-panel__source">{}</span>', short(source, 120))
    if not repo_url:
        return markup('<span class="vb-panel__source">computed by <code>{}</code></span>', source)
    href = f"{repo_url.rstrip('/')}/blob/main/{quote(match.group('path'))}#L{match.group('line')}"
    return markup('<span class="vb-panel__source">computed by <a href="{}"><code>{}</code></a></span>', href, source)


def pretty(text: str) -> Markup:
    """Escaped figure text with powers set as superscripts: 10^-7 → 10⁻⁷ (display only)."""
    escaped = escape(text)
    # the exponent is digits and a sign, so the superscripted text stays escaped
    return Markup(_POWER.sub(lambda m: "<sup>" + m.group("exp").replace("-", "−") + "</sup>", escaped))


BACKEND_LABELS = {NO_BACKEND_NAME: "exact arithmetic"}


def _machine_line(slug: str, items: Sequence[Measurement], results: ResultsFile | None, quiet: bool = False) -> Markup:
    """A machine's heading in the panel: its name, the date of its records, python's version, and
    whether the fleet has not heard from it within the site's window."""
    dates = sorted({m.date[:10] for m in items if m.date})
    versions = (results.run.versions if results is not None else None) or {}
    python = versions.get("python") or ""
    meta = " · ".join(x for x in (", ".join(dates), f"python {python}" if python else "") if x)
    note = Markup()
    if quiet:
        note = markup('<span class="vb-quiet" data-status="{}">{}</span>', NOT_REPORTED, LABELS[NOT_REPORTED])
    return markup(
        '<span class="vb-machine__name">{}</span><span class="vb-machine__meta">{}</span>{}',
        slug,
        short(meta, 120),
        note,
    )


def _row_note(m: Measurement) -> str:
    """What a row needs said beyond its value: why it failed, why it is outdated (what it was computed
    from and what the book says now), what the author's machine printed, or that it was judged from the record."""
    if m.status in (Status.FAILED, Status.OUTDATED, Status.REFERENCE, Status.CITED, CONTENDED) and m.message:
        return short(m.message.splitlines()[0], 300)
    if m.rejudged and m.status != Status.VERIFIED:
        return short(m.message, 300)
    return ""


def _measured_here(claim_id: str, results: Mapping[str, ResultsFile]) -> Markup:
    """Beside a figure computed from another machine's measurement: the same quantity as each machine
    measured it (`Claim.measured_here`), so the panel shows both values."""
    found = []
    for slug in sorted(results):
        per_backend = results[slug].records.get(claim_id)
        for backend, record in sorted((per_backend or {}).items()):
            if record.status not in (Status.SKIPPED, Status.FAILED):
                found.append(f"{slug} ({backend}) {show_value(record.value)}")
    measured = "; ".join(found) if found else "no machine has measured it yet"
    return Markup(
        '<span class="vb-panel__here">The same quantity measured on the book\'s machines (<code>{}</code>): {}.</span>'
    ).format(claim_id, measured)


def _row(m: Measurement) -> Markup:
    """One backend's value on one machine, with its status."""
    version = f" {short(m.version, 40)}" if m.version else ""
    return markup(
        '<span class="vb-row" data-status="{status}" data-backend="{backend}">'
        '<span class="vb-row__backend">{backend_label}{version}</span>'
        '<span class="vb-row__value">{value}</span>'
        '<span class="vb-row__status">{label}</span>'
        "</span>",
        status=m.status,
        backend=m.backend,
        backend_label=BACKEND_LABELS.get(m.backend, m.backend),
        version=version,
        value=show_value(m.value),
        label=label(m.status),
    )


def render_panel(
    view: FigureView, results: Mapping[str, ResultsFile], repo_url: str | None, uid: str, quiet: Collection[str] = ()
) -> Markup:
    """The panel shown on hover or focus: claim, status, each machine's value, date, versions, source.

    Its own element name (`vb-panel`, phrasing content like a span) keeps it whole out of the
    search index, whose parser matches excluded elements by tag name.
    """
    b = view.binding
    parts = [
        markup('<vb-panel class="vb-panel" id="{}" data-search-exclude>', uid),
        Markup('<span class="vb-panel__head">'),
        markup(
            '<span class="vb-badge" data-status="{}">{}{}</span> ', view.status, mark(view.status), label(view.status)
        ),
        markup('<code class="vb-panel__id">{}</code>', b.claim_id),
        Markup("</span>"),
    ]
    if view.claim is not None and view.claim.doc:
        parts.append(markup('<span class="vb-panel__doc">{}</span>', short(view.claim.doc, 300)))
    printed = markup("Printed <b>{}</b>", pretty(b.text))
    if b.stated != b.text:
        printed += markup(", read as {}", b.stated)
    if b.disputed:
        printed += Markup(", marked disputed by the book")
    meaning = MEANINGS.get(view.status, f"a machine recorded the status {label(view.status)!r}")
    parts.append(markup('<span class="vb-panel__printed">{}: {}.</span>', printed, meaning))
    if view.claim is not None and view.claim.measured_here:
        parts.append(_measured_here(view.claim.measured_here, results))
    if not view.measurements:
        parts.append(
            Markup(
                '<span class="vb-panel__none">No machine has recorded this claim yet: '
                "run the suite on yours to verify it.</span>"
            )
        )
    by_machine: dict[str, list[Measurement]] = {}
    for m in view.measurements:
        by_machine.setdefault(m.machine, []).append(m)
    shown: set[str] = set()
    for slug, items in by_machine.items():
        ran = [m for m in items if m.status != Status.SKIPPED]
        machine_status = shown_status(m.status for m in ran) if ran else Status.SKIPPED.value
        parts.append(markup('<span class="vb-machine" data-machine="{}" data-status="{}">', slug, machine_status))
        parts.append(_machine_line(slug, items, results.get(slug), slug in quiet))
        for m in ran:
            parts.append(_row(m))
            note = _row_note(m)
            if note and note not in shown:
                shown.add(note)
                parts.append(markup('<span class="vb-row__message">{}</span>', note))
        skipped = [m for m in items if m.status == Status.SKIPPED]
        if skipped:
            reasons = "; ".join(dict.fromkeys(short(m.message.splitlines()[0], 160) for m in skipped if m.message))
            names = ", ".join(m.backend for m in skipped)
            parts.append(
                markup('<span class="vb-row__skipped" title="{}">not run here: {}</span>', short(reasons, 600), names)
            )
        parts.append(Markup("</span>"))
    parts.append(source_link(view.source, repo_url))
    parts.append(Markup("</vb-panel>"))
    return Markup().join(parts)


#: a figure's mark (its status as a shape), and the opening of what a screen reader says in its place;
#: the site's search leaves both out of its index, with the figure's panel
FIGURE_MARK = Markup('<span class="vb-fig__mark" aria-hidden="true"></span>')
SCREEN_READER = Markup('<span class="vb-sr" data-search-exclude>')


def render_figure(
    view: FigureView,
    results: Mapping[str, ResultsFile],
    repo_url: str | None,
    uid: str,
    in_code: bool = False,
    quiet: Collection[str] = (),
) -> Markup:
    """One printed figure as ONE element carrying `data-claim` and `data-status`, its panel inside."""
    b = view.binding
    text = escape(b.text) if in_code else pretty(b.text)
    sr = f" ({label(view.status)} figure; opens what every machine computed)"
    # a figure reads as one word, except a list of values, which may break after its commas in a narrow cell
    wraps = Markup(" data-wrap") if ", " in b.text else Markup()
    return markup(
        '<span class="vb-fig" data-claim="{claim}" data-status="{status}"{wraps} tabindex="0" '
        'role="button" aria-expanded="false" aria-describedby="{uid}">'
        '<span class="vb-fig__text">{text}</span>{mark}{screen_reader}{sr}</span>'
        "{panel}"
        "</span>",
        claim=b.claim_id,
        status=view.status,
        wraps=wraps,
        uid=uid,
        text=text,
        mark=FIGURE_MARK,
        screen_reader=SCREEN_READER,
        sr=sr,
        panel=render_panel(view, results, repo_url, uid, quiet),
    )


def render_error(text: str, message: str, claim_id: str = "", in_code: bool = False) -> Markup:
    """A visible marker where a binding is broken (plain builds; strict builds fail instead)."""
    shown = escape(text) if in_code else pretty(text)
    message = message.replace("](claim:", "] (claim ")  # the build log has the exact syntax; the page shows no link
    return markup(
        '<span class="vb-fig" data-status="{status}" data-claim-error="{claim}" tabindex="0" title="{message}">'
        '<span class="vb-fig__text">{shown}</span>{mark}'
        "{screen_reader} (broken figure: {message})</span></span>",
        status=BROKEN_BINDING,
        claim=claim_id,
        message=short(message, 300),
        shown=shown,
        mark=FIGURE_MARK,
        screen_reader=SCREEN_READER,
    )


def mark(status: str) -> Markup:
    """A status's mark alone, as the figures carry it (the legend and the machines page use it)."""
    return markup('<span class="vb-mark" data-status="{}" aria-hidden="true"></span>', status)


LEGEND_ORDER = (*VOCABULARY[:-1], CONTENDED, UNVERIFIED, Status.SKIPPED.value, BROKEN_BINDING)


def render_legend(machines_href: str | None = None) -> Markup:
    """What each mark means: one row per status, with its mark, its shape in words and its meaning."""
    rows = []
    for status in LEGEND_ORDER:
        glyph, shape = SHAPES[status]
        sample = Markup(
            '<span class="vb-fig vb-fig--sample" data-status="{}"><span class="vb-fig__text">16.6</span>{}</span>'
        ).format(status, FIGURE_MARK)
        rows.append(
            markup(
                '<tr data-status="{status}"><td>{sample}</td><th scope="row">{label}</th>'
                '<td><span class="vb-legend__glyph" aria-hidden="true">{glyph}</span> {shape}</td>'
                "<td>{meaning}.</td></tr>",
                status=status,
                sample=sample,
                label=LABELS[status],
                glyph=glyph,
                shape=shape,
                meaning=MEANINGS[status],
            )
        )
    glyph, shape = SHAPES[NOT_REPORTED]
    machines = markup('<a href="{}">machines page</a>', machines_href) if machines_href else "machines page"
    return markup(
        '<div class="vb-scroll" data-vb-scroll><table class="vb-legend">'
        '<thead><tr><th scope="col">looks like</th><th scope="col">status</th><th scope="col">mark</th>'
        '<th scope="col">means</th></tr></thead><tbody>{rows}</tbody></table></div>'
        '<p class="vb-legend__machine">{mark} <b>{label}</b> '
        '<span class="vb-legend__glyph" aria-hidden="true">{glyph}</span> ({shape}), on the {machines} '
        "and in the panels: {meaning}.</p>",
        rows=Markup().join(rows),
        mark=mark(NOT_REPORTED),
        label=LABELS[NOT_REPORTED],
        glyph=glyph,
        shape=shape,
        machines=machines,
        meaning=MEANINGS[NOT_REPORTED],
    )


# ---------------------------------------------------------------------------
# One page


@dataclass
class Context:
    """What every page's rendering needs: the results, the claims, where the code lives."""

    results: Mapping[str, ResultsFile]
    claims: Callable[[str], Claim | None]
    repo_url: str | None = None
    near: Callable[[str], Sequence[str]] = lambda _: ()
    quiet: Collection[str] = ()  # fleet machines not reported within the site's window
    #: an included file's text by the path its include names, or None where there is none to read
    include: Callable[[str], str | None] = lambda _: None
    load_errors: Sequence[Problem] = ()  # what kept the book's topics from loading: why a claim may be unknown
    #: the hash of a snippet's source as the book has it now, by file name; None where it has no such snippet
    snippet_hash: Callable[[str], str | None] = lambda _: None


@dataclass
class RenderedPage:
    """A page's Markdown with placeholder tokens, the HTML for each token, and what went wrong."""

    markdown: str
    file: str = ""
    fragments: dict[str, Markup] = field(default_factory=dict)
    blocks: dict[str, Markup] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    views: list[FigureView] = field(default_factory=list)
    missing: list[Binding] = field(default_factory=list)
    titles: dict[str, str] = field(default_factory=dict)


@dataclass
class GeneratedPage:
    """A page the site adds (machines, plots): Markdown with tokens, and the HTML for each token."""

    markdown: str
    blocks: dict[str, str] = field(default_factory=dict)


def fill_blocks(html_text: str, blocks: Mapping[str, str]) -> str:
    """Put each block of a generated page in place of its placeholder paragraph."""
    for token, block in blocks.items():
        html_text = html_text.replace(f"<p>{token}</p>", block).replace(token, block)
    return html_text


class _Tokens:
    """Placeholder tokens: letters and digits only, so Markdown leaves them as they are."""

    def __init__(self, seed: str) -> None:
        self.salt = hashlib.sha1(seed.encode("utf-8")).hexdigest()[:10].upper()
        self.count = 0

    def next(self) -> str:
        self.count += 1
        return f"VBCLAIM{self.salt}N{self.count}Z"


def included_paths(markdown: str) -> set[str]:
    """The scripts a page includes (`--8<-- "path.py"`), each as its include line names it."""
    return {str(PurePosixPath(m.group("path"))) for m in _INCLUDE.finditer(markdown)}


def snippet_of(info: str, last_include: str | None) -> str | None:
    """The snippet an output block shows: `output name.py` in its info string, else the last include."""
    words = info.strip().split()
    for word in words[1:]:
        if word.endswith(".py"):
            return PurePosixPath(word.strip("\"'")).name
    return PurePosixPath(last_include).name if last_include else None


def render_markdown(markdown: str, page: Page, context: Context, line_offset: int = 0) -> RenderedPage:
    """Replace every binding of `page` in `markdown` by a token, and output blocks by tabs.

    `line_offset` is how many lines of the file precede `markdown` (front matter the
    site generator has already taken off), so bindings' file lines find their place.
    """
    tokens = _Tokens(page.file + "\0" + markdown)
    out = RenderedPage(markdown, page.file)
    lines = markdown.split("\n")
    by_line: dict[int, list[Binding]] = {}
    for b in [*page.bindings, *page.malformed]:
        by_line.setdefault(b.line - line_offset - 1, []).append(b)
    result: list[str] = []
    index = 0
    last_include: str | None = None
    fence: str | None = None
    while index < len(lines):
        raw = lines[index]
        include = _INCLUDE.search(raw)
        if include:
            last_include = include.group("path")
        match = _FENCE.match(raw)
        if fence is not None:
            if match and match.group("fence").startswith(fence) and not match.group("info").strip():
                fence = None
            result.extend(_shown_include(raw, include, context) if include else [raw])
            index += 1
            continue
        if match and match.group("info").strip().lower().startswith("output"):
            end = _closing(lines, index, match.group("fence"))
            result.extend(
                _output_block(
                    lines,
                    index,
                    end,
                    match,
                    by_line,
                    context,
                    tokens,
                    out,
                    snippet_of(match.group("info"), last_include),
                )
            )
            index = end + 1
            continue
        if match:
            fence = match.group("fence")
            result.append(raw)
            index += 1
            continue
        result.append(_inline(raw, by_line.get(index, []), context, tokens, out))
        index += 1
    out.markdown = "\n".join(result)
    return out


def _shown_include(raw: str, include: re.Match[str], context: Context) -> list[str]:
    """A snippet included in a code block, as the reader sees it: a percent-format script without its
    cell markers (verified_book.book.snippet_display); any other file is left to the include itself."""
    source = context.include(include.group("path"))
    if source is None or not snippet_display.is_percent_script(source):
        return [raw]
    indent = raw[: len(raw) - len(raw.lstrip())]
    return [f"{indent}{line}" if line else "" for line in snippet_display.reading_form(source).rstrip("\n").split("\n")]


def _closing(lines: list[str], start: int, fence: str) -> int:
    for i in range(start + 1, len(lines)):
        match = _FENCE.match(lines[i])
        if match and match.group("fence").startswith(fence) and not match.group("info").strip():
            return i
    return len(lines) - 1


def _span(raw: str, b: Binding) -> tuple[int, int] | None:
    """Where binding `b` sits on its line, checked against the text actually given."""
    start = b.column - 1
    match = BINDING.match(raw, start)
    if match and match.group("id") == b.claim_id and match.group("text") == b.text:
        return match.span()
    leftover = _LEFTOVER.search(raw, max(0, start - 1))
    if b.error and leftover:
        open_at = raw.rfind("[", 0, leftover.start() + 1)
        return (open_at if open_at >= 0 and leftover.group(0).startswith("]") else leftover.start(), leftover.end())
    return None


def _figure_html(b: Binding, context: Context, out: RenderedPage, uid: str, in_code: bool) -> Markup:
    if b.error:
        out.problems.append(Problem(b.where, b.error))
        return render_error(b.text if b.claim_id else "broken figure", b.error, b.claim_id, in_code)
    claim = context.claims(b.claim_id)
    if claim is None:
        message = unknown_claim(b, list(context.near(b.claim_id)), context.load_errors)
        out.problems.append(Problem(b.where, message))
        return render_error(b.text, message, b.claim_id, in_code)
    view = figure_view(b, claim, context.results)
    out.views.append(view)
    if view.status == UNVERIFIED:
        out.missing.append(b)
    return render_figure(view, context.results, context.repo_url, uid, in_code, context.quiet)


def _uid(token: str) -> str:
    return "vbp-" + token[len("VBCLAIM") :].lower()


def _inline(raw: str, bindings: list[Binding], context: Context, tokens: _Tokens, out: RenderedPage) -> str:
    for b in sorted(bindings, key=lambda x: x.column, reverse=True):
        span = _span(raw, b)
        if span is None:
            out.problems.append(
                Problem(
                    b.where,
                    f"figure {b.text} ({b.claim_id}) is not where the book has it; the page changed during the build",
                )
            )
            continue
        token = tokens.next()
        out.fragments[token] = _figure_html(b, context, out, _uid(token), False)
        out.titles[token] = b.text
        raw = raw[: span[0]] + token + raw[span[1] :]
    return raw


def _output_block(
    lines: list[str],
    start: int,
    end: int,
    match: re.Match[str],
    by_line: dict[int, list[Binding]],
    context: Context,
    tokens: _Tokens,
    out: RenderedPage,
    snippet: str | None,
) -> list[str]:
    """An output block as content tabs: the book's text with its figures, then each machine's output."""
    indent = match.group("indent")
    body: list[Markup] = []
    plain: list[str] = []
    for i in range(start + 1, end):
        raw = lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i].lstrip()
        shift = len(lines[i]) - len(raw)
        pieces: list[str] = []  # the book's text, which Markup().join escapes, and its figures' Markup
        plain_pieces: list[str] = []
        cursor = 0
        spans = []
        for b in by_line.get(i, []):
            span = _span(lines[i], b)
            if span is None:
                out.problems.append(Problem(b.where, f"figure {b.text} ({b.claim_id}) is not where the book has it"))
                continue
            spans.append((span[0] - shift, span[1] - shift, b))
        for s, e, b in sorted(spans, key=lambda x: x[0]):
            pieces.append(raw[cursor:s])
            plain_pieces.append(raw[cursor:s])
            pieces.append(_figure_html(b, context, out, _uid(tokens.next()), True))
            plain_pieces.append(b.text)
            cursor = e
        pieces.append(raw[cursor:])
        plain_pieces.append(raw[cursor:])
        body.append(Markup().join(pieces))
        plain.append("".join(plain_pieces))
    book_token = tokens.next()
    out.blocks[book_token] = _code_block(Markup("\n").join(body), "\n".join(plain), "vb-output vb-output--book")
    machines = []
    if snippet:
        for slug in sorted(context.results):
            entry = context.results[slug].outputs.get(snippet)
            if entry is not None:
                machines.append((slug, entry))
    if not machines:
        return [f"{indent}{book_token}"]
    result = [f'{indent}===! "The book"', "", f"{indent}    {book_token}", ""]
    source_now = context.snippet_hash(snippet) if snippet else None  # read once, for every machine's run
    for slug, entry in machines:
        token = tokens.next()
        text = short(entry.text.rstrip("\n"), 20000)
        date = entry.date or ""
        seconds = entry.seconds
        took = f", ran in {seconds:.2f} s" if seconds is not None else ""
        if took and entry.how in RUN_HOW:
            took += f" {RUN_HOW[entry.how]}"
        on = f" on {date[:10]}" if date else ""
        caption = markup(
            '<p class="vb-output__caption">What <code>{}</code> printed on <b>{}</b>{}{}.{}</p>',
            snippet,
            slug,
            on,
            took,
            _earlier_version(snippet, entry.sha256, source_now),
        )
        run = _code_block(escape(text), text, "vb-output vb-output--machine")
        # a machine's run repeats the book's text: the site's search indexes the book's block alone
        out.blocks[token] = markup('<div class="vb-output__run" data-search-exclude>{}{}</div>', caption, run)
        label = str(escape(slug)).replace("\\", "&#92;")  # Markdown: a tab's title
        result += [f'{indent}=== "{label}"', "", f"{indent}    {token}", ""]
    return result


def _earlier_version(snippet: str | None, printed_by: str | None, now: str | None) -> Markup:
    """What a machine's output says where an earlier version of the snippet printed it (`printed_by` is not
    the hash of its source `now`): the book shows the snippet as it is now, and the run is not of that code.
    Nothing where the record keeps no hash (a file from before schema 5): which version ran is not known."""
    if printed_by is None or now is None or printed_by == now:
        return Markup("")
    return Markup(
        ' <span class="vb-output__earlier">Printed by an earlier version of <code>{}</code>: the snippet has '
        "changed since this run.</span>"
    ).format(snippet)


def _code_block(inner_html: Markup, plain: str, classes: str) -> Markup:
    return markup(
        '<div class="highlight {}" data-copy="{}"><pre><code>{}</code></pre></div>', classes, plain, inner_html
    )


_CLAIM_HREF = re.compile(r'<a\b[^>]*\bhref="\s*claim:(?P<id>[^"]*)"[^>]*>(?P<text>.*?)</a>', re.DOTALL)


_TOKEN = re.compile(r"(?:<p>)?(?P<token>VBCLAIM[0-9A-F]{10}N\d+Z)(?:</p>)?")
_LOWER_TOKEN = re.compile(r"vbclaim[0-9a-f]{10}n\d+z")


def fill(html_text: str, rendered: RenderedPage, where: str) -> tuple[str, list[Problem]]:
    """Put each token's HTML in place; report tokens the conversion lost and `claim:` links that slipped through."""
    problems: list[Problem] = []
    found: set[str] = set()

    def put(m: re.Match[str]) -> str:
        token = m.group("token")
        found.add(token)
        if token in rendered.blocks:  # a block replaces its whole placeholder paragraph
            return rendered.blocks[token]
        inner = rendered.fragments.get(token, token)
        return m.group(0).replace(token, inner)

    html_text = _TOKEN.sub(put, html_text)
    for token in rendered.blocks.keys() - found:
        problems.append(Problem(where, "an output block was lost in conversion (is it inside raw HTML?)"))
    for token in rendered.fragments.keys() - found:
        problems.append(
            Problem(
                where,
                f"figure {rendered.titles.get(token, '?')} was lost in conversion "
                "(a binding inside raw HTML or a link?)",
            )
        )
    lower = {token.lower(): _slug(text) for token, text in rendered.titles.items()}
    html_text = _LOWER_TOKEN.sub(
        lambda m: lower.get(m.group(0), m.group(0)), html_text
    )  # a figure in a heading's anchor

    def slipped(m: re.Match[str]) -> str:
        message = f"a claim: link was not read as a binding: claim:{html.unescape(m.group('id'))}"
        problems.append(Problem(where, message))
        return render_error(re.sub(r"<[^>]+>", "", m.group("text")), message, html.unescape(m.group("id")))

    html_text = _CLAIM_HREF.sub(slipped, html_text)
    return html_text, problems


_TAB_LABELS = re.compile(r'(<div class="tabbed-labels[^"]*">)(.*?)(</div>)', re.DOTALL)


def separate_tab_labels(html_text: str) -> str:
    """Content tabs' labels with a space between them, so that text taken from the page (the search
    index, a copy) reads "The book cpu-x86_64-2c", not "The bookcpu-x86_64-2c"; as flex items they
    are laid out the same."""
    return _TAB_LABELS.sub(
        lambda m: m.group(1) + m.group(2).replace("</label><label", "</label> <label") + m.group(3), html_text
    )


def _slug(text: str) -> str:
    return re.sub(r"[^\w]+", "-", text.lower()).strip("-")


def plain_anchor(anchor: str, rendered: RenderedPage) -> str:
    """A heading's anchor with figure tokens back as the printed text, as the table of contents needs it."""
    for token, text in rendered.titles.items():
        anchor = anchor.replace(token.lower(), _slug(text))
    return anchor


def plain_title(title: str, rendered: RenderedPage) -> str:
    """A heading or TOC title with figure tokens back as their printed text."""
    for token, text in rendered.titles.items():
        title = title.replace(token, escape(text))
    return title
