"""Rendering figures from results: status from every machine's records, one element per figure, nothing unescaped."""

from __future__ import annotations

import copy
import dataclasses
from fractions import Fraction
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markupsafe import Markup

from claims import plots as site_plots
from verified_book.authoring.registry import Claim, Kind
from verified_book.book.bindings import Book, read_page
from verified_book.engine import figure_status, provenance, verdicts
from verified_book.engine.provenance import code_fingerprint
from verified_book.errors import Problem
from verified_book.records.record import ClaimMeta, MachineRecord, Record, RunHeader, SnippetOutput
from verified_book.records.results import ResultsFile
from verified_book.site import machines as site_machines
from verified_book.site import render, transform

CLAIMS = {
    "t.ceiling": Claim(
        "t.ceiling",
        Kind.EXACT,
        lambda: Fraction(331, 20),
        "A ceiling in tokens/s.",
        defined_in="claims/topics/t.py",
        defined_line=12,
    ),
    "t.max": Claim(
        "t.max", Kind.LIBRARY, lambda b: 65504, "Largest float16.", defined_in="claims/topics/t.py", defined_line=30
    ),
    "t.quoted": Claim(
        "t.quoted", Kind.QUOTED, lambda: 250, "A vendor's figure.", defined_in="claims/topics/t.py", defined_line=40
    ),
}
PAGE = """# A page

The ceiling is [16.6](claim:t.ceiling) tokens/s, the largest [65,504](claim:t.max).
A source says [264](claim:t.quoted "disputed").

```python
--8<-- "book/snippets/shapes.py"
```

```output
max=[65,504](claim:t.max)
```
"""


