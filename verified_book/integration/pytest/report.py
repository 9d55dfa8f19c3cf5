"""What the run says: its header, the backends it loaded, the summary table and its last lines."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from verified_book import backends as backends_mod
from verified_book.authoring.registry import REGISTRY
from verified_book.engine import machine as machine_mod
from verified_book.engine.check import BROKEN
from verified_book.engine.kept_records import records_words
from verified_book.engine.run_summary import figure_counts, figure_line, outdated_records, summary_table
from verified_book.engine.session import Session, hardware_in
from verified_book.engine.terminal_text import table_lines, wrapped
from verified_book.integration.pytest.stash import NARROWED, REWRITTEN, UNTOLD, state
from verified_book.vocabulary import LABELS, MEANINGS, NO_BACKEND_LABEL, NO_BACKEND_NAME, Shown, Status


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The book and the machine; the backends once collection has said which libraries the run needs
    (`pytest_report_collectionfinish`), here only on an xdist controller, which collects nothing."""
    run = state(config)
    lines = [
        f"claims: {len(REGISTRY)} claims, {run.bound_figures} bound figures in {len(run.book.pages)} pages",
        f"machine: {run.machine.describe()}",
        *([f"machine identity: {run.identity_notice}"] if run.identity_notice else []),
    ]
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None):
        lines += backend_lines(run, every=True)
    dist = config.getoption("dist", "no")
    if dist not in ("no", "load"):
        lines.append(
            f"measured: under --dist {dist} the timed items run beside other workers' tests, so their "
            "figures describe a shared machine; plain -n N runs them last and alone"
        )
    return lines


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    """The backends this run's selection needs, each library loaded only for a claim selected on it."""
    run = state(config)
    if config.get_verbosity() < 0 or config.getoption("no_header", False):
        return []  # the run's header is not shown either
    if isinstance(sys.exc_info()[1], KeyboardInterrupt):  # pytest says collection finished as Ctrl-C stops it
        return ["interrupted while collecting: no check ran, no library was loaded and nothing is recorded"]
    for name in sorted({b for _, b in run.tally.selected if b in run.backends}):
        run.backends[name]  # the libraries the selected checks run on, loaded now (before the first item runs)
    return backend_lines(run)


def backend_lines(run: Session, every: bool = False) -> list[str]:
    """What the run's libraries found on this machine; `every` detects the libraries no selected claim loaded."""
    found = {name: run.backends[name] for name in run.backends} if every else run.backends.known()
    present = ", ".join(
        f"{b.name} {b.version}" + (" (as recorded; not loaded)" if b.recorded else "")
        for b in found.values()
        if b.available
    )
    absent = "; ".join(f"{b.name}: {b.reason}" for b in found.values() if not b.available)
    unloaded = [name for name in run.backends if name not in found]
    return [
        f"backends: {present or 'none'}",
        f"absent: {absent or 'none'}",
        *([f"not loaded: {', '.join(unloaded)} (no selected check runs there)"] if unloaded else []),
    ]


# The statuses the summary counts, in the order of its columns (the vocabulary's); a status a run
# meets that is not here gets a column after them.
TABLE_STATUSES = tuple(s.value for s in Status)

#: the summary's columns for what the run did not judge, after the statuses
UNJUDGED = (Shown.NOT_HERE, Shown.NOT_RUN)

LEGEND = {
    "selected": "claim × backend checks this run selected (by path, -k or -m)",
    **{s.value: MEANINGS[s.value] for s in Status},
    Status.OUTDATED: "records in this machine's results file, not rerun now, computed from an older claim or input",
    Status.SKIPPED: "run here but not applicable on this backend (reasons: pytest -rs)",
    Shown.NOT_HERE: "selected, but they need hardware or a library this machine lacks, so they did not run",
    Shown.NOT_RUN: "selected, but the run stopped before it reached them (Ctrl-C, -x, a worker lost); run again to "
    "check them",
    BROKEN: "not checked: the environment broke during the run (the line below says what it lost); nothing recorded",
}


