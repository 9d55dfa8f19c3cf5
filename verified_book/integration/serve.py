"""`verified-book serve`: a live preview in one warm process, which recomputes only what a saved file changed.

The process opens the book once (a `Session`: the libraries imported, the machine identified),
computes every (claim, backend) that is not measured, and keeps, beside each value, what it was
computed from: the claim's code fingerprint, the data it read (file, key, value) and the version
of the library it ran on. A saved file then costs what it changed:

- a page: its figures are judged again against the values held; no claim runs;
- a claim module: the topics are imported again and exactly the claims whose fingerprint changed
  (their code, or a helper's they call) are recomputed, on every backend present;
- a data file: exactly the claims that read a value of it that is not the same now are recomputed;
- a library upgraded on disk: the claims computed on it are named, and the process starts again
  to import the new version (a library cannot be imported twice in one process);
- a snippet: the pages that show it render its code again; it is not run here (its output blocks are
  checked where pytest runs it), and a measured value read from what it printed is dropped until it
  is measured again, from a new run;
- a page added or removed: the site is built whole again;
- a measured claim runs only when asked (`--measured`, or `m` and Enter at the terminal).

What is recomputed is decided by `plan`, a pure function of what is held and what changed. The
records go to this machine's results file in the local results folder, as a run writes them, and
the site renders them with the same MkDocs plugin as `mkdocs build`; a page whose figures changed
is rendered again alone, and the browser reloads through MkDocs' live-reload server. The terminal
prints one line per change: what changed, how many figures it touched, their statuses, and
file:line for every figure that is stale or failed.
"""

from __future__ import annotations

import argparse
import copy
import errno
import importlib
import importlib.metadata
import ipaddress
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from verified_book.authoring import inputs
from verified_book.authoring.registry import REGISTRY, Claim, Kind
from verified_book.book.bindings import AllowListError, Binding, read_allowlist, read_page, unknown_claim
from verified_book.engine import snippet_figures
from verified_book.engine.check import Outcome, judge
from verified_book.engine.config import BookConfig, open_book
from verified_book.engine.provenance import code_fingerprint, commit_of
from verified_book.errors import Problem
from verified_book.records.results import ResultsFile, merge_into, now, to_json
from verified_book.site.transform import included_paths
from verified_book.vocabulary import OutcomeStatus, Status, worst

Key = tuple[str, str]  # (claim id, backend name)
GONE = object()  # what `plan` is told of a data key that is no longer there


@dataclass(frozen=True)
class Known:
    """What one (claim, backend) value was computed from."""

    code: str  # the claim's code fingerprint (its helpers' code and its declaration included)
    reads: tuple[tuple[str, str, Any], ...] = ()  # every data value it read: (file, key, value as JSON)
    library: str | None = None  # the library of its backend, None for the arithmetic kinds
    version: str | None = None  # that library's version when it ran
    measured: bool = False
    failed: bool = False  # it did not compute: what it would read is not known, so any data saved may mend it
    snippets: tuple[str, ...] = ()  # the snippets (relative to the book's root) whose printed figures it read
    uses: tuple[tuple[str, str | None], ...] = ()  # the other libraries it computed with, and their versions


@dataclass(frozen=True)
class Changes:
    """What was saved since the last look, as `plan` needs it."""

    pages: frozenset[str] = frozenset()  # pages, relative to the book's root: re-judged, never recomputed
    data: frozenset[str] = frozenset()  # data files, relative to the data folder
    codes: Mapping[str, str] | None = None  # every claim's fingerprint now, where a claim module was saved
    versions: Mapping[str, str | None] = field(default_factory=dict)  # libraries whose version on disk changed
    snippets: frozenset[str] = frozenset()  # snippets saved, relative to the book's root
    measure: bool = False  # the author asked for the measured claims


@dataclass
class Plan:
    """What a change recomputes: the (claim, backend) pairs held, the claims new to the book, the claims
    gone from it, the measured ones it would recompute were they asked for, and why each."""

    recompute: set[Key] = field(default_factory=set)
    new: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)
    held_back: set[Key] = field(default_factory=set)
    why: dict[Key, str] = field(default_factory=dict)


