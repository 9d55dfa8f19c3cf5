"""pytest wiring: options, collection of the book's figures, markers, the summary, the results file.

The work lives in `verified_book.check`, `verified_book.bindings`, `verified_book.results`; this module only
connects them to pytest.
"""
from __future__ import annotations

import contextlib
import gc
from collections import Counter
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pytest

from verified_book import ahead as ahead_mod
from verified_book import backends as backends_mod
from verified_book import conditions as conditions_mod
from verified_book import hookspecs
from verified_book import identity as identity_mod
from verified_book import machine as machine_mod
from verified_book import offline
from verified_book import environment
from verified_book.bindings import AllowListError, Binding, Book, Page, book_pages, read_allowlist, read_page
from verified_book.check import BROKEN, FAILED, SKIPPED, Verifier
from verified_book.vocabulary import FIGURE_COUNTS, KIND_MEANINGS, MEANINGS, NOT_HERE, Status, worst
from verified_book.provenance import commit_of, outdated_reason
from verified_book.config import FILE_NAME, BookConfig, ConfigError, open_book, read_config, snapshot
from verified_book.registry import REGISTRY, Claim, Kind, is_measured
from verified_book.record import SnippetOutput
from verified_book.results import ResultsError, ResultsFile, dumps, merge_into, now
from verified_book.rewrite import rewrite_stale
from verified_book.snippet_figures import book_outputs
from verified_book.snippet_output import BookOutputs, check_snippet
from verified_book.snippet_run import SnippetRun, run_as_script, shared_run

STATE = pytest.StashKey["RunState"]()
LOCK = pytest.StashKey[conditions_mod.RunLock]()
REOPEN = pytest.StashKey[Callable[[], None]]()


