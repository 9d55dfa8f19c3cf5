"""What a narrowed run checks: `--reading FILE[:KEY]` and `--changed`, decided from this machine's records.

Both read the machine's own history (`results.local/<machine>.sqlite`) and the book as it is now; neither
computes anything. A check is a (claim, backend) pair; a figure is checked where its claim is.

- `--reading FILE[:KEY]`: the claims whose records say they read that data file (or that key of it), with
  the figures bound to them. A claim with no record here, or whose code changed since its record, may
  read anything: it is selected too, and the run says how many were selected for that reason.
- `--changed`: the checks whose record no longer speaks for the book: no record, the claim's code or an
  input changed (`provenance.outdated_reason`), the library's version moved, a figure's printed text or
  place moved, or the record did not hold (stale, failed). Where only the figures moved (or the record
  was stale), the recorded value still stands: the figures are judged again against it and nothing is
  computed (`verified_book.engine.recorded`), and the records keep the date the value was computed on.
  Every other record is unchanged: not rerun, and reported as such with its date and status, never as
  verified now.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from verified_book.authoring import inputs
from verified_book.authoring.registry import Claim, Registry
from verified_book.book.bindings import Binding
from verified_book.book.snippet_output import OutputBlock
from verified_book.engine.footprints import NOT_HELD, Unchanged
from verified_book.engine.outcome import Outcome
from verified_book.engine.provenance import VersionsNow, outdated_reason, uses_of
from verified_book.engine.recorded import assumed_backends, recorded_outcome, why_not_reused
from verified_book.errors import BookError
from verified_book.records import store
from verified_book.records.record import Check, ClaimMeta, DataInput, Record
from verified_book.records.results import ResultsError, ResultsFile
from verified_book.vocabulary import NO_BACKEND_NAME, Status

#: why a narrowed run has no records of this machine, where it has no results file
NO_RECORDS_YET = "this machine has no records yet"


@dataclass(frozen=True)
class Reading:
    """One `--reading` argument: a data file, relative to the data folder, and optionally a key in it."""

    file: str
    key: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.key}" if self.key else self.file

    def matches(self, entry: Any) -> bool:
        """Whether a record's input entry is a read of this file (and key: the key itself, or one under it)."""
        if not isinstance(entry, DataInput) or entry.file != self.file:
            return False
        return self.key is None or entry.key == self.key or entry.key.startswith(self.key + ".")


def parse_reading(text: str) -> Reading:
    """`hardware/dgx_spark.toml:memory_bandwidth`, also written with the data folder in front
    (`claims/data/hardware/dgx_spark.toml`, as messages name it)."""
    path, _, key = text.partition(":")
    for prefix in (f"{inputs.shown_as()}/", f"{inputs.data_dir().as_posix()}/"):
        if prefix != "/" and path.startswith(prefix):
            path = path[len(prefix) :]
            break
    return Reading(path, key or None)


class ReadingError(BookError):
    """A `--reading` argument that names no data file of the book, or no key in the file it names."""