def plan(
    known: Mapping[Key, Known], changes: Changes, data_now: Mapping[tuple[str, str], Any], measured: Iterable[str] = ()
) -> Plan:
    """What to recompute for `changes`, given what each held value was computed from.

    `data_now` holds the value each recorded (file, key) of a changed data file has now (`GONE` or
    absent where it has none); `measured` names the claims that measure the machine, which a change
    recomputes only where `changes.measure` asks for them. A page recomputes nothing.
    """
    out = Plan()
    measured = set(measured)

    def due(key: Key, why: str) -> None:
        if known[key].measured and not changes.measure:
            out.held_back.add(key)
        else:
            out.recompute.add(key)
        out.why.setdefault(key, why)

    for key, held in known.items():
        claim_id, backend = key
        if changes.codes is not None:
            if claim_id not in changes.codes:
                out.gone.add(claim_id)
                continue
            if changes.codes[claim_id] != held.code:
                due(key, "its code changed")
        for file, data_key, value in held.reads:
            if file in changes.data and data_now.get((file, data_key), GONE) != value:
                due(key, f"{file} {data_key} changed")
                break
        if (
            held.library is not None
            and held.library in changes.versions
            and changes.versions[held.library] != held.version
        ):
            due(key, f"{held.library} is {changes.versions[held.library]} now, was {held.version}")
        for library, version in held.uses:
            if library in changes.versions and changes.versions[library] != version:
                due(key, f"{library} is {changes.versions[library]} now, was {version}")
        if held.failed and changes.data:
            due(key, "it failed, and data was saved since")
        if saved := changes.snippets & set(held.snippets):
            due(key, f"{', '.join(sorted(saved))} changed")
        if held.measured and changes.measure:
            due(key, "measured claims asked for")
    if changes.codes is not None:
        held_ids = {claim_id for claim_id, _ in known}
        out.new = {c for c in changes.codes if c not in held_ids and (c not in measured or changes.measure)}
    if changes.measure:
        out.new |= measured - {claim_id for claim_id, _ in known} - out.gone
    return out


# ---------------------------------------------------------------------------
# The engine: a warm session and what each value came from


@dataclass
class Report:
    """What one change did, for its terminal line and for tests."""

    what: str
    recomputed: list[Key] = field(default_factory=list)
    figures: dict[Binding, str] = field(default_factory=dict)  # each figure touched and its status here
    problems: list[str] = field(default_factory=list)  # a line each, file:line first
    pages: set[str] = field(default_factory=set)  # pages (relative to the root) whose figures changed
    held_back: int = 0
    rebuild: bool = False  # the whole site, not only `pages` (its config, another run's records, a page added or gone)
    restart: str | None = None  # why the process must start again

    def line(self) -> str:
        counts: dict[str, int] = {}
        for status in self.figures.values():
            counts[status] = counts.get(status, 0) + 1
        claims = sorted({c for c, _ in self.recomputed})
        ran = (
            (
                f"{len(self.recomputed)} (claim, backend) recomputed: "
                + ", ".join(claims[:5])
                + (f" and {len(claims) - 5} more" if len(claims) > 5 else "")
            )
            if self.recomputed
            else "no claim ran"
        )
        shown = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda i: (-i[1], i[0])))
        text = f"{self.what}: {len(self.figures)} figure(s) touched" + (f" ({shown})" if shown else "") + f"; {ran}"
        if self.held_back:
            text += f"; {self.held_back} measured held back (m to measure)"
        return "\n".join([text, *(f"  {p}" for p in self.problems)])


