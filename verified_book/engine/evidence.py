"""What a figure that holds is evidence of, decided from the data flow: verified where a value was computed or
measured here from its inputs, and cited, premise or unsourced where the claim's value is one data entry read
unchanged, whatever the claim's kind (a pass-through is found by probing each entry it read).
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any, Callable, Iterable

from verified_book.authoring import inputs
from verified_book.authoring.registry import Claim
from verified_book.book.figures import as_number
from verified_book.vocabulary import Status


def evidence(claim: Claim, reads: Iterable[inputs.Read]) -> tuple[Status, str]:
    """What a printed figure that holds is evidence of, and why (for the panel).

    Decided from the data flow, not the claim's kind (`passed_through`): a value that is one data entry
    read unchanged is that entry's evidence, whatever computed it: cited where the entry names a source a
    reader can follow, premise where it is the book's own choice, unsourced where no source in hand backs it
    (`inputs.basis_of`). A value computed from another machine's measurement (a data entry with
    `measured_on`) is reference, as that measurement is. Only a value computed or measured here from its
    inputs verifies, and its reason names them, and the book's assumption it holds under (`Claim.assumes`):
    an assumption is said beside a computed value, never a reason to call it the book's choice. The site asks
    the same of every record it shows."""
    read = [r for r in reads if isinstance(r, inputs.Input)]
    through = passed_through(claim)
    if through is not None:
        basis = inputs.basis_of(through.file, through.key)
        status = BASIS_STATUS[basis]
        said = "; ".join(x for x in (claim.citation or "", through.source or "") if x)
        return status, f"{status.value}, not computed: {through.place} {through.key} read unchanged" + (
            f" ({said})" if said else ""
        )
    if claim.about and not claim.needs_backend:
        return Status.CITED, (
            f"cited: {computed_from(claim, read)[len('verified: ') :]}, from the vendor's lists for {claim.about}; "
            "nothing ran on that device"
        )
    measured = [r for r in read if r.measured_on]
    if measured:
        places = "; ".join(f"{r.place} {r.key} = {r.value!r}, measured on {r.measured_on}" for r in measured)
        return Status.REFERENCE, f"reference, computed from another machine's measurement: {places}"
    assumed = f", under the book's assumption that {claim.assumes}" if claim.assumes else ""
    return Status.VERIFIED, computed_from(claim, read) + assumed


#: the mark a figure read unchanged from a data entry carries, by the entry's basis (`inputs.BASES`)
BASIS_STATUS: dict[str, Status] = {
    inputs.SOURCE: Status.CITED,
    inputs.PREMISE: Status.PREMISE,
    inputs.UNSOURCED: Status.UNSOURCED,
}


def computed_from(claim: Claim, read: list[inputs.Input]) -> str:
    """What a verified figure was computed from, as its panel says it: the claim's code and each input."""
    if claim.needs_backend:
        how = f"computed here by {claim.defined_at} on each backend"
    else:
        how = f"computed here in exact arithmetic by {claim.defined_at}"
    files = sorted({r.file for r in read if r.whole})
    named = [f"{r.place} {r.key}" for r in read if not r.whole] + [f"{inputs.shown_as()}/{f}, all of it" for f in files]
    return f"verified: {how}" + (f" from {', '.join(named)}" if named else "")


def passed_through(claim: Claim) -> inputs.Input | None:
    """The data entry whose value a claim returns unchanged, or None where it computes its value.

    Asked of the data flow: the claim is computed once, and again with each entry it read whose value
    equals what it returned replaced by a probe value; where the answer follows the probe exactly, the
    figure is that entry read through, whatever arithmetic surrounds it. Claims computed on a backend
    compute (a library's answer, a measurement); the answer is kept per claim and function."""
    if claim.needs_backend:
        return None
    return _passed_through(claim.id, claim.compute, tuple(sorted(claim.params.items())))


