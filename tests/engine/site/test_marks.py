"""Each mark means one kind of evidence: computed here (verified), transcribed (cited), another machine's
measurement or a figure computed from one (reference); names a claim declares exist; a disputed figure
that holds fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import books, faults
from harness.paths import ROOT

from verified_book.authoring import inputs
from verified_book.authoring.registry import REGISTRY, Registry, claim, undeclared_names
from verified_book.book.bindings import read_page
from verified_book.engine.check import COMPUTED, Outcome, judge
from verified_book.engine.evidence import evidence
from verified_book.engine.machine import Machine
from verified_book.vocabulary import LABELS, MEANINGS, SHAPES, STATUSES, Kind, Status

pytest_plugins = ["pytester"]

CLAIMS = '''
from fractions import Fraction
from verified_book.authoring.inputs import exact, given, vendor
from verified_book.authoring.registry import claim

@claim("sample.card.memory", kind="quoted", citation="the vendor's data sheet")
def memory():
    """The card's memory, as its vendor states it."""
    return vendor("card.toml", "memory")

@claim("sample.batch", kind="given")
def batch():
    """The batch of the book's example."""
    return given("example.batch")

@claim("sample.per_item_ms", kind="exact")
def per_item_ms():
    """The author's time per call over the batch."""
    return exact(vendor("card.toml", "author_ms")) / batch()

@claim("sample.bytes", kind="exact")
def card_bytes():
    """The card's memory in bytes (its GB are GiB)."""
    return vendor("card.toml", "memory") * 2**30
