"""Figures and their panels as HTML: what a reader sees at each printed figure.

A figure's status and measurements come decided (`verified_book.engine.figure_status`); this
module draws them: the figure as one element with its mark, its panel, a broken binding's
marker, the legend. Every string read from a results file is untrusted (results arrive by
pull request): the HTML is built as markupsafe's `Markup`, with `markup` (or `Markup.format`)
and `Markup.join`, which escape every string that is not already `Markup`, so nothing reaches
the page unescaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import PurePosixPath
from typing import Any, Collection, Mapping, Sequence
from urllib.parse import quote

from markupsafe import Markup, escape

from verified_book.engine.figure_status import (
    SOURCE_PATTERN,
    VOCABULARY,
    FigureView,
    Measurement,
    on_machine,
    short,
    show_value,
)
from verified_book.records.results import ResultsFile, from_json
from verified_book.vocabulary import LABELS, MEANINGS, NO_BACKEND_LABEL, NO_BACKEND_NAME, SHAPES, Shown, Status

_POWER = re.compile(r"(?<=\d)\^\{?(?P<exp>[+\-−]?\d+)\}?")


def escaped(value: Any) -> str:
    """`value` as HTML text, as markupsafe's `escape` writes it (`Markup` and `__html__` kept as they are), without
    making a `Markup` of every plain string: a site build escapes each machine's every row of every figure."""
    if type(value) is str:
        return (
            value.replace("&", "&amp;")
            .replace("<", "&lt;")
            .replace(">", "&gt;")
            .replace("'", "&#39;")
            .replace('"', "&#34;")
        )
    return escape(value)


def markup(template: str, *args: Any, **kwargs: Any) -> Markup:
    """`Markup(template).format(...)`: each value escaped unless it is `Markup` already. The values are
    escaped first and `str.format` places them, which costs a third of `Markup.format` at every figure
    of a build; so a field takes no format spec (`{:.1f}`): format the value before."""
    return Markup(template.format(*map(escaped, args), **{k: escaped(v) for k, v in kwargs.items()}))


def label(status: str) -> str:
    return LABELS.get(status, status.replace("_", " ").replace("-", " "))


def number(value: Any) -> float | None:
    """A recorded scalar as a float, for plots; None for anything else."""
    value = from_json(value)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float, Fraction)):
        result = float(value)
        return result if result == result and abs(result) != float("inf") else None
    return None


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
    # the exponent is digits and a sign, so the superscripted text stays escaped
    return Markup(_POWER.sub(lambda m: "<sup>" + m.group("exp").replace("-", "−") + "</sup>", escape(text)))


BACKEND_LABELS = {NO_BACKEND_NAME: NO_BACKEND_LABEL}


def _machine_line(slug: str, items: Sequence[Measurement], results: ResultsFile | None, quiet: bool = False) -> str:
    """A machine's heading in the panel, as escaped HTML text: its name, the date of its records, python's version,
    and whether the fleet has not heard from it within the site's window."""
    dates = sorted({m.date[:10] for m in items if m.date})
    versions = (results.run.versions if results is not None else None) or {}
    python = versions.get("python") or ""
    meta = " · ".join(x for x in (", ".join(dates), f"python {python}" if python else "") if x)
    note = ""
    if quiet:
        note = _QUIET.format(escaped(Shown.NOT_REPORTED), escaped(LABELS[Shown.NOT_REPORTED]))
    return _MACHINE_LINE.format(escaped(slug), escaped(short(meta, 120)), note)


_QUIET = '<span class="vb-quiet" data-status="{}">{}</span>'
_MACHINE_LINE = '<span class="vb-machine__name">{}</span><span class="vb-machine__meta">{}</span>{}'


def _row_note(m: Measurement) -> str:
    """What a row needs said beyond its value: why it failed, why it is outdated (what it was computed
    from and what the book says now), what the author's machine printed, or that it was judged from the record."""
    shown = (
        Status.FAILED,
        Status.OUTDATED,
        Status.REFERENCE,
        Status.CITED,
        Status.PREMISE,
        Status.UNSOURCED,
        Shown.CONTENDED,
        Shown.ANOTHER_VERSION,
    )
    if (m.status in shown or (m.status == Status.VERIFIED and m.message.startswith("verified:"))) and m.message:
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