class RunState:
    """What one pytest run knows: the book, the claims, the backends, the machine."""

    def __init__(self, config: pytest.Config, book: BookConfig) -> None:
        self.book_config = book
        self.root = book.root
        self.book_dir = book.pages
        self.snippets_dir = book.snippets
        self.results_dir = Path(config.getoption("claims_results_dir") or book.writes_to)
        ahead = self._start_ahead(config)  # first: the helper imports what it needs while this process does
        self.load_errors: list[str] = open_book(book)
        self.book = self._read_book() if self.book_dir.is_dir() else Book(self.root, [], [])
        self.bound_figures = sum(1 for _ in self.book.bindings())
        self._allowlist_problems: list[tuple[str | None, str]] | None = None
        self.output_blocks: BookOutputs = book_outputs()
        if ahead is not None:
            self._expect_ahead(ahead)
        info = machine_mod.fingerprint()
        replaced = config.hook.pytest_claims_machine_info(machine_info=info)
        info = replaced if replaced is not None else info
        given = info.pop("slug", None)  # a stand-in machine's (the machine-info hook) names itself
        given_id = info.pop("id", None)
        self.identity_notice: str | None = None
        if given is not None:
            machine_id = given_id or identity_mod.legacy_id(given, info)
            name = config.getoption("claims_machine") or given
        else:
            try:
                kept, self.identity_notice = identity_mod.this_machine(machine_mod.slug_of(info), info)
            except identity_mod.IdentityError as e:
                raise pytest.UsageError(str(e)) from None
            machine_id, name = kept.id, config.getoption("claims_machine") or kept.name
        self.machine = machine_mod.identify(info, name, machine_id)
        self.backends = backends_mod.detect()
        self.verifier = Verifier(REGISTRY, self.book, dict(self.backends), self.machine)
        self.verifier.ahead = ahead
        self.outputs: dict[str, SnippetOutput] = {}
        self.started = time.time()
        self.worker_statuses: dict[tuple[str, str], str] = {}
        self.worker_written: set[str] = set()
        self.lost_workers: list[str] = []  # xdist workers whose statuses never reached the controller, and why
        self.not_here: dict[str, str] = {}  # claim id -> why no backend here computed it
        self.selected: set[tuple[str, str]] = set()  # (claim, backend) pairs this run's items check
        self.figure_statuses: dict[str, str] = {}  # figure item's node id -> its status on this machine
        self.figures_selected: set[str] = set()
        self.written: Path | None = None
        self.merged: ResultsFile | None = None  # the machine's file as this run's merge left it
        self.idled = False  # whether pytest_claims_idle has been called
        self.broken_snippets: dict[str, environment.Broken] = {}  # what the environment lost, as snippets met it
        self.unkept: str | None = None  # why this run's records are not in its results file, and where they are

    def broken(self) -> list[environment.Broken]:
        """What the environment lost during the run, once each: met by claims or by snippets."""
        found = {b.lost: b for b in self.verifier.broken()}
        return list({**found, **self.broken_snippets}.values())

    def _start_ahead(self, config: pytest.Config) -> ahead_mod.Ahead | None:
        """The helper for book.toml's `ahead` work, where this run has a core to spare for it: a plain
        run (xdist's workers share the cores already) that runs its items, on two CPUs or more."""
        plain = not hasattr(config, "workerinput") and not config.getoption("numprocesses", None)
        if not self.book_config.ahead or not plain or config.getoption("claims_no_ahead") or config.option.collectonly \
                or machine_mod.usable_cpus() < 2:
            return None
        return ahead_mod.Ahead(self.root)

    def _expect_ahead(self, ahead: ahead_mod.Ahead) -> None:
        """What this process takes from the helper: the claims book.toml's `ahead` matches, and the
        snippets it names that time nothing; each entry that names nothing usable is a load error."""
        claims, unmatched = ahead_mod.matching(self.book_config.ahead, REGISTRY)
        text = (self.root / FILE_NAME).read_text(encoding="utf-8")

        def problem(entry: str, what: str) -> None:
            line = text[: max(text.find(f'"{entry}"'), 0)].count("\n") + 1
            self.load_errors.append(f"{FILE_NAME}:{line}: [book] ahead names {entry!r}, {what}")

        for pattern in unmatched:
            problem(pattern, "which matches no claim")
        snippets = []
        for path in ahead_mod.snippet_paths(self.book_config.ahead, self.snippets_dir):
            if not path.is_file():
                problem(path.name, f"which is not a snippet in {self.book_config.shown(self.snippets_dir)}")
            elif self.output_blocks.times_the_machine(path.name):
                problem(path.name, "which prints a measured figure: a snippet that times the machine runs alone")
            else:
                snippets.append(path)
        ahead.expect(claims, snippets)

    def done_ahead(self, item: pytest.Item) -> bool:
        """Whether an item's work is the helper's: a claim it computes, a figure of one, a snippet it runs."""
        ahead = self.verifier.ahead
        if ahead is None:
            return False
        if isinstance(item, SnippetItem):
            return item.runner is shared_run and item.path in ahead.snippets
        claim = item.claim if isinstance(item, ClaimItem) else (
            REGISTRY.get(item.binding.claim_id) if isinstance(item, FigureItem) else None)
        return claim is not None and claim.id in ahead.claim_ids

    def _read_book(self) -> Book:
        """The book, page by page: a page that cannot be read is one load error, the others are checked."""
        pages = []
        for path in book_pages(self.book_dir):
            try:
                pages.append(read_page(path, self.root))
            except (OSError, UnicodeDecodeError) as e:
                self.load_errors.append(f"{path.relative_to(self.root)}:1: page cannot be read: {e}")
        try:
            allowlist = read_allowlist(self.book_config.allowlist)
        except (AllowListError, OSError, UnicodeDecodeError) as e:
            self.load_errors.append(str(e))
            allowlist = []
        return Book(self.root, pages, allowlist)

    def allowlist_problems(self) -> list[tuple[str | None, str]]:
        """What is wrong with the book's allow-list, found once for the run: (page or None, message)."""
        if self._allowlist_problems is None:
            self._allowlist_problems = self.book.allowlist_problems(self.book_config.shown(self.book_config.allowlist))
        return self._allowlist_problems

    def statuses(self) -> dict[tuple[str, str], str]:
        """The status of every (claim, backend) judged in this run, on this process or its workers."""
        out = dict(self.worker_statuses)
        for claim_id, backend_name in self.verifier.judged:
            claim = REGISTRY[claim_id]
            backend = self.verifier.backends.get(backend_name) or backends_mod.NO_BACKEND
            status, _ = self.verifier.status(claim, backend)
            key = (claim_id, backend_name)
            out[key] = worst((status, out[key])) if key in out else status
        return out

    def applies_to(self, claim: Claim, backend: str) -> list[str]:
        """Hardware markers of the book's machines on which this (claim, backend) would run."""
        return [marker for marker, profile in machine_mod.profiles().items() if applies_on(claim, backend, profile)]

    def marks(self, claim: Claim, backend: str) -> list[pytest.MarkDecorator]:
        names = {claim.kind.value}
        if claim.kind is Kind.MEASURED:
            names.add("measured")
        if backend == "none":
            names.add("cpu")
        else:
            names.add(self.backends[backend].marker)
        names.update(self.applies_to(claim, backend))
        return [getattr(pytest.mark, n) for n in sorted(names)]

    def runs_alone(self, nodeid: str) -> bool:
        """Whether an item times the machine (a measured claim's case or figure, a snippet run),
        read from its node id, which is all an xdist controller has of it."""
        path = nodeid.split("::", 1)[0]
        if (self.root / path).parent == self.snippets_dir:
            return True
        return is_measured(claim_of_nodeid(nodeid) or "")

    def runs_on_cuda(self, nodeid: str) -> bool:
        """Whether an item computes on a GPU (a claim's case on torch:cuda, torch:rocm, jax:gpu or mlx:gpu,
        or a figure whose claim is computed there), read from its node id: under xdist these share one
        worker, the only one that makes a context on the card."""
        gpus = {name for name, b in self.backends.items() if b.available and backends_mod.on_gpu(name)}
        if not gpus:
            return False
        if any(nodeid.endswith(f"[{name}]") for name in gpus):
            return True
        claim = REGISTRY.get(claim_of_nodeid(nodeid) or "")
        return (claim is not None and FIGURE_NAME.search(nodeid) is not None
                and any(b.name in gpus for b in self.verifier.backends_for(claim)))

    def hardware_skip(self, claim: Claim) -> str | None:
        if claim.hardware and claim.hardware not in self.machine.markers:
            profile = machine_mod.profiles().get(claim.hardware)
            needs = profile.name if profile else claim.hardware
            return f"needs {needs} ({claim.hardware}); this machine is {self.machine.describe()}"
        return None


