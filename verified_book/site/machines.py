"""The machines page: who verified the book, on what, and what each found, claim by claim.

Plain functions from results files (untrusted: the HTML is markupsafe's `Markup`, so every
string is escaped as it is put in) and the book's bindings to Markdown with placeholder tokens
and the HTML they stand for, like `verified_book.site.render` does for a chapter.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Collection, Iterable, Mapping

from markupsafe import Markup, escape

from verified_book.book.bindings import Book
from verified_book.engine.figure_status import VOCABULARY, claim_status_on, measure, on_machine, short, show_value
from verified_book.records.results import ResultsFile
from verified_book.site.render import GeneratedPage, escaped, label, mark, markup, source_link
from verified_book.vocabulary import LABELS, Shown, Status

COUNTED = (*VOCABULARY[:-1], Shown.CONTENDED, VOCABULARY[-1])  # skipped last, as on the page
FINGERPRINT_FIELDS = (
    ("cpu", "CPU"),
    ("arch", "architecture"),
    ("cores", "logical cores"),
    ("memory_gb", "memory"),
    ("gpu", "accelerator"),
    ("gpu_memory_gb", "accelerator memory"),
    ("compute_capability", "compute capability"),
    ("driver", "driver"),
    ("os", "operating system"),
)


@dataclass(frozen=True)
class Chapter:
    """A page of the book as the matrix filter names it."""

    file: str
    title: str
    href: str


#: the claims × machines matrix's table tag; it holds no other table (the site's search leaves it out)
MATRIX_TABLE = Markup('<table class="vb-matrix__table">')


def today(text: str = "") -> dt.date:
    """The date a build judges "reported this week" by: `text` (ISO) when given, else today in UTC."""
    return dt.date.fromisoformat(text) if text else dt.datetime.now(dt.timezone.utc).date()


def last_run(results: ResultsFile) -> dt.date | None:
    """The date of a machine's latest run, from its results file; None when it gives none readable."""
    date = results.run.date
    try:
        return dt.datetime.fromisoformat(date).date() if isinstance(date, str) else None
    except ValueError:
        return None


def in_fleet(results: ResultsFile) -> bool:
    """A machine of the fleet: one that matches a hardware profile of the book (its runner verifies weekly)."""
    return any(results.machine.markers)


def quiet_machines(results: Mapping[str, ResultsFile], on: dt.date, days: int) -> frozenset[str]:
    """The fleet's machines whose latest run is more than `days` days before `on` (or undated).

    They are published with their last results and marked "not reported this week"; they
    never hold the others' publication.
    """
    quiet = set()
    for slug, rf in results.items():
        if not in_fleet(rf):
            continue
        ran = last_run(rf)
        if ran is None or (on - ran).days > days:
            quiet.add(slug)
    return frozenset(quiet)


def _token(seed: str, n: int) -> str:
    return f"VBPAGE{hashlib.sha1(seed.encode()).hexdigest()[:10].upper()}N{n}Z"


def figure_counts(results: ResultsFile, book: Book, name: str | None = None) -> dict[str, int]:
    """How many of the book's printed figures a machine shows in each status: each bound figure once,
    as its panel shows that machine's records (not computable here where every backend there skipped it or
    the claim is about other hardware, not yet verified where the machine has no record), so a machine's counts
    add up to the book's figures.
    `name` is the one the site shows the machine as (this clone's run of a committed machine has its own),
    under which the pages measured its records already."""
    from verified_book.authoring.registry import REGISTRY

    counts = {s: 0 for s in (*COUNTED, Shown.UNVERIFIED)}
    shown_as = name or results.slug
    for binding in book.bindings():
        claim = REGISTRY.get(binding.claim_id)
        per_backend = results.records.get(binding.claim_id) or {}
        status = on_machine(measure(binding, claim, results, b, per_backend[b], shown_as).status for b in per_backend)
        if not per_backend and claim is not None and claim.hardware not in (None, *results.machine.markers):
            status = Status.SKIPPED  # about hardware this machine is not: not computable here, not unverified
        counts[status] = counts.get(status, 0) + 1
    return counts


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool) or value is None or value == "":
        return None
    if isinstance(value, (str, int, float)):
        return short(value, 120)
    return None