def record(status: str, value: Any, figures: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {"status": status, "value": value, "figures": figures or [], "message": "", "version": "2.4.6", **extra}


def machine(slug: str, records: dict[str, dict[str, Any]], outputs: dict[str, Any] | None = None) -> ResultsFile:
    """A machine's results as a current run writes them: each claim's code fingerprint beside its records."""
    return ResultsFile(
        slug,
        {"slug": slug, "markers": [], "fingerprint": {"cpu": "Test CPU", "cores": 2}},
        {"date": "2026-11-28T10:00:00+00:00", "versions": {"python": "3.11.7"}},
        records,
        outputs or {},
        {cid: {"code": code_fingerprint(c)} for cid, c in CLAIMS.items()},
    )


@pytest.fixture
def page(tmp_path: Path) -> Any:
    book = tmp_path / "book"
    book.mkdir()
    (book / "page.md").write_text(PAGE, encoding="utf-8")
    return read_page(book / "page.md", tmp_path)


def context(results: dict[str, ResultsFile]) -> transform.Context:
    return transform.Context(results, CLAIMS.get, "https://github.com/o/r")


def figures_of(page: Any, claim_id: str) -> list[dict[str, Any]]:
    return [
        {"file": b.file, "line": b.line, "printed": b.text, "stated": b.stated, "status": "verified"}
        for b in page.bindings
        if b.claim_id == claim_id
    ]


class Elements(HTMLParser):
    """Every start tag with its attributes, to check what a browser would build."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def elements(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Elements()
    parser.feed(html)
    return parser.tags


def test_no_record_anywhere_is_not_yet_verified(page: Any) -> None:
    b = page.bindings[0]
    view = figure_status.figure_view(b, CLAIMS["t.ceiling"], {})
    assert view.status == "unverified"
    html = render.render_figure(view, {}, None, "p1")
    assert 'data-status="unverified"' in html and "not yet verified" in html


def test_only_a_list_of_values_may_break_across_lines(page: Any) -> None:
    """A figure is one word on the page, except a list, which may break after its commas in a narrow cell."""
    b = page.bindings[0]
    (figure,) = [
        t
        for t in elements(render.render_figure(figure_status.figure_view(b, CLAIMS["t.ceiling"], {}), {}, None, "p"))
        if "vb-fig" == t[1].get("class")
    ]
    assert "data-wrap" not in figure[1], f"{b.text!r} stays whole"
    grid = dataclasses.replace(b, text="(0, 0.5, 1, 1.5, 2, 3, 4, 6)")
    (figure,) = [
        t
        for t in elements(render.render_figure(figure_status.figure_view(grid, CLAIMS["t.ceiling"], {}), {}, None, "p"))
        if "vb-fig" == t[1].get("class")
    ]
    assert "data-wrap" in figure[1]


def test_the_figures_own_entry_gives_its_status_and_the_worst_machine_decides(page: Any) -> None:
    b = next(x for x in page.bindings if x.claim_id == "t.max" and not x.in_output)
    good = {"t.max": {"numpy": record("verified", 65504, figures_of(page, "t.max"))}}
    bad_figures = [dict(f, status="stale") for f in figures_of(page, "t.max")]
    bad = {"t.max": {"mlx:cpu": record("stale", 65505, bad_figures, message="computed 65,505")}}
    results = {"alpha": machine("alpha", good), "beta": machine("beta", bad)}
    view = figure_status.figure_view(b, CLAIMS["t.max"], results)
    assert view.status == "stale"
    assert {(m.machine, m.backend, m.status) for m in view.measurements} == {
        ("alpha", "numpy", "verified"),
        ("beta", "mlx:cpu", "stale"),
    }
    html = render.render_figure(view, results, "https://github.com/o/r", "p1")
    assert "65,504" in html and "65,505" in html and "alpha" in html and "beta" in html
    assert 'href="https://github.com/o/r/blob/main/claims/topics/t.py#L30"' in html


def test_this_clone_s_run_of_a_committed_machine_is_its_own_group_in_the_panel_with_its_own_date(page: Any) -> None:
    """The clone's run (results.local) and the committed file of the same machine share a slug: each row must stand
    under the file it came from, with that file's date, or an older run would read as the committed one."""
    b = next(x for x in page.bindings if x.claim_id == "t.max" and not x.in_output)
    committed = machine("alpha", {"t.max": {"numpy": record("verified", 65504, figures_of(page, "t.max"))}})
    mine = machine("alpha", {"t.max": {"numpy": record("stale", 65505, message="computed 65,505")}})
    mine.run = RunHeader.model_validate(
        {**mine.run.model_dump(exclude_unset=True), "date": "2026-10-01T09:00:00+00:00"}
    )
    local = site_machines.local_name("alpha")
    results = {"alpha": committed, local: mine}
    view = figure_status.figure_view(b, CLAIMS["t.max"], results)
    assert {(m.machine, m.status) for m in view.measurements} == {("alpha", "verified"), (local, "stale")}
    html = render.render_figure(view, results, "https://github.com/o/r", "p1")
    groups = [a["data-machine"] for tag, a in elements(html) if a.get("class") == "vb-machine"]
    assert groups == ["alpha", local]
    mine_group = html[html.index(f'data-machine="{local}"') :]
    assert "2026-10-01" in mine_group and "2026-11-28" not in mine_group


def test_changed_text_is_judged_against_the_recorded_value(page: Any) -> None:
    b = next(x for x in page.bindings if x.claim_id == "t.ceiling")
    entry = figures_of(page, "t.ceiling")[0] | {"printed": "16.5", "stated": "16.5"}
    results = {
        "alpha": machine(
            "alpha", {"t.ceiling": {"none": record("verified", {"exact": "331/20", "float": 16.55}, [entry])}}
        )
    }
    view = figure_status.figure_view(b, CLAIMS["t.ceiling"], results)
    assert view.status == "verified" and view.measurements[0].rejudged

    changed = dataclasses.replace(b, text="16.7")
    view = figure_status.figure_view(changed, CLAIMS["t.ceiling"], results)
    assert view.status == "stale"
    assert "16.55" in view.measurements[0].message


def test_disputed_figure_shows_disputed(page: Any) -> None:
    b = next(x for x in page.bindings if x.claim_id == "t.quoted")
    assert b.disputed
    results = {"alpha": machine("alpha", {"t.quoted": {"none": record("disputed", 250)}})}
    view = figure_status.figure_view(b, CLAIMS["t.quoted"], results)
    assert view.status == "disputed"
    assert "marked disputed by the book" in render.render_figure(view, results, None, "p")


def test_an_excused_figure_shows_the_reason_it_stands_in_its_panel(page: Any) -> None:
    """A claim resting on a premise the book disputes says why its figure stands, and the reader sees it."""
    b = page.bindings[0]
    reason = "the column divides by the whole <file>, as its header says"
    excused = dataclasses.replace(CLAIMS["t.ceiling"], excused={"t.quoted": reason})
    results = {"alpha": machine("alpha", {"t.ceiling": {"none": record("verified", "331/20")}})}
    view = figure_status.figure_view(b, excused, results)
    html = render.render_figure(view, results, None, "p")
    assert "vb-panel__excused" in html and "<code>t.quoted</code>" in html
    assert "the column divides by the whole &lt;file&gt;, as its header says" in html
    plain = render.render_figure(figure_status.figure_view(b, CLAIMS["t.ceiling"], results), results, None, "p")
    assert "vb-panel__excused" not in plain


def test_skipped_everywhere_is_not_yet_verified(page: Any) -> None:
    b = next(x for x in page.bindings if x.claim_id == "t.max")
    results = {"alpha": machine("alpha", {"t.max": {"torch:cuda": record("skipped", None, message="no CUDA here")}})}
    view = figure_status.figure_view(b, CLAIMS["t.max"], results)
    assert view.status == "unverified"
    assert "not computable here: torch:cuda" in render.render_figure(view, results, None, "p")


def test_a_page_renders_each_binding_as_one_element_and_no_claim_link(page: Any) -> None:
    results = {
        "alpha": machine(
            "alpha",
            {"t.max": {"numpy": record("verified", 65504, figures_of(page, "t.max"))}},
            {"shapes.py": {"text": "max=65504\n", "date": "2026-11-28", "seconds": 0.5, "how": "in process"}},
        )
    }
    rendered = transform.render_markdown(PAGE, page, context(results))
    assert "claim:" not in rendered.markdown
    assert '===! "The book"' in rendered.markdown and '=== "alpha"' in rendered.markdown
    html = "\n".join(
        f"<p>{line}</p>" if line.strip().startswith("VB") else line for line in rendered.markdown.split("\n")
    )
    filled, problems = transform.fill(html, rendered, "book/page.md")
    assert not problems
    claims = [a["data-claim"] for _, a in elements(filled) if "data-claim" in a]
    assert sorted(claims) == sorted(b.claim_id for b in page.bindings)
    assert "max=65504" in filled  # the machine's own output, in its tab
    assert "ran in 0.50 s inside the test process" in filled  # not a script's time, and the caption says so
    assert "claim:" not in filled


def test_explicit_snippet_name_in_the_info_string(tmp_path: Path) -> None:
    text = "# P\n\n```output other.py\nx=[65,504](claim:t.max)\n```\n"
    (tmp_path / "p.md").write_text(text)
    page = read_page(tmp_path / "p.md", tmp_path)
    results = {"alpha": machine("alpha", {}, {"other.py": {"text": "x=1"}})}
    rendered = transform.render_markdown(text, page, context(results))
    assert '=== "alpha"' in rendered.markdown


def test_a_machines_run_is_left_out_of_the_search_and_tab_labels_stay_apart(tmp_path: Path) -> None:
    text = "# P\n\n```output other.py\nx=[65,504](claim:t.max)\n```\n"
    (tmp_path / "p.md").write_text(text)
    page = read_page(tmp_path / "p.md", tmp_path)
    rendered = transform.render_markdown(
        text, page, context({"alpha": machine("alpha", {}, {"other.py": {"text": "x=1"}})})
    )
    run = [block for block in rendered.blocks.values() if "vb-output--machine" in block]
    assert len(run) == 1 and run[0].startswith('<div class="vb-output__run" data-search-exclude>')
    book = [block for block in rendered.blocks.values() if "vb-output--book" in block]
    assert len(book) == 1 and "data-search-exclude" not in book[0].split("<pre>", 1)[0]
    labels = '<div class="tabbed-labels"><label for="a">The book</label><label for="b">alpha</label></div>'
    assert transform.separate_tab_labels(labels) == labels.replace("</label><label", "</label> <label")


def test_a_machines_run_of_an_earlier_version_of_the_snippet_says_so_and_one_of_unknown_version_does_not(
    tmp_path: Path,
) -> None:
    text = "# P\n\n```output other.py\nx=[65,504](claim:t.max)\n```\n"
    (tmp_path / "p.md").write_text(text)
    page = read_page(tmp_path / "p.md", tmp_path)
    runs = {
        "alpha": machine("alpha", {}, {"other.py": {"text": "x=1", "sha256": "0123456789abcdef"}}),  # the book's now
        "beta": machine("beta", {}, {"other.py": {"text": "x=2", "sha256": "fedcba9876543210"}}),  # an older source
        "gamma": machine("gamma", {}, {"other.py": {"text": "x=3"}}),  # recorded before outputs kept a hash
    }
    now = {"other.py": "0123456789abcdef"}
    rendered = transform.render_markdown(text, page, dataclasses.replace(context(runs), snippet_hash=now.get))
    captions = {
        slug: next(b for b in rendered.blocks.values() if f"<b>{slug}</b>" in b).split("</p>", 1)[0] for slug in runs
    }
    earlier = "Printed by an earlier version of <code>other.py</code>: the snippet has changed since this run."
    assert earlier in captions["beta"]
    assert "earlier" not in captions["alpha"] and "earlier" not in captions["gamma"], captions


SCRIPT = "# %% [markdown]\n# # A title\n#\n# Some prose.\n\n# %%\nimport numpy as np\nprint(np.pi)\n"


def test_an_included_snippet_is_shown_without_its_cell_markers(page: Any) -> None:
    included = {"book/snippets/shapes.py": SCRIPT}
    ctx = dataclasses.replace(context({}), include=included.get)
    shown = transform.render_markdown(PAGE, page, ctx).markdown
    assert "```python\n# A title\n#\n# Some prose.\n\nimport numpy as np\nprint(np.pi)\n```" in shown
    assert "# %%" not in shown and "--8<--" not in shown


def test_an_include_of_a_plain_file_or_of_none_is_left_to_the_include(page: Any) -> None:
    for included in ({"book/snippets/shapes.py": "print(1)\n"}, {}):
        ctx = dataclasses.replace(context({}), include=included.get)
        assert '--8<-- "book/snippets/shapes.py"' in transform.render_markdown(PAGE, page, ctx).markdown


def test_front_matter_offsets_lines(tmp_path: Path) -> None:
    text = "---\ntitle: x\n---\n\n# P\n\nIt is [65,504](claim:t.max).\n"
    (tmp_path / "p.md").write_text(text)
    page = read_page(tmp_path / "p.md", tmp_path)
    markdown = "# P\n\nIt is [65,504](claim:t.max).\n"
    rendered = transform.render_markdown(markdown, page, context({}), line_offset=4)
    assert not rendered.problems and "claim:" not in rendered.markdown


def test_unknown_and_malformed_bindings_are_problems_with_place(tmp_path: Path) -> None:
    text = "# P\n\nA [16.6](claim:t.nope) and [sixteen](claim:t.max) here.\n"
    (tmp_path / "p.md").write_text(text)
    page = read_page(tmp_path / "p.md", tmp_path)
    rendered = transform.render_markdown(text, page, context({}))
    wheres = sorted(str(p) for p in rendered.problems)
    assert len(wheres) == 2 and all(w.startswith("p.md:3: ") for w in wheres)
    assert any("unknown claim 't.nope'" in w for w in wheres)
    filled, _ = transform.fill(rendered.markdown, rendered, "p.md")
    assert "](claim:" not in filled and 'href="claim:' not in filled
    assert filled.count('data-status="error"') == 2


def test_a_figure_of_an_unknown_claim_says_which_topic_module_did_not_load(tmp_path: Path) -> None:
    """The site's panel says what a run and serve say: the claim is unknown because its module failed."""
    text = "# P\n\nA [16.6](claim:t.ratio) here.\n"
    (tmp_path / "p.md").write_text(text)
    page = read_page(tmp_path / "p.md", tmp_path)
    failed = Problem("book_claims/t.py:3", "book_claims.t does not import: SyntaxError: invalid syntax")
    ctx = dataclasses.replace(context({}), load_errors=[Problem("book.toml:2", "not a module's"), failed])
    (problem,) = transform.render_markdown(text, page, ctx).problems
    assert str(problem) == (
        "p.md:3: figure 16.6 binds to unknown claim 't.ratio'; the book's claims did not all load (1 problem in "
        f"its topic modules, the first: {failed})"
    )


def test_a_figure_in_a_heading_leaves_a_clean_title_and_anchor(tmp_path: Path) -> None:
    text = "# P\n\n## Largest [65,504](claim:t.max) here\n"
    (tmp_path / "p.md").write_text(text)
    page = read_page(tmp_path / "p.md", tmp_path)
    rendered = transform.render_markdown(text, page, context({}))
    token = next(iter(rendered.titles))
    heading = f'<h2 id="largest-{token.lower()}-here">Largest {token} here</h2>'
    filled, problems = transform.fill(heading, rendered, "p.md")
    assert not problems and 'id="largest-65-504-here"' in filled and "data-claim" in filled
    assert transform.plain_title(f"Largest {token} here", rendered) == "Largest 65,504 here"
    assert transform.plain_anchor(f"largest-{token.lower()}-here", rendered) == "largest-65-504-here"


def test_a_claim_link_that_slips_through_is_caught() -> None:
    rendered = transform.RenderedPage("")
    html, problems = transform.fill('<p><a href="claim:x.y">1</a></p>', rendered, "p.md")
    assert "href" not in html and problems and "claim:x.y" in problems[0].message


HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)>'