def applies_on(claim: Claim, backend: str, profile: machine_mod.Profile) -> bool:
    """Whether a (claim, backend) runs on one of the book's machines: a claim about that machine or a
    general one, on a backend its profile lists (or on none at all, the arithmetic kinds)."""
    if claim.hardware not in (None, profile.marker):
        return False
    return backend == backends_mod.NO_BACKEND.name or backend in profile.backends


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
        there = [b for b in wanted if (b == backends_mod.NO_BACKEND.name or claim.runs_on(b)) and applies_on(claim, b, profile)]
        if there:
            for page in printed_on.get(claim.id) or [PLAN_UNPRINTED]:
                plan.setdefault(page, []).append((claim, there))
    return dict(sorted(plan.items(), key=lambda kv: (kv[0] == PLAN_UNPRINTED, kv[0])))


PLAN_UNPRINTED = "not printed"


def plan_lines(marker: str, book: Book) -> list[str]:
    """`--plan MARKER` as it prints: a heading, then each page with its claims and their backends."""
    profiles = machine_mod.profiles()
    if marker not in profiles:
        raise pytest.UsageError(f"--plan {marker}: not one of the book's machines; expected one of {', '.join(profiles)}")
    profile = profiles[marker]
    plan = plan_of(profile, book)
    checks = {(claim.id, b) for entries in plan.values() for claim, backends in entries for b in backends}
    lines = [f"plan for {marker} ({profile.name}, backends {', '.join(profile.backends) or 'none listed'}, from "
             f"{profile.file}): {len(checks)} checks of {len({c for c, _ in checks})} claims; nothing was run"]
    for page, entries in plan.items():
        lines.append(page)
        width = max(len(claim.id) for claim, _ in entries)
        lines += [f"  {claim.id:<{width}}  {', '.join(backends)}" for claim, backends in entries]
    return lines


def _pair_selected(expression: Any, run: RunState, claim: Claim, backend: str, item: pytest.Item) -> bool:
    """Whether `-m`'s expression selects a figure's check on one backend: the item's own marks, with the
    backend, kind and hardware marks of that (claim, backend) alone instead of those of all its backends."""
    from _pytest.mark import MarkMatcher

    family = {*BACKEND_MARKERS, *machine_mod.profiles(), *(k.value for k in Kind), "measured"}
    marks = [m.mark for m in run.marks(claim, backend)] + [m for m in item.iter_markers() if m.name not in family]
    return bool(expression.evaluate(MarkMatcher.from_markers(marks)))


CASE_ID = re.compile(r"::(?P<claim>[a-z0-9_.]+)\[[^\[\]]+\]$")  # book.toml::<claim>[<backend>]
FIGURE_NAME = re.compile(r"\((?P<claim>[a-z0-9_.]+)\)$")  # line N: <printed> (<claim>)


def case_id(claim: Claim, backend: str) -> str:
    return f"{claim.id}[{backend}]"


def figure_name(binding: Binding, twice: bool = False) -> str:
    """A figure's item name: its line, text and claim; with the column where the same figure of the same
    claim stands twice on one line, so that every bound figure is one item and counts once."""
    where = f"line {binding.line}, column {binding.column}" if twice else f"line {binding.line}"
    return f"{where}: {binding.text} ({binding.claim_id})"