class Engine:
    """One warm verification of a book: the session, every computed value, and what each came from."""

    def __init__(self, book: BookConfig, *, measured: bool = False, machine_info: Any = None) -> None:
        from verified_book.engine.session import Session

        self.book = book
        self.session = Session(book, machine_info=machine_info)
        self.measured = measured
        self.known: dict[Key, Known] = {}
        self.evaluated: list[Key] = []  # every (claim, backend) computed, in order: what a change cost
        self.results_path = self.session.results_dir / f"{self.session.machine.slug}.json"
        self.merged: ResultsFile | None = None
        self.commit = commit_of(book.root, (self.session.results_dir, book.results))
        self._own: dict[Path, tuple[int, int]] = {}  # files this process wrote, as it left them
        self._writer: threading.Thread | None = None  # writing the last change's records, while its page shows
        self.unkept: str | None = None  # why the last records written were not kept, where they were not
        self.topic_errors: list[Problem] = list(self.session.load_errors)  # since the topics were last loaded
        self._topics_roots = sorted({t.split(".")[0] for t in book.topics})
        self.files = self.scan()

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
        files = self.scan()
        paths = sorted(p for p in set(files) | set(self.files) if files.get(p) != self.files.get(p))
        self.files = files
        return [p for p in paths if not (p in self._own and files.get(p) == self._own[p])]

    # -- computing

    def start(self) -> Report:
        """Compute every (claim, backend) that is not measured (and the measured ones where asked)."""
        report = Report("started")
        for claim in REGISTRY:
            if claim.kind is Kind.MEASURED and not self.measured:
                continue
            self._compute_claim(claim, report)
        self._judge_all(report)
        report.problems += self.unbound({page.file for page in self.session.book.pages})
        self.write()
        return report

    def _compute_claim(self, claim: Claim, report: Report) -> None:
        for backend in self.session.verifier.backends_for(claim):
            self._compute(claim, backend, report)

    def _compute(self, claim: Claim, backend: Any, report: Report) -> None:
        verifier = self.session.verifier
        key = (claim.id, backend.name)
        verifier._outcomes.pop(key, None)  # the held value is the one this recomputes
        outcome = verifier.outcome(claim, backend)
        if not backend.available:
            return
        self.evaluated.append(key)
        report.recomputed.append(key)
        reads = tuple((r.file, r.key, to_json(r.value)) for r in outcome.inputs if isinstance(r, inputs.Input))
        self.known[key] = Known(
            code_fingerprint(claim),
            reads,
            backend.library if claim.needs_backend else None,
            backend.version if claim.needs_backend else None,
            claim.kind is Kind.MEASURED,
            outcome.status in (OutcomeStatus.FAILED, OutcomeStatus.BROKEN),
            tuple(sorted({r.snippet for r in outcome.inputs if isinstance(r, inputs.SnippetFigure)})),
            tuple(sorted((verifier.uses(claim, backend.name) or {}).items())),
        )

    def _forget(self, claim_id: str) -> None:
        verifier = self.session.verifier
        for key in [k for k in self.known if k[0] == claim_id]:
            del self.known[key]
            verifier._outcomes.pop(key, None)
            verifier.judged.pop(key, None)

    def status_of(self, binding: Binding) -> tuple[str, list[str]]:
        """A figure's status against the values held, and the lines for what is wrong with it.
        A figure of a claim held nowhere (a measured one not asked for) is `not here`."""
        claim = REGISTRY.get(binding.claim_id)
        if binding.error:
            return Status.FAILED.value, [f"{binding.where}: figure {binding.text}: {binding.error}"]
        if claim is None:
            said = unknown_claim(binding, REGISTRY.near(binding.claim_id), self.topic_errors)
            return Status.FAILED.value, [f"{binding.where}: {said}"]
        verifier = self.session.verifier
        outcomes = [verifier._outcomes.get((claim.id, b.name)) for b in verifier.backends_for(claim)]
        held: list[Outcome] = [o for o in outcomes if o is not None]
        if not held or binding.printed is None:
            return "not here", []
        verdicts = [judge(binding, o, self.session.machine) for o in held]
        status = worst((str(v.status) for v in verdicts if v.status != Status.SKIPPED), default=Status.SKIPPED.value)
        problems = [v.message.split("\n")[0] for v in verdicts if v.status in (Status.STALE, Status.FAILED)]
        return status, problems

    def _judge(self, bindings: Iterable[Binding], report: Report) -> None:
        for binding in bindings:
            status, problems = self.status_of(binding)
            report.figures[binding] = status
            report.problems += problems
            report.pages.add(binding.file)

    def _judge_all(self, report: Report) -> None:
        self._judge(self.session.book.bindings(), report)

    # -- a change

    def apply(self, paths: Iterable[Path], *, measure: bool = False) -> Report:
        """Answer the files saved: re-judge, recompute what `plan` says, write the records."""
        paths = list(paths)
        root = self.book.root
        pages = [
            p
            for p in paths
            if p.suffix == ".md"
            and p.is_relative_to(self.book.pages)
            and "snippets" not in p.relative_to(self.book.pages).parts
        ]
        data = [p for p in paths if p.is_relative_to(self.book.data) and p.suffix in (".toml", ".json")]
        code = [p for p in paths if p.suffix == ".py" and any(p.is_relative_to(root / r) for r in self._topics_roots)]
        snippets = [p for p in paths if p.suffix == ".py" and p.is_relative_to(self.book.snippets)]
        results = [
            p
            for p in paths
            if p.suffix == ".json"
            and any(p.is_relative_to(d) for d in (self.book.results, self.book.local_results) if d is not None)
        ]
        site = [p for p in paths if p.name == "mkdocs.yml"]
        allowlist = [p for p in paths if p == self.book.allowlist]
        answered = [p for p in paths if p in {*pages, *data, *code, *snippets, *results, *site, *allowlist}]
        said = "; ".join(
            ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "") + f" {verb}"
            for verb, names in (
                ("saved", [self.book.shown(p) for p in answered if p.exists()]),
                ("removed", [self.book.shown(p) for p in answered if not p.exists()]),
            )
            if names
        )
        report = Report("measured claims asked for" + (f"; {said}" if said else "") if measure else said)
        if not (pages or data or code or snippets or allowlist or measure):
            report.rebuild = bool(results or site)
            if report.rebuild:
                report.what += ": the site built again"
            return report
        verifier = self.session.verifier
        saved_pages = {str(p.relative_to(root)) for p in pages}  # relative to the book's root, as a page's `file`
        had = {page.file for page in self.session.book.pages}
        # a page added or removed changes the site's files and nav: MkDocs builds it whole again
        report.rebuild = any((str(p.relative_to(root)) in had) != p.is_file() for p in pages)
        for path in pages:
            self._reread(path)
        if pages:
            verifier.bindings = self.session.book.by_claim()
        if allowlist:
            self._reread_allowlist(report)
        if data:
            inputs.use_data_dir(inputs.DATA_DIR, inputs.SHOWN_AS)  # the data read again from disk
        codes = self._reload_topics() if code else None
        snippet_names = frozenset(self.book.shown(p) for p in snippets)
        if snippets:
            snippet_figures.forget_runs()  # the next measure runs the snippet as it is now
            report.pages |= self._showing(snippets)
            report.problems += [
                f"{name}: serve does not run snippets; `pytest {name}` runs it and checks its output blocks"
                for name in sorted(snippet_names)
            ]
        data_rel = frozenset(str(p.relative_to(self.book.data)) for p in data)
        data_now: dict[tuple[str, str], Any] = {}
        for file, data_key, _ in {r for held in self.known.values() for r in held.reads if r[0] in data_rel}:
            try:
                data_now[(file, data_key)] = to_json(inputs.current(file, data_key))
            except inputs.InputError:
                data_now[(file, data_key)] = GONE
        if data:  # a saved `source` that states another number than its `value`, as a run's load check says
            saved = {f"{inputs.SHOWN_AS}/{file}" for file in data_rel}
            report.problems += [str(p) for p in inputs.source_disagreements() if p.where.rpartition(":")[0] in saved]
        measured_ids = {c.id for c in REGISTRY if c.kind is Kind.MEASURED}
        decided = plan(
            self.known,
            Changes(
                frozenset(saved_pages),
                data_rel,
                codes,
                measure=measure,
                snippets=snippet_names,
            ),
            data_now,
            measured_ids,
        )
        for claim_id in decided.gone:
            self._forget(claim_id)
        # a value read from what a saved snippet printed before is not kept until measured again: not here
        printed_before = {k[0] for k in decided.held_back if snippet_names & set(self.known[k].snippets)}
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
        if codes is not None:  # the values kept were computed by claims that are now new objects of the same code
            for key, outcome in list(verifier._outcomes.items()):
                if key[0] in REGISTRY and outcome.claim is not REGISTRY[key[0]]:
                    verifier._outcomes[key] = replace(outcome, claim=REGISTRY[key[0]])
                    if key in verifier.judged:
                        verifier.judged[key] = verifier._outcomes[key]
        report.held_back = len(decided.held_back)
        touched = {c for c, _ in report.recomputed} | decided.gone | printed_before
        bindings = [b for b in self.session.book.bindings() if b.claim_id in touched or b.file in saved_pages]
        self._judge(bindings, report)
        report.pages |= saved_pages
        if pages or allowlist:  # what `every number is bound` would say of them now
            on_disk = {str(p.relative_to(root)) for p in pages if p.is_file()}
            report.problems += self.unbound({page.file for page in self.session.book.pages} if allowlist else on_disk)
        claims = {b.claim_id for b in bindings} | {c for c, _ in report.recomputed}
        self.write([key for key in verifier.judged if key[0] in claims], wait=False)
        return report

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
        """The pages (relative to the book's root) that include a snippet's code or show its output."""
        names = {self.book.shown(path) for path in snippets}
        out = {b.file for path in snippets for b in self.session.output_blocks.of_snippet(path.name)}
        for page in self.session.book.pages:
            try:
                if names & included_paths((self.book.root / page.file).read_text(encoding="utf-8")):
                    out.add(page.file)
            except OSError:
                continue
        return out

    def _reread(self, path: Path) -> None:
        book = self.session.book
        rel = str(path.relative_to(self.book.root))
        book.pages[:] = [p for p in book.pages if p.file != rel]
        if path.is_file():
            book.pages.append(read_page(path, self.book.root))
            book.pages.sort(key=lambda p: p.file)

    def page(self, rel: str) -> Any:
        return next((p for p in self.session.book.pages if p.file == rel), None)

    def _reload_topics(self) -> dict[str, str]:
        """Import the book's claim packages again from disk; every claim's fingerprint now."""
        for name in [m for m in sys.modules if m.split(".")[0] in self._topics_roots]:
            del sys.modules[name]
        importlib.invalidate_caches()
        REGISTRY.clear()
        self.topic_errors = open_book(self.book)
        for line in self.topic_errors:
            print(f"verified-book serve: {line}", flush=True)
        return {claim.id: code_fingerprint(claim) for claim in REGISTRY}

    def upgraded(self) -> dict[str, str | None]:
        """The libraries held values were computed with whose version on disk is another now."""
        held = {k.library: k.version for k in self.known.values() if k.library and k.version}
        held |= {library: version for k in self.known.values() for library, version in k.uses if version}
        out: dict[str, str | None] = {}
        for library, version in held.items():
            try:
                on_disk: str | None = importlib.metadata.version(library)
            except importlib.metadata.PackageNotFoundError:
                on_disk = None
            if on_disk != version and not (on_disk and version and version.startswith(on_disk)):
                out[library] = on_disk
        return out

    # -- the records

    def write(self, keys: Iterable[Key] | None = None, *, wait: bool = True) -> None:
        """This machine's records of the values held (those of `keys`, or all), merged into its results file
        as a run merges them. With `wait` false the file is written by a thread while the page is shown:
        `merged` holds the records at once, and the next look at the disk (`changed`) waits for the file."""
        self.written()
        session = self.session
        header = {
            "date": now(),
            "commit": self.commit[0],
            "dirty": self.commit[1],
            "os": session.machine.info.get("os"),
            "backends": {b.name: (b.version if b.available else None) for b in session.backends.detected().values()},
        }
        update = session.verifier.results(session.machine.slug, header, {}, {}, only=keys)
        if wait or self.merged is None:
            self._merge(update)
            return
        self.merged.merge(copy.deepcopy(update))  # what the file will hold, for the page shown now
        self._writer = threading.Thread(target=self._merge, args=(update,), name="verified-book-serve-records")
        self._writer.start()

    def _merge(self, update: ResultsFile) -> None:
        try:
            self.merged = merge_into(self.results_path, update)
        except Exception as e:  # noqa: BLE001 - the preview goes on, and says the records were not kept
            self.unkept = f"{self.results_path}: this change's records were not written: {type(e).__name__}: {e}"
            print(f"verified-book serve: {self.unkept}", file=sys.stderr, flush=True)
            return
        stat = self.results_path.stat()
        self._own[self.results_path] = (stat.st_mtime_ns, stat.st_size)

    def written(self) -> None:
        """Wait until the records of the last change are in the results file."""
        if self._writer is not None:
            self._writer.join()
            self._writer = None


