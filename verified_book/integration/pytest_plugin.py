"""pytest wiring: options, collection of the book's figures, markers, the summary, the results file.

The work lives in `verified_book.engine.check`, `verified_book.book.bindings`, `verified_book.records.results`; this
module only
connects them to pytest.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
from collections import Counter
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from _pytest._code.code import TerminalRepr

from verified_book import backends as backends_mod
from verified_book.records import conditions as conditions_mod
from verified_book.integration import hookspecs
from verified_book.engine import machine as machine_mod
from verified_book.engine import offline
from verified_book.engine import selection as selection_mod
from verified_book.engine import ahead as ahead_mod
from verified_book.engine import environment
from verified_book.errors import BookError
from verified_book.book.bindings import (
    Binding,
    Book,
    Page,
    book_pages,
    generated,
    read_page,
    unknown_claim,
)
from verified_book.engine.check import BROKEN, FAILED, SKIPPED
from verified_book.vocabulary import KIND_MEANINGS, MEANINGS, Status, worst
from verified_book.engine.provenance import commit_of
from verified_book.engine.config import FILE_NAME, BookConfig, ConfigError, open_book, read_config, snapshot
from verified_book.records.record import SLUG_PATTERN, SLUG_WORDS, OutputCheck, SnippetOutput
from verified_book.authoring.registry import REGISTRY, Claim, Kind
from verified_book.records.results import ResultsError, ResultsFile, dumps, folder_problem, merge_into, now
from verified_book.engine.rewrite import Reread, Rewrite, rejudge, rewrite_stale, rewritten, sentences_to_reread
from verified_book.engine.session import (  # noqa: F401  (the engine's helpers, named here as before)
    CASE_ID,
    FIGURE_NAME,
    Session,
    SessionError,
    Tally,
    applies_on,
    case_id,
    claim_of_nodeid,
    figure_counts,
    figure_keywords,
    figure_line,
    figure_name,
    hardware_in,
    outdated_records,
    summary_table,
    table_lines,
    wrapped,
)
from verified_book.book.snippet_output import check_snippet
from verified_book.engine.snippet_figures import source_hash
from verified_book.engine.snippet_run import SnippetRun, run_as_script, shared_run
from verified_book.vocabulary import NO_BACKEND_NAME

STATE = pytest.StashKey[Session]()
LOCK = pytest.StashKey[conditions_mod.RunLock]()
REOPEN = pytest.StashKey[Callable[[], None]]()
NARROWED = pytest.StashKey[selection_mod.Said]()  # what --changed or --reading says at the end of the run
RECORDED = pytest.StashKey[ResultsFile | None]()  # this machine's records, read once for --changed or --reading
UNRECORDED = pytest.StashKey[str]()  # why RECORDED holds none: none yet, or a file that does not read
REWRITTEN = pytest.StashKey[tuple[list[Rewrite], list[str], list[Reread]]]()


RunState = Session  # the run's engine state, as the plugin's fixtures and hooks name it


def marks(run: Session, claim: Claim, backend: str) -> list[pytest.MarkDecorator]:
    """The pytest marks of one (claim, backend): its kind, its backend's, the machines it applies on."""
    return [_mark(n) for n in sorted(run.mark_names(claim, backend))]


@functools.cache
def _mark(name: str) -> pytest.MarkDecorator:
    """One decorator a name, shared by every item: `pytest.mark.<name>` (and `add_marker` given a name) checks the
    name and builds a decorator on each access, and a book's collection asks some fifty thousand times. A
    decorator is immutable, and every name here is one this plugin registers at configure."""
    return getattr(pytest.mark, name)


def done_ahead(run: Session, item: pytest.Item) -> bool:
    """Whether an item's work is the helper's: a claim it computes on a backend it computes on, a figure of
    one, a snippet it runs."""
    if isinstance(item, SnippetItem):
        return item.runner is shared_run and item.path in run.ahead_snippets
    if isinstance(item, ClaimItem):
        return item.claim.id in run.ahead_claims and ahead_mod.computes_on(item.backend)
    claim = REGISTRY.get(item.binding.claim_id) if isinstance(item, FigureItem) else None
    return (
        claim is not None
        and claim.id in run.ahead_claims
        and any(ahead_mod.computes_on(b) for b in run.verifier.backends_for(claim))
    )


def plan_of(profile: machine_mod.Profile, book: Book) -> dict[str, list[tuple[Claim, list[str]]]]:
    """What a run on one of the book's machines would check, by the page that prints each claim's
    figures (`PLAN_UNPRINTED` for a claim printed nowhere): every claim with the backends it would
    run on there. Read from the claims and the profile alone: nothing is computed, no library loaded."""
    printed_on: dict[str, list[str]] = {}
    for binding in book.bindings():
        pages = printed_on.setdefault(binding.claim_id, [])
        if binding.file not in pages:
            pages.append(binding.file)
    names = [backends_mod.NO_BACKEND.name, *backends_mod.NAMES]
    plan: dict[str, list[tuple[Claim, list[str]]]] = {}
    for claim in REGISTRY:
        wanted = names[1:] if claim.needs_backend else names[:1]
        there = [
            b
            for b in wanted
            if (b == backends_mod.NO_BACKEND.name or claim.runs_on(b)) and applies_on(claim, b, profile)
        ]
        if there:
            for page in printed_on.get(claim.id) or [PLAN_UNPRINTED]:
                plan.setdefault(page, []).append((claim, there))
    return dict(sorted(plan.items(), key=lambda kv: (kv[0] == PLAN_UNPRINTED, kv[0])))


