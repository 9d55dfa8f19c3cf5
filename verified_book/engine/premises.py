"""A correction propagates: the claims resting on a premise the book disputes, found through the claim graph.

A claim whose figure disputes its source names what carries the source's premise (`Claim.premise`, from
`disputes_premise`): the book's helpers and data entries that read the world as the source does. Every other
claim bound in the book that calls such a helper or reads such an entry rests on the same premise, and says what
became of it: every figure of it is disputed too, or it gives the reason its figure stands (`Claim.excused`,
from `excuse`), which its panel shows. A claim re-derived without the premise no longer calls it, and is no
dependant. One with no disposition fails the book's check at its definition.

A claim computed without a backend is run once with its calls and reads watched, so only what its value
was computed from counts; a claim computed on a backend cannot run here, and rests on what its code reaches
(`provenance.code_reached`): a helper it names, or a data key its code writes out.
"""

from __future__ import annotations

import contextlib
import sys
import types
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

from verified_book.authoring import inputs
from verified_book.authoring.registry import Claim, Registry
from verified_book.book.bindings import Binding
from verified_book.engine.provenance import code_reached
from verified_book.errors import Problem
from verified_book.vocabulary import Disposition


@dataclass(frozen=True)
class Dependant:
    """A claim resting on the premise of a disputed one: what it shares with it, and what became of it."""

    claim: Claim
    dispute: Claim
    shared: tuple[str, ...]  # the premise's helpers it calls and data entries it reads
    disposition: Disposition | None
    reason: str = ""  # the excuse, where it is excused


def is_entry(item: str) -> bool:
    """Whether a premise item is a data entry (`file:key`) rather than a helper (`module.name`)."""
    return ":" in item


def disputes(registry: Registry) -> list[Claim]:
    """The claims that name a premise of their source's."""
    return [c for c in registry if c.premise]


def dependants(dispute: Claim, registry: Registry, bound: Mapping[str, Sequence[Binding]]) -> list[Dependant]:
    """Every claim bound in the book that rests on `dispute`'s premise, with its disposition, by id."""
    found = []
    for claim in registry:
        if claim.id == dispute.id or claim.id not in bound:
            continue
        shared = shares(claim, dispute.premise)
        if shared:
            found.append(Dependant(claim, dispute, shared, *disposition(claim, dispute, bound[claim.id])))
    return found


def disposition(claim: Claim, dispute: Claim, figures: Sequence[Binding]) -> tuple[Disposition | None, str]:
    """What became of a dependant: disputed where every figure of it is; excused where it says why it stands."""
    if dispute.id in claim.excused:
        return Disposition.EXCUSED, claim.excused[dispute.id]
    if figures and all(b.disputed for b in figures):
        return Disposition.DISPUTED, ""
    return None, ""


def shares(claim: Claim, premise: Sequence[str]) -> tuple[str, ...]:
    """The items of `premise` a claim's value rests on: watched as it computes, or else what its code reaches."""
    reached = code_reached(claim)
    helpers = [p for p in premise if not is_entry(p) and p in reached]
    entries = [p for p in premise if is_entry(p) and _writes_key(reached.values(), p)]
    if not helpers and not entries:
        return ()
    if claim.needs_backend or sys.getprofile() is not None:  # a profiler of the reader's is not ours to replace
        return tuple(p for p in premise if p in helpers or p in entries)
    called, read = _watched(claim, [_code_of(h) for h in helpers])
    return tuple(p for p in premise if p in called or p in read)


def _writes_key(sources: Iterable[str], entry: str) -> bool:
    key = entry.rpartition(":")[2]
    return any(f'"{key}"' in s or f"'{key}'" in s for s in sources)


def _code_of(helper: str) -> tuple[str, types.CodeType | None]:
    module, _, name = helper.rpartition(".")
    target: Any = vars(sys.modules[module]).get(name) if module in sys.modules else None
    target = getattr(target, "__wrapped__", target)
    return helper, getattr(target, "__code__", None)