def hostile_results(page: Any) -> dict[str, ResultsFile]:
    evil = record(
        "stale", HOSTILE, [dict(f, status="stale") for f in figures_of(page, "t.max")], message=HOSTILE, version=HOSTILE
    )
    rf = machine(
        "alpha",
        {"t.max": {"numpy": evil}, "t.evil" + HOSTILE: {"numpy": evil}},
        {"shapes.py": {"text": HOSTILE, "seconds": 0.5}},
    )
    rf.claims["t.evil" + HOSTILE] = ClaimMeta(defined_at=f"claims/topics/t.py:1{HOSTILE}")
    # what the types refuse in a file is put in all the same: the page escapes it even so
    rf.outputs["shapes.py"] = SnippetOutput.model_construct(text=HOSTILE, date=HOSTILE, seconds=0.5, how=HOSTILE)
    rf.machine = MachineRecord.model_construct(
        slug="alpha", fingerprint={"cpu": HOSTILE, "gpu": HOSTILE, "os": HOSTILE}, markers=[HOSTILE]
    )
    rf.run = RunHeader.model_construct(
        date=HOSTILE, versions={"python": HOSTILE, HOSTILE: HOSTILE}, backends={HOSTILE: HOSTILE}, seconds={}, dates={}
    )
    return {"alpha": rf}