def _names(items: Iterable[str | None], limit: int = 300) -> Markup:
    """Names, versions and dates as a table shows them: each kept whole on its line (a slug, a marker,
    `torch 2.13.0+cpu`, an ISO date never breaks at its hyphens), the list breaking between them, cut
    with an ellipsis past `limit` characters."""
    shown: list[Markup] = []
    length = 0
    for item in items:
        if not item:
            continue
        if length + len(item) > limit:
            shown.append(Markup("…"))
            break
        length += len(item) + 2
        shown.append(markup('<span class="vb-name">{}</span>', item))
    return Markup(", ").join(shown)


#: the fingerprint's memory fields, in decimal GB (10^9 bytes)
MEMORY_FIELDS = ("memory_gb", "gpu_memory_gb")
BYTES_PER_GB, BYTES_PER_GIB = 10**9, 2**30


def memory_words(gigabytes: Any) -> str | None:
    """A fingerprint's memory in GiB first, as vendors print a memory's size ("141 GB" on an H200 is GiB),
    then in decimal GB, as the fingerprint stores it: "140.4 GiB (150.8 GB)"."""
    if isinstance(gigabytes, bool) or not isinstance(gigabytes, (int, float)):
        return _scalar(gigabytes)
    return f"{gigabytes * BYTES_PER_GB / BYTES_PER_GIB:,.1f} GiB ({gigabytes:,.1f} GB)"


def _fingerprint(results: ResultsFile) -> Markup:
    fp = results.machine.fingerprint
    run = results.run
    rows: list[tuple[str, list[str | None]]] = [
        (label, [memory_words(fp.get(key)) if key in MEMORY_FIELDS else _scalar(fp.get(key))])
        for key, label in FINGERPRINT_FIELDS
    ]
    markers = results.machine.markers
    if markers:
        rows.append(("matches the book's", list(markers)))
    rows.append(("latest run", [_scalar(run.date)]))
    versions = run.versions or {}
    rows.append(("versions", [f"{k} {v}" for k, v in versions.items() if _scalar(v)]))
    backends = run.backends or {}
    rows.append(("backends present", [f"{k} {v}" for k, v in backends.items() if _scalar(v)]))
    rows.append(("backends absent", [str(k) for k, v in backends.items() if not _scalar(v)]))
    cells = Markup().join(
        markup('<tr><th scope="row">{}</th><td>{}</td></tr>', label, _names(items))
        for label, items in rows
        if any(items)
    )
    return Markup(
        '<div class="vb-scroll" data-vb-scroll><table class="vb-fingerprint"><tbody>{}</tbody></table></div>'
    ).format(cells)


def _counts_html(counts: Mapping[str, int]) -> Markup:
    items = Markup().join(
        markup(
            '<li data-status="{}">{}<span class="vb-count__n">{}</span> {}</li>',
            s,
            mark(s),
            counts.get(s, 0),
            LABELS[s],
        )
        for s in (*COUNTED, Shown.UNVERIFIED)
        if counts.get(s, 0) or s in (Status.VERIFIED, Status.STALE, Status.FAILED)
    )
    total = sum(counts.values())
    return Markup(
        '<p class="vb-counts__of">The book\'s {} printed figures on this machine:</p><ul class="vb-counts">{}</ul>'
    ).format(total, items)


