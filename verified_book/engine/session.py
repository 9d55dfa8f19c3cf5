"""One verification of a book: the book opened, the machine, the backends, the verifier and what the run found.

A `Session` knows nothing of pytest. The pytest plugin opens one when its session starts (not for
`--help`, not while it only registers options and markers) and drives it; what a run found is its
`Tally`, the one thing an xdist worker hands its controller.

Nothing here loads an array library before a claim needs it: `Backends` detects a library the first
time one of its backends is asked for, so a run whose selected claims are all arithmetic imports no
torch, mlx or jax, and the machine's fingerprint reads torch's device only where torch can reach one
(see `verified_book.engine.machine.fingerprint`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Iterator, Mapping, Sequence

from verified_book import backends as backends_mod
from verified_book.authoring.registry import REGISTRY, Claim, is_measured
from verified_book.book.bindings import (
    AllowListError,
    Binding,
    Book,
    Page,
    book_pages,
    read_allowlist,
    unknown_claim,
)
from verified_book.book.snippet_output import BookOutputs, check_snippet
from verified_book.engine import environment, footprints, kept_disagreements
from verified_book.engine import machine as machine_mod
from verified_book.engine import selection as selection_mod
from verified_book.engine.check import Verifier
from verified_book.engine.checkout import commit_of
from verified_book.engine.config import FILE_NAME, BookConfig, OpenBook, open_book
from verified_book.engine.kept_pages import read_pages
from verified_book.engine.long_lived import long_lived
from verified_book.engine.premises import premise_problems
from verified_book.engine.snippet_figures import book_outputs, source_hash
from verified_book.engine.snippet_run import SnippetRun
from verified_book.engine.tally import Tally
from verified_book.errors import BookError, Problem
from verified_book.records import identity as identity_mod
from verified_book.records import store as store_mod
from verified_book.records.record import Check, OutputCheck, Record, RunHeader, SnippetOutput
from verified_book.records.results import ResultsError, ResultsFile, keep_unsaved, merge_into, now
from verified_book.vocabulary import (
    NO_BACKEND_NAME,
    Kind,
    Mark,
    OutcomeStatus,
    Shown,
    Status,
    worst,
)


class SessionError(BookError):
    """The session cannot open: this machine's identity cannot be read or kept."""


class Backends(Mapping[str, backends_mod.Backend]):
    """Every backend name (in the order of `backends.NAMES`), each library detected the first time one of
    its backends is asked for: iterating the names or asking `in` loads nothing."""

    def __init__(self, names: Sequence[str] = backends_mod.NAMES) -> None:
        self._names = tuple(names)  # the backends the book declares (book.toml's `backends`), all by default
        self._found: dict[str, backends_mod.Backend] = {}
        self._libraries: set[str] = set()
        self._assumed: dict[str, backends_mod.Backend] = {}  # known from this machine's records, not loaded

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __getitem__(self, name: str) -> backends_mod.Backend:
        if name in self._assumed and name.split(":")[0] not in self._libraries:
            return self._assumed[name]
        return self.live(name)

    def live(self, name: str) -> backends_mod.Backend:
        """The backend as its library finds it now, the library loaded if it was not."""
        if name not in self._names:
            raise KeyError(name)
        library = name.split(":")[0]
        if library not in self._libraries:
            self._libraries.add(library)
            self._found.update({b.name: b for b in backends_mod.ADAPTERS[library].detect()})
        return self._found[name]

    def assume(self, recorded: Mapping[str, backends_mod.Backend]) -> None:
        """Take backends as this machine's records found them (`engine.recorded.assumed_backends`), so that
        asking for one loads no library; a check that must compute on one loads it (`live`)."""
        self._assumed.update({name: b for name, b in recorded.items() if name in self._names})

    def detected(self) -> dict[str, backends_mod.Backend]:
        """The backends of the libraries detected so far, in the order of NAMES."""
        return {name: self._found[name] for name in self._names if name in self._found}

    def known(self) -> dict[str, backends_mod.Backend]:
        """The backends detected so far or known from this machine's records, in the order of NAMES."""
        return {name: self[name] for name in self._names if name in self._found or name in self._assumed}

    def undetected(self) -> list[str]:
        """The backend names whose library this run has not loaded."""
        return [name for name in self._names if name not in self._found]