def assert_inert(html: str) -> None:
    for tag, attrs in elements(html):
        assert tag not in ("script", "img", "iframe", "object"), f"<{tag}> reached the page"
        assert not any(name.startswith("on") for name in attrs), f"event handler on <{tag}>: {attrs}"
        for name in ("href", "src"):
            assert not (attrs.get(name) or "").strip().lower().startswith("javascript:")


def test_strings_from_a_results_file_are_escaped_in_figures(page: Any) -> None:
    results = hostile_results(page)
    rendered = transform.render_markdown(PAGE, page, context(results))
    html = "\n".join(
        f"<p>{line}</p>" if line.strip().startswith("VB") else line for line in rendered.markdown.split("\n")
    )
    filled, _ = transform.fill(html, rendered, "book/page.md")
    assert "&lt;script&gt;" in filled
    assert_inert(filled)


def test_strings_from_a_results_file_are_escaped_on_the_machines_page(tmp_path: Path, page: Any) -> None:
    results = hostile_results(page)
    book = Book(tmp_path, [page], [])
    generated = site_machines.render_machines(
        results, book, list(CLAIMS), {}, {"t.max": "claims/topics/t.py:30"}, "https://github.com/o/r", "plots.md"
    )
    html = render.fill_blocks(generated.markdown, generated.blocks)
    assert "&lt;script&gt;" in html
    assert_inert(html)


