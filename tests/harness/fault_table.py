"""Run every fault scenario and bad input the suite is proven against, and write docs/faults.md.

    verified-book fault-table                 # all scenarios, process ones tried 3 times
    verified-book fault-table --tries 1       # quicker
    verified-book fault-table --output -      # print the table instead of writing it

(or `scripts/fault-table`, or `python -m harness.fault_table` from tests/, with the project's
virtual environment active).

Each row is counted from a run made now: the sample books are built in a temporary
folder, each fault is injected, and the records expected and kept are compared. The
mutation rows run on the project's own book. Exits 1 if any fault was not handled as
required or any record was lost.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

from harness import faults, mutation
from harness.paths import ROOT


def scenarios(root: Path, tries: int) -> list[faults.Tally]:
    """The sample-book scenarios, in the order of the table."""
    out: list[faults.Tally] = []
    steps = [
        lambda: faults.concurrent_processes(root / "race", tries=tries),
        lambda: faults.xdist_workers(root / "xdist"),
        lambda: faults.killed_mid_write(root / "kill", tries=tries, pytest_runs=tries),
        lambda: faults.locked_threads(root / "threads"),
        lambda: faults.corrupt_files(root / "corrupt"),
        lambda: faults.newer_schema(root / "newer"),
        lambda: faults.older_schema(root / "older"),
        lambda: faults.hostile_results(root / "hostile"),
        lambda: faults.bad_input(root / "bad"),
        lambda: faults.absent_packages(root / "absent"),
        lambda: faults.out_of_memory(root / "oom"),
        lambda: faults.keyboard_interrupt(root / "interrupt"),
        lambda: faults.interrupted_whole_run(root / "interrupted-run"),
        lambda: faults.network(root / "network"),
        lambda: faults.library_fails_to_import(root / "fragile"),
        lambda: faults.venv_removed_mid_run(root / "vanish"),
        lambda: faults.unwritable_results(root / "unwritable"),
        lambda: faults.bad_record_among_hundreds(root / "bad-record"),
        lambda: faults.gpu_lost_and_regained(root / "flicker"),
        lambda: faults.second_machine(root / "two-machines"),
        lambda: faults.two_runs_at_once(root / "two-runs"),
    ]
    for step in steps:
        started = time.monotonic()
        result = step()
        for tally in result if isinstance(result, list) else [result]:
            print(f"{time.monotonic() - started:6.1f}s  {tally}", file=sys.stderr)
            out.append(tally)
    return out


def mutation_rows(root: Path) -> tuple[list[faults.Tally], list[str]]:
    """The book's own mutation counts, as rows, and the lines that say what was left out and why."""
    with mutation.book_verifier(ROOT) as verifier:
        return mutation_rows_of(verifier)


def mutation_rows_of(verifier: Any) -> tuple[list[faults.Tally], list[str]]:
    """The mutation counts of the book `verifier` checks, its book open."""
    figures = mutation.mutate_figures(verifier)
    row = faults.Tally(
        "mutation of the book",
        "bound figure changed (last digit; times ten)",
        "judged stale against the value computed now",
    )
    row.tried, row.handled = figures.tried, len(figures.killed)
    notes = [
        f"Figure mutants caught: {len(figures.killed)} of {figures.tried} "
        f"({figures.kill_rate:.1%}), from {figures.figures} bound figures."
    ]
    notes += [f"Not mutated, {len(items)} figure(s): {reason}." for reason, items in sorted(figures.excluded.items())]
    if figures.within_tolerance:
        notes.append(
            f"Not caught, within a measured claim's stated tolerance: {len(figures.within_tolerance)} mutant(s)."
        )
    notes += [
        f"Survived: {m.binding.where} {m.binding.text} -> {m.stated} ({m.how}, {m.binding.claim_id})."
        for m, _ in figures.survived
    ]
    print(f"        {figures.summary()}", file=sys.stderr)
    report = mutation.perturb_inputs(verifier)
    inputs_row = faults.Tally(
        "mutation of the book",
        "input in claims/data/ perturbed",
        "at least one claim fails; unused inputs only on the allow-list",
    )
    inputs_row.tried = len(report.guarded) + len(report.unguarded)
    inputs_row.handled = len(report.guarded)
    notes.append(
        f"Inputs whose perturbation fails a claim: {len(report.guarded)} of {inputs_row.tried}; "
        f"{len(report.allowed)} more on the allow-list (claims/data/{mutation.ALLOWLIST}), confirmed unused; "
        f"{len(report.elsewhere)} read only by claims about other hardware, which this machine does not compute."
    )
    notes += [f"Not caught: {item.where}: {why}." for item, why in report.unguarded.items()]
    notes += [f"Allow-list problem: {p}." for p in report.problems]
    if report.problems:
        inputs_row.tried += len(report.problems)
    print(f"        {report.summary()}", file=sys.stderr)
    dropped = mutation.drop_dispositions(verifier)
    dispositions_row = faults.Tally(
        "mutation of the book",
        "disposition of a claim resting on a disputed premise removed",
        "the book's check fails at the claim's definition, naming it",
    )
    dispositions_row.tried, dispositions_row.handled = dropped.tried, len(dropped.named)
    notes.append(
        f"Dispositions whose removal the book's check names: {len(dropped.named)} of {dropped.tried} "
        f"(each claim resting on a premise the book disputes, its excuse or disputed marks taken away in turn)."
    )
    notes += [f"Not named: {claim_id}: {why}." for claim_id, why in dropped.missed.items()]
    print(f"        {dropped.summary()}", file=sys.stderr)
    return [row, inputs_row, dispositions_row], notes


