"""The engine's words, each defined once: statuses, kinds, the claim-id pattern.

Every module that writes, reads, counts or shows a status or a kind imports it from
here, so the report, the results file and the site cannot disagree on what a word
means. Backend names are the registered adapters' (`verified_book.backends`).
"""
from __future__ import annotations

import re
from enum import Enum
from typing import Iterable


class Status(str, Enum):
    """What became of a printed figure (or a claim) on one backend of one machine."""

    VERIFIED = "verified"
    STALE = "stale"
    FAILED = "failed"
    DISPUTED = "disputed"
    REFERENCE = "reference"
    OUTDATED = "outdated"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value


#: what each status means, in one sentence a reader understands (README, legend, report)
MEANINGS: dict[Status, str] = {
    Status.VERIFIED: "the printed figure was compared with a value computed or measured on this backend, and held",
    Status.STALE: "compared, and the printed figure no longer rounds to the computed value",
    Status.FAILED: "the claim could not compute, or a property it must have did not hold",
    Status.DISPUTED: "the source's own words (quoted, with their place) assert something the computation refutes",
    Status.REFERENCE: "a measurement printed from another machine: both values shown, its invariants checked, "
                      "no comparison claimed",
    Status.OUTDATED: "this machine's record was computed from an older claim or input than the book has now",
    Status.SKIPPED: "not computable here, with the reason",
}

#: worst first: the status a reader sees where several backends or machines disagree
ORDER: tuple[Status, ...] = (Status.FAILED, Status.STALE, Status.OUTDATED, Status.DISPUTED,
                             Status.REFERENCE, Status.VERIFIED, Status.SKIPPED)

#: the status a figure shows where machines differ: a problem first, then the strongest evidence
#: that it holds (compared here, then only measured elsewhere, then computed from an older book)
SHOWN_ORDER: tuple[Status, ...] = (Status.FAILED, Status.STALE, Status.DISPUTED, Status.VERIFIED,
                                   Status.REFERENCE, Status.OUTDATED)

#: what became of a claim or figure that could not be asked because the run's environment broke
#: (a library would not import, the virtual environment vanished): reported, never recorded, and
#: never counted as failed (verified_book.environment)
BROKEN_ENVIRONMENT = "environment"
_RANKED: tuple[str, ...] = (Status.FAILED.value, Status.STALE.value, BROKEN_ENVIRONMENT, *(s.value for s in ORDER[2:]))

#: how a measurement taken while another run of the book, or a heavy load, shared the machine is
#: shown: recorded with its own status and its conditions, never published as the machine's figure
#: (verified_book.conditions decides it from the record)
CONTENDED = "contended"

#: the statuses a run writes into a results file (outdated is decided when records are read)
RECORDED: tuple[str, ...] = tuple(s.value for s in Status if s is not Status.OUTDATED)

STATUSES: tuple[str, ...] = tuple(s.value for s in Status)


def worst(statuses: Iterable[str], default: str = Status.VERIFIED.value) -> str:
    """The worst of some statuses by `ORDER`, a broken environment after failed and stale (what was
    shown wrong outranks what could not be asked); `default` where there are none."""
    found = {str(s) for s in statuses}
    return next((s for s in _RANKED if s in found), default)


class Kind(str, Enum):
    """How a claim's value comes about, which decides where and how it is checked."""

    EXACT = "exact"
    GIVEN = "given"
    LIBRARY = "library"
    MEASURED = "measured"
    QUOTED = "quoted"

    def __str__(self) -> str:
        return self.value


KIND_MEANINGS: dict[Kind, str] = {
    Kind.EXACT: "arithmetic from stated inputs, computed once on no backend",
    Kind.GIVEN: "a value the book states or chooses, read with its source from the book's given inputs",
    Kind.LIBRARY: "what a numerics library answers, computed on every backend present",
    Kind.MEASURED: "depends on the machine (a time, a bandwidth, an allocation)",
    Kind.QUOTED: "a figure taken from a cited source",
}

KINDS: tuple[str, ...] = tuple(k.value for k in Kind)

#: a claim id: dotted lower-case words, at least two (`decode.ceiling.dgx_spark.bf16`)
ID_PATTERN = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")

#: the backend of exact and quoted claims, which compute once on none
NO_BACKEND_NAME = "none"