def test_strings_from_a_results_file_are_escaped_in_plots(page: Any) -> None:
    rf = copy.deepcopy(hostile_results(page)["alpha"])
    rf.records.update(
        {
            "probe.bandwidth.read": {"numpy": Record.model_validate(record("verified", 20.0))},
            "probe.matmul.fp32": {"numpy": Record.model_validate(record("verified", 150.0))},
            "flops.job.decode_bf16.intensity": {
                "none": Record.model_validate(record("verified", {"exact": "1/1", "float": 1.0}))
            },
        }
    )
    plot = site_plots.roofline(rf, site_plots.intensities({"alpha": rf}))
    assert plot.svg is not None
    assert_inert(site_plots.plot_html(plot))


def test_a_hostile_machine_name_stays_text_through_markdown(page: Any) -> None:
    """Tab labels and headings are Markdown: a results file's name must not become HTML there."""
    import markdown

    name = '<img src=x onerror=alert(1)>"_*'
    results = {name: machine("alpha", {}, {"shapes.py": {"text": "x"}})}
    extensions = ["attr_list", "pymdownx.superfences", "pymdownx.tabbed", "toc"]
    rendered = transform.render_markdown(PAGE, page, context(results))
    filled, _ = transform.fill(markdown.markdown(rendered.markdown, extensions=extensions), rendered, "book/page.md")
    assert "&lt;img" in filled
    assert_inert(filled)
    generated = site_machines.render_machines(results, Book(Path("."), [page], []), list(CLAIMS), {})
    html = render.fill_blocks(markdown.markdown(generated.markdown, extensions=extensions), generated.blocks)
    assert "&lt;img" in html
    assert_inert(html)