def _watched(claim: Claim, helpers: list[tuple[str, types.CodeType | None]]) -> tuple[set[str], set[str]]:
    """The helpers a claim computed without a backend calls as it computes, and the data entries it reads."""
    codes = {code: name for name, code in helpers if code is not None}
    called: set[str] = set()

    def watch(frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in codes:
            called.add(codes[frame.f_code])

    with inputs.recording() as reads, _profiled(watch), contextlib.suppress(Exception):
        claim.evaluate()
    read = {f"{r.file}:{r.key}" for r in reads if isinstance(r, inputs.Input)}
    return called, read


@contextlib.contextmanager
def _profiled(watch: Any) -> Iterator[None]:
    before = sys.getprofile()
    sys.setprofile(watch)
    try:
        yield
    finally:
        sys.setprofile(before)


def premise_problems(registry: Registry, bindings: Iterable[Binding]) -> list[Problem]:
    """Each dependant with no disposition, each premise nothing in the book disputes, and each excuse that
    excuses nothing: one problem each at the claim's definition, saying what, what was expected and found."""
    disputing = disputes(registry)
    bound: dict[str, list[Binding]] = {}
    for binding in bindings if disputing else ():  # a book that disputes nothing has nothing to look up
        bound.setdefault(binding.claim_id, []).append(binding)
    problems: list[Problem] = []
    excusing: dict[str, set[str]] = {}
    for dispute in disputing:
        problems += _unknown_items(dispute)
        contested = [b.where for b in bound.get(dispute.id, []) if b.disputed]
        if not contested:
            problems.append(
                Problem(
                    dispute.premise_at or dispute.defined_at,
                    f"claim {dispute.id!r} names a premise ({', '.join(dispute.premise)}) but no figure of it is "
                    "marked disputed in the book: a premise is the source's reading a dispute contests; mark the "
                    "figure disputed or drop its `disputes_premise`",
                )
            )
            continue
        for found in dependants(dispute, registry, bound):
            if found.disposition is None:
                problems.append(undisposed(found, contested[0]))
            elif found.disposition is Disposition.EXCUSED:
                excusing.setdefault(found.claim.id, set()).add(dispute.id)
    for claim in (c for c in registry if c.excused):
        for named in sorted(set(claim.excused) - excusing.get(claim.id, set())):
            problems.append(_stray_excuse(claim, named, registry))
    return problems


def undisposed(found: Dependant, contested: str) -> Problem:
    """A dependant with no disposition, as the book's check reports it."""
    claim, dispute = found.claim, found.dispute
    return Problem(
        claim.defined_at,
        f"claim {claim.id!r} rests on the premise {dispute.id!r} disputes at {contested} "
        f"({dispute.quoted_from or dispute.doc}): it {_how(found.shared)}; expected a disposition: re-derive it "
        "without that premise, mark every figure of it disputed, or say why it stands after it "
        f"(excuse({claim.compute.__name__}, {{{dispute.id!r}: '...'}})); found none",
    )


def _how(shared: Sequence[str]) -> str:
    helpers = [s for s in shared if not is_entry(s)]
    entries = [s for s in shared if is_entry(s)]
    said = ([f"calls {', '.join(helpers)}"] if helpers else []) + ([f"reads {', '.join(entries)}"] if entries else [])
    return " and ".join(said)


def _unknown_items(dispute: Claim) -> list[Problem]:
    """A premise helper that names no function of a loaded module: it would find nothing, silently."""
    out = []
    for item in dispute.premise:
        if not is_entry(item) and _code_of(item)[1] is None:
            out.append(
                Problem(
                    dispute.premise_at or dispute.defined_at,
                    f"claim {dispute.id!r} names {item!r} in its premise, which is no function of the book's "
                    "modules; expected a helper (the function itself) or a data entry 'file:key'",
                )
            )
    return out


def _stray_excuse(claim: Claim, named: str, registry: Registry) -> Problem:
    other = registry.get(named)
    found = (
        f"{named!r} is no claim"
        if other is None
        else f"{named!r} names no premise"
        if not other.premise
        else f"it no longer rests on {named!r}'s premise ({', '.join(other.premise)})"
    )
    return Problem(
        claim.excused_at.get(named) or claim.defined_at,
        f"claim {claim.id!r} is excused from the dispute {named!r}, but {found}; expected an excuse only where "
        "a claim rests on a disputed premise: drop it",
    )


def excuses_of(claim: Claim, registry: Registry) -> list[tuple[Claim, str]]:
    """The disputes a claim is excused from, each with the reason its figure stands: what its panel shows."""
    out = []
    for named, reason in sorted(claim.excused.items()):
        dispute = registry.get(named)
        if dispute is not None and dispute.premise:
            out.append((dispute, reason))
    return out