def _row(m: Measurement) -> str:
    """One backend's value on one machine, with its status, as escaped HTML text."""
    version = f" {short(m.version, 40)}" if m.version else ""
    return _ROW.format(
        status=escaped(m.status),
        backend=escaped(m.backend),
        backend_label=escaped(BACKEND_LABELS.get(m.backend, m.backend)),
        version=escaped(version),
        value=escaped(show_value(m.value)),
        label=escaped(label(m.status)),
    )


_ROW = (
    '<span class="vb-row" data-status="{status}" data-backend="{backend}">'
    '<span class="vb-row__backend">{backend_label}{version}</span>'
    '<span class="vb-row__value">{value}</span>'
    '<span class="vb-row__status">{label}</span>'
    "</span>"
)


@dataclass
class PanelRows:
    """Where a page's panels put the rows of the machines that do not decide the figure: in `rows`, by panel id,
    for a data file beside the page (`url`, relative to it) that the page's script loads when a reader opens a
    panel; each panel says in their place how many there are and links the Machines page (`machines_href`)."""

    url: str
    machines_href: str | None = None
    rows: dict[str, Markup] = field(default_factory=dict)


def _machine_block(
    slug: str, items: Sequence[Measurement], results: ResultsFile | None, quiet: bool, shown: set[str]
) -> Markup:
    """One machine's part of a panel: its heading, each backend's row and what it needs said, the backends skipped.
    A note already in `shown` is not said again. Made as escaped text, one `Markup` at the end: a panel holds a
    block for every machine that recorded its claim."""
    ran = [m for m in items if m.status != Status.SKIPPED]
    machine_status = on_machine(m.status for m in items)
    parts = [
        f'<span class="vb-machine" data-machine="{escaped(slug)}" data-status="{escaped(machine_status)}">',
        _machine_line(slug, items, results, quiet),
    ]
    for m in ran:
        parts.append(_row(m))
        note = _row_note(m)
        if note and note not in shown:
            shown.add(note)
            parts.append(f'<span class="vb-row__message">{escaped(note)}</span>')
    skipped = [m for m in items if m.status == Status.SKIPPED]
    if skipped:
        reasons = "; ".join(dict.fromkeys(short(m.message.splitlines()[0], 160) for m in skipped if m.message))
        names = ", ".join(m.backend for m in skipped)
        parts.append(
            f'<span class="vb-row__skipped" title="{escaped(short(reasons, 600))}">'
            f"{escaped(LABELS[Status.SKIPPED])}: {escaped(names)}</span>"
        )
    parts.append("</span>")
    return Markup("".join(parts))


def decisive(view: FigureView) -> str | None:
    """The machine whose records decide the figure's mark: the first whose own status is the figure's."""
    by_machine: dict[str, list[str]] = {}
    for m in view.measurements:
        by_machine.setdefault(m.machine, []).append(m.status)
    for slug, statuses in by_machine.items():
        if on_machine(statuses) == view.status:
            return slug
    return next(iter(by_machine), None)


def _more_machines(count: int, rows: PanelRows) -> Markup:
    """In place of the machines a panel leaves to its page's data file: how many, and where else they are."""
    machines = markup('<a href="{}">Machines page</a>', rows.machines_href) if rows.machines_href else "Machines page"
    return markup(
        '<span class="vb-panel__more" data-vb-rows="{}">{} more machine{} recorded this claim: their rows load here '
        "where the page runs its script, and every machine's results are on the {}.</span>",
        rows.url,
        count,
        "" if count == 1 else "s",
        machines,
    )