def claim_of_nodeid(nodeid: str) -> str | None:
    """The claim a claim item or a book figure checks, from its node id (see `case_id`, `figure_name`)."""
    found = CASE_ID.search(nodeid) or FIGURE_NAME.search(nodeid)
    return found["claim"] if found else None


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("claims", "verified book")
    group.addoption(
        "--rewrite-stale-figures", action="store_true", default=False,
        help="Rewrite every stale figure in the book in place, at its printed precision, from the "
        "value computed in this run. Figures that hold are never touched.",
    )
    group.addoption(
        "--machine", dest="claims_machine", metavar="NAME", default=None,
        help="Record results under this name instead of this machine's own (its identity, "
        "~/.config/verified-book/machine.json); the records still carry this machine's id.",
    )
    group.addoption(
        "--results-dir", dest="claims_results_dir", metavar="DIR", default=None,
        help="Write <machine>.json under DIR instead of the book's local results folder (book.toml's "
        "local_results, else results).",
    )
    group.addoption(
        "--no-results", dest="claims_no_results", action="store_true", default=False,
        help="Verify without writing this machine's results file.",
    )
    group.addoption(
        "--no-ahead", dest="claims_no_ahead", action="store_true", default=False,
        help="Do all the work in this process: book.toml's `ahead` claims and snippets are otherwise done by "
        "a helper process while the run starts, on a machine with two CPUs or more.",
    )
    group.addoption(
        "--beside-other-runs", dest="claims_beside", action="store_true", default=False,
        help="Do not wait for another run of this book that is timing the machine (or for other runs before "
        "timing it): run beside them, and mark the measurements of both runs contended.",
    )
    group.addoption(
        "--plan", dest="claims_plan", metavar="MARKER", default=None,
        help="List what a run on the book's machine MARKER (rtx5080, m4_max, ...) would check, and on which "
        "backend, by the page that prints each claim; run nothing. Works on any machine.",
    )


BACKEND_MARKERS = {
    "cpu": "runs on the CPU (numpy, torch:cpu, mlx:cpu, jax:cpu, or no backend at all)",
    **backends_mod.markers(),  # each registered adapter's: cuda, mps, mlx, jax
}
RUN_MARKERS = {
    "slow": "starts other processes or takes long (a snippet run as a script)",
}


def pytest_configure(config: pytest.Config) -> None:
    """Read the book's `book.toml`, open the book, and declare its markers: kinds, backends and
    one per hardware profile, each from its one definition."""
    try:
        book = read_config(Path(config.rootpath))
    except ConfigError as e:
        raise pytest.UsageError(str(e)) from None
    if book.offline:
        offline.set_hub_offline()
        offline.install()
    config.stash[REOPEN] = snapshot()
    config.stash[STATE] = RunState(config, book)
    if not (config.option.collectonly or config.option.help or config.option.version):
        _take_run_lock(config, book)
    for kind, text in KIND_MEANINGS.items():
        config.addinivalue_line("markers", f"{kind.value}: {text}")
    for name, text in {**BACKEND_MARKERS, **RUN_MARKERS}.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    for marker, profile in machine_mod.profiles().items():
        config.addinivalue_line("markers", f"{marker}: applies on {profile.name}")


def _take_run_lock(config: pytest.Config, book: BookConfig) -> None:
    """Hold the book's run lock for the whole run (see `verified_book.conditions`); an xdist controller,
    which cannot tell when its workers start timing, holds it exclusively from the start."""
    capture = config.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            print(f"verified-book: {line}", file=sys.stderr, flush=True)

    lock = conditions_mod.RunLock(conditions_mod.lock_folder(book.local_results, book.root), say,
                                  beside_others=config.getoption("claims_beside"))
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
    if STATE in config.stash and config.stash[STATE].verifier.ahead is not None:
        config.stash[STATE].verifier.ahead.cancel()
    if STATE in config.stash and config.stash[STATE].book_config.offline:
        offline.uninstall()
    if REOPEN in config.stash:
        config.stash[REOPEN]()


def state(config: pytest.Config) -> RunState:
    return config.stash[STATE]


def pytest_report_header(config: pytest.Config) -> list[str]:
    run = state(config)
    present = ", ".join(f"{b.name} {b.version}" for b in run.backends.values() if b.available)
    absent = "; ".join(f"{b.name}: {b.reason}" for b in run.backends.values() if not b.available)
    lines = [
        f"claims: {len(REGISTRY)} claims, {run.bound_figures} bound figures in {len(run.book.pages)} pages",
        f"machine: {run.machine.describe()}",
        *([f"machine identity: {run.identity_notice}"] if run.identity_notice else []),
        f"backends: {present or 'none'}",
        f"absent: {absent or 'none'}",
    ]
    ahead = run.verifier.ahead
    if ahead is not None:
        done = [f"{n} {what}{'' if n == 1 else 's'} {how}" for n, what, how in
                ((len(ahead.claim_ids), "claim", "computed"), (len(ahead.snippets), "snippet", "run")) if n]
        lines.append(f"ahead: {' and '.join(done) or 'nothing'} by a helper process while this one starts "
                     "(book.toml's ahead; --no-ahead does it all here)")
    dist = config.getoption("dist", "no")
    if dist not in ("no", "load"):
        lines.append(f"measured: under --dist {dist} the timed items run beside other workers' tests, so their "
                     "figures describe a shared machine; plain -n N runs them last and alone")
    return lines