# ---------------------------------------------------------------------------
# The site: MkDocs' live-reload server, each changed page rendered again alone


class Site:
    """The book's site built once, then each page whose figures changed rendered again in place."""

    def __init__(self, book: BookConfig, site_dir: Path, host: str, port: int) -> None:
        self.book, self.site_dir, self.host, self.port = book, site_dir, host, port
        self.state: dict[str, Any] = {}
        self.url = f"http://{host}:{port}/"

    def build(self, said: frozenset[str] = frozenset()) -> None:
        """The whole site, as `mkdocs build` makes it, keeping what a page's rebuild needs. The figures at
        `said` (file:line) have their problem on serve's own line already: the build does not log it again."""
        from mkdocs.commands.build import build
        from mkdocs.config import load_config

        config = load_config(str(self.book.root / "mkdocs.yml"), site_dir=str(self.site_dir))
        config.site_url = self.url
        config.plugins["verified-book"].said_elsewhere = said  # type: ignore[attr-defined]
        state = self.state

        class Keep:
            def on_nav(self, nav: Any, config: Any, files: Any) -> Any:
                state.update(nav=nav, files=files)
                return nav

            def on_env(self, env: Any, config: Any, files: Any) -> Any:
                state["env"] = env
                return env

        config.plugins["verified-book-serve"] = Keep()  # type: ignore[assignment]
        build(config, serve_url=self.url)
        state["config"] = config

    def render(
        self,
        pages: Iterable[str],
        results: ResultsFile | None,
        results_path: Path,
        engine: Engine,
        said: frozenset[str] = frozenset(),
    ) -> None:
        """Render `pages` (relative to the book's root) again with this machine's records as they are now. The
        figures at `said` (file:line) have their problem on serve's own line already: the render does not log it
        again."""
        from mkdocs.commands.build import _build_page, _populate_page

        config, files = self.state["config"], self.state["files"]
        plugin = config.plugins["verified-book"]
        plugin.problems, plugin.said_elsewhere = [], said  # this render's own, not every render's since the start
        if results is not None:
            shown = self.book.shown(results_path)
            names = [name for name, where in plugin.local.items() if where == shown]
            if not names and results_path.parent == plugin.book_config.results and results_path.stem in plugin.results:
                names = [results_path.stem]  # a book with no local results folder: its runs write the committed one
            for name in names:
                plugin.results[name] = results
        plugin._verdicts = {}  # the records are new: each is judged afresh
        plugin.context.load_errors = engine.topic_errors  # as the claim modules were last loaded
        doc_files = files.documentation_pages()
        try:
            for rel in sorted(pages):
                path = (self.book.root / rel).resolve()
                file = next((f for f in doc_files if f.abs_src_path and Path(f.abs_src_path).resolve() == path), None)
                if file is None or file.page is None:
                    continue
                page = engine.page(rel)
                if page is not None:
                    plugin._pages[path] = page
                _populate_page(file.page, config, files)
                _build_page(file.page, config, doc_files, self.state["nav"], self.state["env"])
        finally:
            plugin.said_elsewhere = frozenset()