def _overview(
    results: Mapping[str, ResultsFile],
    counted: Mapping[str, Mapping[str, int]],
    quiet: Collection[str] = (),
    local: Collection[str] = (),
) -> Markup:
    # a column for contended measurements only where a machine has one: most never do, and the table must fit
    # what a figure can show where it holds or fails, always; the rest (outdated, contended, skipped, not yet
    # verified) only where some machine has one, so that the overview fits beside the navigation
    always = (
        Status.VERIFIED,
        Status.CITED,
        Status.UNSOURCED,
        Status.STALE,
        Status.FAILED,
        Status.DISPUTED,
        Status.REFERENCE,
    )
    columns = [s for s in (*COUNTED, Shown.UNVERIFIED) if s in always or any(c.get(s) for c in counted.values())]
    head = Markup().join(
        markup('<th scope="col">{}<span class="vb-overview__label">{}</span></th>', mark(s), LABELS[s]) for s in columns
    )
    rows = []
    for slug in sorted(results):
        rf = results[slug]
        fp = rf.machine.fingerprint
        what = _scalar(fp.get("gpu")) or _scalar(fp.get("cpu")) or "—"
        date = _scalar(rf.run.date) or ""
        cells = Markup().join(markup('<td data-status="{}">{}</td>', s, counted[slug][s]) for s in columns)
        when = _names([date[:10]])
        if slug in quiet:
            when += markup(
                ' <span class="vb-quiet" data-status="{}">{}{}</span>',
                Shown.NOT_REPORTED,
                mark(Shown.NOT_REPORTED),
                LABELS[Shown.NOT_REPORTED],
            )
        if slug in local:
            when += Markup(' <span class="vb-local" data-local>this clone\'s run, not contributed</span>')
        rows.append(
            markup(
                '<tr data-machine="{slug}"{quiet}{local}>'
                '<th scope="row"><a class="vb-name" href="#{anchor}">{slug}</a></th>'
                "<td>{what}</td><td>{when}</td>{cells}</tr>",
                slug=slug,
                quiet=Markup(" data-quiet") if slug in quiet else Markup(),
                local=Markup(" data-local") if slug in local else Markup(),
                anchor=anchor(slug),
                what=what,
                when=when,
                cells=cells,
            )
        )
    return Markup(
        '<div class="vb-scroll" data-vb-scroll><table class="vb-overview"><thead><tr><th scope="col">machine</th>'
        '<th scope="col">hardware</th><th scope="col">latest run</th>{}</tr></thead>'
        "<tbody>{}</tbody></table></div>"
    ).format(head, Markup().join(rows))


#: how the site names this clone's run of a machine that also has a committed file
LOCAL_SUFFIX = " · this clone"  # no brackets: escaped for a heading, "\\(" would open a formula


def local_name(slug: str) -> str:
    """The name this clone's run of machine `slug` is shown under, beside the committed file of that name."""
    return slug + LOCAL_SUFFIX


def _local_note(where: str) -> Markup:
    return Markup(
        '<p class="vb-local" data-local>This clone\'s run, not contributed: <code>{}</code>, which git '
        "ignores. It reaches the published book once <code>verified-book contribute</code> has merged it into the "
        "committed results and a pull request has been merged.</p>"
    ).format(where)


def anchor(slug: str) -> str:
    """The id of a machine's section."""
    return "machine-" + (re.sub(r"[^a-z0-9]+", "-", slug.lower()).strip("-") or "unnamed")


def markdown_text(text: str) -> str:
    """Untrusted text for a Markdown heading: HTML escaped, Markdown's own punctuation backslashed."""
    return re.sub(r"([\\`*_{}\[\]()#+!|<>])", r"\\\1", str(escape(text)))


_NO_RECORD_CELL = Markup(
    '<td data-status="{}" title="no record on this machine"><span class="vb-cell">—</span></td>'
).format(Shown.UNVERIFIED)


def _cell(claim_id: str, rf: ResultsFile) -> tuple[str, str]:
    """A machine's cell of a claim's row, as escaped HTML text (the matrix has one for every claim and machine)."""
    per_backend = rf.records.get(claim_id)
    if not per_backend:
        return Shown.UNVERIFIED, _NO_RECORD_CELL
    status = claim_status_on(per_backend, rf, claim_id)
    detail = "; ".join(f"{backend}: {show_value(r.value)} ({r.status})" for backend, r in sorted(per_backend.items()))
    return status, (
        f'<td data-status="{escaped(status)}" title="{escaped(short(detail, 600))}">'
        f'<span class="vb-cell">{mark(status)}{escaped(label(status))}</span></td>'
    )


@dataclass
class MatrixRows:
    """Where the matrix puts its rows: one data file for each chapter (by the chapter's key: `c0`, ..., `c-other`,
    `none` for the claims no page prints), which the page's script loads when a reader picks the chapter, with the
    rows of every claim that chapter prints. The table says where they are with `url`, a placeholder the build
    replaces with each file's address (`rows_addresses`). A course's matrix holds every claim on every machine: on
    the page, it would be most of the site."""

    url: str
    files: dict[str, list[Markup]] = field(default_factory=dict)