@pytest.fixture
def claims_run(request: pytest.FixtureRequest) -> RunState:
    """The run's engine state: verifier, book, machine, backends."""
    return state(request.config)


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    run = state(parent.config)
    if file_path == run.root / FILE_NAME:
        return ClaimsFile.from_parent(parent, path=file_path)
    if file_path.suffix == ".md" and file_path.is_relative_to(run.book_dir) \
            and "snippets" not in file_path.relative_to(run.book_dir).parts:
        return BookPage.from_parent(parent, path=file_path)
    if file_path.suffix == ".py" and file_path.parent == run.snippets_dir:
        return SnippetFile.from_parent(parent, path=file_path)
    return None


class ClaimsFile(pytest.File):
    """The book's claims, collected from its `book.toml`: one item per claim and backend, and
    one that fails when a topic module does not load."""

    def collect(self) -> Iterator[pytest.Item]:
        run = state(self.config)
        yield TopicsItem.from_parent(self, name="every topic module loads")
        for claim in REGISTRY:
            for backend in run.verifier.backends_for(claim):
                item = ClaimItem.from_parent(self, name=case_id(claim, backend.name), claim=claim, backend=backend)
                for mark in run.marks(claim, backend.name):
                    item.add_marker(mark)
                skip = run.hardware_skip(claim)
                if skip is None and not backend.available:
                    skip = f"{backend.name} is not here: {backend.reason}; this machine has {backends_mod.summary()}"
                if skip:
                    item.add_marker(pytest.mark.skip(reason=skip))
                yield item


class TopicsItem(pytest.Item):
    """A topic module that fails to import, or declares a bad claim, fails here and only here; so does
    an allow-list entry that excuses nothing."""

    def runtest(self) -> None:
        run = state(self.config)
        errors = run.load_errors + [message for page, message in run.allowlist_problems() if page is None]
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

    def runtest(self) -> None:
        check_claim(state(self.config), self.claim, self.backend)

    def reportinfo(self) -> tuple[Path, int, str]:
        return Path(self.claim.source_file), self.claim.source_line - 1, f"claim {self.claim.id} on {self.backend.name}"


