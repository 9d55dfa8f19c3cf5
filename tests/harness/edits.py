"""The edits of one rule's table (`tests/engine/test_invalidation.py`): page prose, a printed figure, a claim's code,
a helper it calls, a data value a claim reads, a data key none reads, a library's version, a snippet a figure is
read from; each with what it invalidates, on the book `verified-book init` writes with a lab page added
(`add_lab`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LAB = """
from verified_book.authoring.registry import claim
from verified_book.engine.snippet_figures import snippet_figure


@claim("lab.ms", kind="measured", backends=("numpy",), printed_on="author_test_box", tolerance=0.5)
def ms(backend):
    \"\"\"Milliseconds per call, as clock.py prints them here.\"\"\"
    return snippet_figure("lab.ms")
"""
UNREAD = '\n[fp16_sign_bits]\nvalue = 1\nsource = "IEEE 754-2019, table 3.5: one sign bit"\n'
HELPERS = ("half.mantissa_bits", "half.eps", "half.max", "half.finfo_eps")  # every claim that calls `_bits`
ON_NUMPY = ("half.finfo_eps", "half.sum_2049", "half.sum_ms", "lab.ms")


@dataclass(frozen=True)
class Edit:
    """One row: what is saved (a file, the old text and the new), and the claims it invalidates."""

    name: str
    file: str  # relative to the book's root; "" for the library's version, which is no file of the book
    old: str
    new: str
    invalidates: tuple[str, ...]


EDITS = [
    Edit("page prose", "pages/index.md", "# Half precision", "# Half precision, in short", ()),
    Edit("a printed figure", "pages/index.md", "[65504](claim:half.max)", "[65505](claim:half.max)", ()),
    Edit(
        "a claim's code",
        "book_claims/topics/half.py",
        'return int(given("half.sum_count"))\n\n\n@claim("half.sum_ms"',
        'return int(given("half.sum_count")) * 1\n\n\n@claim("half.sum_ms"',
        ("half.sum_count",),
    ),
    Edit(
        "a helper the claim calls",
        "book_claims/topics/half.py",
        'return int(exact(vendor(FORMATS, f"fp16_{part}_bits")))',
        'return int(exact(vendor(FORMATS, f"fp16_{part}_bits"))) + 0',
        HELPERS,
    ),
    Edit("a data value a claim reads", "book_claims/data/formats.toml", "value = 5\n", "value = 6\n", ("half.max",)),
    Edit("a data key no claim reads", "book_claims/data/formats.toml", "value = 1\n", "value = 2\n", ()),
    Edit("a library's version", "", "", "", ON_NUMPY),
    Edit("a snippet a figure is read from", "pages/snippets/clock.py", "0.500", "0.700", ("lab.ms",)),
]


def add_lab(root: Path) -> None:
    """The lab page, its measured figure read from a snippet's output, and a data key no claim reads, added to the
    book at `root`."""
    (root / "book_claims" / "topics" / "lab.py").write_text(LAB)
    with (root / "book.toml").open("a") as toml:
        toml.write('elsewhere = ["author_test_box"]\n')
    (root / "pages" / "snippets" / "clock.py").write_text('print("took 0.500 ms a call")\n')
    block = "```output clock.py varies=1\ntook [0.500](claim:lab.ms) ms a call\n```\n"
    (root / "pages" / "lab.md").write_text("# Lab\n\n" + block)
    formats = root / "book_claims" / "data" / "formats.toml"
    formats.write_text(formats.read_text() + UNREAD)