#: the function a matrix data file calls with its chapter's key and rows (verified_book/assets/javascripts/claims.js)
MATRIX_FUNCTION = "vbMatrixRows"


def _matrix(
    results: Mapping[str, ResultsFile],
    book: Book,
    claim_ids: Iterable[str],
    chapters: Mapping[str, Chapter],
    sources: Mapping[str, str],
    repo_url: str | None,
    in_files: MatrixRows | None = None,
) -> Markup:
    """The claims × machines matrix, its filters and its rows; given `in_files`, the rows go to its files, by
    chapter, and the table holds none until the page's script loads a chapter's."""
    slugs = sorted(results)
    printed: dict[str, list[str]] = {}
    for binding in book.bindings():
        files = printed.setdefault(binding.claim_id, [])
        if binding.file not in files:
            files.append(binding.file)
    ids = set(claim_ids) | set(printed)  # a retired claim's records stay in its file, unshown
    chapter_keys = {file: f"c{i}" for i, file in enumerate(chapters)}
    known = set(claim_ids)
    rows: list[Markup] = []
    for claim_id in sorted(ids):
        files = printed.get(claim_id, [])
        keys = " ".join(dict.fromkeys(chapter_keys.get(f, "c-other") for f in files)) or "none"
        where = Markup(", ").join(
            markup('<a href="{}">{}</a>', chapters[f].href, chapters[f].title) if f in chapters else f for f in files
        ) or Markup('<span class="vb-muted">not printed</span>')
        statuses: list[str] = []
        cells: list[str] = []
        for slug in slugs:
            status, cell = _cell(claim_id, results[slug])
            statuses.append(status)
            cells.append(cell)
        note = Markup()
        if claim_id not in known:
            note = Markup(' <span class="vb-muted">(no longer a claim of this book)</span>')
        link = source_link(sources.get(claim_id), repo_url) if claim_id in sources else Markup()
        rows.append(
            markup(
                '<tr data-claim-row="{claim}" data-chapters="{keys}" data-statuses="{statuses}">'
                '<th scope="row"><code>{claim}</code>{note}{link}</th><td>{where}</td>{cells}</tr>',
                keys=keys,
                statuses=" ".join(sorted(set(statuses))),
                claim=claim_id,
                note=note,
                link=link,
                where=where,
                cells=Markup("".join(cells)),
            )
        )
        if in_files is not None:
            for key in keys.split():
                in_files.files.setdefault(key, []).append(rows[-1])
    first = next(iter(chapters), None) if in_files is not None else None  # a chapter's rows, not the course's
    options = Markup().join(
        markup('<option value="{}"{}>{}</option>', chapter_keys[f], Markup(" selected") if f == first else "", c.title)
        for f, c in chapters.items()
    )
    status_options = Markup().join(
        markup('<option value="{}">{}</option>', s, LABELS[s]) for s in (*COUNTED, Shown.UNVERIFIED)
    )
    head = Markup().join(markup('<th scope="col"><a href="#{}">{}</a></th>', anchor(s), s) for s in slugs)
    body, rows_at, waiting = Markup().join(rows), "", Markup()
    if in_files is not None:
        body, rows_at = Markup(), in_files.url
        waiting = Markup(
            '<p class="vb-matrix__wait" data-vb-wait>The rows load a chapter at a time where the page runs its '
            "script; each machine's counts are above.</p>"
        )
    return markup(
        '<div class="vb-matrix" data-vb-matrix data-vb-rows="{rows_at}" data-vb-total="{count}">'
        '<div class="vb-matrix__filters">'
        '<label>Chapter <select data-vb-filter="chapter"><option value="">all chapters</option>'
        '{options}<option value="none">not printed in the book</option></select></label> '
        '<label>Status <select data-vb-filter="status"><option value="">any status</option>'
        "{status_options}</select></label> "
        '<span class="vb-matrix__count" data-vb-count aria-live="polite">{count} claims</span>'
        "</div>{waiting}"
        '<div class="vb-matrix__scroll">{table}'
        '<thead><tr><th scope="col">claim</th><th scope="col">printed in</th>{head}</tr></thead>'
        "<tbody>{rows}</tbody></table></div></div>",
        rows_at=rows_at,
        options=options,
        status_options=status_options,
        count=len(rows),
        waiting=waiting,
        table=MATRIX_TABLE,
        head=head,
        rows=body,
    )