class BookPage(pytest.File):
    """A page of the book: one item per bound figure, plus the unbound-number check."""

    def collect(self) -> Iterator[pytest.Item]:
        run = state(self.config)
        rel = str(self.path.relative_to(run.root))
        page = next((p for p in run.book.pages if p.file == rel), None) or Page(rel)
        for binding in page.malformed:
            yield MalformedItem.from_parent(self, name=f"line {binding.line}: malformed", binding=binding)
        seen = Counter((b.line, b.text, b.claim_id) for b in page.bindings)
        for binding in page.bindings:
            claim = REGISTRY.get(binding.claim_id)
            twice = seen[(binding.line, binding.text, binding.claim_id)] > 1
            item = FigureItem.from_parent(self, name=figure_name(binding, twice), binding=binding)
            if claim is not None:
                backends_used = [b.name for b in run.verifier.backends_for(claim)]
                names = set()
                for b in backends_used:
                    names.update(m.name for m in run.marks(claim, b))
                for n in sorted(names):
                    item.add_marker(n)
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

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, BookFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class BookFailure(AssertionError):
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
            near = REGISTRY.near(self.binding.claim_id)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            run.figure_statuses[self.nodeid] = "failed"
            raise BookFailure(f"{self.binding.where}: figure {self.binding.text} binds to unknown claim "
                              f"{self.binding.claim_id!r}{hint}")
        verdicts = run.verifier.judge_everywhere(self.binding, claim)
        judged = [v.status for v in verdicts if v.status != Status.SKIPPED]
        run.figure_statuses[self.nodeid] = worst(judged) if judged else Status.SKIPPED.value
        bad = [v for v in verdicts if v.status in (Status.STALE, Status.FAILED, BROKEN)]
        if bad:
            raise BookFailure("\n".join(v.message for v in bad))
        if not verdicts:
            pytest.skip(f"claim {claim.id} runs on {', '.join(claim.backends or ())}, and none of them is a "
                        f"backend of this run ({', '.join(run.verifier.backends) or 'none selected'})")
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
        lines = [
            f"{u.where}:{u.column}: number {u.text} is bound to no claim: bind it as [{u.text}](claim:...) "
            f"or add it to book/allowlist.toml with a reason\n    {u.context}"
            for u, allowed in run.book.unbound() if u.file == self.page.file and allowed is None
        ]
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
    it sets what a library reads only as it loads, see `verified_book.snippet_run`), as a script in the slow set."""

    def collect(self) -> Iterator[pytest.Item]:
        inside = SnippetItem.from_parent(self, name="runs in this process", runner=shared_run)
        script = SnippetItem.from_parent(self, name="runs as a script", runner=run_as_script)
        script.add_marker(pytest.mark.slow)
        for item in (inside, script):
            # a reader runs a snippet on any machine: `-m <machine>` runs it too, and its output is
            # recorded in that machine's results file beside the claims
            for name in ("cpu", *machine_mod.profiles()):
                item.add_marker(name)
            yield item


class SnippetItem(BookItem):
    """A lab snippet runs as a reader would run it, its output is kept per machine, and what it
    printed is held against each output block of the book that shows it (`verified_book.snippet_output`)."""

    line = 1

    def __init__(self, *, runner: Callable[[Path], SnippetRun], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.runner = runner

    def runtest(self) -> None:
        run = state(self.config)
        ahead = run.verifier.ahead
        done = ahead.snippet(self.path) if ahead is not None and run.done_ahead(self) else None
        done = done or self.runner(self.path)
        broken = environment.broken_in(done.stderr) if done.exit_status != 0 else None
        if broken is not None:  # the snippet was not shown wrong: its output is not recorded
            run.broken_snippets[broken.lost] = broken
            raise BookFailure(f"{self.path.relative_to(run.root)}: not run to its end: {broken.line()}")
        if done.exit_status != 0:
            raise BookFailure(f"{self.path.relative_to(run.root)}: exited {done.exit_status} ({done.how})\n"
                              f"{done.stderr[-3000:]}")
        name = self.path.name
        devices = [b.device for b in run.backends.values() if b.available]
        checks = check_snippet(run.output_blocks, name, done.stdout, done.how, devices)
        run.outputs[name] = SnippetOutput(text=done.stdout, date=now(), seconds=round(done.seconds, 3), how=done.how,
                                          checked=[c.entry() for c in checks])
        if not checks:
            raise BookFailure(f"{self.path.relative_to(run.root)}:1: no output block of the book shows what {name} "
                              f"prints: add one where the book runs it, fenced as ```output {name}")
        stale = [c.message for c in checks if c.status == Status.STALE]
        if stale:
            raise BookFailure("\n".join(stale))


def check_claim(run: RunState, claim: Claim, backend: backends_mod.Backend) -> None:
    """A claim item's check: the claim computes on the backend (figures are judged by their own items)."""
    result = run.verifier.outcome(claim, backend)
    if result.state == SKIPPED:
        pytest.skip(result.message)
    if result.state in (FAILED, BROKEN):
        pytest.fail(f"{claim.source_file}:{claim.source_line}: claim {claim.id} on {backend.name}: {result.message}",
                    pytrace=False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    run = state(session.config)
    if run.lost_workers and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.INTERNAL_ERROR  # a summary without a worker's checks is not a pass
    if session.config.getoption("rewrite_stale_figures"):
        changed = rewrite_stale(run.verifier, run.root)
        if changed:
            reporter = session.config.pluginmanager.get_plugin("terminalreporter")
            if reporter:
                reporter.write_line(f"rewrote {len(changed)} stale figure(s): " + ", ".join(changed))
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller prints the summary from these
        workeroutput["claims_statuses"] = [[c, b, s] for (c, b), s in sorted(run.statuses().items())]
        workeroutput["claims_selected"] = sorted([c, b] for c, b in run.selected)
        workeroutput["claims_figures"] = sorted([n, s] for n, s in run.figure_statuses.items())
        workeroutput["claims_figures_selected"] = sorted(run.figures_selected)
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
        "backends": {b.name: (b.version if b.available else None) for b in run.backends.values()},
    }
    broken = run.broken()
    if broken:  # contribute refuses a run whose environment broke; a later sound run clears it
        header["environment_errors"] = [b.line() for b in broken]
    update = run.verifier.results(run.machine.slug, header, run.outputs, run.not_here)
    path = run.results_dir / f"{run.machine.slug}.json"
    warnings: list[str] = []
    try:
        run.merged = merge_into(path, update, warn=warnings.append)
        run.written = path
        if workeroutput is not None:
            workeroutput["claims_written"] = str(path)
    except (ResultsError, OSError) as e:
        warnings.append(f"results not merged into {path}: {e}")
        kept, aside = _keep_unmerged(path, update)
        warnings.append(kept)
        run.unkept = (f"this run's records could not be written to {path}; they are kept in {aside}" if aside else
                      f"this run's records could not be written to {path}, nor kept anywhere else: they are lost")
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
    CUDA items on one worker, see `verified_book.scheduling`. Other distributions are left as asked."""
    if config.getoption("dist", "load") != "load":
        return None
    from verified_book.scheduling import QuietLastScheduling

    return QuietLastScheduling(config, log, runs_alone=state(config).runs_alone, pinned=state(config).runs_on_cuda)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """On the xdist controller: take in what a worker judged, for one summary of the whole run."""
    run = state(node.config)
    output = getattr(node, "workeroutput", None) or {}
    if error is not None or "claims_statuses" not in output:
        why = str(error).strip().splitlines()[-1] if error is not None and str(error).strip() else "it handed back no statuses"
        run.lost_workers.append(f"{node.gateway.id} ({why})")
    for claim_id, backend_name, status in output.get("claims_statuses", []):
        key = (claim_id, backend_name)
        run.worker_statuses[key] = worst((status, run.worker_statuses[key])) if key in run.worker_statuses else status
    run.selected.update((c, b) for c, b in output.get("claims_selected", []))
    for nodeid, status in output.get("claims_figures", []):
        run.figure_statuses[nodeid] = status
    run.figures_selected.update(output.get("claims_figures_selected", []))
    if output.get("claims_written"):
        run.worker_written.add(output["claims_written"])


# The statuses the summary counts, in the order of its columns (the vocabulary's); a status a run
# meets that is not here gets a column after them.
TABLE_STATUSES = tuple(s.value for s in Status)
LEGEND = {
    "selected": "claim × backend checks this run selected (by path, -k or -m)",
    **{s.value: MEANINGS[s.value] for s in Status},
    "outdated": "records in this machine's results file, not rerun now, computed from an older claim or input",
    "skipped": "run here but not applicable on this backend (reasons: pytest -rs)",
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
    markexpr = config.getoption("markexpr", "") or ""
    expression = None
    if markexpr:
        from _pytest.mark.expression import Expression

        expression = Expression.compile(markexpr)
    for item in items:
        if isinstance(item, ClaimItem):
            run.selected.add((item.claim.id, item.backend.name))
        elif isinstance(item, FigureItem):
            run.figures_selected.add(item.nodeid)
            claim = REGISTRY.get(item.binding.claim_id)
            if claim is not None:
                run.selected.update((claim.id, b.name) for b in run.verifier.backends_for(claim)
                                    if expression is None or _pair_selected(expression, run, claim, b.name, item))
    if expression is not None and hardware_in(markexpr) and run.selected:
        # `-m <machine>` runs what applies there and nothing else; another expression (`-m slow`) selects
        # tests, whose claims still compute on every backend here
        used = {b for _, b in run.selected}
        run.verifier.backends = {name: b for name, b in run.verifier.backends.items() if name in used}
    ahead = run.verifier.ahead
    if ahead is None:
        return
    # the helper's work comes after everything else untimed, and the timed items last, alone
    tier = {item: 1 if run.done_ahead(item) else 2 if run.runs_alone(item.nodeid) else 0 for item in items}
    if 1 not in tier.values():
        ahead.cancel()  # nothing selected needs the helper: it stops, and no timed item waits for it
        run.verifier.ahead = None
        return
    items.sort(key=tier.__getitem__)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A timed item has the machine to itself: it waits until the helper working ahead has exited, and
    until no other run of this book is going on (`verified_book.conditions`)."""
    run = state(item.config)
    ahead = run.verifier.ahead
    timed = run.runs_alone(item.nodeid)
    if ahead is not None and ahead.running:
        ours = run.done_ahead(item)
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


