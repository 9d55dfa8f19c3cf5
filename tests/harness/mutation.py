"""Mutation testing of the book: a wrong figure, a changed input or a lost disposition must be caught.

Three questions, asked of whatever the book holds today:

- Figures: every bound figure, changed in its last printed digit and multiplied by ten,
  is judged against the values this run computed; each such mutant must come out
  stale. Figures that cannot be compared here (a measured claim printed for another
  machine, a disputed figure, a claim skipped on every backend here) are counted
  apart, each with its reason.
- Inputs: every stated input in `claims/data/` (each vendor figure's `value`, each key
  of a model's `config.json`) is perturbed in turn, and the claims whose recorded inputs
  include it are computed again: at least one must fail. An input nothing depends on
  must be on the allow-list `claims/data/unused-inputs.toml` with a reason, and an entry
  there that something does depend on is an error too. Inputs that only claims about
  other hardware read are listed there under `[elsewhere]`: excused where unread,
  checked like any other input on a machine that reads them.
- Dispositions: every claim resting on a premise the book disputes, its disposition
  removed (its excuse, and the disputed marks of its figures), must fail the book's
  check at its definition, naming it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import tomllib
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Iterable, Iterator

from verified_book.authoring import inputs
from verified_book.authoring.registry import Claim, Kind, Registry
from verified_book.backends import Backend
from verified_book.book.bindings import Binding
from verified_book.book.figures import FigureSyntaxError, Printed, as_number, parse
from verified_book.engine import premises
from verified_book.engine.check import COMPUTED, FAILED, HELD, Outcome, Verifier, evaluate, judge
from verified_book.vocabulary import Status

ALLOWLIST = "unused-inputs.toml"
CAUGHT = (Status.STALE, Status.FAILED)
_DIGIT = re.compile(r"\d")
_EXPONENT = re.compile(r"(?:[eE][+-]?\d+|\s*[×x·*]\s*10\^\{?[+-]?\d+\}?)")


# ---------------------------------------------------------------- figures


@dataclass(frozen=True)
class Mutant:
    """A bound figure with its printed value changed: how, and the text it now reads."""

    binding: Binding
    how: str
    stated: str

    def as_binding(self) -> Binding:
        return self.binding.restated(self.stated)


@dataclass
class FigureReport:
    """What became of each figure mutant: caught, survived, or not tried and why."""

    figures: int = 0
    killed: list[Mutant] = field(default_factory=list)
    survived: list[tuple[Mutant, str]] = field(default_factory=list)
    within_tolerance: list[Mutant] = field(default_factory=list)
    excluded: dict[str, list[Binding]] = field(default_factory=dict)

    @property
    def tried(self) -> int:
        return len(self.killed) + len(self.survived)

    @property
    def kill_rate(self) -> float:
        return len(self.killed) / self.tried if self.tried else 1.0

    def exclude(self, reason: str, binding: Binding) -> None:
        self.excluded.setdefault(reason, []).append(binding)

    def summary(self) -> str:
        parts = [
            f"figure mutants: {len(self.killed)}/{self.tried} caught ({self.kill_rate:.1%}) "
            f"from {self.figures} bound figures"
        ]
        for reason, items in sorted(self.excluded.items()):
            parts.append(f"  not mutated ({len(items)} figures): {reason}")
        if self.within_tolerance:
            parts.append(
                f"  not caught, within a measured claim's stated tolerance: {len(self.within_tolerance)} mutants"
            )
        for mutant, why in self.survived:
            parts.append(
                f"  SURVIVED {mutant.binding.where} {mutant.binding.text!r} -> {mutant.stated!r} "
                f"({mutant.how}, {mutant.binding.claim_id}): {why}"
            )
        return "\n".join(parts)


def _mantissa_end(printed: Printed) -> int:
    """Where the mantissa's digits end in the stated text: before an exponent, except in a power (2^-7)."""
    core = printed.core
    if re.match(r"^\d+\^", core):
        return len(printed.prefix) + len(core)
    exponent = _EXPONENT.search(core)
    return len(printed.prefix) + (exponent.start() if exponent else len(core))


def last_digit_mutant(text: str) -> str | None:
    """The figure with its last printed digit moved by five, beyond any printed precision."""
    printed = parse(text)
    if printed.is_tuple:
        return None
    start, end = len(printed.prefix), _mantissa_end(printed)
    digits = [m.start() + start for m in _DIGIT.finditer(text[start:end])]
    if not digits:
        return None
    at = digits[-1]
    return text[:at] + str((int(text[at]) + 5) % 10) + text[at + 1 :]


