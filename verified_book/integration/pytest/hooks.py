"""pytest wiring for a book: this module is the plugin a book's `conftest.py` names.

    pytest_plugins = ["verified_book.integration.pytest.hooks"]

It opens the book's session when pytest's session starts (not for `--help`), narrows the selection, holds the
run lock around the timed items and has the session write its records at the end. The options, the items and
the report are the modules it names in `pytest_plugins`; the work is the engine's (`verified_book.engine`).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import pytest

from verified_book import backends as backends_mod
from verified_book.authoring.registry import REGISTRY
from verified_book.book.bindings import generated
from verified_book.engine import offline
from verified_book.engine import selection as selection_mod
from verified_book.engine.config import FILE_NAME, BookConfig, ConfigError, read_config
from verified_book.engine.plan import PlanError, book_plan
from verified_book.engine.rewrite import rejudge, rewrite_stale, rewritten, sentences_to_reread
from verified_book.engine.session import Session, SessionError, hardware_in
from verified_book.engine.tally import Tally
from verified_book.integration.pytest.items import (
    BookItem,
    BookPage,
    ClaimItem,
    ClaimsFile,
    FigureItem,
    SnippetFile,
    keep_one_load_check,
)
from verified_book.integration.pytest.marks import expression_of, pair_selected
from verified_book.integration.pytest.stash import (
    COLLECTED,
    LOCK,
    NARROWED,
    OPENED,
    REWRITTEN,
    STATE,
    UNTOLD,
    state,
)
from verified_book.records import conditions as conditions_mod
from verified_book.records.record import SLUG_PATTERN, SLUG_WORDS
from verified_book.records.results import folder_problem
from verified_book.vocabulary import Status

#: the plugin's other modules, registered with this one
pytest_plugins = ["verified_book.integration.pytest.options", "verified_book.integration.pytest.report"]


def refused_options(config: pytest.Config) -> None:
    """Options that name where the records go, checked before anything is computed: a run that could not
    write its records would otherwise find so only at its end, and lose them."""
    name = config.getoption("claims_machine")
    if name is not None and not SLUG_PATTERN.match(name):
        raise pytest.UsageError(f"--machine {name}: expected {SLUG_WORDS}, starting with a letter or digit")
    folder = config.getoption("claims_results_dir")
    if folder is not None and not config.getoption("claims_no_results"):
        problem = folder_problem(Path(folder))
        if problem:
            raise pytest.UsageError(f"--results-dir {folder}: {problem}")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Open the book: its claims, pages and machine (before pytest prints the run's header)."""
    config = session.config
    refused_options(config)
    book = read_config(Path(config.rootpath))
    if book.offline:
        offline.set_hub_offline()
        offline.install()

    def machine_info(info: dict[str, Any]) -> dict[str, Any] | None:
        replaced: dict[str, Any] | None = config.hook.pytest_claims_machine_info(machine_info=info)
        return replaced

    try:
        config.stash[STATE] = Session(
            book,
            results_dir=config.getoption("claims_results_dir"),
            machine_name=config.getoption("claims_machine"),
            machine_info=machine_info,
        )
    except SessionError as e:
        raise pytest.UsageError(str(e)) from None
    run = config.stash[STATE]
    opened = contextlib.ExitStack()  # the book is the current one until the run ends (pytest_unconfigure)
    opened.enter_context(run.opened_book.opened())
    config.stash[OPENED] = opened
    try:
        collected = run.selection_before_collection(
            changed=config.getoption("claims_changed"),
            readings=config.getoption("claims_reading"),
            whole_book=config.args_source is pytest.Config.ArgsSource.TESTPATHS,
        )
    except selection_mod.ReadingError as e:
        raise pytest.UsageError(str(e)) from None
    if collected is not None:
        config.stash[COLLECTED] = collected
    if not config.option.collectonly:
        take_run_lock(config, book)