def test_plots_without_records_are_left_out_with_a_note() -> None:
    sections = site_plots.all_plots({"alpha": machine("alpha", {})})
    plots = [p for s in sections for p in s.plots]
    assert plots and all(p.svg is None and p.note for p in plots)
    assert "probe.bandwidth" in plots[0].note


def test_plots_are_drawn_from_records_in_the_page_colour() -> None:
    records: dict[str, dict[str, Any]] = {
        "probe.bandwidth.read": {"numpy": record("verified", 20.0), "torch:cpu": record("verified", 18.0)},
        "probe.matmul.fp32": {"numpy": record("verified", 150.0)},
        "probe.matmul.bf16": {"torch:cpu": record("verified", 60.0)},
        "probe.decode_ceiling.qwen3_8b.bf16": {"numpy": record("verified", 1.2)},
        "decode.ceiling.dgx_spark.bf16": {"none": record("verified", {"exact": "273/16", "float": 17.0625})},
        "flops.job.decode_bf16.intensity": {"none": record("verified", 1)},
        "flops.job.prefill_bf16.intensity": {"none": record("verified", 512)},
    }
    for batch in site_plots.SWEEP_BATCHES:
        records[f"probe.sweep.{batch}.gflops"] = {"numpy": record("verified", 10.0 * batch)}
    rf = machine("alpha", records)
    assert site_plots.intensities({"alpha": rf}) == {"decode_bf16": 1.0, "prefill_bf16": 512.0}
    for plot in (
        site_plots.roofline(rf, site_plots.intensities({"alpha": rf})),
        site_plots.decode_ceilings({"alpha": rf}),
        site_plots.sweep(rf),
    ):
        assert plot.svg is not None and plot.svg.startswith("<svg"), plot.note
        assert "currentColor" in plot.svg and site_plots.INK not in plot.svg
        assert 'width="' not in plot.svg.split(">", 1)[0]


