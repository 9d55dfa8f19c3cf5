"""The engine: compute a claim on a backend, compare the book's figures with it, record both.

Knows nothing of pytest; the plugin asks it questions and reports its answers.
"""

from __future__ import annotations

import json
import math
import time
import traceback
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from verified_book.authoring import inputs
from verified_book.authoring.registry import Claim, InvariantFailed, NotOnBackend, Registry
from verified_book.backends import NO_BACKEND, Backend, empty_caches
from verified_book.book.bindings import Binding, Book
from verified_book.book.figures import Printed, as_number
from verified_book.engine import environment
from verified_book.engine.evidence import evidence
from verified_book.engine.machine import Machine
from verified_book.engine.outcome import Outcome
from verified_book.engine.provenance import code_fingerprint, input_entry, uses_of
from verified_book.records.record import (
    Check,
    ClaimMeta,
    Conditions,
    FigureVerdict,
    MachineRecord,
    Record,
    RunHeader,
    SnippetOutput,
    revised,
)
from verified_book.records.results import ResultsFile, now, to_json
from verified_book.vocabulary import Kind, OutcomeStatus, Status, worst

if TYPE_CHECKING:
    from verified_book.records.conditions import RunLock

COMPUTED, SKIPPED, FAILED, BROKEN = (
    OutcomeStatus.COMPUTED,
    OutcomeStatus.SKIPPED,
    OutcomeStatus.FAILED,
    OutcomeStatus.BROKEN,
)


@dataclass(frozen=True)
class Verdict:
    """One printed figure judged against one backend's value."""

    binding: Binding
    backend: str
    status: str
    message: str


def show(value: Any) -> str:
    """A computed value for a message: enough digits to see why it does not round to the figure."""
    number = as_number(value)
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(show(v) for v in value) + ")"
    if number is None:
        return repr(value)
    if isinstance(number, float):
        return repr(number)
    if number.denominator == 1:
        return f"{int(number):,}"
    return f"{float(number):.6g}"


MESSAGE_LIMIT = 4000


def _valid_value(value: Any) -> str | None:
    """Why what a claim returned is no value it can be judged by, or None. A NaN or an infinity is a value (a
    cast's answer, an overflow): judged against the printed figure like any other, and kept in the record as
    its text (`records.values.to_json`), never a claim that could not compute."""
    if value is None:
        return "returned None; a claim returns its value (a number, a tuple, a bool or a string)"
    if not isinstance(value, (list, tuple, str, bytes)) and callable(getattr(value, "tolist", None)):
        try:
            listed = value.tolist()
        except Exception as e:  # an array that cannot be listed is not a value either
            return f"returned a {type(value).__name__} that does not convert to a value ({type(e).__name__}: {e})"
        if isinstance(listed, list):
            return _valid_value(listed)
    try:
        number = as_number(value)
    except Exception as e:  # a custom object whose conversion raises
        return f"returned a {type(value).__name__} that does not convert to a number ({type(e).__name__}: {e})"
    if isinstance(value, (list, tuple)):
        for item in value:
            problem = _valid_value(item)
            if problem:
                return problem
        return None
    if number is None and not isinstance(value, (bool, str)) and not hasattr(value, "tolist"):
        return f"returned a {type(value).__name__}, which is not a value a figure can be compared with"
    return None


def _short(text: str) -> str:
    """A message kept to a readable length: a huge exception text must not swamp the report or the file."""
    return (
        text
        if len(text) <= MESSAGE_LIMIT
        else text[:MESSAGE_LIMIT] + f"... ({len(text) - MESSAGE_LIMIT} more characters)"
    )


