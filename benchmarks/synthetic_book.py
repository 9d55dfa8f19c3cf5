"""A synthetic book in the engine's own formats, of any size, to measure what the engine costs as a book grows.

    .venv/bin/python benchmarks/synthetic_book.py OUT --scale 4     (or --pages N)

Scale 1 is about this book's size: 16 pages and 1,026 figures bound to 704 claims. Each page has its own
claims module (`book_claims/topics/pNNNN.py`, the public API only: `claim`, `given`, `vendor`, `exact`,
`lazy_import`), and prints its figures in prose, in a table and in a recap, beside display math; the first page
of each part of 16 pages includes a snippet and its output block. The claims are this book's mix of kinds:
20 exact (arithmetic on the inputs, in fractions), 16 library (numpy, computed on the numpy backend: a sum and a
square root in float32), 4 given (`book_claims/data/given.toml`) and 4 quoted (`book_claims/data/vendor/
partNNN.toml`, one data file per part) per page. Every claim is trivially cheap, so what a run costs is the
engine's work, not the computations'.

The printed figures are computed here the way the claims compute them, so a fresh book verifies: every figure
of the first run is verified.
"""

from __future__ import annotations

import argparse
import string
import sys
import textwrap
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

PAGES_PER_SCALE = 16  # scale 1 is about this book's size
PAGES_PER_PART = 16  # one data file and one snippet per part
GIVEN, QUOTED, EXACT, LIBRARY = 4, 4, 20, 16  # claims of each kind per page
RECAP = 10  # exact and library claims printed a second time, in the recap
DENOMINATORS = (3, 7, 9, 11, 13, 17, 19, 21)  # odd and prime to ten: no printed figure is a rounding tie
PACKAGE = "book_claims"


@dataclass(frozen=True)
class Book:
    """What was written: its folder and counts."""

    root: Path
    pages: int
    claims: int
    figures: int

    def page(self, index: int) -> Path:
        return self.root / "pages" / f"{page_name(index)}.md"


def page_name(index: int) -> str:
    return f"p{index:04d}"


def letters(index: int) -> str:
    """A page's index in letters, for headings and row labels: a digit there would be a number bound to nothing."""
    out = ""
    index += 26 * 26  # three letters at least
    while index:
        index, rest = divmod(index, 26)
        out = string.ascii_lowercase[rest] + out
    return out


def given_value(page: int, k: int) -> int:
    return 2 + (page * 7 + k * 3) % 97


def vendor_value(page: int, k: int) -> int:
    return 100 + (page * 13 + k * 11) % 900