def test_machine_counts_count_each_printed_figure_once(tmp_path: Path) -> None:
    """A machine's counts are of the book's figures, each in one status, adding up to the figures bound."""
    rf = machine(
        "alpha",
        {
            "a.one": {"numpy": record("verified", 1), "torch:cpu": record("stale", 2)},
            "a.two": {"torch:cuda": record("skipped", None)},
            "a.three": {"none": record("verified", 3)},
        },
    )
    (tmp_path / "page.md").write_text(
        "One [1](claim:a.one), two [1](claim:a.one), [2](claim:a.two), [3](claim:a.three) and [4](claim:a.four).\n"
    )
    book = Book(tmp_path, [read_page(tmp_path / "page.md", tmp_path)], [])
    counts = site_machines.figure_counts(rf, book)
    assert {s: n for s, n in counts.items() if n} == {"stale": 2, "skipped": 1, "verified": 1, "unverified": 1}
    assert sum(counts.values()) == sum(1 for _ in book.bindings()) == 5


def test_show_value_keeps_exact_values_readable() -> None:
    assert figure_status.show_value({"exact": "1/128", "float": 0.0078125}) == "1/128 ≈ 0.0078125"
    assert figure_status.show_value(8190427136) == "8,190,427,136"
    assert figure_status.show_value([4096, 12288]) == "(4,096, 12,288)"
    assert render.from_json({"exact": "1/128", "float": 0.0078125}) == Fraction(1, 128)


def test_a_record_from_older_code_shows_outdated_with_its_reason(page: Any) -> None:
    b = next(x for x in page.bindings if x.claim_id == "t.ceiling")
    rf = machine(
        "alpha",
        {"t.ceiling": {"none": record("verified", {"exact": "331/20", "float": 16.55}, figures_of(page, "t.ceiling"))}},
    )
    assert figure_status.figure_view(b, CLAIMS["t.ceiling"], {"alpha": rf}).status == "verified"
    rf.claims["t.ceiling"] = ClaimMeta(code="0" * 16)  # made by another version of the claim's code
    view = figure_status.figure_view(b, CLAIMS["t.ceiling"], {"alpha": rf})
    assert view.status == "outdated"
    panel = render.render_panel(view, {"alpha": rf}, None, "p")
    assert "the claim&#39;s code changed since this record was made (claims/topics/t.py:12)" in panel