def serve(book: BookConfig, args: list[str]) -> int:
    """`verified-book serve [--port N] [--host H] [--measured]`."""
    parser = argparse.ArgumentParser(prog="verified-book serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--measured", action="store_true", help="compute the measured claims too (else only on `m`)")
    parser.add_argument("--poll", type=float, default=0.1, help="seconds between looks at the watched files")
    options = parser.parse_args(args)
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    problem = address_problem(options.host, options.port)
    if problem:  # said at once, not after the book is computed
        print(f"verified-book serve: cannot listen on {options.host}:{options.port}: {problem}", file=sys.stderr)
        return 1
    started = time.perf_counter()
    print("verified-book serve: computing the book's claims ...", flush=True)
    engine = Engine(book, measured=options.measured)
    report = engine.start()
    say(report, f"{len(report.recomputed)} (claim, backend) computed in {time.perf_counter() - started:.1f} s")
    from mkdocs.livereload import LiveReloadServer

    site_dir = Path(tempfile.mkdtemp(prefix="verified-book-serve-"))
    site = Site(book, site_dir, options.host, options.port)
    site.build()
    asked = threading.Event()

    def builder() -> None:
        if engine.upgraded():
            restart(engine)
        report = engine.apply(engine.changed(), measure=asked.is_set())
        asked.clear()
        failed = frozenset(b.where for b, status in report.figures.items() if status == Status.FAILED.value)
        if report.rebuild:
            engine.written()  # the whole build reads the records from the results file
            site.build(said=failed)
        elif report.pages:
            site.render(report.pages, engine.merged, engine.results_path, engine, said=failed)
        if report.what:
            print(report.line(), flush=True)

    server = LiveReloadServer(
        builder=builder, host=options.host, port=options.port, root=str(site_dir), polling_interval=options.poll
    )
    server.build_delay = 0.05
    for path in engine.watched():
        path.mkdir(parents=True, exist_ok=True) if not path.exists() else None
        server.watch(str(path))
    if sys.stdin.isatty():

        def keys() -> None:
            for line in sys.stdin:
                if line.strip() == "m":
                    asked.set()
                    with server._rebuild_cond:
                        server._want_rebuild = True
                        server._rebuild_cond.notify_all()

        threading.Thread(target=keys, daemon=True).start()

    def announce() -> None:  # once the watchers have their first look, so a save from now on is seen
        while not (server.observer.is_alive() and all(e.is_alive() for e in server.observer.emitters)):
            time.sleep(0.01)
        print(f"verified-book serve: {site.url} (Ctrl-C stops; m and Enter measures)", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    code = 0
    try:
        server.serve()
    except KeyboardInterrupt:
        pass
    except OSError as e:  # the port taken while the book was computed: the probe above was free
        problem = bind_problem(e)
        if problem is None or server.serve_thread.is_alive():
            raise
        print(f"verified-book serve: cannot listen on {options.host}:{options.port}: {problem}", file=sys.stderr)
        code = 1
    finally:
        server.shutdown()
        engine.written()
        shutil.rmtree(site_dir, ignore_errors=True)
    return 1 if engine.unkept else code


def address_problem(host: str, port: int) -> str | None:
    """Why the preview could not listen on host:port (in use, or not an address of this machine), and what
    to do, or None.

    Asked with a socket bound as the server binds its own (MkDocs's, which binds only once it starts serving,
    after the book is computed)."""
    try:
        family = socket.AF_INET6 if isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address) else socket.AF_INET
    except ValueError:  # a name, not an address
        family = socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as http.server's HTTPServer does
        try:
            probe.bind((host, port))
        except OSError as e:
            return bind_problem(e) or f"{e.strerror or e}; choose an address of this machine with --host"
        except OverflowError as e:  # a port outside 0-65535
            return f"{str(e).rstrip('.')}; choose a port with --port"
    return None