PLAN_UNPRINTED = "not printed"


def plan_lines(marker: str, book: Book) -> list[str]:
    """`--plan MARKER` as it prints: a heading, then each page with its claims and their backends."""
    profiles = machine_mod.profiles()
    if marker not in profiles:
        raise pytest.UsageError(
            f"--plan {marker}: not one of the book's machines; expected one of {', '.join(profiles)}"
        )
    profile = profiles[marker]
    plan = plan_of(profile, book)
    checks = {(claim.id, b) for entries in plan.values() for claim, backends in entries for b in backends}
    lines = [
        f"plan for {marker} ({profile.name}, backends {', '.join(profile.backends) or 'none listed'}, from "
        f"{profile.file}): {len(checks)} checks of {len({c for c, _ in checks})} claims; nothing was run"
    ]
    for page, entries in plan.items():
        lines.append(page)
        width = max(len(claim.id) for claim, _ in entries)
        lines += [f"  {claim.id:<{width}}  {', '.join(backends)}" for claim, backends in entries]
    return lines


def _pair_selected(expression: Any, run: Session, claim: Claim, backend: str, item: pytest.Item | None = None) -> bool:
    """Whether `-m`'s expression selects a claim's check on one backend: the backend, kind and hardware marks
    of that (claim, backend), with a figure item's own other marks (not those of all its backends)."""
    from _pytest.mark import MarkMatcher

    family = {*BACKEND_MARKERS, *machine_mod.profiles(), *(k.value for k in Kind), "measured"}
    others = [m for m in item.iter_markers() if m.name not in family] if item is not None else []
    found = [m.mark for m in marks(run, claim, backend)] + others
    return bool(expression.evaluate(MarkMatcher.from_markers(found)))


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("claims", "verified book")
    group.addoption(
        "--rewrite-stale-figures",
        action="store_true",
        default=False,
        help="Rewrite every stale figure in the book in place, at its printed precision, from the "
        "value computed in this run. Figures that hold are never touched.",
    )
    group.addoption(
        "--machine",
        dest="claims_machine",
        metavar="NAME",
        default=None,
        help="Record results under this name instead of this machine's own (its identity, "
        "~/.config/verified-book/machine.json); the records still carry this machine's id.",
    )
    group.addoption(
        "--results-dir",
        dest="claims_results_dir",
        metavar="DIR",
        default=None,
        help="Write <machine>.json under DIR instead of the book's local results folder (book.toml's "
        "local_results, else results).",
    )
    group.addoption(
        "--no-results",
        dest="claims_no_results",
        action="store_true",
        default=False,
        help="Verify without writing this machine's results file.",
    )
    group.addoption(
        "--no-ahead",
        dest="claims_no_ahead",
        action="store_true",
        default=False,
        help="Do all the work in this process: book.toml's `ahead` claims and snippets are otherwise done by "
        "a helper process while the run starts, on a machine with two CPUs or more.",
    )
    group.addoption(
        "--beside-other-runs",
        dest="claims_beside",
        action="store_true",
        default=False,
        help="Do not wait for another run of this book that is timing the machine (or for other runs before "
        "timing it): run beside them, and mark the measurements of both runs contended.",
    )
    group.addoption(
        "--plan",
        dest="claims_plan",
        metavar="MARKER",
        default=None,
        help="List what a run on the book's machine MARKER (rtx5080, m4_max, ...) would check, and on which "
        "backend, by the page that prints each claim; run nothing. Works on any machine.",
    )
    group.addoption(
        "--changed",
        dest="claims_changed",
        action="store_true",
        default=False,
        help="Check only what changed since this machine's records: a claim whose code, inputs, library version "
        "or printed figures moved, or whose record did not hold. The rest is reported unchanged, with its date.",
    )
    group.addoption(
        "--reading",
        dest="claims_reading",
        metavar="FILE[:KEY]",
        action="append",
        default=[],
        help="Check only the claims that read this data file (relative to the book's data folder) or this key of "
        "it, as this machine's records say, and the figures bound to them; repeatable. Claims with no record here "
        "are checked too; a file or key the data does not hold is refused.",
    )


BACKEND_MARKERS = {
    "cpu": "runs on the CPU (numpy, torch:cpu, mlx:cpu, jax:cpu, or no backend at all)",
    **backends_mod.markers(),  # each registered adapter's: cuda, mps, mlx, jax
}
RUN_MARKERS = {
    "slow": "starts other processes or takes long (a snippet run as a script)",
}