def checked_reading(text: str) -> Reading:
    """`parse_reading`, with its file and key looked up in the book's data as it is now.

    Records can only say that no claim read a mistyped name: the run would then check nothing, or,
    on a machine with no records yet, everything. The name is checked instead, and what is near it said.
    """
    reading = parse_reading(text)
    files = [Path(f).as_posix() for f in inputs.data_files()]
    if reading.file not in files:
        # by stem alone: a shared folder and suffix would make every file look near
        stems = {Path(f).stem for f in files}
        near_stems = difflib.get_close_matches(Path(reading.file).stem, sorted(stems), n=3, cutoff=0.5)
        near = [f for stem in near_stems for f in files if Path(f).stem == stem]
        raise ReadingError(
            f"--reading {text}: {inputs.shown_as()}/{reading.file} is no data file of the book; expected a file "
            f"relative to {inputs.shown_as()}/"
            + (f"; did you mean {' or '.join(near)}?" if near else f", one of: {', '.join(files)}")
        )
    if reading.key is None:
        return reading
    try:
        node: Any = inputs.table(reading.file)
    except inputs.InputError as e:
        raise ReadingError(f"--reading {text}: {e}") from None
    # a JSON config's keys are read whole (`model_config`); a TOML key is a dotted path of tables
    parts = [reading.key] if reading.file.endswith(".json") else reading.key.split(".")
    for depth, part in enumerate(parts):
        if depth and isinstance(node, Mapping) and "value" in node:  # an entry is read whole, never its fields
            entry = ".".join(parts[:depth])
            raise ReadingError(
                f"--reading {text}: {entry!r} is one entry of {inputs.shown_as()}/{reading.file} (its value, unit "
                f"and source), read whole; name it as {reading.file}:{entry}"
            )
        if isinstance(node, Mapping) and part in node:
            node = node[part]
            continue
        keys = sorted(map(str, node)) if isinstance(node, Mapping) else []
        under = ".".join(parts[:depth])
        place = f"{inputs.shown_as()}/{reading.file}" + (f" under {under!r}" if under else "")
        near = difflib.get_close_matches(part, keys, n=3, cutoff=0.5)
        prefix = f"{under}." if under else ""
        raise ReadingError(
            f"--reading {text}: {place} has no key {part!r}"
            + (
                f"; did you mean {' or '.join(repr(prefix + k) for k in near)}?"
                if near
                else f"; its keys: {', '.join(keys)}"
                if keys
                else f"; {under!r} holds a value, not a table"
            )
        )
    return reading


@dataclass
class Selection:
    """The checks a narrowed run reruns, why, and the records it leaves as they are."""

    how: str  # "--changed" or "--reading ..."
    pairs: set[Check] = field(default_factory=set)
    why: dict[Check, str] = field(default_factory=dict)
    #: (claim, backend) -> (status, date) of each record not rerun
    unchanged: dict[Check, tuple[str, str | None]] = field(default_factory=dict)
    unknown: int = 0  # claims selected because what they read is not known here
    snippets: set[str] = field(default_factory=set)  # snippet file names to run
    notes: list[str] = field(default_factory=list)
    #: (claim, backend) -> the outcome its record keeps, for each check whose recorded value still stands
    reusable: dict[Check, Outcome] = field(default_factory=dict)
    #: the records the one rule read and found speaking for the book as it is, value and figures: those whose
    #: footprint may be written anew, as a run writes a record's (`Session.footprint_again`)
    current: dict[Check, Record] = field(default_factory=dict)

    @property
    def claims(self) -> set[str]:
        return {c for c, _ in self.pairs}

    @property
    def rejudged(self) -> dict[Check, Outcome]:
        """The checks the run judges again against their recorded values, computing nothing."""
        return {key: self.reusable[key] for key in self.pairs if key in self.reusable}

    def keeps(self, claim_id: str, backend: str | None = None) -> bool:
        """Whether the run checks this claim (on this backend; on any, for a figure)."""
        if backend is None:
            return claim_id in self.claims
        return (claim_id, backend) in self.pairs

    def said(self) -> Said:
        """What the run says of this selection once it ends (`Said`)."""
        rejudged = self.rejudged
        head = [
            f"{self.how}: {len(self.pairs) - len(rejudged)} claim × backend checks rerun"
            + (
                f" ({self.unknown} claims with no usable record here, so what they read is not known: selected too;"
                " a full run on this machine records it)"
                if self.unknown
                else ""
            )
        ]
        if rejudged:
            dates = sorted({o.recorded or "" for o in rejudged.values()})
            span = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
            head.append(
                f"{self.how}: {len(rejudged)} checks judged again against the values this machine's records keep "
                f"(computed {span}; the claim's code, its inputs and the library's version unchanged): "
                "nothing computed for them"
            )
        rerun = [
            f"  {'rejudged' if (c, b) in rejudged else 'rerun':<9} {c}[{b}]: {self.why.get(Check(c, b), '')}"
            for c, b in sorted(self.pairs)
        ]
        return Said(self.how, head + self.notes, rerun, dict(self.unchanged))