def bind_problem(error: OSError) -> str | None:
    """What a failed bind says, with what to change; None for an error that is not about the address."""
    if error.errno == errno.EADDRINUSE:
        return f"{error.strerror}; another server holds it: choose another port with --port"
    if error.errno == errno.EACCES:
        return f"{error.strerror}; a port below 1024 needs privileges: choose another port with --port"
    if error.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or isinstance(error, socket.gaierror):
        return f"{error.strerror or error}; choose an address of this machine with --host"
    return None


def say(report: Report, what: str) -> None:
    counts = Report(what, [], report.figures, report.problems, held_back=report.held_back)
    print(counts.line().replace("; no claim ran", ""), flush=True)


def restart(engine: Engine) -> None:
    """A library on disk is not the one imported: name the claims it computed and start again."""
    changed = engine.upgraded()
    decided = plan(engine.known, Changes(versions=changed), {})
    names = ", ".join(f"{lib} {engine_version(engine, lib)} -> {v}" for lib, v in changed.items())
    print(f"{names} on disk: {len(decided.recompute)} (claim, backend) computed on it; starting again", flush=True)
    os.execv(sys.executable, [sys.executable, *sys.argv])


def engine_version(engine: Engine, library: str) -> str | None:
    return next((k.version for k in engine.known.values() if k.library == library), None) or next(
        (version for k in engine.known.values() for name, version in k.uses if name == library), None
    )