def pytest_configure(config: pytest.Config) -> None:
    """Declare the book's markers (kinds, backends and one per hardware profile, each from its one
    definition) and nothing else: the book opens when the session starts, and not for `--help`."""
    try:
        book = read_config(Path(config.rootpath))
    except ConfigError as e:
        raise pytest.UsageError(str(e)) from None
    for kind, text in KIND_MEANINGS.items():
        config.addinivalue_line("markers", f"{kind.value}: {text}")
    for name, text in {**BACKEND_MARKERS, **RUN_MARKERS}.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    for marker, name in machine_mod.profile_names(book.data / book.hardware).items():
        config.addinivalue_line("markers", f"{marker}: applies on {name}")
    keyword_hint(config.getoption("keyword", "") or "")
    exempt_at_exit()


@functools.cache  # once a process: pytester's in-process runs configure again
def exempt_at_exit() -> None:
    """Exempt whatever is alive when the process exits from the interpreter's last garbage collections.

    Those passes walk every object the libraries made: with torch loaded they cost half a second of a
    one-page check, after the run has said all it had to say. Registered now, ahead of the handlers
    the libraries register as they load, it runs after them, so every exit handler still runs and
    objects still go by reference counting; only cycles left at exit stay, which the process's end
    returns with the rest of its memory."""
    atexit.register(gc.freeze)


def keyword_hint(expression: str) -> None:
    """Refuse a `-k` that names a figure's line as its item's name reads (`line 254`), saying the word it
    answers to: pytest alone says only that the expression does not parse."""
    spelled = re.sub(r"\bline (\d+)\b", r"line_\1", expression)
    if spelled == expression:
        return
    from _pytest.mark.expression import Expression

    try:
        Expression.compile(expression)
    except SyntaxError as e:  # what pytest's expression parser raises
        raise pytest.UsageError(
            f"-k {expression!r} does not parse (at column {e.offset}: {e.msg}): a figure's item answers to the "
            f"word line_N, since -k cannot take the spaces and colons of its name; try -k {spelled!r}"
        ) from None


def _refused_options(config: pytest.Config) -> None:
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
    _refused_options(config)
    book = read_config(Path(config.rootpath))
    if book.offline:
        offline.set_hub_offline()
        offline.install()
    config.stash[REOPEN] = snapshot()
    plain = not hasattr(config, "workerinput") and not config.getoption("numprocesses", None)
    ahead = (
        plain
        and not config.getoption("claims_no_ahead")
        and not config.option.collectonly
        and ahead_mod.core_to_spare()
    )  # xdist's workers share the cores already

    def machine_info(info: dict[str, Any]) -> dict[str, Any] | None:
        replaced: dict[str, Any] | None = config.hook.pytest_claims_machine_info(machine_info=info)
        return replaced

    try:
        config.stash[STATE] = Session(
            book,
            results_dir=config.getoption("claims_results_dir"),
            machine_name=config.getoption("claims_machine"),
            machine_info=machine_info,
            ahead=ahead,
        )
    except SessionError as e:
        raise pytest.UsageError(str(e)) from None
    run = config.stash[STATE]
    try:
        for text in config.getoption("claims_reading"):
            selection_mod.checked_reading(text)
    except selection_mod.ReadingError as e:
        raise pytest.UsageError(str(e)) from None
    if config.getoption("claims_changed") or config.getoption("claims_reading"):
        config.stash[RECORDED], config.stash[UNRECORDED] = selection_mod.recorded(
            run.results_dir / f"{run.machine.slug}.json"
        )
        selection_mod.assume_recorded_backends(run.backends, config.stash[RECORDED])
    if ahead and selects_ahead_work(config, run):
        run.start_ahead()  # its libraries load while this process collects; dropped if collection says otherwise
    elif not ahead:
        ahead_mod.stop_early()  # a helper `verify` started is not this run's (xdist, --no-ahead, --collect-only)
    if not config.option.collectonly:
        _take_run_lock(config, book)


#: the options that narrow a run to part of what its paths collect; `-m` is judged on its own
NARROWING = ("keyword", "deselect", "lf", "claims_changed", "claims_reading")


def selects_ahead_work(config: pytest.Config, run: Session) -> bool:
    """Whether the run's arguments alone select the helper's claims, before anything is collected: book.toml
    named whole (or a folder that holds it), no option that narrows the selection, and a `-m` expression (the
    ini's included) that keeps some of those claims on a CPU backend. `verify` runs so; `pytest book/index.md`
    does not, and its helper starts, if at all, once collection shows it selected some of that work."""
    if not run.ahead_claims or any(getattr(config.option, name, None) for name in NARROWING):
        return False
    claims_file = (run.root / FILE_NAME).resolve()
    here = config.invocation_params.dir

    def names_claims_file(arg: str) -> bool:
        path, _, node = arg.partition("::")
        target = (here / path).resolve()
        return not node and (target == claims_file or (target.is_dir() and claims_file.is_relative_to(target)))

    if not any(names_claims_file(arg) for arg in config.args):
        return False
    markexpr = config.getoption("markexpr", "") or ""
    if not markexpr:
        return True
    from _pytest.mark.expression import Expression

    expression = Expression.compile(markexpr)
    return any(
        _pair_selected(expression, run, claim, name)
        for claim in run.ahead_claims.values()
        for name in claim.backends or backends_mod.NAMES
        if ahead_mod.on_cpu(backends_mod.Backend(name, available=False, reason="not yet detected"))
    )