def rows_addresses(addresses: Mapping[str, str]) -> str:
    """What the matrix's `data-vb-rows` holds once its files are written: each chapter key's file address, as JSON
    escaped for the attribute (the placeholder, `MatrixRows.url`, needs no escaping)."""
    return str(escape(json.dumps(addresses, sort_keys=True)))


def render_machines(
    results: Mapping[str, ResultsFile],
    book: Book,
    claim_ids: Iterable[str],
    chapters: Mapping[str, Chapter],
    sources: Mapping[str, str] | None = None,
    repo_url: str | None = None,
    plots_href: str | None = None,
    quiet: Collection[str] = (),
    report_within_days: int = 8,
    local: Mapping[str, str] | None = None,
    matrix_rows: MatrixRows | None = None,
) -> GeneratedPage:
    """The machines page: one section per machine, then the claims × machines matrix (its rows in `matrix_rows`'
    files, where given)."""
    claim_ids = list(claim_ids)
    local = local or {}
    counted = {slug: figure_counts(rf, book, slug) for slug, rf in results.items()}  # for the overview and each section
    bound = sum(1 for _ in book.bindings())
    seed = "machines:" + ",".join(sorted(results))
    n = 0
    blocks: dict[str, str] = {}

    def put(fragment: Markup) -> str:
        nonlocal n
        n += 1
        token = _token(seed, n)
        blocks[token] = fragment
        return token

    lines = ["# Machines", ""]
    if not results:
        lines += [
            "No machine has verified the book yet: every figure shows as not yet verified. "
            "Run the suite on yours and its results file appears here.",
            "",
        ]
    else:
        plots = f" The [plots]({plots_href}) draw what they measured." if plots_href else ""
        clone = (
            " Machines marked *this clone's run* are this checkout's own records, not contributed: they "
            "show here and nowhere else."
            if local
            else ""
        )
        lines += [
            f"Each machine below ran the book's suite and committed its results file. Its counts are of the "
            f"book's {bound} printed figures, each counted once, in the mark its panel shows for that machine "
            f"(the worst of its backends; skipped where every backend there skipped it), so each row adds up to "
            f"{bound}; the marks on the pages combine every machine. The matrix at the end counts claims, "
            f"one claim for each value the figures print.{plots}{clone}",
            "",
            put(_overview(results, counted, quiet, local)),
            "",
        ]
        if quiet:
            lines += [
                f"A machine of the fleet marked *{LABELS[Shown.NOT_REPORTED]}* has not reported within "
                f"{report_within_days} days: its last results are shown, and the others are published "
                "without waiting for it.",
                "",
            ]
        for slug in sorted(results):
            quiet_note = Markup()
            if slug in quiet:
                quiet_note = Markup(
                    '<p class="vb-quiet" data-status="{}">{}{}: the latest run is older than {} days.</p>'
                ).format(Shown.NOT_REPORTED, mark(Shown.NOT_REPORTED), LABELS[Shown.NOT_REPORTED], report_within_days)
            local_note = _local_note(local[slug]) if slug in local else Markup()
            lines += [
                f"## {markdown_text(slug)} {{ #{anchor(slug)} }}",
                "",
                put(local_note + quiet_note + _counts_html(counted[slug]) + _fingerprint(results[slug])),
                "",
            ]
    lines += [
        "## Claims × machines { #claims-by-machine }",
        "",
        f"Every one of the book's {len(claim_ids)} claims against every machine: a claim's cell shows the "
        "worst status of its records on that machine's backends; hover a cell for each backend's value. "
        + (
            "It shows the claims of the chapter picked (all chapters brings every claim); filter them by status."
            if matrix_rows is not None
            else "Filter by the chapter that prints a claim, or by status."
        ),
        "",
        put(_matrix(results, book, claim_ids, chapters, sources or {}, repo_url, matrix_rows)),
        "",
    ]
    return GeneratedPage("\n".join(lines), blocks)