def exact_value(page: int, n: int) -> Fraction:
    return Fraction(given_value(page, n % GIVEN) * vendor_value(page, (n // GIVEN) % QUOTED), DENOMINATORS[n % 8])


def library_value(page: int, n: int) -> float | int:
    if n % 2 == 0:
        return int(np.arange(given_value(page, n % GIVEN) + n, dtype=np.int64).sum())
    return float(np.sqrt(np.float32(vendor_value(page, n % QUOTED) + n)))


def exact_text(value: Fraction) -> str:
    return f"{float(value):.2f}"


def library_text(value: float | int) -> str:
    return str(value) if isinstance(value, int) else f"{value:.3f}"


def claims_module(page: int) -> str:
    """The page's claims: one family of each kind, reading the page's inputs."""
    name, part = page_name(page), page // PAGES_PER_PART
    return textwrap.dedent(
        f'''\
        """The claims of page {name}: inputs given and quoted, arithmetic on them, and numpy's answers."""

        from __future__ import annotations

        from fractions import Fraction
        from typing import TYPE_CHECKING

        from verified_book import Backend, claim, exact, given, lazy_import, vendor

        if TYPE_CHECKING:
            import numpy as np
        else:
            np = lazy_import("numpy")

        DATA = "vendor/part{part:03d}.toml"
        DENOMINATORS = {DENOMINATORS!r}


        @claim("{name}.given.g{{k}}", kind="given", over={{"k": tuple(range({GIVEN}))}})
        def chosen(k: int) -> int:
            """A value the page chooses."""
            return int(given(f"{name}.g{{k}}"))


        @claim("{name}.quoted.q{{k}}", kind="quoted", over={{"k": tuple(range({QUOTED}))}}, citation="a data sheet")
        def quoted(k: int) -> int:
            """A figure from a data sheet, as stated."""
            return int(exact(vendor(DATA, f"{name}_q{{k}}")))


        @claim("{name}.exact.e{{n}}", kind="exact", over={{"n": tuple(range({EXACT}))}})
        def derived(n: int) -> Fraction:
            """A chosen value times a quoted one, over a small odd number."""
            chosen = exact(given(f"{name}.g{{n % {GIVEN}}}"))
            stated = exact(vendor(DATA, f"{name}_q{{(n // {GIVEN}) % {QUOTED}}}"))
            return chosen * stated / DENOMINATORS[n % 8]


        @claim("{name}.library.l{{n}}", kind="library", over={{"n": tuple(range({LIBRARY}))}})
        def computed(backend: Backend, n: int) -> float | int:
            """numpy's sum of a range, or its float32 square root of a quoted value."""
            if n % 2 == 0:
                return int(np.arange(int(given(f"{name}.g{{n % {GIVEN}}}")) + n, dtype=np.int64).sum())
            return float(np.sqrt(np.float32(int(vendor(DATA, f"{name}_q{{n % {QUOTED}}}")) + n)))
        '''
    )


def page_text(page: int) -> str:
    """The page: prose with the inputs, display math, a table of derived and computed figures, a recap, and on a
    part's first page a snippet and its output."""
    name, label = page_name(page), letters(page)

    def fig(text: str, kind: str, n: int) -> str:
        return f"[{text}](claim:{name}.{kind}{n})"

    g = [fig(str(given_value(page, k)), "given.g", k) for k in range(GIVEN)]
    q = [fig(str(vendor_value(page, k)), "quoted.q", k) for k in range(QUOTED)]
    e = [fig(exact_text(exact_value(page, n)), "exact.e", n) for n in range(EXACT)]
    lib = [fig(library_text(library_value(page, n)), "library.l", n) for n in range(LIBRARY)]
    rows = "\n".join(f"| row {label}{string.ascii_lowercase[n]} | {e[n]} | {lib[n]} |" for n in range(LIBRARY))
    lines = [
        f"# Section {label}",
        "",
        f"This section chooses a width of {g[0]} and a depth of {g[1]}, a batch of {g[2]} and a count of {g[3]}.",
        f"The data sheet states {q[0]}, {q[1]}, {q[2]} and {q[3]} for the quantities it covers.",
        "Each derived figure is a chosen value times a stated one, over a small odd divisor:",
        "",
        "$$",
        r"e_n = \frac{g_{n \bmod 4} \cdot q_{\lfloor n / 4 \rfloor \bmod 4}}{d_n},",
        r"\quad d = (3, 7, 9, 11, 13, 17, 19, 21)",
        "$$",
        "",
        "| Row | Derived | numpy |",
        "| --- | --- | --- |",
        rows,
        "",
        f"The remaining derived figures are {', '.join(e[LIBRARY : EXACT - 1])} and {e[EXACT - 1]}.",
        "",
        f"In short, the derived figures begin {', '.join(e[:RECAP])}; numpy answers {', '.join(lib[:RECAP])}.",
        "",
    ]
    if page % PAGES_PER_PART == 0:
        snippet = snippet_name(page)
        lines += [
            "The part's script prints the section's width and depth:",
            "",
            "```python",
            f'--8<-- "pages/snippets/{snippet}"',
            "```",
            "",
            "What it prints:",
            "",
            f"```output {snippet}",
            *g[:2],
            "```",
            "",
        ]
    return "\n".join(lines)


def snippet_name(page: int) -> str:
    return f"part{page // PAGES_PER_PART:03d}.py"


def snippet_text(page: int) -> str:
    return (
        f'"""The width and depth of section {letters(page)}, printed."""\n\n'
        f"width = {given_value(page, 0)}\ndepth = {given_value(page, 1)}\nprint(width)\nprint(depth)\n"
    )


BOOK_TOML = """\
# A synthetic book written by benchmarks/synthetic_book.py; every key is described in verified_book/engine/config.py.
[book]
pages = "pages"
snippets = "pages/snippets"
topics = ["book_claims.topics"]
data = "book_claims/data"
results = "results"
local_results = "results.local"
offline = true
backends = ["numpy"]
"""

CONFTEST = """\
\"\"\"The synthetic book's pytest wiring: the engine's plugin.\"\"\"

pytest_plugins = ["verified_book.integration.pytest.hooks"]
"""

PYTEST_INI = """\
[pytest]
testpaths = book.toml pages
addopts = --strict-markers -p no:logging -p no:randomly -p no:unraisableexception -p no:threadexception
"""

ALLOWLIST = "# Numbers on the pages that are not figures: none.\n"

MKDOCS = """\
site_name: A synthetic verified book
docs_dir: pages
exclude_docs: |
  snippets/
  allowlist.toml
theme:
  name: material
  font: false
plugins:
  - verified-book:
      results_dir: !ENV [CLAIMS_RESULTS_DIR, results]
      on_missing: mark
markdown_extensions:
  - admonition
  - pymdownx.superfences
  - pymdownx.tabbed:
      alternate_style: true
  - pymdownx.snippets:
      base_path: ["."]
      check_paths: true
  - verified_book.integration.markdown_ext
"""


def write(root: Path, pages: int) -> Book:
    """A book of `pages` pages written into `root` (made if missing, expected empty)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "book.toml").write_text(BOOK_TOML, encoding="utf-8")
    (root / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (root / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
    (root / "mkdocs.yml").write_text(MKDOCS, encoding="utf-8")
    topics = root / PACKAGE / "topics"
    data = root / PACKAGE / "data"
    for folder in (topics, data / "vendor", data / "hardware", root / "pages" / "snippets"):
        folder.mkdir(parents=True, exist_ok=True)
    (root / PACKAGE / "__init__.py").write_text("", encoding="utf-8")
    (topics / "__init__.py").write_text('"""The synthetic book\'s claims, one module per page."""\n', encoding="utf-8")
    (root / "pages" / "allowlist.toml").write_text(ALLOWLIST, encoding="utf-8")
    given_lines = ["# The values each section chooses, with their source."]
    vendor_parts: dict[int, list[str]] = {}
    figures = 0
    for page in range(pages):
        name = page_name(page)
        (topics / f"{name}.py").write_text(claims_module(page), encoding="utf-8")
        text = page_text(page)
        (root / "pages" / f"{name}.md").write_text(text, encoding="utf-8")
        figures += text.count("](claim:")
        if page % PAGES_PER_PART == 0:
            (root / "pages" / "snippets" / snippet_name(page)).write_text(snippet_text(page), encoding="utf-8")
        for k in range(GIVEN):
            given_lines += ["", f"[{name}.g{k}]", f"value = {given_value(page, k)}", 'source = "the section\'s choice"']
        part = vendor_parts.setdefault(page // PAGES_PER_PART, ["# The figures of a data sheet, with their source."])
        for k in range(QUOTED):
            part += ["", f"[{name}_q{k}]", f"value = {vendor_value(page, k)}", 'source = "a data sheet, table one"']
    (data / "given.toml").write_text("\n".join(given_lines) + "\n", encoding="utf-8")
    for part, lines in vendor_parts.items():
        (data / "vendor" / f"part{part:03d}.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Book(root, pages, pages * (GIVEN + QUOTED + EXACT + LIBRARY), figures)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder to write the book in")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--scale", type=float, default=1.0, help="times this book's size (16 pages each)")
    size.add_argument("--pages", type=int, help="the number of pages")
    args = parser.parse_args(argv)
    book = write(args.out, args.pages or max(1, round(args.scale * PAGES_PER_SCALE)))
    print(f"{book.root}: {book.pages} pages, {book.claims} claims, {book.figures} figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