def _take_run_lock(config: pytest.Config, book: BookConfig) -> None:
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
        book = read_config(Path(config.rootpath))
    except ConfigError as e:
        raise pytest.UsageError(str(e)) from None
    restore = snapshot()
    try:
        errors = open_book(book)
        pages = [read_page(path, book.root) for path in book_pages(book.pages)] if book.pages.is_dir() else []
        lines = plan_lines(marker, Book(book.root, pages, []))
    finally:
        restore()
    try:
        print("\n".join([*lines, *(f"load error: {e}" for e in errors)]), flush=True)
    except BrokenPipeError:  # the reader closed the pipe (`| head`): what it read is what it wanted
        pass
    return 1 if errors else 0


def pytest_unconfigure(config: pytest.Config) -> None:
    if LOCK in config.stash:
        config.stash[LOCK].release()
    ahead = config.stash[STATE].ahead if STATE in config.stash else None
    if ahead is not None:
        ahead.cancel()
    ahead_mod.stop_early()
    if STATE in config.stash and config.stash[STATE].book_config.offline:
        offline.uninstall()
    if REOPEN in config.stash:
        config.stash[REOPEN]()


def state(config: pytest.Config) -> Session:
    return config.stash[STATE]


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
    """The backends this run's selection needs, each library loaded only for a claim selected on it,
    and the helper's work."""
    run = state(config)
    if config.get_verbosity() < 0 or config.getoption("no_header", False):
        return []  # the run's header is not shown either
    for name in sorted({b for _, b in run.tally.selected if b in run.backends}):
        run.backends[name]  # the libraries the selected checks run on, loaded now (before the first item runs)
    lines = backend_lines(run)
    ahead = run.ahead
    if ahead is not None:
        done = [
            f"{n} {what}{'' if n == 1 else 's'} {how}"
            for n, what, how in ((len(ahead.claim_ids), "claim", "computed"), (len(ahead.snippets), "snippet", "run"))
            if n
        ]
        lines.append(
            f"ahead: {' and '.join(done) or 'nothing'} by a helper process while this one starts "
            "(book.toml's ahead; --no-ahead does it all here)"
        )
    return lines


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
        return BookPage.from_parent(parent, path=file_path)
    if file_path.suffix == ".py" and file_path.parent == run.snippets_dir:
        return SnippetFile.from_parent(parent, path=file_path)
    return None


class ClaimsFile(pytest.File):
    """The book's claims, collected from its `book.toml`: one item per claim and backend, and
    one that fails when a topic module does not load."""

    def collect(self) -> Iterator[pytest.Item]:
        run = state(self.config)
        yield TopicsItem.from_parent(self, name=TopicsItem.NAME)
        for claim in REGISTRY:
            for backend in run.verifier.backends_for(claim):
                item = ClaimItem.from_parent(self, name=case_id(claim, backend.name), claim=claim, backend=backend)
                for mark in marks(run, claim, backend.name):
                    item.add_marker(mark)
                skip = run.hardware_skip(claim)
                if skip is None and not backend.available:
                    here = ", ".join(b.name for b in run.backends.values() if b.available) or "no backend"
                    skip = f"{backend.name} is not here: {backend.reason}; this machine has {here}"
                if skip:
                    item.add_marker(pytest.mark.skip(reason=skip))
                    item.not_here = skip
                yield item


class TopicsItem(pytest.Item):
    """A topic module that fails to import, or declares a bad claim, fails here and only here; so does
    a data file whose `source` states another number than its `value`, and an allow-list entry that
    excuses nothing. book.toml always holds one; a page holds one where the book has such a problem,
    so that checking the page alone says so too, and the run keeps one of them (`keep_one_load_check`)."""

    NAME = "every topic module loads"

    def runtest(self) -> None:
        errors = book_problems(state(self.config))
        if errors:
            raise BookFailure("\n".join(errors))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return str(excinfo.value)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.name


