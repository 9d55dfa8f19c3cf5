"""The engine's words, each defined once: statuses, kinds, the claim-id pattern.

Every module that writes, reads, counts or shows a status or a kind imports it from
here, so the report, the results file and the site cannot disagree on what a word
means. Each status is one row (`WORDS`): its label, its meaning, the glyph and the
shape words of its mark, and whether a run records it. Backend names are the
registered adapters' (`verified_book.backends`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import Enum
from typing import Iterable, TypeAlias


class Status(str, Enum):
    """What became of a printed figure (or a claim) on one backend of one machine."""

    VERIFIED = "verified"
    CITED = "cited"
    PREMISE = "premise"
    UNSOURCED = "unsourced"
    STALE = "stale"
    FAILED = "failed"
    DISPUTED = "disputed"
    REFERENCE = "reference"
    OUTDATED = "outdated"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value


class Shown(str, Enum):
    """A mark a run's report or the site shows and no run records: each is drawn and named in `WORDS` like a
    `Status`, but never written into a results file."""

    #: a claim or figure that could not be asked because the run's environment broke (a library would not
    #: import, the virtual environment vanished): reported, never recorded, never counted as failed
    #: (verified_book.engine.environment)
    BROKEN_ENVIRONMENT = "environment"
    #: a measurement taken while another run of the book, or a heavy load, shared the machine: recorded with its
    #: conditions, never published as the machine's figure (verified_book.records.conditions)
    CONTENDED = "contended"
    #: a record computed with a library version other than those the figure is stated for (a claim's
    #: `stated_for`): that version's answer, shown with its value and version, never the book failing
    ANOTHER_VERSION = "another-version"
    #: a figure no machine has a record of yet
    UNVERIFIED = "unverified"
    #: a fleet machine whose latest run is older than the site allows
    NOT_REPORTED = "not-reported"
    #: a figure whose binding is broken (the build reports where)
    BROKEN_BINDING = "error"
    #: the key under which a run counts the selected figures and checks no backend of this machine computed;
    #: named, meant and drawn as `skipped` ("not computable here")
    NOT_HERE = "not here"
    #: the key under which a run counts the selected figures and checks it never reached: Ctrl-C, `-x`, a lost
    #: worker
    NOT_RUN = "not run"

    def __str__(self) -> str:
        return self.value


#: any status a surface takes, shows or counts: recorded (`Status`) or display-only (`Shown`)
Mark: TypeAlias = Status | Shown

#: the display-only marks under their earlier names, for code that counts or compares them
BROKEN_ENVIRONMENT = Shown.BROKEN_ENVIRONMENT
CONTENDED = Shown.CONTENDED
ANOTHER_VERSION = Shown.ANOTHER_VERSION
UNVERIFIED = Shown.UNVERIFIED
NOT_REPORTED = Shown.NOT_REPORTED
BROKEN_BINDING = Shown.BROKEN_BINDING
NOT_HERE = Shown.NOT_HERE
NOT_RUN = Shown.NOT_RUN


class OutcomeStatus(str, Enum):
    """What became of asking one claim for its value on one backend, before any figure is judged."""

    COMPUTED = "computed"
    SKIPPED = "skipped"  # the backend cannot compute it (NotOnBackend), or is not here
    FAILED = "failed"  # it raised, returned no usable value, or an invariant did not hold
    BROKEN = (
        Shown.BROKEN_ENVIRONMENT.value
    )  # not asked: the environment broke (verified_book.engine.environment); never recorded

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Word:
    """One status as every surface names and draws it."""

    name: str
    label: str
    meaning: str
    glyph: str  # the mark as a character, for text (the README, the legend's shape column)
    shape: str  # the drawn mark in words, for readers who do not see it (claims.css draws it)
    recorded: bool  # whether a run writes it into a results file


WORDS: dict[str, Word] = {
    w.name: w
    for w in (
        Word(
            "verified",
            "verified",
            "the printed figure was compared with a value computed or measured here from its inputs (the panel names "
            "them), and held",
            "✓",
            "a tick",
            True,
        ),
        Word(
            "cited",
            "cited",
            "the figure is read unchanged from an outside source its panel names (a vendor's page, a standard: the "
            "document and its words), which a reader can follow; nothing here computed it",
            "❝",
            "a quotation mark",
            True,
        ),
        Word(
            "premise",
            "premise",
            "the book's own choice or example input (a batch size, a prompt length, a worked example's budget), "
            "shown as the book chooses it: nothing to verify",
            "□",
            "a hollow square",
            True,
        ),
        Word(
            "unsourced",
            "unsourced",
            "a factual figure the book prints that no source in hand backs: neither computed here nor cited",
            "?",
            "a question mark",
            True,
        ),
        Word(
            "stale",
            "stale",
            "compared, and the printed figure no longer rounds to the computed value",
            "≠",
            "a not-equal sign",
            True,
        ),
        Word(
            "failed",
            "failed",
            "the claim could not compute, or a property it must have did not hold",
            "✗",
            "a cross",
            True,
        ),
        Word(
            "disputed",
            "disputed",
            "the source's own words (quoted, with their place) assert something the computation refutes",
            "⚑",
            "a flag",
            True,
        ),
        Word(
            "reference",
            "reference",
            "a measurement printed from another machine, or a figure computed from one: both values shown, its "
            "invariants checked, no comparison claimed",
            "◇",
            "a hollow diamond",
            True,
        ),
        Word(
            "outdated",
            "outdated",
            "this machine's record was computed from an older claim or input than the book has now",
            "↻",
            "a circular arrow",
            False,
        ),
        Word(
            "skipped",
            "not computable here",
            "needs hardware or a library this machine lacks, or no backend here computes it; the reason is given",
            "⊖",
            "a circle with a bar",
            True,
        ),
        Word(
            Shown.BROKEN_ENVIRONMENT,
            "not checked",
            "the run's environment broke before this could be asked (a library would not import); never recorded, "
            "the earlier record stands",
            "⊘",
            "a slashed circle",
            False,
        ),
        Word(
            Shown.CONTENDED,
            Shown.CONTENDED,
            "measured while another run of the book, or a heavy load, shared the machine; not the machine's figure",
            "⇄",
            "two arrows, one each way",
            False,
        ),
        Word(
            Shown.ANOTHER_VERSION,
            "another version",
            "computed with a library version other than the one the book states this figure for: that version's "
            "value and version shown, not a failure of the book",
            "⑂",
            "a forked path",
            False,
        ),
        Word(
            Shown.UNVERIFIED,
            "not yet verified",
            "no machine has recorded a result for this claim yet",
            "○",
            "a hollow circle",
            False,
        ),
        Word(
            Shown.BROKEN_BINDING,
            "error",
            "this figure's binding is broken; the build reports where",
            "⚠",
            "a triangle with an exclamation mark",
            False,
        ),
        Word(
            Shown.NOT_REPORTED,
            "not reported this week",
            "a machine of the fleet whose latest run is older than the site allows; its last results are still shown",
            "◷",
            "a clock with an exclamation mark",
            False,
        ),
    )
}

# What a run did not judge, each state named once for every surface (the verdict, the summary table and its
# legend, the figure panel, the Machines page, the site's legend, serve's line): a figure or check this machine
# cannot compute is `skipped`, named "not computable here"; one the run never reached is "not run (interrupted)";
# one no machine has a record of is "not yet verified" (`UNVERIFIED`).
WORDS[Shown.NOT_RUN] = Word(
    Shown.NOT_RUN,
    "not run (interrupted)",
    "selected, but the run stopped before it got to it (Ctrl-C, -x, a worker lost); any earlier record of it "
    "stands, and a run again checks it",
    "⏸",
    "two upright bars",
    False,
)
#: how every surface names the backend of exact and quoted claims (`NO_BACKEND_NAME`), which compute once on none
NO_BACKEND_LABEL = "exact arithmetic"

#: what each status means, in one sentence a reader understands (README, legend, report)
MEANINGS: dict[str, str] = {name: w.meaning for name, w in WORDS.items()}
LABELS: dict[str, str] = {name: w.label for name, w in WORDS.items()}
#: each mark's glyph and shape in words, so no status is told by colour alone (claims.css draws them)
SHAPES: dict[str, tuple[str, str]] = {name: (w.glyph, w.shape) for name, w in WORDS.items()}
#: the run's count of what this machine cannot compute is the skipped state under another key
LABELS[Shown.NOT_HERE] = LABELS[Status.SKIPPED]
MEANINGS[Shown.NOT_HERE] = MEANINGS[Status.SKIPPED]

#: worst first: the status a reader sees where several backends or machines disagree
ORDER: tuple[Status, ...] = (
    Status.FAILED,
    Status.STALE,
    Status.OUTDATED,
    Status.DISPUTED,
    Status.UNSOURCED,
    Status.REFERENCE,
    Status.CITED,
    Status.PREMISE,
    Status.VERIFIED,
    Status.SKIPPED,
)

#: the status a figure shows where machines differ: a problem first, then the strongest evidence
#: that it holds (compared here, then transcribed, then only measured elsewhere, then computed from
#: an older book)
SHOWN_ORDER: tuple[Status, ...] = (
    Status.FAILED,
    Status.STALE,
    Status.DISPUTED,
    Status.UNSOURCED,
    Status.VERIFIED,
    Status.CITED,
    Status.PREMISE,
    Status.REFERENCE,
    Status.OUTDATED,
)

_RANKED: tuple[Mark, ...] = (Status.FAILED, Status.STALE, Shown.BROKEN_ENVIRONMENT, *ORDER[2:])

#: the statuses a run writes into a results file (outdated is decided when records are read)
RECORDED: tuple[str, ...] = tuple(s.value for s in Status if WORDS[s.value].recorded)

STATUSES: tuple[str, ...] = tuple(s.value for s in Status)

#: what a run's figure line counts, in this order: each figure the run selected falls in exactly one
#: (`not here`: no backend of this machine computed it; `not run`: the run stopped before it); a run judges its
#: figures now, so none is outdated
FIGURE_COUNTS: tuple[Mark, ...] = (
    *(s for s in Status if s not in (Status.SKIPPED, Status.OUTDATED)),
    Shown.BROKEN_ENVIRONMENT,
    Shown.NOT_HERE,
    Shown.NOT_RUN,
)


def worst(statuses: Iterable[str], default: Mark = Status.VERIFIED) -> Mark:
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


class Disposition(str, Enum):
    """What became of a claim resting on a premise the book disputes (`verified_book.engine.premises`); one
    re-derived without the premise rests on it no longer, and needs none."""

    #: every figure of it is marked disputed too
    DISPUTED = "disputed too"
    #: it says why its figure stands (`excused` on its claim), and its panel shows the reason
    EXCUSED = "excused"

    def __str__(self) -> str:
        return self.value


#: a claim id: dotted lower-case words, at least two (`decode.ceiling.dgx_spark.bf16`)
ID_PATTERN = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")

#: the backend of exact and quoted claims, which compute once on none
NO_BACKEND_NAME = "none"


def fingerprint(content: bytes | str) -> str:
    """How the engine names a text by its content (in the records: an output block as compared, a snippet's
    source, a claim's code; on the site: what the generated pages were written from): the first 16 hex digits of
    its SHA-256, short enough to read in a results file and far too many for two texts of one book to share by
    chance. A str is hashed as UTF-8."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    return hashlib.sha256(data).hexdigest()[:16]