def take_run_lock(config: pytest.Config, book: BookConfig) -> None:
    """Hold the book's run lock for the whole run (see `verified_book.records.conditions`); an xdist controller,
    which cannot tell when its workers start timing, holds it exclusively from the start."""
    capture = config.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            print(f"verified-book: {line}", file=sys.stderr, flush=True)

    lock = conditions_mod.RunLock(
        conditions_mod.lock_folder(book.local_results, book.root), say, beside_others=config.getoption("claims_beside")
    )
    controller = not hasattr(config, "workerinput") and bool(config.getoption("numprocesses", None))
    lock.start(exclusive=controller)
    config.stash[LOCK] = lock
    state(config).verifier.conditions = lock


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """`--plan MARKER`: print the plan and stop, before the run opens the machine (no fingerprint, no backend)."""
    marker = config.getoption("claims_plan", None)
    if not marker:
        return None
    try:
        lines, errors = book_plan(read_config(Path(config.rootpath)), marker)
    except (ConfigError, PlanError) as e:
        raise pytest.UsageError(str(e)) from None
    try:
        print("\n".join([*lines, *(f"load error: {e}" for e in errors)]), flush=True)
    except BrokenPipeError:  # the reader closed the pipe (`| head`): what it read is what it wanted
        pass
    return 1 if errors else 0


def pytest_unconfigure(config: pytest.Config) -> None:
    for line in config.stash.get(UNTOLD, []):  # no summary was printed (--no-summary, an internal error)
        print(line, file=sys.stderr)
    if LOCK in config.stash:
        config.stash[LOCK].release()
    if STATE in config.stash and config.stash[STATE].book_config.offline:
        offline.uninstall()
    if OPENED in config.stash:
        config.stash[OPENED].close()