class ClaimItem(pytest.Item):
    """One claim on one backend: it computes and its invariants hold. Whether its printed
    figures still round to the value is the figure items' report, made once per figure."""

    def __init__(self, *, claim: Claim, backend: backends_mod.Backend, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.claim = claim
        self.backend = backend
        self.not_here: str | None = None  # why it will not run here, known at collection

    def runtest(self) -> None:
        check_claim(state(self.config), self.claim, self.backend)

    def reportinfo(self) -> tuple[Path, int, str]:
        return Path(self.claim.defined_in), self.claim.defined_line - 1, f"claim {self.claim.id} on {self.backend.name}"


def book_problems(run: Session) -> list[str]:
    """What keeps the book from loading cleanly, one message each: a topic module, a data file, the allow-list."""
    return [*map(str, run.load_errors), *(message for page, message in run.allowlist_problems() if page is None)]


def keep_one_load_check(items: list[pytest.Item]) -> None:
    """Of the load checks collected (book.toml's, and each page's where the book has a problem), keep book.toml's,
    or else the first page's: the same messages once."""
    checks = [item for item in items if isinstance(item, TopicsItem)]
    if len(checks) > 1:
        kept = next((c for c in checks if isinstance(c.parent, ClaimsFile)), checks[0])
        items[:] = [item for item in items if not isinstance(item, TopicsItem) or item is kept]


class BookPage(pytest.File):
    """A page of the book: one item per bound figure, plus the unbound-number check, and the book's load
    check where the book has a problem (a page checked alone still says that a topic module failed)."""

    def collect(self) -> Iterator[pytest.Item]:
        run = state(self.config)
        if book_problems(run):
            yield TopicsItem.from_parent(self, name=TopicsItem.NAME)
        rel = str(self.path.relative_to(run.root))
        page = next((p for p in run.book.pages if p.file == rel), None) or Page(rel)
        for binding in page.malformed:
            yield MalformedItem.from_parent(self, name=f"line {binding.line}: malformed", binding=binding)
        seen = Counter((b.line, b.text, b.claim_id) for b in page.bindings)
        for binding in page.bindings:
            claim = REGISTRY.get(binding.claim_id)
            twice = seen[(binding.line, binding.text, binding.claim_id)] > 1
            item = FigureItem.from_parent(self, name=figure_name(binding, twice), binding=binding)
            item.extra_keyword_matches.update(figure_keywords(binding, twice))
            if claim is not None:
                backends_used = (
                    [name for name in run.verifier.backends if claim.runs_on(name)]
                    if claim.needs_backend
                    else [backends_mod.NO_BACKEND.name]
                )  # names only: no library loads here
                names = set()
                for b in backends_used:
                    names.update(run.mark_names(claim, b))
                for n in sorted(names):
                    item.add_marker(_mark(n))
                skip = run.hardware_skip(claim)
                if skip:
                    item.add_marker(pytest.mark.skip(reason=skip))
            yield item
        yield UnboundItem.from_parent(self, name="every number is bound", page=page)
        if run.output_blocks.of_page(rel):
            yield OutputBlocksItem.from_parent(self, name="every output block names its snippet", page=page)


class BookItem(pytest.Item):
    line = 0

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.line - 1, self.name

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | TerminalRepr:
        if isinstance(excinfo.value, BookFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class BookFailure(BookError, AssertionError):
    """A failure whose message is already a compiler-style report."""


class FigureItem(BookItem):
    def __init__(self, *, binding: Binding, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.binding = binding
        self.line = binding.line

    def runtest(self) -> None:
        run = state(self.config)
        claim = REGISTRY.get(self.binding.claim_id)
        if claim is None:
            run.tally.figure_statuses[self.nodeid] = Status.FAILED.value
            near = REGISTRY.near(self.binding.claim_id)
            raise BookFailure(f"{self.binding.where}: {unknown_claim(self.binding, near, run.load_errors)}")
        verdicts = run.verifier.judge_everywhere(self.binding, claim)
        judged = [v.status for v in verdicts if v.status != Status.SKIPPED]
        run.tally.figure_statuses[self.nodeid] = worst(judged) if judged else Status.SKIPPED.value
        bad = [v for v in verdicts if v.status in (Status.STALE, Status.FAILED, BROKEN)]
        if bad:
            raise BookFailure("\n".join(v.message for v in bad))
        if not verdicts:
            pytest.skip(
                f"claim {claim.id} runs on {', '.join(claim.backends or ())}, and none of them is a "
                f"backend of this run ({', '.join(run.verifier.backends) or 'none selected'})"
            )
        if all(v.status == Status.SKIPPED for v in verdicts):
            pytest.skip("; ".join(v.message for v in verdicts))


class MalformedItem(BookItem):
    def __init__(self, *, binding: Binding, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.binding = binding
        self.line = binding.line

    def runtest(self) -> None:
        bound = f"figure {self.binding.text} ({self.binding.claim_id}): " if self.binding.claim_id else ""
        raise BookFailure(f"{self.binding.where}:{self.binding.column}: {bound}{self.binding.error}")


class UnboundItem(BookItem):
    def __init__(self, *, page: Page, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.page = page
        self.line = 1

    def runtest(self) -> None:
        run = state(self.config)
        allowlist = run.book_config.shown(run.book_config.allowlist)
        lines = run.book.unbound_lines(self.page.file, allowlist)
        lines += [message for page, message in run.allowlist_problems() if page == self.page.file]
        if lines:
            raise BookFailure("\n".join(lines))


class OutputBlocksItem(BookItem):
    """A page's output blocks are declared right: each names a snippet of this book, and says which lines vary."""

    def __init__(self, *, page: Page, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.page = page
        self.line = 1

    def runtest(self) -> None:
        errors = state(self.config).output_blocks.errors(self.page.file)
        if errors:
            raise BookFailure("\n".join(errors))


class SnippetFile(pytest.File):
    """A lab snippet: run inside the test process in the default run (as a script there too where
    it sets what a library reads only as it loads, see `verified_book.engine.snippet_run`), as a script in the slow
    set."""

    def collect(self) -> Iterator[pytest.Item]:
        inside = SnippetItem.from_parent(self, name="runs in this process", runner=shared_run)
        script = SnippetItem.from_parent(self, name="runs as a script", runner=run_as_script)
        script.add_marker(pytest.mark.slow)
        for item in (inside, script):
            # a reader runs a snippet on any machine: `-m <machine>` runs it too, and its output is
            # recorded in that machine's results file beside the claims
            for name in ("cpu", *machine_mod.profiles()):
                item.add_marker(_mark(name))
            yield item


class SnippetItem(BookItem):
    """A lab snippet runs as a reader would run it, its output is kept per machine, and what it
    printed is held against each output block of the book that shows it (`verified_book.book.snippet_output`)."""

    line = 1

    def __init__(self, *, runner: Callable[[Path], SnippetRun], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.runner = runner

    def runtest(self) -> None:
        run = state(self.config)
        ahead = run.ahead
        done = ahead.snippet(self.path) if ahead is not None and done_ahead(run, self) else None
        done = done or self.runner(self.path)
        broken = environment.broken_in(done.stderr) if done.exit_status != 0 else None
        if broken is not None:  # the snippet was not shown wrong: its output is not recorded
            run.broken_snippets[broken.lost] = broken
            raise BookFailure(f"{self.path.relative_to(run.root)}: not run to its end: {broken.line()}")
        if done.exit_status != 0:
            raise BookFailure(
                f"{self.path.relative_to(run.root)}: exited {done.exit_status} ({done.how})\n{done.stderr[-3000:]}"
            )
        name = self.path.name
        devices = [b.device for b in run.backends.values() if b.available]
        checks = check_snippet(run.output_blocks, name, done.stdout, done.how, devices)
        run.outputs[name] = SnippetOutput(
            text=done.stdout,
            date=now(),
            seconds=round(done.seconds, 3),
            how=done.how,
            checked=[
                OutputCheck(file=c.file, line=c.line, status=c.status, message=c.message, sha256=c.sha256)
                for c in checks
            ],
            sha256=source_hash(self.path),
        )
        if not checks:
            raise BookFailure(
                f"{self.path.relative_to(run.root)}:1: no output block of the book shows what {name} "
                f"prints: add one where the book runs it, fenced as ```output {name}"
            )
        stale = [c.message for c in checks if c.status == Status.STALE]
        if stale:
            raise BookFailure("\n".join(stale))


def check_claim(run: Session, claim: Claim, backend: backends_mod.Backend) -> None:
    """A claim item's check: the claim computes on the backend (figures are judged by their own items)."""
    result = run.verifier.outcome(claim, backend)
    if result.status == SKIPPED:
        run.tally.not_here.setdefault(claim.id, result.message)
        pytest.skip(result.message)
    if result.status in (FAILED, BROKEN):
        pytest.fail(f"{claim.defined_at}: claim {claim.id} on {backend.name}: {result.message}", pytrace=False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    run = state(session.config)
    if run.tally.lost_workers and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR  # a summary without a worker's checks is not a pass
    if session.config.getoption("rewrite_stale_figures"):
        changed = rewrite_stale(run.verifier, run.root)
        if changed:  # the run's records and summary speak of the book as rewritten, judged again
            run.book = run._read_book()
            problems = rejudge(run.verifier, run.book, changed)
            session.config.stash[REWRITTEN] = (changed, problems, sentences_to_reread(run.root, changed))
            if problems:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller prints the summary from these
        workeroutput["claims_tally"] = run.own_tally().to_json()
        if NARROWED in session.config.stash:
            workeroutput["claims_narrowed"] = session.config.stash[NARROWED].to_json()
    if session.config.getoption("claims_no_results") or not (run.verifier.judged or run.outputs):
        return
    commit, dirty = commit_of(run.root, (run.results_dir, run.book_config.results))
    header = {
        "date": now(),
        "commit": commit,
        "dirty": dirty,
        "os": run.machine.info.get("os"),
        "driver": run.machine.info.get("driver"),
        "versions": {k: run.machine.info.get(k) for k in ("python", *machine_mod.VERSIONED)},
        "backends": {b.name: (b.version if b.available else None) for b in run.backends.known().values()},
    }
    broken = run.broken()
    if broken:  # contribute refuses a run whose environment broke; a later sound run clears it
        header["environment_errors"] = [b.line() for b in broken]
    update = run.verifier.results(run.machine.slug, header, run.outputs, run.tally.not_here)
    path = run.results_dir / f"{run.machine.slug}.json"
    warnings: list[str] = []
    try:
        run.merged = merge_into(path, update, warn=warnings.append)
        run.written = path
        if workeroutput is not None:
            workeroutput["claims_tally"] = run.own_tally().to_json()
    except (ResultsError, OSError) as e:
        warnings.append(f"results not merged into {path}: {e}")
        kept, aside = _keep_unmerged(path, update)
        warnings.append(kept)
        run.unkept = (
            f"this run's records could not be written to {path}; they are kept in {aside}"
            if aside
            else f"this run's records could not be written to {path}, nor kept anywhere else: they are lost"
        )
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR  # a run that could not keep its records is not a pass
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for line in warnings:
        if reporter:
            reporter.write_line(line, red=True)
        else:
            print(line, file=sys.stderr)


def _keep_unmerged(path: Path, update: Any) -> tuple[str, Path | None]:
    """Where a run whose merge was refused keeps its records, so a refusal loses nothing: the line
    that says so, and the file (None where even that could not be written)."""
    aside = path.with_name(f"{path.name}.unmerged-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    try:
        aside.parent.mkdir(parents=True, exist_ok=True)
        aside.write_text(dumps(update), encoding="utf-8")
    except (OSError, ValueError) as e:
        return f"this run's records could not be kept either: {e}", None
    return f"this run's records are kept in {aside}; merge them by hand once the cause is fixed", aside


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


# The statuses the summary counts, in the order of its columns (the vocabulary's); a status a run
# meets that is not here gets a column after them.
TABLE_STATUSES = tuple(s.value for s in Status)
LEGEND = {
    "selected": "claim × backend checks this run selected (by path, -k or -m)",
    **{s.value: MEANINGS[s.value] for s in Status},
    Status.OUTDATED.value: "records in this machine's results file, not rerun now, computed from an older claim or "
    "input",
    Status.SKIPPED.value: "run here but not applicable on this backend (reasons: pytest -rs)",
    "not here": "selected, but they need hardware or a backend this machine lacks, so they did not run",
    BROKEN: "not checked: the environment broke during the run (the line below says what it lost); nothing recorded",
}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Note what the run selected (after -m and -k have deselected), for the summary's counts.

    A figure's item carries the marks of every backend its claim runs on, so that `-m` keeps it where
    any of them is selected; under `-m` it then checks only the backends the expression selects (on
    `-m rtx5080`, those the profile lists), and the run computes on no other backend."""
    run = state(config)
    keep_one_load_check(items)
    if config.getoption("claims_changed") or config.getoption("claims_reading"):
        # they select among the book's checks: a test of anything else (the engine's own) reads no record
        others = [item for item in items if not isinstance(item.parent, (ClaimsFile, BookPage, SnippetFile))]
        narrowed, items[:], dropped = selection_mod.narrow(
            [item for item in items if isinstance(item.parent, (ClaimsFile, BookPage, SnippetFile))],
            changed=config.getoption("claims_changed"),
            readings=config.getoption("claims_reading"),
            results=config.stash[RECORDED],
            unrecorded=config.stash[UNRECORDED],
            registry=REGISTRY,
            verifier=run.verifier,
            outputs=run.output_blocks,
        )
        config.stash[NARROWED] = narrowed.said()
        config.hook.pytest_deselected(items=[*dropped, *others])
    markexpr = config.getoption("markexpr", "") or ""
    expression = None
    if markexpr:
        from _pytest.mark.expression import Expression

        expression = Expression.compile(markexpr)
    tally = run.tally
    for item in items:
        if isinstance(item, ClaimItem):
            tally.selected.add((item.claim.id, item.backend.name))
            if item.not_here:
                tally.not_here.setdefault(item.claim.id, item.not_here)
        elif isinstance(item, FigureItem):
            tally.figures_selected.add(item.nodeid)
            claim = REGISTRY.get(item.binding.claim_id)
            if claim is not None:
                names = (
                    [name for name in run.verifier.backends if claim.runs_on(name)]
                    if claim.needs_backend
                    else [backends_mod.NO_BACKEND.name]
                )
                tally.selected.update(
                    (claim.id, b)
                    for b in names
                    if expression is None or _pair_selected(expression, run, claim, b, item)
                )
    if expression is not None and hardware_in(markexpr) and tally.selected:
        # `-m <machine>` runs what applies there and nothing else; another expression (`-m slow`) selects
        # tests, whose claims still compute on every backend here
        used = {b for _, b in tally.selected}
        run.verifier.backends = {name: run.verifier.backends[name] for name in run.verifier.backends if name in used}
    if not (run.ahead_claims or run.ahead_snippets):
        return
    # the helper's work comes after everything else untimed, and the timed items last, alone; the helper
    # runs only where the selection holds some of its work
    tier = {item: 1 if done_ahead(run, item) else 2 if run.runs_alone(item.nodeid) else 0 for item in items}
    if 1 not in tier.values():
        run.drop_ahead()
        return
    run.start_ahead()
    items.sort(key=tier.__getitem__)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A timed item has the machine to itself: it waits until the helper working ahead has exited, and
    until no other run of this book is going on (`verified_book.records.conditions`)."""
    run = state(item.config)
    ahead = run.ahead
    timed = run.runs_alone(item.nodeid)
    if ahead is not None and ahead.running:
        ours = done_ahead(run, item)
        if ours or timed:
            if not run.idled:
                run.idled = True
                item.config.hook.pytest_claims_idle(config=item.config)
            if not ours:
                ahead.wait()
    if timed and LOCK in item.config.stash:
        item.config.stash[LOCK].before_timing()


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """The load average after each timed item: the last one's is what the records say."""
    if LOCK in item.config.stash and state(item.config).runs_alone(item.nodeid):
        item.config.stash[LOCK].after_timed_item()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    run = state(config)
    absent = {name for name, b in run.backends.known().items() if not b.available}
    statuses = {k: s for k, s in run.statuses().items() if not (s == Status.SKIPPED and k[1] in absent)}
    tally = run.tally
    table = summary_table(statuses, tally.selected)
    for _, backend_name in outdated_records(run, statuses):
        row = table.setdefault(backend_name, {})
        row[Status.OUTDATED.value] = row.get(Status.OUTDATED.value, 0) + 1
    if run.ahead is not None and run.ahead.problem:
        terminalreporter.write_line(
            f"ahead: the helper process {run.ahead.problem}; this process did its work itself", yellow=True
        )
    for lost in tally.lost_workers:
        terminalreporter.write_line(
            f"the statuses of worker {lost} did not reach this process: the counts below leave out every check it ran",
            red=True,
        )
    _say_what_was_rewritten(terminalreporter, config)
    if NARROWED in config.stash:
        for line in config.stash[NARROWED].lines(judged=statuses, verbose=config.getoption("verbose") > 0):
            terminalreporter.write_line(line)
    if not table:
        _say_what_was_lost(terminalreporter, run)
        return
    found = {s for row in table.values() for s in row} - {"selected", "not here"}
    columns = ("selected", *TABLE_STATUSES, *sorted(found - set(TABLE_STATUSES)), "not here")
    order = (NO_BACKEND_NAME, *backends_mod.NAMES)
    terminalreporter.section("verified book")
    rows = sorted(table, key=lambda n: (order.index(n) if n in order else len(order), n))
    total = {c: sum(row.get(c, 0) for row in table.values()) for c in columns}
    for line in table_lines({**table, "all": total}, columns, [*rows, "all"]):
        terminalreporter.write_line(line)
    for line in wrapped(
        "The table counts checks, one per claim and backend; the figures line below counts "
        "each printed figure once, in the status it has on this machine."
    ):
        terminalreporter.write_line(line)
    for column in columns:
        for line in wrapped(f"{column}: {LEGEND.get(column, 'a status the results schema names')}", "  "):
            terminalreporter.write_line(line)
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
    _say_what_was_lost(terminalreporter, run)


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    """A stale figure the run rewrote and judged again is reported as rewritten, not failed."""
    if report.when == "call" and getattr(report, "rewritten", None):
        return "rewritten", "R", f"REWRITTEN to {report.rewritten}"
    return None


def _say_what_was_rewritten(terminalreporter: Any, config: pytest.Config) -> None:
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


def _say_what_was_lost(terminalreporter: Any, run: Session) -> None:
    """The run's last lines: records it could not keep, and what its environment lost."""
    if run.unkept:
        terminalreporter.write_line(f"results NOT kept: {run.unkept}", red=True)
    for broken in run.broken():
        terminalreporter.write_line(broken.line(), red=True)


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


#: the name under which hypothesis's pytest plugin registers itself (hypothesis's `pytest11` entry point)
HYPOTHESIS_PLUGIN = "hypothesispytest"


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Exempt what is alive once collection is done (the libraries, the book, the items) from
    the garbage collector's later passes, which would otherwise walk those hundreds of
    thousands of objects each time: with torch and transformers loaded a full collection
    costs about a third of a second, and afterwards only what the tests made since is walked.
    Objects made by the tests themselves are collected as usual."""
    gc.freeze()
    _release_idle_hypothesis_plugin(session.config)


def _release_idle_hypothesis_plugin(config: pytest.Config) -> None:
    """Unregister hypothesis's pytest plugin where no collected test can use it.

    Where hypothesis is installed (the engine's own tests use it), its plugin imports all of
    hypothesis at the end of every run to report statistics and observations: about a third of a
    second on each check of a page, which imports nothing of hypothesis. A run whose collected
    modules never imported hypothesis has no hypothesis test, so that work reports nothing."""
    if "hypothesis" in sys.modules:
        return
    plugin = config.pluginmanager.get_plugin(HYPOTHESIS_PLUGIN)
    if plugin is not None:
        config.pluginmanager.unregister(plugin)
