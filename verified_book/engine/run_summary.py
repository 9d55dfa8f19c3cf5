"""What a run found, counted: by backend and status for the summary's table, the printed figures by status for its
line and `verify`'s verdict, and the records of this machine's history that the run left outdated."""

from __future__ import annotations

from typing import TYPE_CHECKING, Container, Mapping

from verified_book.authoring.registry import REGISTRY
from verified_book.engine.provenance import outdated_reason
from verified_book.vocabulary import FIGURE_COUNTS, LABELS, Shown, Status

if TYPE_CHECKING:
    from verified_book.engine.session import Session


def summary_table(
    statuses: dict[tuple[str, str], str],
    selected: set[tuple[str, str]] | None = None,
    cannot: Container[tuple[str, str]] | None = None,
) -> dict[str, dict[str, int]]:
    """Counts by backend: each status judged, and (given the selection) `selected`, `not here` for the selected
    checks this machine cannot run (`cannot`: it lacks their hardware or library) and `not run` for those the run
    never reached (stopped before them). Without `cannot`, every selected check not judged is `not here`."""
    table: dict[str, dict[str, int]] = {}
    for (_, backend_name), status in statuses.items():
        row = table.setdefault(backend_name, {})
        row[status] = row.get(status, 0) + 1
    for key in selected or ():
        row = table.setdefault(key[1], {})
        row["selected"] = row.get("selected", 0) + 1
        if key not in statuses:
            state = Shown.NOT_HERE if cannot is None or key in cannot else Shown.NOT_RUN
            row[state] = row.get(state, 0) + 1
    return table


def outdated_records(run: Session, judged: Mapping[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """Records in this machine's results file that this run did not redo and that no longer match the
    book (the claim's code or an input changed since), each with why: a rerun of them clears it."""
    results = run.records_left(judged)
    if results is None:
        return {}
    out = {}
    for claim_id, per_backend in results.current(REGISTRY).items():
        for backend_name, record in per_backend.items():
            if (claim_id, backend_name) in judged or record.status == Status.SKIPPED:
                continue
            why = outdated_reason(REGISTRY[claim_id], results.claims.get(claim_id), record)
            if why:
                out[(claim_id, backend_name)] = why
    return out


def figure_counts(figure_statuses: dict[str, str], selected: set[str]) -> dict[str, int]:
    """Figures by their status on this machine, each selected figure once: `not here` for those that no
    backend here computed (skipped, at collection or when judged), `not run` for those the run never
    reached (it was stopped before them)."""
    counts: dict[str, int] = {}
    for nodeid in selected | set(figure_statuses):
        status = figure_statuses.get(nodeid, Shown.NOT_RUN)
        status = Shown.NOT_HERE if status == Status.SKIPPED else status
        counts[status] = counts.get(status, 0) + 1
    return counts


def figure_line(counts: Mapping[str, int], bound: int) -> str:
    """What the run found of the book's printed figures, each counted once in one status, the parts
    adding up to the figures the run selected; the summary and the verdict both print this line. What the
    run did not judge is named as the vocabulary names it: not computable here, not run (interrupted)."""
    selected = sum(counts.values())
    of = f"all {bound}" if selected == bound else f"{selected} of the book's {bound}"
    parts = [
        f"{counts.get(s, 0)} {s}"
        for s in FIGURE_COUNTS
        if s not in (Shown.BROKEN_ENVIRONMENT, Shown.NOT_HERE, Shown.NOT_RUN)
    ]
    if counts.get(Shown.BROKEN_ENVIRONMENT):
        parts.append(f"{counts[Shown.BROKEN_ENVIRONMENT]} not checked (the environment broke)")
    parts.append(f"{counts.get(Shown.NOT_HERE, 0)} {LABELS[Shown.NOT_HERE]}")
    if counts.get(Shown.NOT_RUN):
        parts.append(f"{counts[Shown.NOT_RUN]} {LABELS[Shown.NOT_RUN]}")
    return f"figures ({of} bound figures selected): {', '.join(parts)}"