def table(rows: list[faults.Tally], notes: list[str], control: faults.Tally, seconds: float) -> str:
    lost = sum(r.lost for r in rows)
    tried = sum(r.tried for r in rows)
    handled = sum(r.handled for r in rows)
    lines = [
        "# Faults and bad inputs tried",
        "",
        "Produced by `scripts/fault-table`, which runs each scenario now (on sample books in a",
        "temporary folder, and the mutation rows on this book) and counts; nothing here is typed",
        "by hand. *Tried* is how many times the fault was injected, *handled* how many times the",
        "suite did what the third column requires, and the record columns count the results",
        "records that had to survive the fault and those that did not.",
        "",
        "| Group | Fault or bad input | Required | Tried | Handled | Records kept | Records lost |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        kept = f"{r.kept} of {r.expected}" if r.expected else "–"
        lines.append(f"| {r.group} | {r.fault} | {r.required} | {r.tried} | {r.handled} | {kept} | {r.lost} |")
    lines.append(
        f"| **all** | | | **{tried}** | **{handled}** | **{sum(r.kept for r in rows)} of "
        f"{sum(r.expected for r in rows)}** | **{lost}** |"
    )
    lines += ["", f"Records lost: **{lost}**.", "", "## Notes", ""]
    lines.append(
        f"- The race is real: with the lock switched off, the same two processes kept {control.kept} of "
        f"{control.expected} records ({control.lost} lost), so the concurrency rows can see a loss."
    )
    lines += [f"- {n}" for n in notes]
    for r in rows:
        lines += [f"- {r.group} / {r.fault}: {n.splitlines()[0]}" for n in r.notes]
    lines += [
        "",
        f"Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {seconds:.0f} s, on {os.cpu_count()} cores.",
    ]
    return "\n".join(lines) + "\n"


def own_machine(root: Path) -> Any:
    """The runs' own machine identity and state folder under `root`: running the table mints, renames or keeps
    records for no machine of the reader's."""
    from verified_book.records import identity, unsaved

    return mock.patch.dict(
        os.environ,
        {identity.FILE_VARIABLE: str(root / "machine.json"), unsaved.STATE_VARIABLE: str(root / "state")},
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="verified-book fault-table", description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=3, help="times to try each process-level fault (default 3)")
    parser.add_argument(
        "--output", default=str(ROOT / "docs" / "faults.md"), help="where to write the table; - for stdout"
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fault-table-") as tmp, own_machine(Path(tmp)):
        root = Path(tmp)
        rows = scenarios(root, args.tries)
        control = faults.concurrent_processes(root / "race-unlocked", lock=False)
        print(f"        control: {control}", file=sys.stderr)
        more, notes = mutation_rows(root)
        rows += more
    text = table(rows, notes, control, time.monotonic() - started)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"wrote {args.output}", file=sys.stderr)
    bad = [r for r in rows if not r.ok]
    for r in bad:
        print(f"NOT HANDLED: {r}", file=sys.stderr)
    return 1 if bad or control.lost == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