@dataclass(frozen=True)
class Judgement:
    """What the session found of one item's check: its status here, and the failure or the reason for a
    skip, each already worded as the reader sees it (None where there is none)."""

    status: Mark
    failure: str | None = None
    skip: str | None = None


MachineInfoHook = Callable[[dict[str, Any]], "dict[str, Any] | None"]


class Session:
    """What one verification knows: the book, the claims, the backends, the machine."""

    @long_lived
    def __init__(
        self,
        book: BookConfig,
        *,
        results_dir: Path | None = None,
        machine_name: str | None = None,
        machine_info: MachineInfoHook | None = None,
    ) -> None:
        self.opened_at = time.time()  # a page, data file or snippet saved since may not be what the run read
        self.book_config = book
        self.root = book.root
        self.book_dir = book.pages
        self.snippets_dir = book.snippets
        self.results_dir = Path(results_dir or book.writes_to)
        self.opened_book: OpenBook = open_book(book)  # the door enters `opened_book.opened()` for the run
        with self.opened_book.opened():
            self.load_errors: list[Problem] = self.opened_book.load_errors + kept_disagreements.source_disagreements(
                self.root
            )
            self.book = self.read_book()
            self.load_errors += premise_problems(REGISTRY, self.book.bindings())
            self.bound_figures = sum(1 for _ in self.book.bindings())
            self._allowlist_problems: list[tuple[str | None, str]] | None = None
            self.output_blocks: BookOutputs = book_outputs()
            info = machine_mod.fingerprint()
            replaced = machine_info(info) if machine_info is not None else None
            info = replaced if replaced is not None else info
            given = info.pop("slug", None)  # a stand-in machine's (the machine-info hook) names itself
            given_id = info.pop("id", None)
            self.identity_notice: str | None = None
            if given is not None:
                machine_id = given_id or identity_mod.legacy_id(given, info)
                name = machine_name or given
            else:
                try:
                    kept, self.identity_notice = identity_mod.this_machine(machine_mod.slug_of(info), info)
                except identity_mod.IdentityError as e:
                    raise SessionError(str(e)) from None
                machine_id, name = kept.id, machine_name or kept.name
            self.machine = machine_mod.identify(info, name, machine_id)
            try:
                self.backends = Backends(backends_mod.declared(book.backends))
            except ValueError as e:
                raise SessionError(f"{book.root / 'book.toml'}: [book] backends: {e}") from None
            self.verifier = Verifier(REGISTRY, self.book, self.backends, self.machine)
        self.outputs: dict[str, SnippetOutput] = {}
        self.started = time.time()
        self.tally = Tally()
        self.written: Path | None = None
        self._merged: ResultsFile | None = None  # the machine's history as this run's merge left it
        #: the history as the run found it, by the claims read (None: all), each read once
        self._found: dict[frozenset[str] | None, tuple[ResultsFile | None, str]] = {}
        self._held: tuple[footprints.Unchanged | None] | None = None  # what no edit changed (`held_records`)
        self._judged_from: frozenset[str] | None = None  # the claims read for a selection, the others held
        self._current: dict[Check, Record] = {}  # the records a --changed found current (`narrow`)
        self.history_notices: list[str] = []  # what reading a store's whole history said (a bad row set aside)
        self.broken_snippets: dict[str, environment.Broken] = {}  # what the environment lost, as snippets met it
        self.unkept: str | None = None  # why this run's records are not in its results file, and where they are

    def broken(self) -> list[environment.Broken]:
        """What the environment lost during the run, once each: met by claims or by snippets."""
        found = {b.lost: b for b in self.verifier.broken()}
        return list({**found, **self.broken_snippets}.values())

    def read_book(self) -> Book:
        """The book, page by page: a page that cannot be read is one load error, the others are checked.
        Called when the session opens, and again by whatever rewrote the pages (`--rewrite-stale-figures`)."""
        if not self.book_dir.is_dir():
            return Book(self.root, [], [])
        pages = []
        paths = book_pages(self.book_dir)
        for path, page in zip(paths, read_pages(paths, self.root), strict=True):
            if isinstance(page, Page):
                pages.append(page)
            else:
                self.load_errors.append(Problem(f"{path.relative_to(self.root)}:1", f"page cannot be read: {page}"))
        try:
            allowlist = read_allowlist(self.book_config.allowlist, self.book_config.shown(self.book_config.allowlist))
        except AllowListError as e:
            self.load_errors.append(e.problem or Problem(self.book_config.shown(self.book_config.allowlist), str(e)))
            allowlist = []
        except (OSError, UnicodeDecodeError) as e:
            self.load_errors.append(Problem(self.book_config.shown(self.book_config.allowlist), f"cannot be read: {e}"))
            allowlist = []
        return Book(self.root, pages, allowlist)

    def run_header(self, commit: tuple[str | None, bool | None] | None = None) -> RunHeader:
        """The one header every door writes with its records: when, at which commit (`commit` where the door
        knows it already), on which OS, driver, library versions and backends, and what the environment lost."""
        head, dirty = commit or commit_of(self.root, (self.results_dir, self.book_config.results))
        broken = self.broken()
        return RunHeader(
            date=now(),
            commit=head,
            dirty=dirty,
            os=self.machine.info.get("os"),
            driver=self.machine.info.get("driver"),
            versions={k: self.machine.info.get(k) for k in ("python", *machine_mod.VERSIONED)},
            backends={b.name: (b.version if b.available else None) for b in self.backends.known().values()},
            # contribute refuses a run whose environment broke; a later sound run clears it
            environment_errors=[b.line() for b in broken] if broken else None,
        )

    def records(
        self, only: Iterable[tuple[str, str]] | None = None, commit: tuple[str | None, bool | None] | None = None
    ) -> ResultsFile:
        """What this run judged (the checks in `only`, or all), with the snippets' output and the run header,
        as a results file to merge into this machine's."""
        header = self.run_header(commit).model_dump(mode="json", exclude={"seconds", "dates"})
        return self.verifier.results(self.machine.slug, header, self.outputs, self.tally.not_here, only=only)

    @property
    def results_path(self) -> Path:
        """This machine's own history, where `write_records` merges: its store in the book's local results folder
        (verified_book.records.store), else its results file, the exchange format (in the committed folder of a
        book with no local one, or in the folder --results-dir names)."""
        local = self.book_config.local_results
        if local is not None and self.results_dir.resolve() == local.resolve():
            return store_mod.place(self.results_dir, self.machine.slug)
        return self.results_dir / f"{self.machine.slug}.json"

    def history_found(
        self, claims: Collection[str] | None = None, *, others_held: bool = False
    ) -> tuple[ResultsFile | None, str]:
        """This machine's history as the run found it, as `--changed` and `--reading` select from it (or None and
        why there is none to read); with `claims`, only those claims' records of a store (its header and outputs
        whole). Read once, the first time it is asked for. `others_held`: every record of a claim not read is
        held (`held_records`), so the claims read hold every record the run may find outdated."""
        key = None if claims is None or not store_mod.is_store(self.results_path) else frozenset(claims)
        if key not in self._found:
            self._found[key] = selection_mod.recorded(self.results_path, self.history_notices.append, key)
        if others_held:
            self._judged_from = key
        return self._found[key]

    def selection_before_collection(
        self, *, changed: bool, readings: Sequence[str], whole_book: bool
    ) -> selection_mod.ToCollect | None:
        """Before a run collects: each `--reading` checked (a `selection.ReadingError` says what is wrong with one);
        for `--changed` or `--reading`, the backends taken as this machine's records found them, so collecting
        loads no array library; and for a `--changed` of the whole book (`whole_book`: no paths named) without a
        reading, what it need collect at all (`selection.to_collect`), None where it collects everything."""
        for text in readings:
            selection_mod.checked_reading(text)
        if changed or readings:
            selection_mod.assume_recorded_backends(self.backends, self.history_found(claims=())[0])
        if not (changed and whole_book and not readings):
            return None
        held = self.held_records()
        registry = self.opened_book.registry  # the open book's, asked directly: REGISTRY asks which is open each time
        return None if held is None else selection_mod.to_collect(held, registry, self.verifier, self.book.pages)

    def narrow(
        self, items: list[Any], *, changed: bool, readings: list[str], whole_book: bool
    ) -> tuple[selection_mod.Selection, list[Any], list[Any]]:
        """The selection for `--changed` or `--reading` of the run's book items, and the items kept and those
        deselected (`selection.narrow`, from this machine's history and what of it is held); `whole_book`: the run
        collected what `selection_before_collection` chose. The records the rule found current have their
        footprints written anew when the run writes its records (`footprint_again`)."""
        selection, kept, dropped = selection_mod.narrow(
            items,
            changed=changed,
            readings=readings,
            history=self.history_found,
            held=self.held_records() if changed else None,
            whole_book=whole_book,
            registry=self.opened_book.registry,
            verifier=self.verifier,
            outputs=self.output_blocks,
        )
        self._current = dict(selection.current)
        return selection, kept, dropped

    def footprint_again(self) -> int:
        """The footprints of the records a `--changed` read and found current (`narrow`), written anew from the
        sources as they are, so that the next run need not read them: where no footprint held (one written by an
        older engine, or before a library was upgraded), the rule said the record speaks for the book, and its
        footprint now says so. Returns the rows written."""
        current, self._current = self._current, {}
        path = self.results_path
        if not current or not store_mod.is_store(path):
            return 0
        with self.opened_book.opened():
            sources = footprints.of(current, REGISTRY, self.root, self.opened_at)
        return store_mod.Store(path).footprint_again(current, sources)

    def held_records(self) -> footprints.Unchanged | None:
        """The records of this machine's store that no edit since they were written can have changed, with their
        status and date, and the pages that did change (`verified_book.engine.footprints.held`); None where that
        is not known. Asked once, after the backends are assumed from the records."""
        if self._held is None:
            now = {k: v for k, v in self.machine.info.items() if k in machine_mod.VERSIONED}
            now |= {name: b.version for name, b in self.backends.known().items()}
            self._held = (footprints.held(self.results_path, self.root, now, self.verifier.bindings, self.opened_at),)
        return self._held[0]

    def records_left(self, redone: Collection[tuple[str, str]]) -> ResultsFile | None:
        """The records of this machine's history that this run did not redo (`redone`), as its merge left them:
        the history the run found where it read it whole (a merge changes only what it redid), or the claims it
        read for a selection whose other records are held (none of those can be outdated), else a store's rows
        but those, read at their cost (a store's merge writes and returns only what the run touched); a results
        file's merge returned it whole. None before the run wrote any."""
        if self.written is None:
            return None
        if not store_mod.is_store(self.written):
            return self._merged
        partial = self._found.get(self._judged_from) if self._judged_from is not None else None
        for read in (self._found.get(None), partial):
            if read is not None and read[0] is not None:
                return read[0]
        return store_mod.Store(self.written).read_except(redone, self.history_notices.append)

    def write_records(
        self, only: Iterable[tuple[str, str]] | None = None, commit: tuple[str | None, bool | None] | None = None
    ) -> list[str]:
        """Merge this run's records into this machine's results file, never replacing it: a run of a subset keeps
        the other records. A merge the file refuses (another machine's, a newer schema, a folder that cannot be
        written) loses nothing: the records are kept aside (`records.results.keep_unsaved`) and `unkept` says
        where. Returns the lines the reader must be told; a run with nothing judged and no snippet run writes
        nothing."""
        self.footprint_again()
        if not (self.verifier.judged or self.outputs):
            return []
        update = self.records(only, commit)
        path = self.results_path
        warnings: list[str] = []
        try:
            with self.opened_book.opened():
                sources = footprints.to_keep(path, update, REGISTRY, self.root, self.opened_at)
            merged = merge_into(path, update, warn=warnings.append, footprints=sources)
            self._merged = None if store_mod.is_store(path) else merged
            self.written = path
        except (ResultsError, OSError) as e:
            warnings.append(f"results not merged into {path}: {e}")
            kept = keep_unsaved(path, update, e)
            warnings.append(kept.line)
            self.unkept = kept.words
        return warnings

    def check_claim(self, claim: Claim, backend: backends_mod.Backend) -> Judgement:
        """A claim's check on one backend: it computes and its invariants hold (its figures are judged apart)."""
        result = self.verifier.outcome(claim, backend)
        if result.status == OutcomeStatus.SKIPPED:
            self.tally.not_here.setdefault(claim.id, result.message)
            return Judgement(Status.SKIPPED, skip=result.message)
        if result.status in (OutcomeStatus.FAILED, OutcomeStatus.BROKEN):
            message = f"{claim.defined_at}: claim {claim.id} on {backend.name}: {result.message}"
            return Judgement(Status.FAILED, failure=message)
        return Judgement(Status.VERIFIED)

    def judge_figure(self, binding: Binding, key: str) -> Judgement:
        """A printed figure judged on every backend its claim computes on here; its status counted once, under
        `key` (the figure's item), in the run's tally."""
        claim = REGISTRY.get(binding.claim_id)
        if claim is None:
            self.tally.figure_statuses[key] = Status.FAILED
            near = REGISTRY.near(binding.claim_id)
            return Judgement(
                Status.FAILED, failure=f"{binding.where}: {unknown_claim(binding, near, self.load_errors)}"
            )
        verdicts = self.verifier.judge_everywhere(binding, claim)
        judged = [v.status for v in verdicts if v.status != Status.SKIPPED]
        status = worst(judged) if judged else Status.SKIPPED
        self.tally.figure_statuses[key] = status
        bad = [v for v in verdicts if v.status in (Status.STALE, Status.FAILED, Shown.BROKEN_ENVIRONMENT)]
        if bad:
            return Judgement(status, failure="\n".join(v.message for v in bad))
        if not verdicts:
            return Judgement(
                status,
                skip=f"claim {claim.id} runs on {', '.join(claim.backends or ())}, and none of them is a "
                f"backend of this run ({', '.join(self.verifier.backends) or 'none selected'})",
            )
        if all(v.status == Status.SKIPPED for v in verdicts):
            return Judgement(status, skip="; ".join(v.message for v in verdicts))
        return Judgement(status)

    def take_snippet_run(self, path: Path, done: SnippetRun) -> Judgement:
        """A snippet's run, kept as this machine's record of what it printed and held against every output block
        of the book that shows it. A run the environment cut short is not recorded."""
        shown = path.relative_to(self.root)
        broken = environment.broken_in(done.stderr) if done.exit_status != 0 else None
        if broken is not None:  # the snippet was not shown wrong: its output is not recorded
            self.broken_snippets[broken.lost] = broken
            return Judgement(Shown.BROKEN_ENVIRONMENT, failure=f"{shown}: not run to its end: {broken.line()}")
        if done.exit_status != 0:
            return Judgement(
                Status.FAILED,
                failure=f"{shown}: exited {done.exit_status} ({done.how})\n{done.stderr[-3000:]}",
            )
        name = path.name
        devices = [b.device for b in self.backends.values() if b.available]
        checks = check_snippet(self.output_blocks, name, done.stdout, done.how, devices)
        self.outputs[name] = SnippetOutput(
            text=done.stdout,
            date=now(),
            seconds=round(done.seconds, 3),
            how=done.how,
            checked=[
                OutputCheck(file=c.file, line=c.line, status=c.status, message=c.message, sha256=c.sha256)
                for c in checks
            ],
            sha256=source_hash(path),
        )
        if not checks:
            return Judgement(
                Status.FAILED,
                failure=f"{shown}:1: no output block of the book shows what {name} prints: add one where the book "
                f"runs it, fenced as ```output {name}",
            )
        stale = [c.message for c in checks if c.status == Status.STALE]
        if stale:
            return Judgement(Status.STALE, failure="\n".join(stale))
        return Judgement(Status.VERIFIED)

    def allowlist_problems(self) -> list[tuple[str | None, str]]:
        """What is wrong with the book's allow-list, found once for the run: (page or None, message)."""
        if self._allowlist_problems is None:
            self._allowlist_problems = self.book.allowlist_problems(self.book_config.shown(self.book_config.allowlist))
        return self._allowlist_problems

    def statuses(self) -> dict[tuple[str, str], str]:
        """The status of every (claim, backend) judged in this run, on this process or its workers."""
        out = dict(self.tally.statuses)
        for claim_id, backend_name in self.verifier.judged:
            claim = REGISTRY[claim_id]
            backend = self.verifier.backends.get(backend_name) or backends_mod.NO_BACKEND
            status, _ = self.verifier.status(claim, backend)
            key = (claim_id, backend_name)
            out[key] = worst((status, out[key])) if key in out else status
        return out

    def own_tally(self) -> Tally:
        """What this process found, statuses included: what an xdist worker hands back."""
        tally = Tally(**{**self.tally.__dict__})
        tally.statuses = self.statuses()
        tally.written = {str(self.written)} if self.written else set()
        return tally

    def applies_to(self, claim: Claim, backend: str) -> list[str]:
        """Hardware markers of the book's machines on which this (claim, backend) would run."""
        return [marker for marker, profile in machine_mod.profiles().items() if applies_on(claim, backend, profile)]

    def mark_names(self, claim: Claim, backend: str) -> set[str]:
        """The marker names of one (claim, backend): its kind, its backend's, and the machines it applies on."""
        names = {claim.kind.value}
        if claim.kind is Kind.MEASURED:
            names.add("measured")
        if backend == NO_BACKEND_NAME:
            names.add("cpu")
        else:
            library, _, place = backend.partition(":")
            names.add(backends_mod.ADAPTERS[library].marker_for(place or "cpu"))  # the library is not loaded for it
        names.update(self.applies_to(claim, backend))
        return names

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
        gpus = {name for name in self.backends if backends_mod.on_gpu(name) and self.backends[name].available}
        if not gpus:
            return False
        if any(nodeid.endswith(f"[{name}]") for name in gpus):
            return True
        claim = REGISTRY.get(claim_of_nodeid(nodeid) or "")
        return (
            claim is not None
            and FIGURE_NAME.search(nodeid) is not None
            and any(b.name in gpus for b in self.verifier.backends_for(claim))
        )

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