'''

CARD = """
[memory]
value = 16
unit = "GB"
source = "the vendor's data sheet"

[author_ms]
value = 12.5
unit = "ms per call"
source = "the author's run"
measured_on = "the author's test box"
"""

GIVEN = """
[example.batch]
value = 5
unit = "rows"
source = "the book's own choice of example"
basis = "premise"
"""

PAGE = (
    "The card has [16](claim:sample.card.memory) GB, that is [17,179,869,184](claim:sample.bytes) bytes; "
    "the example's batch is [5](claim:sample.batch), and the author's run took [2.5](claim:sample.per_item_ms) ms "
    "per item.\n"
)


@pytest.fixture
def book(pytester: pytest.Pytester) -> pytest.Pytester:
    return faults.sample_book(
        pytester, CLAIMS, PAGE, "sample.py", files={"data/card.toml": CARD, "data/given.toml": GIVEN}
    )


run = faults.run_book


def figure_statuses(pytester: pytest.Pytester) -> dict[str, str]:
    (path,) = (pytester.path / "results").glob("*.json")
    records = json.loads(path.read_text())["records"]
    return {cid: per["none"]["figures"][0]["status"] for cid, per in records.items()}


def test_each_figure_shows_the_evidence_it_has(book: pytest.Pytester) -> None:
    result = run(book)
    assert result.ret == 0
    assert figure_statuses(book) == {
        "sample.card.memory": "cited",  # transcribed from a vendor: cited, never verified
        "sample.batch": "premise",  # the book's own stated choice: premise, nothing to verify
        "sample.per_item_ms": "reference",  # computed from the author's measurement: inherits reference
        "sample.bytes": "verified",  # arithmetic computed here from a cited value: verified
    }
    result.stdout.fnmatch_lines(
        [
            "figures (all 4 bound figures selected): 1 verified, 1 cited, 1 premise, 0 unsourced, 0 stale, 0 failed, "
            "0 disputed, 1 reference, 0 not computable here"
        ]
    )


def test_a_wrong_cited_figure_is_stale_not_cited(book: pytest.Pytester) -> None:
    (book.path / "book" / "page.md").write_text(PAGE.replace("[16]", "[18]"))
    result = run(book)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*book/page.md:1: figure 18 (sample.card.memory) is stale in exact arithmetic: computed 16*"]
    )


def test_a_measurement_that_is_no_longer_one_verifies(book: pytest.Pytester) -> None:
    """The reference comes from the data entry's `measured_on`, not from the claim: remove it, and the
    same figure, computed the same way, is verified."""
    data = book.path / "data" / "card.toml"
    data.write_text(CARD.replace('measured_on = "the author\'s test box"\n', ""))
    run(book)
    assert figure_statuses(book)["sample.per_item_ms"] == "verified"


def test_evidence_names_the_source_and_the_data_line(tmp_path: Path) -> None:
    (tmp_path / "card.toml").write_text(CARD)
    registry = Registry()
    claim("x.quoted", kind="quoted", citation="a vendor page", registry=registry)(
        lambda: inputs.vendor("card.toml", "memory")
    )
    claim("x.exact", kind="exact", registry=registry)(
        lambda: inputs.exact(inputs.vendor("card.toml", "author_ms")) * inputs.vendor("card.toml", "memory")
    )
    with books.with_data(tmp_path, "data"):
        memory = inputs.Input("card.toml", "memory", 16, 3, "the vendor's data sheet")
        status, why = evidence(registry["x.quoted"], [memory])
        assert status is Status.CITED
        assert (
            why
            == "cited, not computed: data/card.toml:3 memory read unchanged (a vendor page; the vendor's data sheet)"
        )
        measured = inputs.Input("card.toml", "author_ms", 12.5, 8, "a run", measured_on="the author's box")
        status, why = evidence(registry["x.exact"], [memory, measured])
        assert status is Status.REFERENCE and "data/card.toml:8 author_ms = 12.5, measured on the author's box" in why
        status, why = evidence(registry["x.exact"], [memory])
        assert status is Status.VERIFIED and why.endswith("from data/card.toml:3 memory")


def test_a_disputed_figure_that_holds_fails(tmp_path: Path) -> None:
    """The rule that keeps a 'disputed' mark honest: once the computation agrees with the printed words,
    the mark is a failure to remove, never a dispute."""
    registry = Registry()
    claim("x.ratio", kind="exact", registry=registry)(lambda: 10)
    machine = Machine({}, "here", ())
    outcome = Outcome(registry["x.ratio"], "none", COMPUTED, value=10)
    (tmp_path / "p.md").write_text(
        'A factor of [ten](claim:x.ratio "10; disputed"), or [ten](claim:x.ratio "12; disputed").\n'
    )
    holds, refuted = read_page(tmp_path / "p.md", tmp_path).bindings
    assert holds.disputed and refuted.disputed
    verdict = judge(holds, outcome, machine)
    assert verdict.status is Status.FAILED and "is marked disputed but holds" in verdict.message
    assert judge(refuted, outcome, machine).status is Status.DISPUTED


def test_every_status_is_one_row_of_the_vocabulary() -> None:
    for status in (*STATUSES, "environment", "contended", "unverified", "not-reported", "error"):
        assert LABELS[status] and MEANINGS[status] and SHAPES[status][0] and SHAPES[status][1]
    glyphs = [glyph for glyph, _ in SHAPES.values()]
    assert len(glyphs) == len(set(glyphs)), "two statuses share a glyph"
    assert Kind.QUOTED.value and Status.CITED.value == "cited"


# ---------------------------------------------------------------- names a claim declares


def test_an_unknown_backend_or_profile_is_an_error_with_its_place() -> None:
    registry = Registry()
    claim("x.lib", kind="library", backends=("nmupy",), registry=registry)(lambda backend: 1)
    claim("x.hw", kind="measured", hardware="rtx5800", registry=registry)(lambda backend: 1)
    claim("x.timed", kind="measured", printed_on="rtx5800", tolerance=0.1, registry=registry)(lambda backend: 1)
    claim("x.cuda", kind="library", backends=("torch:cuda",), hardware="m4_max", registry=registry)(lambda b: 1)
    claim("x.fine", kind="library", backends=("numpy",), registry=registry)(lambda backend: 1)
    profiles = {"rtx5080": ("numpy", "torch:cuda"), "m4_max": ("numpy", "torch:mps")}
    errors = undeclared_names(registry, ("numpy", "torch:cpu", "torch:cuda", "torch:mps"), profiles, ("author_box",))
    text = "\n".join(map(str, errors))
    assert "claim 'x.lib' declares backend 'nmupy', which is not one; did you mean 'numpy'?" in text
    assert "claim 'x.hw' declares hardware profile 'rtx5800', which is not one; did you mean 'rtx5080'?" in text
    assert "claim 'x.timed' declares printed_on machine 'rtx5800'" in text
    assert "claim 'x.cuda' runs on torch:cuda, and no backend of the m4_max profile is one of them" in text
    assert "x.fine" not in text
    assert all(e.where.split(":")[0].endswith(".py") and e.where.split(":")[1].isdigit() for e in errors)


def test_a_misspelt_backend_fails_the_run_instead_of_skipping(book: pytest.Pytester) -> None:
    (book.path / "sample_claims" / "typo.py").write_text(
        "from verified_book.authoring.registry import claim\n\n"
        '@claim("sample.lib", kind="library", backends=("nmupy",))\n'
        "def lib(backend):\n    return 3\n"
    )
    (book.path / "book" / "page.md").write_text(PAGE + "\nA wrong figure: [4](claim:sample.lib).\n")
    result = run(book)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*sample_claims/typo.py:3: claim 'sample.lib' declares backend 'nmupy', "
            "which is not one; did you mean 'numpy'?*"
        ]
    )


def test_the_books_own_claims_declare_only_names_that_exist() -> None:
    from verified_book.backends import NAMES
    from verified_book.engine.config import read_config
    from verified_book.engine.machine import profiles

    book = read_config(ROOT)
    found = {m: p.backends for m, p in profiles().items()}
    assert undeclared_names(REGISTRY, NAMES, found, book.elsewhere) == []


def test_the_readme_status_table_is_the_legend() -> None:
    """The README's table of marks and the site's legend say the same statuses with the same words and shapes."""
    from verified_book.site.render import LEGEND_ORDER
    from verified_book.vocabulary import NOT_REPORTED

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("| mark | status | means |")
    rows = [line.strip("|").split(" | ") for line in readme[start:].splitlines()[2:] if line.startswith("|")]
    rows = rows[: next((i for i, r in enumerate(rows) if len(r) != 3), len(rows))]
    expected = [
        [f" {SHAPES[s][0]} {SHAPES[s][1]}", LABELS[s], f"{MEANINGS[s]} "] for s in (*LEGEND_ORDER, NOT_REPORTED)
    ]
    assert rows == expected


# ---------------------------------------------------------------- one count

SECOND_PAGE = "The batch with its copy makes [10](claim:sample.twice), and on a library [3](claim:sample.lib).\n"
MORE_CLAIMS = '''
from verified_book.authoring.inputs import given
from verified_book.authoring.registry import claim

