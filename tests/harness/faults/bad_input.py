"""Bad input in the book and in the claims: one clear error each, every other claim recorded."""

from __future__ import annotations

from pathlib import Path

from harness.faults.common import (
    BASIC_CLAIMS,
    BASIC_PAGE,
    SampleBook,
    Tally,
)

# ---------------------------------------------------------------- bad input in the book and the claims

GOOD_CLAIMS = BASIC_CLAIMS

FAULTY_CLAIMS = '''\
import math

from verified_book.authoring.registry import claim


@claim("bad.raises", kind="exact")
def raises():
    """Divides by zero."""
    return 1 / 0


@claim("bad.wrong_type", kind="exact")
def wrong_type():
    """Returns a mapping, which no figure can be compared with."""
    return {"tokens": 16}


@claim("bad.string_for_number", kind="exact")
def string_for_number():
    """Returns words where the book prints a number."""
    return "sixteen"


@claim("bad.nan", kind="exact")
def not_a_number():
    """Returns NaN: a value, judged against the figure, not a claim that could not compute."""
    return math.nan


@claim("basic.ratio", kind="exact")
def ratio_again():
    """Declares an id another module declared first."""
    return 1


@claim("Bad.Upper", kind="exact")
def upper():
    """An id that is not dotted lower case."""
    return 1


@claim("bad.after", kind="exact")
def after():
    """Declared after the faulty ones in the same module: still registered, run and recorded."""
    return 42
'''

FAULTY_PAGE = """\
A raising claim gives [5](claim:bad.raises).
A mapping is no figure: [16](claim:bad.wrong_type).
Words are no number: [16](claim:bad.string_for_number).
NaN is a value, not this one: [1.5](claim:bad.nan).
A typo: [4](claim:basic.sqare.2).
Words without their value: [sixteen](claim:basic.ratio).
A broken link: [16.6](claim: basic.ratio).
After them all, [42](claim:bad.after).
"""

BAD_INPUTS: dict[str, list[str]] = {
    "claim raises": [
        r"b_faulty\.py:\d+: claim bad\.raises on none: raised ZeroDivisionError: division by zero \(at ",
        r"book/faults\.md:1: figure 5 \(bad\.raises\) cannot be checked: raised ZeroDivisionError",
    ],
    "claim returns the wrong type": [
        r"b_faulty\.py:\d+: claim bad\.wrong_type on none: returned a dict",
        r"book/faults\.md:3: figure 16 \(bad\.string_for_number\) cannot be checked on none: "
        r"the claim returned a str",
    ],
    "claim returns NaN for a printed number": [
        r"book/faults\.md:4: figure 1\.5 \(bad\.nan\) is stale in exact arithmetic: computed nan",
    ],
    "unknown claim id": [
        r"book/faults\.md:5: figure 4 binds to unknown claim 'basic\.sqare\.2'; did you mean basic\.square\.2"
    ],
    "figure text that does not parse": [
        r"book/faults\.md:6:\d+: figure sixteen \(basic\.ratio\): 'sixteen' is not a printed number"
    ],
    "malformed binding": [
        r"book/faults\.md:7:\d+: malformed binding: expected \[printed text\]\(claim:dotted\.id\).*claim: basic\.ratio"
    ],
    "duplicated claim id": [r"b_faulty\.py:\d+: claim id 'basic\.ratio' is declared twice; first at \S*a_good\.py:\d+"],
    "claim id not dotted lower case": [r"b_faulty\.py:\d+: claim id 'Bad\.Upper' is not a dotted lower-case id"],
    "topic module that does not import": [r"c_syntax\.py:\d+: sample_claims\.c_syntax does not import: SyntaxError"],
    "page that is not UTF-8": [r"book/latin1\.md:1: page cannot be read"],
}


def bad_input(root: Path) -> list[Tally]:
    """Every kind of bad input at once in one book: each is one clear error at its place; the rest is recorded."""
    import re

    book = SampleBook(root / "bad-input")
    book.claims("a_good", GOOD_CLAIMS)
    book.claims("b_faulty", FAULTY_CLAIMS)
    book.claims("c_syntax", "def broken(:\n    return 1\n")
    book.page("page.md", BASIC_PAGE)
    book.page("faults.md", FAULTY_PAGE)
    (book.root / "book" / "latin1.md").write_bytes(b"Caf\xe9 au lait: [42](claim:bad.after).\n")
    run = book.run()
    tallies = []
    for fault, patterns in BAD_INPUTS.items():
        tally = Tally("bad input", fault, "one clear error naming file:line (and the claim id, where one is involved)")
        missing = [p for p in patterns if not re.search(p, run.output)]
        tally.check(
            not missing and "Traceback (most recent call last)" not in run.output,
            f"not reported as expected: {missing}",
        )
        tallies.append(tally)
    statuses = run.statuses()
    good = {("basic.ratio", "none"), ("basic.square.2", "numpy"), ("basic.square.3", "numpy"), ("bad.after", "none")}
    failed = {
        ("bad.raises", "none"),
        ("bad.wrong_type", "none"),
        ("bad.string_for_number", "none"),
    }
    stale = {("bad.nan", "none")}  # a computed NaN is a value: its figure is stale, its record keeps it
    kept = {p for p in good if statuses.get(p[0], {}).get(p[1]) == "verified"}
    kept |= {p for p in failed if statuses.get(p[0], {}).get(p[1]) == "failed"}
    kept |= {
        p for p in stale if statuses.get(p[0], {}).get(p[1]) == "stale" and run.records[p[0]][p[1]]["value"] == "nan"
    }
    every = good | failed | stale
    around = Tally(
        "bad input",
        "all of the above in one book",
        "the run fails (exit 1) and records every claim that computed, the faulty ones as failed, a NaN as its value",
    )
    around.check(run.ret == 1 and kept == every, f"exit {run.ret}, missing {sorted(every - kept)}")
    around.keep(len(every), len(kept))
    tallies.append(around)
    for tally in tallies:
        tally.notes += [] if tally.ok else [run.output[-3000:]]
    return tallies