def summary_table(statuses: dict[tuple[str, str], str],
                  selected: set[tuple[str, str]] | None = None) -> dict[str, dict[str, int]]:
    """Counts by backend: each status judged, and (given the selection) `selected` and `not here`."""
    table: dict[str, dict[str, int]] = {}
    for (_, backend_name), status in statuses.items():
        row = table.setdefault(backend_name, {})
        row[status] = row.get(status, 0) + 1
    for key in selected or ():
        row = table.setdefault(key[1], {})
        row["selected"] = row.get("selected", 0) + 1
        if key not in statuses:
            row["not here"] = row.get("not here", 0) + 1
    return table


def outdated_records(run: RunState, judged: Mapping[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """Records in this machine's results file that this run did not redo and that no longer match the
    book (the claim's code or an input changed since), each with why: a rerun of them clears it."""
    results = run.merged
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


def hardware_in(markexpr: str) -> list[str]:
    """The hardware markers a `-m` expression names, in the order it names them."""
    known = machine_mod.profiles()
    return list(dict.fromkeys(w for w in re.findall(r"[A-Za-z0-9_]+", markexpr or "") if w in known))


def figure_counts(figure_statuses: dict[str, str], selected: set[str]) -> dict[str, int]:
    """Figures by their status on this machine, each selected figure once; `not here` for those that no
    backend here computed."""
    counts: dict[str, int] = {}
    for nodeid in selected | set(figure_statuses):
        status = figure_statuses.get(nodeid, Status.SKIPPED.value)
        status = NOT_HERE if status == Status.SKIPPED else status
        counts[status] = counts.get(status, 0) + 1
    return counts


def figure_line(counts: Mapping[str, int], bound: int) -> str:
    """What the run found of the book's printed figures, each counted once in one status, the parts
    adding up to the figures the run selected; the summary and the verdict both print this line."""
    selected = sum(counts.values())
    of = f"all {bound}" if selected == bound else f"{selected} of the book's {bound}"
    parts = [f"{counts.get(s, 0)} {s}" for s in FIGURE_COUNTS if s not in (BROKEN, NOT_HERE)]
    if counts.get(BROKEN):
        parts.append(f"{counts[BROKEN]} not checked (the environment broke)")
    parts.append(f"{counts.get(NOT_HERE, 0)} not computed on this machine")
    return f"figures ({of} bound figures selected): {', '.join(parts)}"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    run = state(config)
    absent = {name for name, b in run.backends.items() if not b.available}
    statuses = {k: s for k, s in run.statuses().items() if not (s == "skipped" and k[1] in absent)}
    table = summary_table(statuses, run.selected)
    for _, backend_name in outdated_records(run, statuses):
        row = table.setdefault(backend_name, {})
        row[Status.OUTDATED.value] = row.get(Status.OUTDATED.value, 0) + 1
    if run.verifier.ahead is not None and run.verifier.ahead.problem:
        terminalreporter.write_line(f"ahead: the helper process {run.verifier.ahead.problem}; this process did "
                                    "its work itself", yellow=True)
    for lost in run.lost_workers:
        terminalreporter.write_line(f"the statuses of worker {lost} did not reach this process: the counts "
                                    "below leave out every check it ran", red=True)
    if not table:
        _say_what_was_lost(terminalreporter, run)
        return
    found = {s for row in table.values() for s in row} - {"selected", "not here"}
    columns = ("selected", *TABLE_STATUSES, *sorted(found - set(TABLE_STATUSES)), "not here")
    order = ("none", *backends_mod.NAMES)
    width = max(10, *(len(c) + 2 for c in columns))
    terminalreporter.section("verified book")
    terminalreporter.write_line(f"{'backend':<12}" + "".join(f"{c:>{width}}" for c in columns))
    for backend_name in sorted(table, key=lambda n: (order.index(n) if n in order else len(order), n)):
        row = table[backend_name]
        terminalreporter.write_line(f"{backend_name:<12}" + "".join(f"{row.get(c, 0):>{width}}" for c in columns))
    total = {c: sum(row.get(c, 0) for row in table.values()) for c in columns}
    terminalreporter.write_line(f"{'all':<12}" + "".join(f"{total[c]:>{width}}" for c in columns))
    terminalreporter.write_line("The table counts checks, one per claim and backend; the figures line below counts "
                                "each printed figure once, in the status it has on this machine.")
    for column in columns:
        terminalreporter.write_line(f"  {column}: {LEGEND.get(column, 'a status the results schema names')}")
    missed = [key for key in run.selected if key not in statuses]
    for marker in hardware_in(config.getoption("markexpr", "") or ""):
        there = sum(1 for c, b in missed if c in REGISTRY and marker in run.applies_to(REGISTRY[c], b))
        profile = machine_mod.profiles()[marker]
        ran = len(run.selected) - len(missed)
        terminalreporter.write_line(
            f"-m {marker}: {len(run.selected)} checks selected, {ran} ran here; {there} would run on "
            f"{profile.name} and did not run here (this machine is {run.machine.describe()})")
    if run.figure_statuses or run.figures_selected:
        terminalreporter.write_line(figure_line(figure_counts(run.figure_statuses, run.figures_selected),
                                                run.bound_figures))
    written = run.written
    for path in sorted({str(written)} if written else run.worker_written):
        terminalreporter.write_line(f"results: {path} (machine {run.machine.slug})")
    _say_what_was_lost(terminalreporter, run)


def _say_what_was_lost(terminalreporter: Any, run: RunState) -> None:
    """The run's last lines: records it could not keep, and what its environment lost."""
    if run.unkept:
        terminalreporter.write_line(f"results NOT kept: {run.unkept}", red=True)
    for broken in run.broken():
        terminalreporter.write_line(broken.line(), red=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Point a skip at what was skipped (the book's line, the claim's source), not at this module."""
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple) and call.when == "call":
        _, _, reason = report.longrepr
        if isinstance(item, BookItem):
            report.longrepr = (str(item.path), item.line, reason)
        elif isinstance(item, ClaimItem):
            report.longrepr = (item.claim.source_file, item.claim.source_line, reason)
    if report.skipped and isinstance(item, ClaimItem) and isinstance(report.longrepr, tuple):
        state(item.config).not_here.setdefault(item.claim.id, str(report.longrepr[2]).removeprefix("Skipped: "))
    return report


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Exempt what is alive once collection is done (the libraries, the book, the items) from
    the garbage collector's later passes, which would otherwise walk those hundreds of
    thousands of objects each time: with torch and transformers loaded a full collection
    costs about a third of a second, and afterwards only what the tests made since is walked.
    Objects made by the tests themselves are collected as usual."""
    gc.freeze()
