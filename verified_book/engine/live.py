"""A book kept warm: every value computed once, then only what a saved file invalidates computed again.

`verified-book serve` holds one `Live`. It opens the book once (a `Session`: the libraries imported, the
machine identified), computes every (claim, backend) that is not measured and keeps, beside each value,
the record a run would write of it and its claim's metadata: the claim's code fingerprint, every input
it read (file, key, value; a snippet's printed figure with the snippet's hash), the version of its
library and of the others it computed with. What must be computed again after an edit is then what
`provenance.outdated_reason` says of those records, the rule `--changed` and the site ask as well:

- a page: its figures are judged again against the values held; no claim runs;
- a claim module: the topics are imported again, and the values whose claim's fingerprint changed (its
  code, or a helper's it calls) are computed again, on every backend present;
- a data file: the values that read a key of it whose value is not the same now;
- a library upgraded on disk: the values computed with it; the process must start again to import the
  new version (a library cannot be imported twice in one process);
- a snippet: the values read from what it printed; the pages that show it render its code again, and
  it is not run here (its output blocks are checked where pytest runs it);
- a page added or removed: the site is built whole again;
- a measured claim runs only when asked: one the rule names is held back until then, and one whose
  value was read from a saved snippet is not held meanwhile (the value printed before is gone).

A value that failed holds no inputs to go by: it is computed again at any data file saved, which may be
its mend. The records go to this machine's results file, merged as a run merges them.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import importlib
import importlib.metadata
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TypeVar

from verified_book.authoring import inputs
from verified_book.authoring.registry import REGISTRY, Claim
from verified_book.book.bindings import AllowListError, Binding, Page, read_allowlist, read_page, unknown_claim
from verified_book.engine import footprints, snippet_figures
from verified_book.engine.check import judge
from verified_book.engine.checkout import commit_of
from verified_book.engine.config import BookConfig, OpenBook, open_book
from verified_book.engine.held_values import NO_VALUE, Held, HeldValues
from verified_book.engine.live_report import Report, Saved
from verified_book.engine.long_lived import let_go
from verified_book.engine.machine import VERSIONED
from verified_book.engine.outcome import Outcome
from verified_book.engine.provenance import VersionsNow, changed_snippet, outdated_reason
from verified_book.errors import Problem
from verified_book.records import store as store_mod
from verified_book.records.footprints import Footprints
from verified_book.records.record import Check, SnippetInput
from verified_book.records.results import ResultsFile, keep_unsaved, merge_into
from verified_book.vocabulary import NO_BACKEND_NAME, Kind, Shown, Status, worst

Key = Check
T = TypeVar("T")


@dataclass
class Invalidated:
    """What the rule says must be computed again: the values held to compute now, the measured ones held
    back until asked for, why each, the claims new to the book and those gone from it."""

    recompute: set[Key] = field(default_factory=set)
    held_back: set[Key] = field(default_factory=set)
    why: dict[Key, str] = field(default_factory=dict)
    new: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)


def in_book(method: Callable[..., T]) -> Callable[..., T]:
    """Run a method of `Live` with its book open, whichever thread calls it (serve's, livereload's build
    thread, a test's); a reload of the topics inside it opens the fresh book for the rest of the call."""

    @functools.wraps(method)
    def run(self: Live, *args: Any, **kwargs: Any) -> T:
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.opened_book.opened())
            outer, self._opening = self._opening, stack
            try:
                return method(self, *args, **kwargs)
            finally:
                self._opening = outer

    return run