def test_a_build_judges_each_record_once(page: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every figure of a claim and the machines page ask whether the same record is outdated: within
    one build's `judged_once` it is judged once; the next build, or a caller outside one, judges anew."""
    b = next(x for x in page.bindings if x.claim_id == "t.ceiling")
    rf = machine(
        "alpha",
        {"t.ceiling": {"none": record("verified", {"exact": "331/20", "float": 16.55}, figures_of(page, "t.ceiling"))}},
    )
    judged: list[object] = []
    measured: list[object] = []
    judge, measure = provenance._outdated_reason, figure_status._measure_now
    monkeypatch.setattr(provenance, "_outdated_reason", lambda *args: judged.append(args) or judge(*args))
    monkeypatch.setattr(figure_status, "_measure_now", lambda *args: measured.append(args) or measure(*args))
    with verdicts.judged_once({}):
        for _ in range(3):
            assert figure_status.figure_view(b, CLAIMS["t.ceiling"], {"alpha": rf}).status == "verified"
    assert len(judged) == 1 and len(measured) == 1
    with verdicts.judged_once({}):
        figure_status.figure_view(b, CLAIMS["t.ceiling"], {"alpha": rf})
    figure_status.figure_view(b, CLAIMS["t.ceiling"], {"alpha": rf})
    assert len(judged) == 3 and len(measured) == 3


def test_markup_escapes_each_value_and_keeps_markup_as_it_is() -> None:
    made = render.markup('<a href="{}" title="{t}">{}</a>', '"><script>', Markup("<b>kept</b>"), t="a & b")
    assert made == '<a href="&#34;&gt;&lt;script&gt;" title="a &amp; b"><b>kept</b></a>'
    assert isinstance(made, Markup)
    assert made == Markup('<a href="{}" title="{t}">{}</a>').format('"><script>', Markup("<b>kept</b>"), t="a & b")


BOOK_JOBS = {"decode_bf16": 1.0, "decode_q4_k_m": 3.3, "decode_batch8_bf16": 8.0, "prefill_bf16": 2048.0}


#: (bandwidth GB/s, BF16 peak GFLOP/s) of machines of every kind, and the ridge each puts the jobs about
SHAPES = {
    "a 2-core VM": (40.0, 330.0),
    "a desktop CPU": (60.0, 1_500.0),
    "an Apple M4 Max": (546.0, 34_000.0),
    "an RTX 5080": (960.0, 225_000.0),
    "an H100": (3_350.0, 990_000.0),
    "an emulated BF16, every job on the flat roof": (4.4, 3.5),
    "a ridge between two jobs": (100.0, 500.0),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_the_roofline_s_words_never_overlap_whatever_the_machine_measured(shape: str) -> None:
    """The jobs' numbers and the title stay apart on any machine: each number is a digit beside its diamond,
    and the headroom above the highest roof keeps one set there clear of the title."""
    bandwidth, peak = SHAPES[shape]
    records = {
        "probe.bandwidth.read": {"numpy": record("verified", bandwidth), "torch:cpu": record("verified", bandwidth)},
        "probe.matmul.bf16": {"torch:cpu": record("verified", peak)},
        "probe.matmul.fp32": {"numpy": record("verified", peak / 3)},
        **{f"flops.job.{name}.intensity": {"none": record("verified", value)} for name, value in BOOK_JOBS.items()},
    }
    drawn: list[Any] = []
    original = site_plots.to_svg

    def keep(fig: Any, title: str) -> str:
        from matplotlib.text import Text

        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        heading = next(t for t in ax.findobj(Text) if t.get_text() and t.get_text() == ax.get_title(loc="left"))
        drawn.extend((t.get_text(), t.get_window_extent(renderer)) for t in [heading, *ax.texts])
        return original(fig, title)

    rf = machine("alpha", records)
    site_plots.to_svg = keep
    try:
        plot = site_plots.roofline(rf, site_plots.intensities({"alpha": rf}))
    finally:
        site_plots.to_svg = original
    assert plot.svg is not None and len(drawn) == 1 + len(BOOK_JOBS)
    for i, (text, box) in enumerate(drawn):
        for other, other_box in drawn[i + 1 :]:
            assert not box.overlaps(other_box), f"on {shape}, {text!r} overlaps {other!r}"