def render_panel(
    view: FigureView,
    results: Mapping[str, ResultsFile],
    repo_url: str | None,
    uid: str,
    quiet: Collection[str] = (),
    rows: PanelRows | None = None,
    own: Collection[str] = (),
) -> Markup:
    """The panel shown on hover or focus: claim, status, each machine's value, date, versions, source.

    Given `rows`, the panel holds the machine that decides the figure's mark and this clone's own (`own`),
    and the other machines' parts go to `rows.rows` under the panel's id. Its own element name (`vb-panel`,
    phrasing content like a span) keeps it whole out of the search index, whose parser matches excluded
    elements by tag name.
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
    for dispute, reason in sorted(view.claim.excused.items()) if view.claim is not None else ():
        parts.append(
            markup(
                '<span class="vb-panel__excused">Rests on a premise of the source the book disputes '
                "(<code>{}</code>), and stands: {}</span>",
                dispute,
                reason,
            )
        )
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
    kept = {decisive(view), *own} if rows is not None else set(by_machine)
    shown: set[str] = set()  # a note said once, first where the page holds it
    for slug in [s for s in by_machine if s in kept]:
        parts.append(_machine_block(slug, by_machine[slug], results.get(slug), slug in quiet, shown))
    others = [s for s in by_machine if s not in kept]
    if rows is not None and others:
        blocks = [_machine_block(s, by_machine[s], results.get(s), s in quiet, shown) for s in others]
        rows.rows[uid] = Markup("".join(blocks))
        parts.append(_more_machines(len(others), rows))
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
    rows: PanelRows | None = None,
    own: Collection[str] = (),
) -> Markup:
    """One printed figure as ONE element carrying `data-claim` and `data-status`, its panel inside (`render_panel`:
    given `rows`, the machines that do not decide its mark go to the page's data file)."""
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
        panel=render_panel(view, results, repo_url, uid, quiet, rows, own),
    )


def render_error(text: str, message: str, claim_id: str = "", in_code: bool = False) -> Markup:
    """A visible marker where a binding is broken (plain builds; strict builds fail instead)."""
    shown = escape(text) if in_code else pretty(text)
    message = message.replace("](claim:", "] (claim ")  # the build log has the exact syntax; the page shows no link
    return markup(
        '<span class="vb-fig" data-status="{status}" data-claim-error="{claim}" tabindex="0" title="{message}">'
        '<span class="vb-fig__text">{shown}</span>{mark}'
        "{screen_reader} (broken figure: {message})</span></span>",
        status=Shown.BROKEN_BINDING,
        claim=claim_id,
        message=short(message, 300),
        shown=shown,
        mark=FIGURE_MARK,
        screen_reader=SCREEN_READER,
    )


def mark(status: str) -> Markup:
    """A status's mark alone, as the figures carry it (the legend and the machines page use it)."""
    return markup('<span class="vb-mark" data-status="{}" aria-hidden="true"></span>', status)


LEGEND_ORDER = (
    *VOCABULARY[:-1],
    Shown.CONTENDED,
    Shown.ANOTHER_VERSION,
    Shown.UNVERIFIED,
    Status.SKIPPED,
    Shown.BROKEN_BINDING,
)


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
    glyph, shape = SHAPES[Shown.NOT_REPORTED]
    machines = markup('<a href="{}">machines page</a>', machines_href) if machines_href else "machines page"
    return markup(
        '<div class="vb-scroll" data-vb-scroll><table class="vb-legend">'
        '<thead><tr><th scope="col">looks like</th><th scope="col">status</th><th scope="col">mark</th>'
        '<th scope="col">means</th></tr></thead><tbody>{rows}</tbody></table></div>'
        '<p class="vb-legend__machine">{mark} <b>{label}</b> '
        '<span class="vb-legend__glyph" aria-hidden="true">{glyph}</span> ({shape}), on the {machines} '
        "and in the panels: {meaning}.</p>",
        rows=Markup().join(rows),
        mark=mark(Shown.NOT_REPORTED),
        label=LABELS[Shown.NOT_REPORTED],
        glyph=glyph,
        shape=shape,
        machines=machines,
        meaning=MEANINGS[Shown.NOT_REPORTED],
    )


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