def times_ten_mutant(text: str) -> str | None:
    """The figure multiplied by ten, printed in the same notation."""
    printed = parse(text)
    if printed.is_tuple:
        values = [as_number(p.value) for p in printed.value]  # type: ignore[union-attr]
        if any(not isinstance(v, Fraction) for v in values) or all(v == 0 for v in values):
            return None
        return printed.render([v * 10 for v in values])  # type: ignore[operator]
    value = as_number(printed.value)
    if not isinstance(value, Fraction) or value == 0:
        return None
    return printed.render(value * 10)


def mutants(binding: Binding) -> list[Mutant]:
    """The mutants of one figure: its last digit, and ten times its value (each element of a tuple)."""
    stated = binding.stated
    printed = binding.printed
    assert printed is not None
    out: list[Mutant] = []
    if printed.is_tuple:
        items = printed.value
        assert isinstance(items, tuple)
        inner_start = len(printed.prefix)
        # Mutate each element's last digit in place, one element at a time.
        offset = inner_start
        for index, item in enumerate(items):
            found = stated.find(item.text.strip(), offset)
            if found < 0:
                continue
            changed = last_digit_mutant(item.text.strip())
            if changed is not None:
                out.append(
                    Mutant(
                        binding,
                        f"last digit of element {index + 1}",
                        stated[:found] + changed + stated[found + len(item.text.strip()) :],
                    )
                )
            offset = found + len(item.text.strip())
    else:
        changed = last_digit_mutant(stated)
        if changed is not None:
            out.append(Mutant(binding, "last digit", changed))
    scaled = times_ten_mutant(stated)
    if scaled is not None:
        out.append(Mutant(binding, "times ten", scaled))
    valid = []
    for mutant in out:
        try:
            if parse(mutant.stated) and mutant.stated != stated:
                valid.append(mutant)
        except FigureSyntaxError:
            continue
    return valid


def _computed(verifier: Verifier, claim: Claim) -> tuple[list[Outcome], list[str]]:
    """This run's computed outcomes of a claim, and why the others were not computed."""
    done, why = [], []
    for backend in verifier.backends_for(claim):
        result = verifier.outcome(claim, backend)
        if result.status == COMPUTED:
            done.append(result)
        else:
            why.append(result.message.split("\n")[0])
    return done, why


def _hardware_elsewhere(verifier: Verifier, claim: Claim) -> bool:
    return bool(claim.hardware) and claim.hardware not in verifier.machine.markers


def mutate_figures(verifier: Verifier) -> FigureReport:
    """Judge every figure mutant against the values this run computed (computed now where missing)."""
    report = FigureReport()
    for binding in verifier.book.bindings():
        report.figures += 1
        claim = verifier.registry.get(binding.claim_id)
        if claim is None:
            report.exclude("binds to no claim (the book's own test fails it)", binding)
            continue
        if binding.disputed:
            report.exclude("disputed: printed from a source to show that it does not hold", binding)
            continue
        if _hardware_elsewhere(verifier, claim):
            report.exclude(
                f"claim about other hardware, not computed on this machine ({verifier.machine.slug})", binding
            )
            continue
        if claim.kind is Kind.MEASURED and claim.printed_on and claim.printed_on not in verifier.machine.markers:
            report.exclude("measured claim printed for another machine: compared only there", binding)
            continue
        outcomes, why = _computed(verifier, claim)
        if not outcomes:
            failed = any(verifier.outcome(claim, b).status == FAILED for b in verifier.backends_for(claim))
            reason = (
                "claim fails on this machine (the book's own test reports it)"
                if failed
                else "skipped on every backend here"
            )
            report.exclude(reason, binding)
            continue
        if any(judge(binding, o, verifier.machine).status not in HELD for o in outcomes):
            report.exclude("does not hold unmutated on this machine (the book's own test reports it)", binding)
            continue
        changes = mutants(binding)
        if not changes:
            report.exclude("no digit to change (inf or nan), and ten times zero is zero", binding)
            continue
        for mutant in changes:
            verdicts = [judge(mutant.as_binding(), o, verifier.machine) for o in outcomes]
            if any(v.status in CAUGHT for v in verdicts):
                report.killed.append(mutant)
            elif claim.tolerance is not None:
                report.within_tolerance.append(mutant)
            else:
                report.survived.append((mutant, "; ".join(f"{v.backend}: {v.status}" for v in verdicts)))
    return report


# ---------------------------------------------------------------- inputs