@claim("sample.twice", kind="exact")
def twice():
    """Twice the example's batch."""
    return 2 * given("example.batch")

@claim("sample.lib", kind="library", backends=("numpy", "torch:cuda"))
def lib(backend):
    """Three, as the library adds it."""
    return int(backend.tensor([1, 2]).sum())
'''


def _figures_line(result: pytest.RunResult) -> tuple[int, int, dict[str, int]]:
    import re

    line = next(text for text in result.outlines if text.startswith("figures ("))
    head = re.match(r"figures \((?:all (\d+)|(\d+) of the book's (\d+)) bound figures selected\): (.*)$", line)
    assert head, line
    selected = int(head[1] or head[2])
    bound = int(head[1] or head[3])
    parts = dict((name, int(n)) for n, name in re.findall(r"(\d+) ([a-z][a-z ()]*?)(?:,|$)", head[4]))
    return selected, bound, parts


@pytest.mark.parametrize("args", [(), ("book/page.md",), ("-m", "rtx5080")], ids=["whole", "one page", "-m rtx5080"])
def test_every_count_of_a_run_adds_up(book: pytest.Pytester, args: tuple[str, ...]) -> None:
    (book.path / "sample_claims" / "more.py").write_text(MORE_CLAIMS)
    (book.path / "book" / "second.md").write_text(SECOND_PAGE)
    result = run(book, *args)
    assert result.ret == 0, result.stdout.str()
    selected, bound, parts = _figures_line(result)
    assert bound == 6 and sum(parts.values()) == selected
    if args == ("book/page.md",):
        assert selected == 4
    elif args == ():
        assert selected == 6
    if args == ():
        from verified_book.book.bindings import Book, book_pages
        from verified_book.records.results import read
        from verified_book.site import machines as site_machines

        (path,) = (book.path / "results").glob("*.json")
        import sys

        from harness import books

        for name in [m for m in sys.modules if m.startswith("sample_claims")]:
            del sys.modules[name]
        with books.opened(book.path):
            pages = [read_page(p, book.path) for p in book_pages(book.path / "book")]
            shown = site_machines.figure_counts(read(path), Book(book.path, pages, []))
        # the Machines page counts the same figures in the same statuses as the run's last line
        assert sum(shown.values()) == bound
        for status in ("verified", "cited", "reference", "stale", "failed", "disputed"):
            assert shown.get(status, 0) == parts.get(status, 0), (status, shown, parts)


def test_the_panels_badge_shows_the_mark_beside_its_word(tmp_path: Path) -> None:
    """A status is told by its shape and its word together wherever a panel names it, so a reader
    who does not see colour learns which shape is which."""
    from verified_book.site import render

    (tmp_path / "p.md").write_text("A figure [16](claim:x.sixteen).\n")
    (binding,) = read_page(tmp_path / "p.md", tmp_path).bindings
    for status in (Status.VERIFIED.value, Status.OUTDATED.value, "unverified"):
        view = render.FigureView(binding, status, (), None, None)
        html = render.render_panel(view, {}, None, "p")
        badge = html[html.index('<span class="vb-badge"') : html.index("</span> ")]
        assert render.mark(status) in badge and badge.endswith(LABELS[status]), badge


def test_the_machines_tables_keep_each_name_version_and_date_whole() -> None:
    """Each name in the Machines tables (a machine, a marker, a library with its version, a date) is
    one unbreakable piece, the list breaking only between them, and the text reads as before."""
    import re

    from verified_book.book.bindings import Book
    from verified_book.records.results import ResultsFile
    from verified_book.site import machines

    slug = "nvidia-geforce-rtx-5080"
    results = ResultsFile(
        slug,
        machine={"slug": slug, "markers": ["rtx5080", "ryzen_ai_max"], "fingerprint": {"os": "Linux 6.18.44-fc-v1"}},
        run={"date": "2026-12-04T15:29:09+00:00", "versions": {"torch": "2.13.0+cpu", "ml_dtypes": "0.6.0"}},
    )
    page = machines.render_machines({slug: results}, Book(Path("."), [], []), [], {})
    whole = set(re.findall(r'<(?:span|a) class="vb-name"[^>]*>([^<]*)<', "".join(page.blocks.values())))
    expected = {slug, "rtx5080", "ryzen_ai_max", "Linux 6.18.44-fc-v1", "2026-12-04T15:29:09+00:00", "2026-12-04"}
    assert expected | {"torch 2.13.0+cpu", "ml_dtypes 0.6.0"} <= whole, whole
    text = re.sub(r"<[^>]+>", "", "".join(page.blocks.values()))
    assert "rtx5080, ryzen_ai_max" in text and "torch 2.13.0+cpu, ml_dtypes 0.6.0" in text