@dataclass
class Said:
    """What a narrowed run says of its selection after its summary: made where the items were collected
    (this process, or each xdist worker, which hands it to its controller as JSON) and said where the
    summary is printed, every record not rerun listed as unchanged with its recorded status and date."""

    how: str
    head: list[str]  # the checks rerun, those judged again from their records, and the selection's notes
    rerun: list[str]  # one line a check rerun or judged again, and why (with -v)
    #: (claim, backend) -> (status, date) of each record not rerun
    unchanged: dict[Check, tuple[str, str | None]]

    def lines(self, judged: Iterable[tuple[str, str]] = (), verbose: bool = False) -> list[str]:
        """The lines to print; a check in `judged` (the run judged it after all) is not called unchanged."""
        judged = set(judged)
        unchanged = {key: value for key, value in self.unchanged.items() if key not in judged}
        out = list(self.head)
        if unchanged:
            by_status: dict[str, int] = {}
            for status, _ in unchanged.values():
                by_status[status] = by_status.get(status, 0) + 1
            dates = {d for _, d in unchanged.values() if d}
            first, last = (min(dates), max(dates)) if dates else (None, None)
            span = (
                f"last checked {first}"
                if first == last and first
                else f"last checked between {first} and {last}"
                if first
                else "undated"
            )
            counts = ", ".join(f"{n} {s}" for s, n in sorted(by_status.items()))
            out.append(
                f"{self.how}: {len(unchanged)} records unchanged since this machine's last run and "
                f"not checked now ({counts}; {span}): they keep their recorded status and date"
            )
        if verbose:
            out += self.rerun
            out += [
                f"  unchanged {c}[{b}]: {status} as of {date or 'an undated run'}"
                for (c, b), (status, date) in sorted(unchanged.items())
            ]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "how": self.how,
            "head": self.head,
            "rerun": self.rerun,
            # plain strings only: an xdist worker sends this through execnet, which takes no enum
            "unchanged": [
                [str(c), str(b), str(status), date] for (c, b), (status, date) in sorted(self.unchanged.items())
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Said:
        unchanged = {Check(c, b): (status, date) for c, b, status, date in data["unchanged"]}
        return cls(data["how"], list(data["head"]), list(data["rerun"]), unchanged)


def _figures_now(bindings: Iterable[Binding]) -> set[tuple[str, int, str | None]]:
    return {(b.file, b.line, b.text) for b in bindings}


def _figures_recorded(record: Record) -> set[tuple[str, int, str | None]]:
    return {(f.file, f.line, f.printed) for f in record.figures or ()}


def value_why(
    claim: Claim,
    meta: ClaimMeta | None,
    record: Record | None,
    version_now: str | None,
    backend: str = NO_BACKEND_NAME,
    libraries_now: Mapping[str, str | None] | None = None,
) -> str | None:
    """Why a check's recorded value no longer speaks for the book (no record, its claim's code or an input
    changed, its library's version moved, or the version of another library it computes with:
    `provenance.uses_of`, against `libraries_now`); None where computing again here would give it back."""
    if record is None:
        return "no record on this machine"
    known: dict[str, str | None] = {backend: version_now}
    if libraries_now is not None:
        known |= {name: libraries_now.get(name) for name in uses_of(claim, backend)}
    return outdated_reason(claim, meta, record, backend, VersionsNow.of(known))


def figures_why(record: Record, bindings: list[Binding]) -> str | None:
    """Why a record whose value still stands must be judged again: a figure's text or place moved, or the
    record did not hold; None where it speaks for the book as it is."""
    now, then = _figures_now(bindings), _figures_recorded(record)
    if now != then:
        moved = sorted(now - then) or sorted(then - now)
        file, line, printed = moved[0]
        return f"a figure's text or place changed since the record ({file}:{line}: {printed})"
    if record.status in NOT_HELD:
        return f"{record.status} when last recorded"
    return None


def select_changed(
    results: ResultsFile | None,
    registry: Registry,
    bindings: Mapping[str, list[Binding]],
    pairs: Iterable[Check],
    versions: Mapping[str, str | None],
    unrecorded: str = NO_RECORDS_YET,
    libraries: Mapping[str, Any] | None = None,
    held: Mapping[Check, tuple[str, str | None]] | None = None,
) -> Selection:
    """`--changed`: of the run's `pairs` (claim, backend), those whose record no longer speaks for the book;
    `versions` holds each backend's library version here, `libraries` every versioned library's
    (`machine.VERSIONED`, as the machine's fingerprint has them); `unrecorded` says why there are no
    records, where `results` is None. A pair in `held` (`footprints.held`: no source of its record moved) is
    unchanged with the status and date given, and its record need not be in `results`."""
    selection = Selection("--changed")
    if results is None:
        selection.notes.append(f"--changed: {unrecorded}: everything is checked")
    for claim_id, backend in pairs:
        said = held.get(Check(claim_id, backend)) if held is not None else None
        if said is not None:
            selection.unchanged[Check(claim_id, backend)] = said
            continue
        claim = registry.get(claim_id)
        if claim is None:
            continue
        record = (results.records.get(claim_id) or {}).get(backend) if results is not None else None
        meta = results.claims.get(claim_id) if results is not None else None
        why = value_why(claim, meta, record, versions.get(backend), backend, libraries)
        if record is not None and results is not None and why is None:
            date = results.date_of(claim_id, backend)
            if date and not why_not_reused(claim, record):
                seconds = results.run.seconds.get(claim_id, {}).get(backend, 0.0)
                selection.reusable[Check(claim_id, backend)] = recorded_outcome(claim, backend, record, date, seconds)
            why = figures_why(record, bindings.get(claim_id, []))
            if why is None:
                selection.unchanged[Check(claim_id, backend)] = (str(record.status), date)
                selection.current[Check(claim_id, backend)] = record
                continue
        selection.pairs.add(Check(claim_id, backend))
        selection.why[Check(claim_id, backend)] = why or ""
    return selection


def select_reading(
    results: ResultsFile | None, registry: Registry, readings: list[Reading], pairs: Iterable[Check]
) -> Selection:
    """`--reading`: of the run's `pairs`, the claims that read one of `readings`, on every backend; and
    those whose reads are not known here (no record, or code changed since it)."""
    selection = Selection("--reading " + ", ".join(map(str, readings)))
    pairs = list(pairs)
    unknown: set[str] = set()
    reading: set[str] = set()
    for claim_id in {c for c, _ in pairs}:
        claim = registry.get(claim_id)
        if claim is None:
            continue
        records = (results.records.get(claim_id) or {}) if results is not None else {}
        meta = results.claims.get(claim_id) if results is not None else None
        usable = [
            r
            for r in records.values()
            if r.inputs is not None
            and not (outdated_reason(claim, meta, r) or "").startswith(("the claim's code", "recorded before"))
        ]
        if not usable:
            unknown.add(claim_id)
        elif any(r.matches(entry) for record in usable for entry in record.inputs or [] for r in readings):
            reading.add(claim_id)
    for claim_id, backend in pairs:
        if claim_id in reading or claim_id in unknown:
            selection.pairs.add(Check(claim_id, backend))
            selection.why[Check(claim_id, backend)] = (
                "reads " + ", ".join(map(str, readings))
                if claim_id in reading
                else "no record on this machine says what it reads"
            )
    selection.unknown = len(unknown)
    if not reading and not unknown:
        selection.notes.append(f"{selection.how}: no record on this machine says a claim reads it")
    return selection


def snippets_changed(
    results: ResultsFile | None, snippets: Iterable[Path], blocks: Mapping[str, list[OutputBlock]], root: Path
) -> set[str]:
    """`--changed` for snippets: those with no recorded output here, whose last check did not hold, whose
    source is not the one that printed the recorded output, or whose output blocks are not the ones that
    were compared. Each is told by its hash where the record keeps one; by the file's time since the
    recorded run where it does not (a record from before hashes were kept)."""
    from datetime import datetime

    from verified_book.engine.snippet_figures import source_hash

    out = set()
    for path in snippets:
        recorded = results.outputs.get(path.name) if results is not None else None
        date = recorded.date if recorded is not None else None
        checked = (recorded.checked if recorded is not None else None) or []
        if not isinstance(date, str) or any(c.status not in (Status.VERIFIED, Status.SKIPPED) for c in checked):
            out.add(path.name)
            continue
        try:
            when = datetime.fromisoformat(date).timestamp()
        except ValueError:
            out.add(path.name)
            continue
        printed_by = recorded.sha256 if recorded is not None else None
        if printed_by is not None and path.is_file() and source_hash(path) != printed_by:
            out.add(path.name)
            continue
        shown = blocks.get(path.name, [])
        if checked and all(c.sha256 is not None for c in checked):
            if sorted((c.file, c.sha256) for c in checked) != sorted((b.file, b.sha256) for b in shown):
                out.add(path.name)
            files = []
        else:  # no block hash kept: the pages' times are all there is to go by
            files = [root / b.file for b in shown]
        if printed_by is None:  # no source hash kept: nor for the snippet
            files.append(path)
        if any(f.is_file() and f.stat().st_mtime > when for f in files):
            out.add(path.name)
    return out


def _whole_claims(selection: Selection, everywhere: Mapping[str, list[str]]) -> None:
    """A figure is judged on every backend its claim computes on, so a claim rerun on one is rerun on all:
    its other checks leave the unchanged list, and say why they run."""
    for claim_id in selection.claims:
        for backend in everywhere.get(claim_id, []):
            if (claim_id, backend) not in selection.pairs:
                selection.unchanged.pop(Check(claim_id, backend), None)
                selection.pairs.add(Check(claim_id, backend))
                selection.why[Check(claim_id, backend)] = (
                    "checked with its claim's other backends (a figure is judged on each)"
                )


def recorded(
    results_path: Path, warn: Callable[[str], None] = lambda _: None, claims: Iterable[str] | None = None
) -> tuple[ResultsFile | None, str]:
    """This machine's history (its store, or its results file, read whatever its size: `store.read_history`) as
    `--changed` and `--reading` select from it (with `claims`, a store's records of those claims only), or None
    and why there is none to read; a bad row of a store is set aside and said through `warn`. A history that does
    not read selects as no records (everything is checked); the run's writing reports it and keeps it aside."""
    legacy = store.is_store(results_path) and store.Store(results_path).legacy.is_file()
    if not (results_path.is_file() or legacy):
        return None, NO_RECORDS_YET
    try:
        return store.read_history(results_path, warn, claims), ""
    except ResultsError as e:
        return None, f"this machine's records do not read ({str(e).splitlines()[0]})"


@dataclass(frozen=True)
class ToCollect:
    """What a whole-book `--changed` run collects: the claims with a check that no record held here speaks for, and
    the pages that changed or print one of them, or print a figure no declared claim backs (or a malformed one)."""

    claims: frozenset[str]
    pages: frozenset[str]


def to_collect(held: Unchanged, registry: Registry, verifier: Any, pages: Iterable[Any]) -> ToCollect:
    """`ToCollect` from the records `held` (`footprints.held`): every other claim's checks and figures are unchanged,
    so the run need not collect them to deselect them."""
    on: dict[tuple[bool, tuple[str, ...] | None], list[str]] = {}  # the backends, by what decides them
    claims = set()
    for claim in registry:
        backends = on.get((claim.needs_backend, claim.backends))
        if backends is None:
            backends = on[claim.needs_backend, claim.backends] = _computes_on(claim, verifier)
        if any((claim.id, b) not in held.records for b in backends):
            claims.add(claim.id)
    printing = {b.file for c in claims for b in verifier.bindings.get(c, ())}
    unbacked = {p.file for p in pages if p.malformed or any(b.claim_id not in registry for b in p.bindings)}
    return ToCollect(frozenset(claims), frozenset(held.pages | printing | unbacked))


def _computes_on(claim: Claim, verifier: Any) -> list[str]:
    """The backends here a claim is checked on: a check of each is what `--changed` reruns or leaves. Whether the
    claim needs a backend, and which it names, decide them."""
    return [b.name for b in verifier.backends_for(claim) if b.available]


def assume_recorded_backends(backends: Any, results: ResultsFile | None) -> None:
    """Before collection, for `--changed` and `--reading`: the backends as this machine's records found them
    (`assumed_backends`), so that collecting the book's checks loads no array library; a check the selection
    keeps loads its library when it computes."""
    if results is not None:
        backends.assume(assumed_backends(results))


def narrow(
    items: list[Any],
    *,
    changed: bool,
    readings: list[str],
    history: Callable[..., tuple[ResultsFile | None, str]],
    registry: Registry,
    verifier: Any,
    outputs: Any,
    held: Unchanged | None = None,
    whole_book: bool = False,
) -> tuple[Selection, list[Any], list[Any]]:
    """The selection for `--changed` or `--reading`, and the run's items split into those kept and those
    deselected. Items are told apart by what they carry: a claim's check (`claim`, `backend`), a figure
    (`binding`), a snippet run (`runner`); the page and load checks, which compute nothing, are kept.
    `history(claims, others_held=)` reads this machine's history (`Session.history_found`); with `held`, `--changed`
    reads only the claims with a record not in it (`select_changed`), and where the run collected the whole book as
    `to_collect` chose (`whole_book`), every record held is unchanged."""
    in_run = {item.claim.id for item in items if hasattr(item, "claim")} | {
        item.binding.claim_id for item in items if hasattr(item, "binding")
    }  # what the run's items check: a page's run speaks of that page's claims only
    everywhere = {c: _computes_on(registry[c], verifier) for c in sorted(in_run) if c in registry}
    pairs = [Check(c, b) for c, names in everywhere.items() for b in names]
    if changed and not readings and held is not None:
        unheld = held.judged | {c for c, b in pairs if (c, b) not in held.records}  # the run's, and any other's
        results, unrecorded = history(unheld, others_held=True)
    else:
        (results, unrecorded), held = history(), None
    if changed:
        versions = {
            name: verifier.backends[name].version for name in {b for _, b in pairs} if name in verifier.backends
        }
        selection = select_changed(
            results,
            registry,
            verifier.bindings,
            pairs,
            versions,
            unrecorded,
            dict(verifier.machine.info),
            held.records if held is not None else None,
        )
        snippets = [Path(i.path) for i in items if hasattr(i, "runner")]
        blocks = {path.name: outputs.of_snippet(path.name) for path in snippets}
        selection.snippets = snippets_changed(results, set(snippets), blocks, verifier.book.root)
    else:
        selection = select_reading(results, registry, [parse_reading(r) for r in readings], pairs)
    if readings and changed:  # both: what reads the input and changed
        reading = select_reading(results, registry, [parse_reading(r) for r in readings], pairs)
        for key in selection.pairs - reading.pairs:
            selection.pairs.discard(key)
            selection.why.pop(key, None)
        selection.how = f"--changed {reading.how}"
    _whole_claims(selection, everywhere)
    if whole_book and held is not None:  # the claims not collected: held, so unchanged
        for key, said in held.records.items():
            if key not in selection.pairs and key.claim in registry:
                selection.unchanged.setdefault(key, said)
    verifier.recorded.update(selection.rejudged)
    kept: list[Any] = []
    dropped: list[Any] = []
    for item in items:
        if hasattr(item, "claim") and hasattr(item, "backend"):
            keep = selection.keeps(item.claim.id)
        elif hasattr(item, "binding") and item.binding.error is None:  # a figure; a malformed one is kept
            keep = item.binding.claim_id not in registry or selection.keeps(item.binding.claim_id)
        elif hasattr(item, "runner"):
            keep = Path(item.path).name in selection.snippets
        else:
            keep = True
        (kept if keep else dropped).append(item)
    return selection, kept, dropped