@dataclass(frozen=True)
class DataInput:
    """One stated input: a vendor figure's value, or one key of a model's config.json."""

    file: str
    key: str
    value: Any = field(compare=False, hash=False)

    @property
    def where(self) -> str:
        return f"claims/data/{self.file} {self.key}"


@dataclass
class InputReport:
    """What perturbing each input did: which claim caught it, or that nothing did."""

    guarded: dict[DataInput, str] = field(default_factory=dict)
    unguarded: dict[DataInput, str] = field(default_factory=dict)
    allowed: dict[DataInput, str] = field(default_factory=dict)
    elsewhere: dict[DataInput, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def tried(self) -> int:
        return len(self.guarded) + len(self.unguarded) + len(self.allowed) + len(self.elsewhere)

    def summary(self) -> str:
        lines = [
            f"input perturbations: {len(self.guarded)}/{len(self.guarded) + len(self.unguarded)} caught; "
            f"{len(self.allowed)} on the allow-list ({ALLOWLIST}) confirmed unused; "
            f"{len(self.elsewhere)} read only on other hardware, not here"
        ]
        lines += [f"  NOT CAUGHT {item.where}: {why}" for item, why in self.unguarded.items()]
        lines += [f"  {problem}" for problem in self.problems]
        return "\n".join(lines)


def data_inputs() -> list[DataInput]:
    """Every stated input under claims/data/: vendor figures (tables with a `value`) and config keys."""
    out: list[DataInput] = []
    for file in inputs.data_files():
        if file == ALLOWLIST:
            continue
        data = inputs.table(file)
        if file.endswith(".json"):
            if isinstance(data, dict):
                out += [DataInput(file, key, value) for key, value in data.items()]
            continue

        def walk(node: Any, prefix: str, file: str = file, out: list[DataInput] = out) -> None:
            if not isinstance(node, dict):
                return
            if "value" in node and prefix:
                out.append(DataInput(file, prefix, node["value"]))
                return
            for key, value in node.items():
                walk(value, f"{prefix}.{key}" if prefix else key)

        walk(data, "")
    return out


def perturbations(value: Any) -> list[Any]:
    """Changed values to try, strongest first: a dependent figure cannot round back to its text."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value * 2 if value else 1, value + 1]
    if isinstance(value, float):
        return [value * 2 if value else 1.0, value * 1.5 if value else -1.0]
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return [value + "_perturbed"]
        return [str(number * 2 if number else 1.0), value + "_perturbed"]
    if isinstance(value, list):
        if value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return [[v * 2 if v else 1 for v in value], []]
        return [[*value, "perturbed"], []]
    if isinstance(value, dict):
        return [{}, {**value, "perturbed": 1}]
    return [1, "perturbed"]


ELSEWHERE = "elsewhere"


def read_allowlist(text: str | None = None, section: str | None = None) -> dict[tuple[str, str], str]:
    """The allow-list: (file, key) -> reason. Each table is a data file, each entry a key with its reason.

    Tables under `[elsewhere."<file>"]` (section="elsewhere") list inputs that only claims
    about other hardware read: excused on a machine where no claim reads them, checked
    like any input where one does.
    """
    if text is None:
        path = inputs.data_dir() / ALLOWLIST
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    data = tomllib.loads(text)
    if section is not None:
        data = data.get(section, {})
    out: dict[tuple[str, str], str] = {}
    for file, entries in data.items():
        if section is None and file == ELSEWHERE:
            continue
        if not isinstance(entries, dict):
            raise ValueError(f"claims/data/{ALLOWLIST}: [{file}] must be a table of key = reason")
        for key, reason in entries.items():
            out[(file, key)] = reason if isinstance(reason, str) else ""
    return out


@contextlib.contextmanager
def _all_overridden(items: Iterable[tuple[DataInput, Any]]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for item, value in items:
            stack.enter_context(inputs.overridden(item.file, item.key, value))
        yield


def _dependents(verifier: Verifier) -> dict[tuple[str, str], list[tuple[Claim, Backend]]]:
    """(file, key) -> the (claim, backend) pairs whose recorded inputs include it, quickest to compute first."""
    found: dict[tuple[str, str], list[tuple[float, str, Claim, Backend]]] = {}
    for claim in verifier.registry:
        if _hardware_elsewhere(verifier, claim):
            continue
        for backend in verifier.backends_for(claim):
            result = verifier.outcome(claim, backend)
            if result.status == "skipped":
                continue
            for item in result.inputs:
                if isinstance(item, inputs.Input):  # a recorded machine setting is no data file to perturb
                    found.setdefault((item.file, item.key), []).append((result.seconds, claim.id, claim, backend))
    out: dict[tuple[str, str], list[tuple[Claim, Backend]]] = {}
    for key, entries in found.items():
        pairs: list[tuple[Claim, Backend]] = []
        for _, _, claim, backend in sorted(entries, key=lambda e: (e[0], e[1])):
            if (claim, backend) not in pairs:
                pairs.append((claim, backend))
        out[key] = pairs
    return out


def _fails(verifier: Verifier, claim: Claim, backend: Backend) -> str | None:
    """Why this claim fails when computed again now (under whatever inputs are overridden), or None."""
    result = evaluate(claim, backend)
    if result.status == FAILED:
        return f"{claim.id} on {backend.name} fails: {result.message.splitlines()[0]}"
    if result.status != COMPUTED:
        return None
    for binding in verifier.bindings.get(claim.id, []):
        if binding.printed is None:
            continue
        verdict = judge(binding, result, verifier.machine)
        if verdict.status in CAUGHT:
            return f"{binding.where} ({claim.id} on {backend.name}) goes {verdict.status}"
    return None


def _caught_by(
    verifier: Verifier, pairs: list[tuple[Claim, Backend]], changes: list[tuple[DataInput, Any]]
) -> str | None:
    with _all_overridden(changes):
        for claim, backend in pairs:
            why = _fails(verifier, claim, backend)
            if why:
                return why
    return None


QUICK_CASES = 12
QUICK_SECONDS = 0.5


def _perturbed(group: list[DataInput], round_: int) -> list[tuple[DataInput, Any]]:
    out = []
    for item in group:
        options = perturbations(item.value)
        out.append((item, options[min(round_, len(options) - 1)]))
    return out


class _Cases:
    """The dependents of each input, with the time each took in this run, to try the quick ones first."""

    def __init__(self, verifier: Verifier) -> None:
        self.verifier = verifier
        self.by_input = _dependents(verifier)

    def seconds(self, pair: tuple[Claim, Backend]) -> float:
        return self.verifier.outcome(*pair).seconds

    def cost(self, pair: tuple[Claim, Backend]) -> tuple[int, float]:
        """Measured claims last (their runs are timed, and their caches hide the cost), then by time."""
        return (pair[0].kind is Kind.MEASURED, self.seconds(pair))

    def of(self, group: list[DataInput], quick: bool | None = None) -> list[tuple[Claim, Backend]]:
        pairs: list[tuple[Claim, Backend]] = []
        for item in group:
            pairs += [p for p in self.by_input.get((item.file, item.key), []) if p not in pairs]
        if quick is not None:
            pairs = [p for p in pairs if (self.cost(p) <= (False, QUICK_SECONDS)) == quick]
        return sorted(pairs, key=self.cost)


def _search(cases: _Cases, group: list[DataInput], quick: bool | None, caught: dict[DataInput, str]) -> None:
    """Perturb a group together; where a claim fails, halve the group until each input it fails on is found."""
    if not group:
        return
    why = _caught_by(cases.verifier, cases.of(group, quick), _perturbed(group, 0))
    if why is None:
        return
    if len(group) == 1:
        caught[group[0]] = why
        return
    middle = len(group) // 2
    _search(cases, group[:middle], quick, caught)
    _search(cases, group[middle:], quick, caught)


def _allowlist_problems(listed: dict[tuple[str, str], str], known: set[tuple[str, str]]) -> list[str]:
    """The allow-list's entries that name no input or give no reason."""
    problems = []
    for (file, key), reason in sorted(listed.items()):
        if (file, key) not in known:
            problems.append(f'claims/data/{ALLOWLIST}: ["{file}"] {key} names no input in claims/data/; remove it')
        if not reason.strip():
            problems.append(f'claims/data/{ALLOWLIST}: ["{file}"] {key} has no reason')
    return problems


def perturb_inputs(
    verifier: Verifier,
    allowlist: dict[tuple[str, str], str] | None = None,
    elsewhere: dict[tuple[str, str], str] | None = None,
) -> InputReport:
    """Perturb every input; the claims that recorded it are computed again, and one must fail.

    Each input is first tried alone against its quickest dependents, with two kinds of
    change. The rest (the allow-listed ones among them) are perturbed together per file:
    against their quick dependents, then once against the slow ones; a group in which a
    claim fails is halved until the input it fails on is found. So a book whose inputs
    are all used and whose allow-list is right costs about one computation of each
    claim that reads an input, and a slow claim is computed again once, not per input.
    """
    allowlist = read_allowlist() if allowlist is None else allowlist
    elsewhere = read_allowlist(section=ELSEWHERE) if elsewhere is None else elsewhere
    report = InputReport()
    items = data_inputs()
    report.problems += _allowlist_problems({**allowlist, **elsewhere}, {(i.file, i.key) for i in items})
    cases = _Cases(verifier)
    caught: dict[DataInput, str] = {}
    pending: dict[str, list[DataInput]] = {}
    for item in items:
        if not cases.of([item]):
            continue
        if (item.file, item.key) not in allowlist:
            quick = cases.of([item], quick=True)[:QUICK_CASES]
            why = None
            for round_ in range(2):
                why = why or _caught_by(verifier, quick, _perturbed([item], round_))
            if why:
                caught[item] = why
                continue
        pending.setdefault(item.file, []).append(item)
    for group in pending.values():
        _search(cases, group, True, caught)
        _search(cases, [i for i in group if i not in caught], False, caught)
    for item in items:
        listed = (item.file, item.key) in allowlist
        pairs = cases.of([item])
        if item in caught:
            report.guarded[item] = caught[item]
            if listed:
                report.problems.append(
                    f'claims/data/{ALLOWLIST}: ["{item.file}"] {item.key} is listed as unused, '
                    f"but a figure depends on it: {caught[item]}; remove the entry"
                )
        elif listed:
            report.allowed[item] = allowlist[(item.file, item.key)]
        elif not pairs and (item.file, item.key) in elsewhere:
            report.elsewhere[item] = elsewhere[(item.file, item.key)]
        elif pairs:
            names = sorted({c.id for c, _ in pairs})
            report.unguarded[item] = (
                f"read by {', '.join(names[:4])}{', ...' if len(names) > 4 else ''}; "
                "changing it fails none of them (no figure of theirs is bound, or none moves)"
            )
        else:
            report.unguarded[item] = "no claim reads it"
    return report


# ---------------------------------------------------------------- dispositions


@dataclass
class DispositionReport:
    """What removing each disposition did: the book's check named the claim at its definition, or did not."""

    named: list[str] = field(default_factory=list)
    missed: dict[str, str] = field(default_factory=dict)

    @property
    def tried(self) -> int:
        return len(self.named) + len(self.missed)

    def summary(self) -> str:
        lines = [f"dispositions removed: {len(self.named)}/{self.tried} named by the book's check"]
        lines += [f"  NOT NAMED {claim_id}: {why}" for claim_id, why in self.missed.items()]
        return "\n".join(lines)


def drop_dispositions(verifier: Verifier) -> DispositionReport:
    """Remove each dependant's disposition in turn (its excuse from the dispute, the disputed marks of its
    figures) and run the book's premise check again: it must fail at the claim's definition, naming it."""
    report = DispositionReport()
    bindings = list(verifier.book.bindings())
    for dispute in premises.disputes(verifier.registry):
        for found in premises.dependants(dispute, verifier.registry, verifier.book.by_claim()):
            claim = found.claim
            excused = {k: v for k, v in claim.excused.items() if k != dispute.id}
            registry = _replaced(verifier.registry, dataclasses.replace(claim, excused=excused))
            marked = [dataclasses.replace(b, disputed=False) if b.claim_id == claim.id else b for b in bindings]
            problems = premises.premise_problems(registry, marked)
            said = f"claim {claim.id!r} rests on the premise {dispute.id!r}"
            if any(p.where == claim.defined_at and said in p.message for p in problems):
                report.named.append(claim.id)
            else:
                report.missed[claim.id] = "; ".join(map(str, problems)) or "the check passed"
    return report


def _replaced(registry: Registry, item: Claim) -> Registry:
    """A registry of the same claims, `item` in place of the one of its id."""
    out = Registry()
    for held in registry:
        out.add(item if held.id == item.id else held)
    return out


@contextlib.contextmanager
def book_verifier(root: Any) -> Iterator[Verifier]:
    """A verifier of the project's book outside pytest (for scripts): the run's claims, book and machine, with
    the book open for the block."""
    from pathlib import Path

    from verified_book import backends as backends_mod
    from verified_book.authoring.registry import REGISTRY
    from verified_book.book.bindings import Book
    from verified_book.engine import machine as machine_mod
    from verified_book.engine.config import open_book, read_config

    config = read_config(Path(root))
    opened = open_book(config)
    if opened.load_errors:
        raise RuntimeError("topic modules do not import:\n" + "\n".join(map(str, opened.load_errors)))
    with opened.opened():
        book = Book.read(config.pages, config.root, config.allowlist)
        machine = machine_mod.identify(machine_mod.fingerprint())
        yield Verifier(REGISTRY, book, dict(backends_mod.detect()), machine)