def _text(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:  # an exception whose own text raises still gets reported
        return f"<{type(error).__name__} whose message cannot be read>"


def _out_of_memory(error: BaseException) -> bool:
    return type(error).__name__ == "OutOfMemoryError" or "out of memory" in _text(error).lower()


def _release_device_memory() -> None:
    """After an out-of-memory error, give the cached blocks back so the next claim starts clean."""
    import gc

    gc.collect()
    empty_caches()


def evaluate(claim: Claim, backend: Backend) -> Outcome:
    """Compute one claim on one backend; never raises for the claim's own faults."""
    start = time.perf_counter()
    with inputs.recording() as reads:
        try:
            with backend.activate():
                value = claim.evaluate(backend if claim.needs_backend else None)
        except NotOnBackend as e:
            return Outcome(
                claim, backend.name, SKIPPED, message=_short(f"{backend.name}: {_text(e)}"), inputs=list(reads)
            )
        except InvariantFailed as e:
            return Outcome(
                claim,
                backend.name,
                FAILED,
                message=_short(f"invariant does not hold: {_text(e)}"),
                inputs=list(reads),
                seconds=time.perf_counter() - start,
            )
        except KeyboardInterrupt:
            raise
        except inputs.InputError as e:
            return Outcome(claim, backend.name, FAILED, message=_short(f"bad input: {_text(e)}"), inputs=list(reads))
        except (Exception, SystemExit) as e:
            frame = traceback.extract_tb(e.__traceback__)[-1]
            where = f"(at {frame.filename}:{frame.lineno})"
            broken = environment.broken_by(e)
            if broken is not None:
                return Outcome(
                    claim,
                    backend.name,
                    BROKEN,
                    message=f"{broken.line()} {where}",
                    inputs=list(reads),
                    seconds=time.perf_counter() - start,
                    broken=broken,
                )
            if _out_of_memory(e):
                _release_device_memory()
                text = (
                    f"ran out of device memory on {backend.name} {where}: {type(e).__name__}: {_short(_text(e))}; "
                    "this claim alone is failed, the others run on"
                )
            else:
                text = f"raised {type(e).__name__}: {_short(_text(e))} {where}"
            return Outcome(
                claim, backend.name, FAILED, message=text, inputs=list(reads), seconds=time.perf_counter() - start
            )
    problem = _valid_value(value) or (_inexact(value) if claim.kind is Kind.EXACT else None)
    if problem:
        return Outcome(claim, backend.name, FAILED, message=problem, inputs=list(reads))
    return Outcome(
        claim,
        backend.name,
        COMPUTED,
        value=value,
        inputs=list(reads),
        seconds=time.perf_counter() - start,
        version=backend.version,
    )


def _inexact(value: Any) -> str | None:
    """Why an `exact` claim's value is not exact: a binary float (Python's or numpy's) that is, to its last
    bits, a fraction of small terms (273 / 16.4 is 1365/82): arithmetic on literals that a Fraction would
    have done exactly. A float no small fraction matches (a logarithm, a derivative at a point) is the
    value of a function no rational holds, and passes; so does a sympy Float."""
    items = value if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not (
            isinstance(item, float) or (type(item).__module__ == "numpy" and type(item).__name__.startswith("float"))
        ):
            continue
        number = float(item)
        if not math.isfinite(number) or number == int(number):
            continue
        near = Fraction(number).limit_denominator(10**6)
        if abs(float(near) - number) <= 2 * math.ulp(number):
            return (
                f"returned the float {number!r}, which is {near} to its last bits: an exact claim returns int or "
                "Fraction (or a sympy rational), so that rounding happens only where the figure is compared; read "
                "stated decimals with exact(...) and divide Fractions"
            )
    return None


def _holds_within(claim: Claim, binding: Binding, value: Any) -> bool:
    assert binding.printed is not None
    if binding.printed.holds(value):
        return True
    if claim.tolerance is None or binding.printed.is_tuple:
        return False
    printed, computed = as_number(binding.printed.value), as_number(value)
    if not isinstance(printed, Fraction) or not isinstance(computed, Fraction):
        return False
    return abs(computed - printed) <= Fraction(claim.tolerance) * abs(printed)


def _type_mismatch(binding: Binding, value: Any) -> str | None:
    """Why a computed value cannot be compared with a printed number at all (a string for a number, say)."""
    assert binding.printed is not None
    if binding.printed.is_tuple or isinstance(value, (list, tuple)):
        return None
    if as_number(value) is None and not callable(getattr(value, "tolist", None)):
        return (
            f"the claim returned a {type(value).__name__} ({_short(repr(value))[:200]}), "
            "and a printed number can only be compared with a number"
        )
    return None


def judge(binding: Binding, outcome: Outcome, machine: Machine) -> Verdict:
    """Compare one printed figure with one backend's outcome."""
    claim = outcome.claim
    if outcome.status == SKIPPED:
        return Verdict(binding, outcome.backend, Status.SKIPPED, outcome.message)
    if outcome.status == FAILED:
        return Verdict(
            binding,
            outcome.backend,
            Status.FAILED,
            f"{binding.where}: figure {binding.text} ({claim.id}) cannot be checked: {outcome.message}",
        )
    if outcome.status == BROKEN:
        return Verdict(
            binding,
            outcome.backend,
            BROKEN,
            f"{binding.where}: figure {binding.text} ({claim.id}) was not checked: {outcome.message}",
        )
    if claim.kind is Kind.MEASURED and claim.printed_on and claim.printed_on not in machine.markers:
        return Verdict(
            binding,
            outcome.backend,
            Status.REFERENCE,
            f"{binding.where}: the author's machine ({claim.printed_on}) printed {binding.text}; this machine "
            f"({machine.slug}) measured {show(outcome.value)} on {outcome.backend}; compared only on "
            f"{claim.printed_on}, its invariants checked here",
        )
    mismatch = _type_mismatch(binding, outcome.value)
    if mismatch:
        return Verdict(
            binding,
            outcome.backend,
            Status.FAILED,
            f"{binding.where}: figure {binding.text} ({claim.id}) cannot be checked on {outcome.backend}: {mismatch}",
        )
    holds = _holds_within(claim, binding, outcome.value)
    if binding.disputed:
        assert binding.printed is not None
        margin = dispute_margin(binding.printed)
        if not holds and not beyond_precision(binding.printed, outcome.value):
            return Verdict(
                binding,
                outcome.backend,
                Status.FAILED,
                f"{binding.where}: figure {binding.text} ({claim.id}) is marked disputed, but computed "
                f"{show(outcome.value)} on {outcome.backend} lies within {margin} of it, the precision the figure "
                "states: a dispute must refute the source beyond the precision it gave; print the figure at that "
                "precision (a value with '± margin' in the link's title) and drop the 'disputed' mark"
                + (f" ({claim.quoted_from})" if claim.quote else "")
                + _from(outcome),
            )
        if holds:
            return Verdict(
                binding,
                outcome.backend,
                Status.FAILED,
                f"{binding.where}: figure {binding.text} ({claim.id}) is marked disputed but holds on "
                f"{outcome.backend}: computed {show(outcome.value)}; drop the 'disputed' mark"
                + (f" ({claim.quoted_from})" if claim.quote else "")
                + _from(outcome),
            )
        quoted = f"; {claim.quoted_from}" if claim.quote else ""
        return Verdict(
            binding,
            outcome.backend,
            Status.DISPUTED,
            f"{binding.where}: figure {binding.text} ({claim.id}) is disputed: computed {show(outcome.value)} "
            f"on {outcome.backend}{quoted}",
        )
    if holds:
        status, why = evidence(claim, outcome.inputs)
        return Verdict(
            binding,
            outcome.backend,
            status,
            f"{binding.where}: figure {binding.text} ({claim.id}) is {why}" if status is not Status.VERIFIED else "",
        )
    return Verdict(binding, outcome.backend, Status.STALE, stale_message(binding, outcome))


def dispute_margin(printed: Printed) -> str:
    """The precision a printed figure gives itself, as a reader reads it: the margin it states (`25 ± 1`),
    else one unit in its last printed digit (`25` is a whole number: within 1 of it is what it claims)."""
    items = printed.value if isinstance(printed.value, tuple) else (printed,)
    return ", ".join(f"±{show(_margin(p))}" for p in items)


def _margin(printed: Printed) -> Fraction:
    half = Fraction(printed.high) - Fraction(printed.low) if isinstance(printed.low, Fraction) else Fraction(0)
    return half / 2 if printed.suffix.lstrip().startswith(("±", "+/-")) else half


def beyond_precision(printed: Printed, computed: Any) -> bool:
    """Whether a computed value refutes a printed figure beyond the precision the figure gave itself
    (`dispute_margin`): what a dispute must show. A value that only misses the printed rounding (25.6 against
    a prose "twenty-five") leaves the source's proposition standing."""
    if isinstance(printed.value, tuple):
        items = _as_items(computed)
        if items is None or len(items) != len(printed.value):
            return True
        return any(beyond_precision(p, c) for p, c in zip(printed.value, items, strict=True))
    number, value = as_number(computed), printed.value
    if number is None or isinstance(number, float) or isinstance(value, float):
        return not printed.holds(computed)
    assert isinstance(value, Fraction)
    return abs(number - value) > _margin(printed)


def _as_items(value: Any) -> list[Any] | None:
    if isinstance(value, (list, tuple)):
        return list(value)
    listed = value.tolist() if callable(getattr(value, "tolist", None)) else None
    return listed if isinstance(listed, list) else None


#: what `evidence` may call a printed figure that holds: each says the figure matched its value, from another source
HELD: frozenset[Status] = frozenset({Status.VERIFIED, Status.CITED, Status.PREMISE, Status.UNSOURCED, Status.REFERENCE})


def stale_message(binding: Binding, outcome: Outcome) -> str:
    """The compiler-style line for a stale figure: where, which claim, printed, computed, from what."""
    stated = f" (stated as {binding.stated!r})" if binding.stated != binding.text else ""
    on = "in exact arithmetic" if outcome.backend == NO_BACKEND.name else f"on {outcome.computed_on}"
    if outcome.recorded:
        on += f" (this machine's record of {outcome.recorded})"
    line = (
        f"{binding.where}: figure {binding.text}{stated} ({outcome.claim.id}) is stale {on}: "
        f"computed {show(outcome.value)}"
    )
    if outcome.claim.tolerance is not None:
        line += f" (tolerance {outcome.claim.tolerance:.0%})"
    if outcome.inputs:
        line += _from(outcome)
    elif outcome.claim.kind is Kind.LIBRARY:
        line += f"\n    from {outcome.claim.defined_at} on {outcome.computed_on}"
    return line


def _from(outcome: Outcome) -> str:
    """The inputs and settings a value came from, one per line, for a message; a file a library reads
    whole (a model's config.json) is one line, not one per key."""
    lines, whole = [], set()
    for read in outcome.inputs:
        reader = getattr(read, "whole", None)
        if isinstance(read, inputs.Input) and reader:
            if read.file not in whole:
                whole.add(read.file)
                lines.append(f"{inputs.shown_as()}/{read.file}, all of it ({reader} reads every key)")
            continue
        lines.append(str(read))
    return ("\n    from " + "\n    and  ".join(lines)) if lines else ""


def backends_for(claim: Claim, backends: Mapping[str, Backend]) -> list[Backend]:
    """Of `backends` (by name, in the order of `backends.NAMES`), those a claim is computed on;
    no backend at all for the arithmetic kinds."""
    if not claim.needs_backend:
        return [NO_BACKEND]
    return [
        backends[name] for name in backends if claim.runs_on(name)
    ]  # a library is detected only where a claim runs on it


class Verifier:
    """One run's engine: computes each (claim, backend) once and judges every figure against it."""

    conditions: RunLock | None = None  # what the machine was doing while the run timed it, where the run knows

    def __init__(self, registry: Registry, book: Book, backends: Mapping[str, Backend], machine: Machine) -> None:
        self.registry = registry
        self.book = book
        self.backends = backends
        self.machine = machine
        self.bindings = book.by_claim()
        self._outcomes: dict[Check, Outcome] = {}
        self.judged: dict[Check, Outcome] = {}
        #: the outcomes taken from this machine's records, which this run judges against without computing
        #: (`--changed`, see verified_book.engine.recorded)
        self.recorded: dict[Check, Outcome] = {}
        self._live: Callable[[str], Backend] | None = getattr(backends, "live", None)

    def backends_for(self, claim: Claim) -> list[Backend]:
        """The backends a claim is computed on, available or not (absent ones are skipped)."""
        return backends_for(claim, self.backends)

    def broken(self) -> list[environment.Broken]:
        """What the environment lost during the run, once each, as the claims met it."""
        found = [o.broken for o in self.judged.values() if o.status == BROKEN and o.broken is not None]
        return list({b.lost: b for b in found}.values())

    def outcome(self, claim: Claim, backend: Backend) -> Outcome:
        key = Check(claim.id, backend.name)
        if key not in self._outcomes and key in self.recorded:
            self._outcomes[key] = self.recorded[key]
        if key not in self._outcomes:
            if backend.recorded is not None and backend.available and self._live is not None:
                # known from the records, and this check must compute on it: its library loads now
                backend = self._live(backend.name)
            if not backend.available:
                self._outcomes[key] = Outcome(
                    claim, backend.name, SKIPPED, message=f"{backend.name} is not here: {backend.reason}"
                )
            else:
                self._outcomes[key] = evaluate(claim, backend)
        self.judged[key] = self._outcomes[key]
        return self._outcomes[key]

    def computed(self, key: Check) -> Outcome | None:
        """The outcome of (claim id, backend name) computed so far, if any; nothing is computed."""
        return self._outcomes.get(key)

    def forget(self, key: Check) -> None:
        """Let go of what was computed and judged for (claim id, backend name): the next `outcome` computes it."""
        self._outcomes.pop(key, None)
        self.judged.pop(key, None)

    def renew_claims(self) -> None:
        """Point every outcome kept at the registry's claim of its id: after the claims were loaded again, the
        values kept were computed by objects of the same code that the registry no longer holds."""
        for key, outcome in list(self._outcomes.items()):
            claim = self.registry.get(key[0])
            if claim is not None and outcome.claim is not claim:
                self._outcomes[key] = replace(outcome, claim=claim)
                if key in self.judged:
                    self.judged[key] = self._outcomes[key]

    def verdicts(self, claim: Claim, backend: Backend) -> list[Verdict]:
        result = self.outcome(claim, backend)
        return [judge(b, result, self.machine) for b in self.bindings.get(claim.id, [])]

    def judge_everywhere(self, binding: Binding, claim: Claim) -> list[Verdict]:
        """One printed figure against every backend its claim is computed on."""
        return [judge(binding, self.outcome(claim, b), self.machine) for b in self.backends_for(claim)]

    def status(self, claim: Claim, backend: Backend) -> tuple[str, list[Verdict]]:
        result = self.outcome(claim, backend)
        verdicts = self.verdicts(claim, backend)
        if result.status == SKIPPED:
            return Status.SKIPPED, verdicts
        if result.status == FAILED:
            return Status.FAILED, verdicts
        if result.status == BROKEN:
            return BROKEN, verdicts
        return worst((v.status for v in verdicts), default=evidence(claim, result.inputs)[0]), verdicts

    def record(self, claim: Claim, backend: Backend) -> Record:
        """The results-file record of one (claim, backend)."""
        result = self.outcome(claim, backend)
        status, verdicts = self.status(claim, backend)
        messages = [result.message] if result.message else []
        messages += [v.message for v in verdicts if v.message and v.status != Status.VERIFIED]
        notes = sorted({v.message for v in verdicts if v.status == Status.VERIFIED and v.message})
        record = Record(
            status=str(status),
            value=to_json(result.value),
            figures=[
                FigureVerdict(
                    file=v.binding.file,
                    line=v.binding.line,
                    printed=v.binding.text,
                    stated=v.binding.stated,
                    status=str(v.status),
                )
                for v in verdicts
            ],
            message="\n".join(messages + notes),
            inputs=[input_entry(i) for i in result.inputs],
            version=self.backends[backend.name].version if backend.name in self.backends else None,
        )
        uses = self.uses(claim, backend.name)
        if uses is not None:  # left out, not null, where it computes with no other library
            record = revised(record, uses=uses)
        if claim.kind is Kind.MEASURED and self.conditions is not None:  # what the machine was doing meanwhile
            record = revised(record, conditions=Conditions.model_validate(self.conditions.seen().entry()))
        return record

    def uses(self, claim: Claim, backend: str) -> dict[str, str | None] | None:
        """The versions, as this machine has them, of the libraries beyond its backend's that a value of `claim`
        on `backend` is computed with (`provenance.uses_of`); None where there are none."""
        names = uses_of(claim, backend)
        return {name: str(self.machine.info[name]) for name in names if self.machine.info.get(name)} if names else None

    def claim_meta(self, claim: Claim) -> ClaimMeta:
        """What a claim is, kept once per claim in the results file: its fingerprint says which code made its
        records."""
        return ClaimMeta(
            kind=claim.kind.value,
            defined_at=claim.defined_at,
            citation=claim.citation,
            hardware=claim.hardware,
            code=code_fingerprint(claim),
        )

    def results(
        self,
        slug: str,
        run: dict[str, Any],
        outputs: dict[str, SnippetOutput],
        not_here: dict[str, str] | None = None,
        only: Iterable[tuple[str, str]] | None = None,
    ) -> ResultsFile:
        """Every (claim, backend) judged in this run (or those of them in `only`), as a results file to
        merge; `not_here` gives the reason for each claim this run selected but could not compute on any
        backend here."""
        records: dict[str, dict[str, Record]] = {}
        claims: dict[str, ClaimMeta] = {}
        seconds: dict[str, dict[str, float]] = {}
        dates: dict[str, dict[str, str]] = {}
        keys = sorted(self.judged) if only is None else sorted(set(only) & set(self.judged))
        for claim_id, backend_name in keys:
            claim = self.registry[claim_id]
            backend = self.backends.get(backend_name, NO_BACKEND)
            if not backend.available:  # an absent backend leaves no record; the run header lists what is absent
                continue
            if self.judged[Check(claim_id, backend_name)].status == BROKEN:  # not asked: the earlier record stands
                continue
            try:
                record = self.record(claim, backend)
                json.dumps(record.model_dump(mode="json"), allow_nan=False)
            except Exception as e:  # one record that cannot be written must not cost the others
                record = Record(
                    status=FAILED,
                    value=None,
                    figures=[],
                    message=_short(
                        f"the record of {claim_id} on {backend_name} cannot be written: {type(e).__name__}: {_text(e)}"
                    ),
                    inputs=[],
                    version=None,
                )
            records.setdefault(claim_id, {})[backend_name] = record
            claims[claim_id] = self.claim_meta(claim)
            outcome = self._outcomes[Check(claim_id, backend_name)]
            seconds.setdefault(claim_id, {})[backend_name] = round(outcome.seconds, 4)
            # a value taken from a record keeps the date it was computed on; its figures are judged anew
            dates.setdefault(claim_id, {})[backend_name] = outcome.recorded or run.get("date") or now()
        for claim_id, reason in sorted((not_here or {}).items()):
            if claim_id not in records and claim_id in self.registry:
                claims[claim_id] = revised(self.claim_meta(self.registry[claim_id]), skipped=reason)
        machine = MachineRecord(
            slug=slug,
            **({"id": self.machine.id} if self.machine.id else {}),
            markers=list(self.machine.markers),
            fingerprint=to_json(dict(self.machine.info)),
        )
        header = RunHeader.model_validate({**to_json(run), "seconds": seconds, "dates": dates})
        return ResultsFile(slug, machine, header, records, outputs, claims)