class Live:
    """One warm verification of a book: the session, every value computed, and the record of each."""

    def __init__(self, book: BookConfig, *, measured: bool = False, machine_info: Any = None) -> None:
        from verified_book.engine.session import Session

        self.book = book
        self._opening: contextlib.ExitStack | None = None  # the open book of the call under way (`in_book`)
        self.session = Session(book, machine_info=machine_info)
        self.measured = measured
        self.held = HeldValues()
        self.evaluated: list[Key] = []  # every (claim, backend) computed, in order: what a change cost
        self.results_path = self.session.results_path
        self.merged: ResultsFile | None = None
        self.commit = commit_of(book.root, (self.session.results_dir, book.results))
        self._own: dict[Path, tuple[int, int]] = {}  # files this process wrote, as it left them
        self._writer: threading.Thread | None = None  # writing the last change's records, while its page shows
        self.unkept: str | None = None  # why the last records written were not kept, where they were not
        self.topic_errors: list[Problem] = list(self.session.load_errors)  # since the topics were last loaded
        self._topics_roots = sorted({t.split(".")[0] for t in book.topics})
        self._asked_with: VersionsNow | None = None  # the versions the rule last judged every value held with
        self.looked_at = self.session.opened_at  # a file saved since may not be what the values held were read from
        self.files = self.scan()

    @property
    def opened_book(self) -> OpenBook:
        """The book as last loaded: a reload of the topics opens a fresh one (a new registry)."""
        return self.session.opened_book

    @contextlib.contextmanager
    def opened(self) -> Iterator[OpenBook]:
        """The book current for the block, for a door that works with it beside these methods (a site render)."""
        with self.opened_book.opened() as book:
            yield book

    # -- what is on disk

    def watched(self) -> list[Path]:
        """The folders and files a change in which the preview answers."""
        roots = [self.book.pages, self.book.data, self.book.root / "mkdocs.yml", self.book.results, self.book.snippets]
        roots += [] if self.book.allowlist.is_relative_to(self.book.pages) else [self.book.allowlist]
        roots += [self.book.root / name for name in self._topics_roots]
        if self.book.local_results:
            roots.append(self.book.local_results)
        return [p for p in roots if p.exists() or p in (self.book.local_results, self.book.allowlist)]

    def scan(self) -> dict[Path, tuple[int, int]]:
        """Every watched file with its modification time and size."""
        out: dict[Path, tuple[int, int]] = {}
        for root in self.watched():
            paths = [root] if root.is_file() else (root.rglob("*") if root.is_dir() else [])
            for path in paths:
                if "__pycache__" in path.parts or path.name.startswith(".") or path.suffix in (".lock", ".tmp"):
                    continue
                try:
                    stat = path.stat()
                except OSError:
                    continue
                if path.is_file():
                    out[path] = (stat.st_mtime_ns, stat.st_size)
        return out

    def changed(self) -> list[Path]:
        """The files saved, made or removed since the last look, less what this process wrote itself."""
        self.written()
        self.looked_at = time.time()
        files = self.scan()
        paths = sorted(p for p in set(files) | set(self.files) if files.get(p) != self.files.get(p))
        self.files = files
        # SQLite removes a store's write-ahead log when it checkpoints it into the store: no change of records
        checkpointed = {p for p in paths if p.name.endswith(f"{store_mod.SUFFIX}-wal") and p not in files}
        return [p for p in paths if not (p in self._own and files.get(p) == self._own[p]) and p not in checkpointed]

    def sort(self, paths: Iterable[Path]) -> Saved:
        """The files of a change by what they are to the book; a file it does not read is left out."""
        paths = list(paths)
        root, pages_dir = self.book.root, self.book.pages
        results_dirs = [d for d in (self.book.results, self.book.local_results) if d is not None]
        return Saved(
            pages=[
                p
                for p in paths
                if p.suffix == ".md"
                and p.is_relative_to(pages_dir)
                and "snippets" not in p.relative_to(pages_dir).parts
            ],
            data=[p for p in paths if p.is_relative_to(self.book.data) and p.suffix in (".toml", ".json")],
            code=[
                p for p in paths if p.suffix == ".py" and any(p.is_relative_to(root / r) for r in self._topics_roots)
            ],
            snippets=[p for p in paths if p.suffix == ".py" and p.is_relative_to(self.book.snippets)],
            results=[
                p
                for p in paths
                if p.suffix in (".json", store_mod.SUFFIX, f"{store_mod.SUFFIX}-wal")
                and any(p.is_relative_to(d) for d in results_dirs)
            ],
            site=[p for p in paths if p.name == "mkdocs.yml"],
            allowlist=[p for p in paths if p == self.book.allowlist],
        )

    # -- the rule

    @staticmethod
    def installed(library: str) -> str | None:
        """A library's version on disk now (its package's metadata), None where it is not installed."""
        try:
            return importlib.metadata.version(library)
        except importlib.metadata.PackageNotFoundError:
            return None

    def on_disk(self) -> dict[str, str | None]:
        """Every versioned library's version on disk now."""
        return {library: self.installed(library) for library in VERSIONED}

    def versions_now(self, on_disk: dict[str, str | None] | None = None) -> VersionsNow:
        """The versions a value computed now would be recorded with: each library as on disk, a backend's as
        its library reported itself when imported, unless another version is on disk now."""
        started = self.session.machine.info
        known: dict[str, str | None] = {NO_BACKEND_NAME: None, **(self.on_disk() if on_disk is None else on_disk)}
        for name, backend in self.session.backends.detected().items():
            library = name.split(":")[0]
            found = known[library] if library in known else self.installed(library)
            known[name] = backend.version if found == started.get(library) else found
        return VersionsNow.of(known)

    def upgraded(self, on_disk: dict[str, str | None] | None = None) -> dict[str, tuple[str | None, str | None]]:
        """The libraries whose version on disk is not the one this process imported: (imported, on disk)."""
        started = self.session.machine.info
        found = self.on_disk() if on_disk is None else on_disk
        return {
            library: (started.get(library), version)
            for library, version in sorted(found.items())
            if version != started.get(library)
        }

    @in_book
    def invalidated(
        self,
        keys: Iterable[Key] | None = None,
        *,
        versions: VersionsNow | None = None,
        measure: bool = False,
        data_saved: bool = False,
        code_loaded: bool = False,
    ) -> Invalidated:
        """What `provenance.outdated_reason` says of the values held (those of `keys`, or all) against the book
        and the libraries as they are now; a value that failed where data was saved since; the measured ones,
        where `measure` asks for them. A claim of the book held nowhere is new where its code was loaded again
        (or, measured, where asked for); a value whose claim is gone is named gone."""
        out = Invalidated()
        versions = self.versions_now() if versions is None else versions
        for key in self.held if keys is None else [k for k in keys if k in self.held]:
            claim_id, backend = key
            claim = REGISTRY.get(claim_id)
            if claim is None:
                out.gone.add(claim_id)
                continue
            held = self.held[key]
            why = outdated_reason(claim, held.meta, held.record, backend, versions)
            if why is None and data_saved and held.record.status in NO_VALUE:
                why = "it failed, and data was saved since"
            measured = claim.kind is Kind.MEASURED
            if why is None and measured and measure:
                why = "measured claims asked for"
            if why is None:
                continue
            (out.held_back if measured and not measure else out.recompute).add(key)
            out.why[key] = why
        if measure or code_loaded:
            held_ids = self.held.claims()
            out.new = {
                c.id for c in REGISTRY if c.id not in held_ids and (measure if c.kind is Kind.MEASURED else code_loaded)
            }
        return out

    # -- computing

    @in_book
    def start(self) -> Report:
        """Compute every (claim, backend) that is not measured (and the measured ones where asked)."""
        report = Report("started")
        for claim in REGISTRY:
            if claim.kind is Kind.MEASURED and not self.measured:
                continue
            self._compute_claim(claim, report)
        self._judge(self.session.book.bindings(), report)
        report.problems += self.unbound({page.file for page in self.session.book.pages})
        self._asked_with = self.versions_now()
        self.write()
        return report

    def _compute_claim(self, claim: Claim, report: Report) -> None:
        for backend in self.session.verifier.backends_for(claim):
            self._compute(claim, backend, report)

    def _compute(self, claim: Claim, backend: Any, report: Report) -> None:
        verifier = self.session.verifier
        key = Check(claim.id, backend.name)
        verifier.forget(key)  # the value held is the one this computes again
        verifier.outcome(claim, backend)
        if not backend.available:
            return
        self.evaluated.append(key)
        report.recomputed.append(key)
        self.held[key] = Held(verifier.record(claim, backend), verifier.claim_meta(claim))

    def _forget(self, claim_id: str) -> None:
        for key in self.held.of_claim(claim_id):
            del self.held[key]
            self.session.verifier.forget(key)

    @in_book
    def status_of(self, binding: Binding) -> tuple[str, list[str]]:
        """A figure's status against the values held, and the lines for what is wrong with it.
        A figure of a claim held nowhere (a measured one not asked for) is `not here` (not computable here)."""
        claim = REGISTRY.get(binding.claim_id)
        if binding.error:
            return Status.FAILED, [f"{binding.where}: figure {binding.text}: {binding.error}"]
        if claim is None:
            said = unknown_claim(binding, REGISTRY.near(binding.claim_id), self.topic_errors)
            return Status.FAILED, [f"{binding.where}: {said}"]
        verifier = self.session.verifier
        outcomes = [verifier.computed(Check(claim.id, b.name)) for b in verifier.backends_for(claim)]
        held: list[Outcome] = [o for o in outcomes if o is not None]
        if not held or binding.printed is None:
            return Shown.NOT_HERE, []
        verdicts = [judge(binding, o, self.session.machine) for o in held]
        status = worst((str(v.status) for v in verdicts if v.status != Status.SKIPPED), default=Status.SKIPPED)
        problems = [v.message.split("\n")[0] for v in verdicts if v.status in (Status.STALE, Status.FAILED)]
        return status, problems

    def _judge(self, bindings: Iterable[Binding], report: Report) -> None:
        for binding in bindings:
            status, problems = self.status_of(binding)
            report.figures[binding] = status
            report.problems += problems
            report.pages.add(binding.file)

    # -- a change

    @in_book
    def look(self, *, measure: bool = False) -> Report:
        """Answer what was saved since the last look: `apply`, unless a library the values held were computed
        with is another version on disk now, which this process cannot import: then a report that says what
        the rule invalidates and that the process must start again."""
        on_disk = self.on_disk()
        upgraded = self.upgraded(on_disk)
        if upgraded:
            decided = self.invalidated(versions=self.versions_now(on_disk))
            if decided.recompute or decided.held_back:
                names = ", ".join(f"{library} {was} -> {now}" for library, (was, now) in upgraded.items())
                return Report(
                    "",
                    restart=f"{names} on disk: {len(decided.why)} (claim, backend) computed on it; starting again",
                    invalidated=decided.why,
                )
        return self.apply(self.changed(), measure=measure, on_disk=on_disk)

    def _said(self, saved: Saved) -> str:
        """The files saved and removed, named (three of each at most), for the report's line."""
        return "; ".join(
            ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "") + f" {verb}"
            for verb, names in (
                ("saved", [self.book.shown(p) for p in saved.answered() if p.exists()]),
                ("removed", [self.book.shown(p) for p in saved.answered() if not p.exists()]),
            )
            if names
        )

    def _read_again(self, saved: Saved, report: Report) -> None:
        """Read again the pages, the allow-list, the data and the claims' code that were saved."""
        for path in saved.pages:
            page = read_page(path, self.book.root) if path.is_file() else None
            self.session.book.replace_page(str(path.relative_to(self.book.root)), page, self.session.verifier.bindings)
        if saved.allowlist:
            self._reread_allowlist(report)
        if saved.data:
            inputs.forget_read()  # the data read again from disk
        if saved.code:
            self._reload_topics()

    def _snippets_saved(self, saved: Saved, report: Report) -> frozenset[str]:
        """The saved snippets' names; their pages shown again, and said to be checked by pytest, not here."""
        snippet_names = frozenset(self.book.shown(p) for p in saved.snippets)
        if saved.snippets:
            snippet_figures.forget_runs()  # the next measure runs the snippet as it is now
            report.pages |= self._showing(saved.snippets)
            report.snippets = set(snippet_names)
            report.problems += [
                f"{name}: serve does not run snippets; `pytest {name}` runs it and checks its output blocks"
                for name in sorted(snippet_names)
            ]
        return snippet_names

    def _data_saved(self, saved: Saved, report: Report) -> frozenset[str]:
        """The saved data files, relative to the data folder; a saved `source` that states another number than
        its `value` is reported, as a run's load check says."""
        data_rel = frozenset(str(p.relative_to(self.book.data)) for p in saved.data)
        if saved.data:
            report.problems += [str(p) for p in inputs.source_disagreements(sorted(data_rel))]
        return data_rel

    @in_book
    def apply(
        self, paths: Iterable[Path], *, measure: bool = False, on_disk: dict[str, str | None] | None = None
    ) -> Report:
        """Answer the files saved: read them again, compute again what the rule invalidates, judge the figures
        it touches and those of the pages saved, write the records."""
        saved = self.sort(paths)
        root = self.book.root
        said = self._said(saved)
        report = Report("measured claims asked for" + (f"; {said}" if said else "") if measure else said)
        if not (saved.pages or saved.data or saved.code or saved.snippets or saved.allowlist or measure):
            report.rebuild = bool(saved.results or saved.site)
            if report.rebuild:
                report.what += ": the site built again"
            return report
        verifier = self.session.verifier
        saved_pages = {str(p.relative_to(root)) for p in saved.pages}  # relative to the book's root, as a page's
        had = {page.file for page in self.session.book.pages}
        # a page added or removed changes the site's files and nav: MkDocs builds it whole again
        report.rebuild = any((str(p.relative_to(root)) in had) != p.is_file() for p in saved.pages)
        self._read_again(saved, report)
        snippet_names = self._snippets_saved(saved, report)
        data_rel = self._data_saved(saved, report)
        versions = self.versions_now(on_disk)
        everything = saved.code or measure or versions != self._asked_with
        self._asked_with = versions
        decided = self.invalidated(
            None if everything else self.held.reading(data_rel, snippet_names),
            versions=versions,
            measure=measure,
            data_saved=bool(saved.data),
            code_loaded=bool(saved.code),
        )
        for claim_id in decided.gone:
            self._forget(claim_id)
        # a value read from what a saved snippet printed before is not kept until measured again: not here
        printed_before = {
            key[0]
            for key in decided.held_back
            if any(isinstance(e, SnippetInput) and changed_snippet(e) for e in self.held[key].record.inputs or ())
        }
        for claim_id in printed_before:
            self._forget(claim_id)
        again = {k[0] for k in decided.recompute}
        for claim in [REGISTRY[c] for c in sorted(again | decided.new) if c in REGISTRY]:
            if claim.id in again:
                for backend in verifier.backends_for(claim):
                    if (claim.id, backend.name) in decided.recompute:
                        self._compute(claim, backend, report)
            else:
                self._compute_claim(claim, report)
        if saved.code:  # the values kept were computed by claims that are now new objects of the same code
            verifier.renew_claims()
        report.held_back = len(decided.held_back)
        report.invalidated = dict(decided.why)
        touched = {c for c, _ in report.recomputed} | decided.gone | printed_before
        bindings = [b for b in self.session.book.bindings() if b.claim_id in touched or b.file in saved_pages]
        self._judge(bindings, report)
        report.pages |= saved_pages
        if saved.pages or saved.allowlist:  # what `every number is bound` would say of them now
            kept = {str(p.relative_to(root)) for p in saved.pages if p.is_file()}
            report.problems += self.unbound(
                {page.file for page in self.session.book.pages} if saved.allowlist else kept
            )
        claims = {b.claim_id for b in bindings} | {c for c, _ in report.recomputed}
        self.write([key for key in verifier.judged if key[0] in claims], wait=False)
        return report

    @in_book
    def unbound(self, pages: set[str]) -> list[str]:
        """Each number of `pages` bound to no claim and excused by no allow-list entry, and what is wrong with the
        allow-list there or as a whole: the lines `every number is bound` fails with."""
        book, shown = self.session.book, self.book.shown(self.book.allowlist)
        lines = [line for page in sorted(pages) for line in book.unbound_lines(page, shown)]
        return lines + [message for page, message in book.allowlist_problems(shown) if page is None or page in pages]

    def _reread_allowlist(self, report: Report) -> None:
        """The allow-list as saved. One that does not read is said, and the one read last stands meanwhile:
        without any, every number it excuses would be listed as unbound, burying the one line that matters."""
        shown = self.book.shown(self.book.allowlist)
        try:
            self.session.book.allowlist[:] = read_allowlist(self.book.allowlist, shown)
        except AllowListError as e:
            report.problems.append(f"{e.problem or e} (the allow-list as last read stands until this one reads)")
        except (OSError, UnicodeDecodeError) as e:
            report.problems.append(f"{shown}: cannot be read: {e} (the allow-list as last read stands meanwhile)")

    def _showing(self, snippets: list[Path]) -> set[str]:
        """The pages (relative to the book's root) that show a snippet's output. The pages that include its code
        are the site's to find (`Report.snippets`): the include is the site generator's."""
        return {b.file for path in snippets for b in self.session.output_blocks.of_snippet(path.name)}

    def page(self, rel: str) -> Page | None:
        """The page (relative to the book's root) as it was last read."""
        return next((p for p in self.session.book.pages if p.file == rel), None)

    def _reload_topics(self) -> None:
        """Import the book's claim packages again from disk, into a fresh open book (a new registry), which is
        the current book for the rest of the call and the session's from now on; the old claims let go first."""
        let_go()  # frozen since start (`long_lived`), they would never be collected
        for name in [m for m in sys.modules if m.split(".")[0] in self._topics_roots]:
            del sys.modules[name]
        importlib.invalidate_caches()
        book = open_book(self.book)
        self.session.opened_book = book
        if self._opening is not None:
            self._opening.enter_context(book.opened())
        self.topic_errors = book.load_errors
        for line in self.topic_errors:
            print(f"verified-book serve: {line}", flush=True)

    # -- the records

    @in_book
    def write(self, keys: Iterable[Key] | None = None, *, wait: bool = True) -> None:
        """This machine's records of the values held (those of `keys`, or all), merged into its results file
        as a run merges them. With `wait` false the file is written by a thread while the page is shown:
        `merged` holds the records at once, and the next look at the disk (`changed`) waits for the file."""
        self.written()
        session = self.session
        update = session.records(keys, commit=self.commit)  # the run's one header, as pytest writes it
        sources = footprints.to_keep(self.results_path, update, REGISTRY, self.book.root, self.looked_at)
        if self.merged is None:
            self._merge(update, sources)
            return
        self.merged.merge(copy.deepcopy(update))  # what the file will hold, for the page shown now
        if wait:
            self._merge(update, sources)
            return
        self._writer = threading.Thread(  # in the book's context, as every thread serve starts
            target=contextvars.copy_context().run,
            args=(self._merge, update, sources),
            name="verified-book-serve-records",
        )
        self._writer.start()

    def _merge(self, update: ResultsFile, sources: Footprints | None = None) -> None:
        """`update` merged into the history, each record with its footprint from `sources` (as a run writes them);
        `merged` is what the history holds now. A store's merge writes only the rows of `update`, merged in memory
        too: the store is read whole only the first time, or where its merge said something (a bad row set aside,
        records taken in) that the records in memory do not know of."""
        path, said = self.results_path, list[str]()
        try:
            merged = merge_into(path, update, warn=said.append, footprints=sources)
        except Exception as e:  # noqa: BLE001 - the preview goes on, and says where the records were kept
            kept = keep_unsaved(self.results_path, update, e)
            self.unkept = kept.words
            print(f"verified-book serve: {kept.line}", file=sys.stderr, flush=True)
            return
        for line in said:
            print(f"verified-book serve: {line}", file=sys.stderr, flush=True)
        if not store_mod.is_store(path):
            self.merged = merged
        elif self.merged is None or said:
            self.merged = store_mod.Store(path).read()
        for written in (path, Path(f"{path}-wal")):
            with contextlib.suppress(OSError):
                stat = written.stat()
                self._own[written] = (stat.st_mtime_ns, stat.st_size)

    def written(self) -> None:
        """Wait until the records of the last change are in the results file."""
        if self._writer is not None:
            self._writer.join()
            self._writer = None