@pytest.fixture
def claims_run(request: pytest.FixtureRequest) -> Session:
    """The run's engine state: verifier, book, machine, backends."""
    return state(request.config)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under `--changed` or `--reading` with no path named (the ini's testpaths), collect only the book:
    those options select among its checks and deselect anything else, so the engine's own tests are not
    even imported. A path named on the command line is collected as pytest would, and deselected."""
    if not (config.getoption("claims_changed") or config.getoption("claims_reading")):
        return None
    if config.args_source is not pytest.Config.ArgsSource.TESTPATHS or STATE not in config.stash:
        return None
    run = state(config)
    book = (run.root / FILE_NAME, run.book_dir, run.snippets_dir)
    if any(collection_path.is_relative_to(p) or p.is_relative_to(collection_path) for p in book):
        return None
    return True


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    run = state(parent.config)
    if file_path == run.root / FILE_NAME:
        return ClaimsFile.from_parent(parent, path=file_path)
    if (
        file_path.suffix == ".md"
        and file_path.is_relative_to(run.book_dir)
        and "snippets" not in file_path.relative_to(run.book_dir).parts
        and not generated(file_path)
    ):
        collected = parent.config.stash.get(COLLECTED, None)
        if collected is not None and file_path.relative_to(run.root).as_posix() not in collected.pages:
            return None
        return BookPage.from_parent(parent, path=file_path)
    if file_path.suffix == ".py" and file_path.parent == run.snippets_dir:
        return SnippetFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Note what the run selected (after -m and -k have deselected), for the summary's counts: a figure
    of a claim about hardware not here counts as not computable here from the start, so that one the run
    never reached (stopped before it) is told apart from it.

    A figure's item carries the marks of every backend its claim runs on, so that `-m` keeps it where
    any of them is selected; under `-m` it then checks only the backends the expression selects (on
    `-m rtx5080`, those the profile lists), and the run computes on no other backend."""
    run = state(config)
    keep_one_load_check(items)
    if config.getoption("claims_changed") or config.getoption("claims_reading"):
        # they select among the book's checks: a test of anything else (the engine's own) reads no record
        others = [item for item in items if not isinstance(item.parent, (ClaimsFile, BookPage, SnippetFile))]
        narrowed, items[:], dropped = run.narrow(
            [item for item in items if isinstance(item.parent, (ClaimsFile, BookPage, SnippetFile))],
            changed=config.getoption("claims_changed"),
            readings=config.getoption("claims_reading"),
            whole_book=COLLECTED in config.stash,
        )
        config.stash[NARROWED] = narrowed.said()
        config.hook.pytest_deselected(items=[*dropped, *others])
    markexpr = config.getoption("markexpr", "") or ""
    expression = None
    if markexpr:
        expression = expression_of(markexpr)
    tally = run.tally
    for item in items:
        if isinstance(item, ClaimItem):
            tally.selected.add((item.claim.id, item.backend.name))
            if item.not_here:
                tally.not_here.setdefault(item.claim.id, item.not_here)
        elif isinstance(item, FigureItem):
            tally.figures_selected.add(item.nodeid)
            claim = REGISTRY.get(item.binding.claim_id)
            if claim is not None and run.hardware_skip(claim):
                # not computable here, known now: counted so even where the run stops before the item
                tally.figure_statuses.setdefault(item.nodeid, Status.SKIPPED)
            if claim is not None:
                names = (
                    [name for name in run.verifier.backends if claim.runs_on(name)]
                    if claim.needs_backend
                    else [backends_mod.NO_BACKEND.name]
                )
                tally.selected.update(
                    (claim.id, b) for b in names if expression is None or pair_selected(expression, run, claim, b, item)
                )
    if expression is not None and hardware_in(markexpr) and tally.selected:
        # `-m <machine>` runs what applies there and nothing else; another expression (`-m slow`) selects
        # tests, whose claims still compute on every backend here
        used = {b for _, b in tally.selected}
        run.verifier.backends = {name: run.verifier.backends[name] for name in run.verifier.backends if name in used}
    # the timed items last, alone
    items.sort(key=lambda item: run.runs_alone(item.nodeid))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A timed item has the machine to itself: it waits until no other run of this book is going on
    (`verified_book.records.conditions`)."""
    if LOCK in item.config.stash and state(item.config).runs_alone(item.nodeid):
        item.config.stash[LOCK].before_timing()


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """The load average after each timed item: the last one's is what the records say."""
    if LOCK in item.config.stash and state(item.config).runs_alone(item.nodeid):
        item.config.stash[LOCK].after_timed_item()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Point a skip at what was skipped (the book's line, the claim's source), not at this module."""
    report = yield
    if (
        report.failed
        and call.when == "call"
        and isinstance(item, FigureItem)
        and item.config.getoption("rewrite_stale_figures")
    ):
        new = rewritten(state(item.config).verifier, item.binding)
        if new is not None:  # rewritten at the session's end, and judged again there
            report.outcome, report.longrepr, report.rewritten = "passed", None, new[0]
            state(item.config).tally.figure_statuses[item.nodeid] = new[1]
    if report.skipped and isinstance(report.longrepr, tuple) and call.when == "call":
        _, _, reason = report.longrepr
        if isinstance(item, BookItem):
            report.longrepr = (str(item.path), item.line, reason)
        elif isinstance(item, ClaimItem):
            report.longrepr = (item.claim.defined_in, item.claim.defined_line, reason)
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    run = state(session.config)
    if run.tally.lost_workers and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR  # a summary without a worker's checks is not a pass
    if session.config.getoption("rewrite_stale_figures"):
        changed = rewrite_stale(run.verifier, run.root)
        if changed:  # the run's records and summary speak of the book as rewritten, judged again
            run.book = run.read_book()
            problems = rejudge(run.verifier, run.book, changed)
            session.config.stash[REWRITTEN] = (changed, problems, sentences_to_reread(run.root, changed))
            if problems:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller prints the summary from these
        workeroutput["claims_tally"] = run.own_tally().to_json()
        if NARROWED in session.config.stash:
            workeroutput["claims_narrowed"] = session.config.stash[NARROWED].to_json()
    if session.config.getoption("claims_no_results"):
        return
    warnings = run.write_records()
    if workeroutput is not None and run.written:
        workeroutput["claims_tally"] = run.own_tally().to_json()
    if run.unkept and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR  # a run that could not keep its records is not a pass
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter and workeroutput is None:
        session.config.stash[UNTOLD] = warnings  # -q's line of dots is still open here: said in the summary
        return
    for line in warnings:
        if reporter:
            reporter.write_line(line, red=True)
        else:
            print(line, file=sys.stderr)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`-n N` (xdist's default `load` distribution): the timed items run last and alone, and the
    CUDA items on one worker, see `verified_book.integration.scheduling`. Other distributions are left as asked."""
    if config.getoption("dist", "load") != "load":
        return None
    from verified_book.integration.scheduling import QuietLastScheduling

    return QuietLastScheduling(config, log, runs_alone=state(config).runs_alone, pinned=state(config).runs_on_cuda)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the xdist controller: take in what a worker judged, for one summary of the whole run."""
    run = state(node.config)
    output = getattr(node, "workeroutput", None) or {}
    if error is not None or "claims_tally" not in output:
        why = (
            str(error).strip().splitlines()[-1]
            if error is not None and str(error).strip()
            else "it handed back no statuses"
        )
        run.tally.lost_workers.append(f"{node.gateway.id} ({why})")
    if "claims_tally" in output:
        run.tally.merge(Tally.from_json(output["claims_tally"]))
    if "claims_narrowed" in output and NARROWED not in node.config.stash:  # every worker narrowed alike
        node.config.stash[NARROWED] = selection_mod.Said.from_json(output["claims_narrowed"])