def write_table(terminalreporter: Any, table: dict[str, dict[str, int]]) -> None:
    """The run's table of checks per backend, each column named as the vocabulary names it, in blocks no wider
    than a terminal, with a legend line per column."""
    found = {s for row in table.values() for s in row} - {"selected", *UNJUDGED}
    unjudged = (Shown.NOT_HERE, *(s for s in UNJUDGED[1:] if any(s in row for row in table.values())))
    columns = ("selected", *TABLE_STATUSES, *sorted(found - set(TABLE_STATUSES)), *unjudged)
    order = (NO_BACKEND_NAME, *backends_mod.NAMES)
    names = {c: LABELS[c] if c in UNJUDGED else c for c in columns}
    terminalreporter.section("verified book")
    rows = sorted(table, key=lambda n: (order.index(n) if n in order else len(order), n))
    total = {c: sum(row.get(c, 0) for row in table.values()) for c in columns}
    shown = {r: {names[c]: n for c, n in row.items() if c in names} for r, row in {**table, "all": total}.items()}
    for line in table_lines(shown, [names[c] for c in columns], [*rows, "all"]):
        terminalreporter.write_line(line)
    for line in wrapped(
        "The table counts checks, one per claim and backend; the figures line below counts "
        "each printed figure once, in the status it has on this machine."
    ):
        terminalreporter.write_line(line)
    for column in columns:
        for line in wrapped(f"{names[column]}: {LEGEND.get(column, 'a status the results schema names')}", "  "):
            terminalreporter.write_line(line)
    if NO_BACKEND_NAME in table:
        for line in wrapped(
            f"backend {NO_BACKEND_NAME}: exact and quoted claims, computed once in {NO_BACKEND_LABEL} on no backend",
            "  ",
        ):
            terminalreporter.write_line(line)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    for line in config.stash.get(UNTOLD, []):
        terminalreporter.write_line(line, red=True)
    config.stash[UNTOLD] = []
    if config.option.collectonly:
        return  # nothing ran, so there is nothing to count: every selected check would be `not run`
    run = state(config)
    absent = {name for name, b in run.backends.known().items() if not b.available}
    statuses = {k: s for k, s in run.statuses().items() if not (s == Status.SKIPPED and k[1] in absent)}
    tally = run.tally
    table = summary_table(statuses, tally.selected, cannot_run(run, tally.selected - set(statuses), absent))
    for _, backend_name in outdated_records(run, statuses):
        row = table.setdefault(backend_name, {})
        row[Status.OUTDATED] = row.get(Status.OUTDATED, 0) + 1
    for line in run.history_notices:  # said by the read of this machine's history just above
        terminalreporter.write_line(line, red=True)
    for lost in tally.lost_workers:
        terminalreporter.write_line(
            f"the statuses of worker {lost} did not reach this process: the counts below leave out every check it ran",
            red=True,
        )
    say_what_was_rewritten(terminalreporter, config)
    if NARROWED in config.stash:
        for line in config.stash[NARROWED].lines(judged=statuses, verbose=config.getoption("verbose") > 0):
            terminalreporter.write_line(line)
    if not table:
        say_what_was_lost(terminalreporter, run)
        return
    write_table(terminalreporter, table)
    missed = [key for key in tally.selected if key not in statuses]
    for marker in hardware_in(config.getoption("markexpr", "") or ""):
        there = sum(1 for c, b in missed if c in REGISTRY and marker in run.applies_to(REGISTRY[c], b))
        profile = machine_mod.profiles()[marker]
        ran = len(tally.selected) - len(missed)
        terminalreporter.write_line(
            f"-m {marker}: {len(tally.selected)} checks selected, {ran} ran here; {there} would run on "
            f"{profile.name} and did not run here (this machine is {run.machine.describe()})"
        )
    if tally.figure_statuses or tally.figures_selected:
        terminalreporter.write_line(
            figure_line(figure_counts(tally.figure_statuses, tally.figures_selected), run.bound_figures)
        )
    written = run.written
    for path in sorted({str(written)} if written else tally.written):
        terminalreporter.write_line(f"results: {path} (machine {run.machine.slug})")
    say_what_was_lost(terminalreporter, run)


def cannot_run(run: Session, unjudged: set[tuple[str, str]], absent: set[str]) -> set[tuple[str, str]]:
    """Of the selected checks the run did not judge, those this machine cannot run: their claim is about
    hardware not here, or their backend's library is absent. The others it never reached."""
    return {
        (claim_id, backend)
        for claim_id, backend in unjudged
        if backend in absent or (claim_id in REGISTRY and run.hardware_skip(REGISTRY[claim_id]) is not None)
    }


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    """A stale figure the run rewrote and judged again is reported as rewritten, not failed."""
    if report.when == "call" and getattr(report, "rewritten", None):
        return "rewritten", "R", f"REWRITTEN to {report.rewritten}"
    return None


def say_what_was_rewritten(terminalreporter: Any, config: pytest.Config) -> None:
    """The rewrite's report, each part on its own lines: what was rewritten, what still does not hold
    after it, and the sentences where a rewritten figure stands beside other figures or comparisons."""
    if REWRITTEN not in config.stash:
        return
    changed, problems, reread = config.stash[REWRITTEN]
    terminalreporter.write_sep("-", "rewritten")
    terminalreporter.write_line(
        f"rewrote {len(changed)} stale figure(s), judged again as rewritten: " + ", ".join(map(str, changed))
    )
    for problem in problems:
        terminalreporter.write_line(f"still does not hold after the rewrite: {problem}", red=True)
    if reread:
        terminalreporter.write_line(
            f"reread {len(reread)} sentence(s): a rewritten figure stands beside other "
            "figures or comparisons, and each figure holding does not make the sentence true:",
            yellow=True,
        )
        for sentence in reread:
            terminalreporter.write_line(f"  {sentence}")


def say_what_was_lost(terminalreporter: Any, run: Session) -> None:
    """The run's last lines: records it could not keep, and what its environment lost."""
    if run.unkept:
        terminalreporter.write_line(records_words(None, run.unkept), red=True)
    for broken in run.broken():
        terminalreporter.write_line(broken.line(), red=True)