@functools.lru_cache(maxsize=8192)
def _passed_through(
    claim_id: str, compute: Callable[..., Any], params: tuple[tuple[str, Any], ...]
) -> inputs.Input | None:
    def value() -> Any:
        return compute(**dict(params))

    with inputs.recording() as reads:
        try:
            returned = value()
        except Exception:  # the run reports a claim that cannot compute; here it is simply not a read-through
            return None
    data = [r for r in reads if isinstance(r, inputs.Input) and not r.whole]
    for read in data:
        for part in _parts_equal(read.value, returned):
            if any(_follows(value, read, probe, part, alone=len(data) == 1) for probe in _probes(read.value)):
                return read
    return None


def _follows(value: Callable[[], Any], read: inputs.Input, probe: Any, part: int | None, alone: bool) -> bool:
    """Whether the claim's answer is `probe` (or its item `part`) when `read` holds it: the very object read
    (or `exact`'s fraction of it), or, where the claim read nothing else, a value equal to it."""
    with inputs.overridden(read.file, read.key, probe), inputs.recording(), inputs.conversions() as seen:
        try:
            moved = value()
        except Exception:  # a probe the claim cannot take (a range it must lie in): this probe tells nothing
            return False
    target = probe if part is None else probe[part]
    return _same(moved, target) and (alone or _carried(moved, target, seen))


def _carried(moved: Any, target: Any, seen: list[tuple[Any, Fraction]]) -> bool:
    """Whether `moved` is the object `target` itself, item by item, or `exact`'s fraction of it: read through,
    not arrived at by arithmetic that cancels (an intensity of 2·P·b / 2·P is b, computed)."""
    if moved is target or any(stated is target and result is moved for stated, result in seen):
        return True
    if isinstance(moved, (list, tuple)) and isinstance(target, (list, tuple)) and len(moved) == len(target):
        return all(_carried(m, t, seen) for m, t in zip(moved, target, strict=True))
    return False


def _parts_equal(value: Any, returned: Any) -> list[int | None]:
    """Where `returned` could be `value` read through: the whole (None), or each item of a list it equals."""
    if _same(value, returned):
        return [None]
    if isinstance(value, (list, tuple)):
        return [i for i, item in enumerate(value) if _same(item, returned)]
    return []


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, str) != isinstance(b, str):  # a number written as text in the data ("12.0")
        return _same(_decimal(a), b) if isinstance(a, str) else _same(a, _decimal(b))
    if isinstance(a, (str, bool)) or isinstance(b, (str, bool)):
        return type(a) is type(b) and a == b
    x, y = as_number(a), as_number(b)
    return x is not None and y is not None and x == y


def _decimal(text: str) -> Fraction | None:
    """A data entry's text that is a decimal number ("9.0", a compute capability), as the claim reads it."""
    try:
        return Fraction(text.strip())
    except ValueError:
        return None


def _probes(value: Any) -> list[Any]:
    """A value of the same shape as `value`, one step from it: a read-through carries it unchanged, and a claim
    that checks its input lies in a range still takes it. A far probe is not taken: a claim that computes from
    the input (a format's exponent bits, a power of two) could grow without bound on it."""
    return [p for p in (_probe(value),) if p is not None]


def _probe(value: Any) -> Any:
    if isinstance(value, bool):
        return None
    if isinstance(value, (list, tuple)):
        items = [_probe(v) for v in value]
        return None if any(i is None for i in items) else type(value)(items)
    if isinstance(value, str):
        whole, dot, places = value.strip().partition(".")
        if _decimal(value) is None or not whole.isdigit():
            return None
        return f"{int(whole) + 1}{dot}{places}"  # its digits after the point kept
    if isinstance(value, int):
        return value + 1  # an integer still: a claim may take int() of its input
    if isinstance(value, float):
        return value + 2.0**-10  # exactly representable, so its decimal reads back the same
    number = as_number(value)
    if number is None or isinstance(number, float):
        return None
    return number + Fraction(1, 7919)