# a claim item, <root>/book.toml::<claim>[<backend>], and a figure item, <page>.md::line N: <printed> (<claim>);
# a parametrized test elsewhere (tests/test_x.py::test_y[z]) is neither
CASE_ID = re.compile(rf"(?:^|/){re.escape(FILE_NAME)}::(?P<claim>[a-z0-9_.]+)\[[^\[\]]+\]$")
FIGURE_NAME = re.compile(r"\.md::line \d+(?:, column \d+)?: .* \((?P<claim>[a-z0-9_.]+)\)$")


def case_id(claim: Claim, backend: str) -> str:
    return f"{claim.id}[{backend}]"


def figure_name(binding: Binding, twice: bool = False) -> str:
    """A figure's item name: its line, text and claim; with the column where the same figure of the same
    claim stands twice on one line, so that every bound figure is one item and counts once."""
    where = f"line {binding.line}, column {binding.column}" if twice else f"line {binding.line}"
    return f"{where}: {binding.text} ({binding.claim_id})"


def figure_keywords(binding: Binding, twice: bool = False) -> list[str]:
    """Words `-k` selects a figure by, free of the spaces and colons of its name: `line_254` (and
    `column_17` where the figure stands twice on its line). Its claim id is in its name already."""
    return [f"line_{binding.line}", *([f"column_{binding.column}"] if twice else [])]


def claim_of_nodeid(nodeid: str) -> str | None:
    """The claim a claim item or a book figure checks, from its node id (see `case_id`, `figure_name`)."""
    found = CASE_ID.search(nodeid) or FIGURE_NAME.search(nodeid)
    return found["claim"] if found else None


def hardware_in(markexpr: str) -> list[str]:
    """The hardware markers a `-m` expression names, in the order it names them."""
    known = machine_mod.profiles()
    return list(dict.fromkeys(w for w in re.findall(r"[A-Za-z0-9_]+", markexpr or "") if w in known))
