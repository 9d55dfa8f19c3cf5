"""A panel holds the machine that decides its figure and this clone's own; the other machines' rows go to the
page's data file, loaded when a reader opens a panel. What a claim's records are judged by is read once per
claim, however many machines recorded it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_render import CLAIMS, PAGE, elements, figures_of, machine, record

from verified_book.book.bindings import read_page
from verified_book.engine import figure_status, provenance, verdicts
from verified_book.site import build as site_book
from verified_book.site import render


@pytest.fixture
def page(tmp_path: Path) -> Any:
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "page.md").write_text(PAGE, encoding="utf-8")
    return read_page(tmp_path / "book" / "page.md", tmp_path)


def fleet(page: Any) -> dict[str, Any]:
    """Three machines: alpha and gamma hold t.max's figure, beta's record makes it stale."""
    good = {"t.max": {"numpy": record("verified", 65504, figures_of(page, "t.max"))}}
    stale = [dict(f, status="stale") for f in figures_of(page, "t.max")]
    bad = {"t.max": {"numpy": record("stale", 65505, stale, message="computed 65,505")}}
    return {"alpha": machine("alpha", good), "beta": machine("beta", bad), "gamma": machine("gamma", good)}


def machines_in(html: str) -> list[str | None]:
    return [a["data-machine"] for _, a in elements(html) if a.get("class") == "vb-machine"]


def test_a_panel_keeps_the_machine_that_decides_its_mark_and_leaves_the_others_to_the_page_s_data_file(
    page: Any,
) -> None:
    b = next(x for x in page.bindings if x.claim_id == "t.max" and not x.in_output)
    results = fleet(page)
    view = figure_status.figure_view(b, CLAIMS["t.max"], results)
    assert view.status == "stale" and render.decisive(view) == "beta"
    whole = render.render_figure(view, results, None, "p1")
    assert machines_in(whole) == ["alpha", "beta", "gamma"], "without a data file every machine stays in the panel"
    assert "vb-panel__more" not in whole

    rows = render.PanelRows("page.panels.js?v=1", "machines.html")
    html = render.render_figure(view, results, None, "p1", rows=rows)
    assert machines_in(html) == ["beta"]
    (more,) = [a for _, a in elements(html) if a.get("class") == "vb-panel__more"]
    assert more["data-vb-rows"] == "page.panels.js?v=1"
    assert "2 more machines recorded this claim" in html and '<a href="machines.html">Machines page</a>' in html
    assert list(rows.rows) == ["p1"] and machines_in(rows.rows["p1"]) == ["alpha", "gamma"]
    assert "65,504" in rows.rows["p1"] and "65,505" in html

    mine = render.PanelRows("page.panels.js")
    html = render.render_figure(view, results, None, "p2", rows=mine, own=("gamma",))
    assert machines_in(html) == ["beta", "gamma"], "this clone's own run stays on the page"
    assert machines_in(mine.rows["p2"]) == ["alpha"] and "1 more machine recorded" in html


def test_a_figure_one_machine_decides_alone_has_no_data_file_rows(page: Any) -> None:
    b = next(x for x in page.bindings if x.claim_id == "t.max" and not x.in_output)
    results = {"alpha": fleet(page)["alpha"]}
    view = figure_status.figure_view(b, CLAIMS["t.max"], results)
    rows = render.PanelRows("page.panels.js")
    assert render.render_figure(view, results, None, "p1", rows=rows) == render.render_figure(view, results, None, "p1")
    assert rows.rows == {}


def test_the_data_file_is_written_beside_the_page_and_hands_each_panel_its_rows(tmp_path: Path) -> None:
    rows = {"vbp-1": render.markup('<span class="vb-machine" data-machine="{}">{}</span>', "a", "</script> é")}
    for dest, written in (("ch/index.html", "ch/index.panels.js"), ("chapter.html", "chapter.panels.js")):
        url = site_book.write_panel_rows(tmp_path, dest, rows)
        name, _, version = url.partition("?v=")
        assert name == Path(written).name and version
        assert site_book.read_data_file(tmp_path / written) == (
            site_book.ROWS_FUNCTION,
            [{uid: str(html) for uid, html in rows.items()}],
        )
        assert (tmp_path / written).read_bytes().isascii(), "a data file reads the same whatever encoding is named"
    changed = site_book.write_panel_rows(tmp_path, "chapter.html", {"vbp-1": render.markup("{}", "other")})
    assert changed != url, "a browser that kept the earlier file is sent the new one"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_rows_packed_for_a_data_file_unpack_to_themselves_as_plain_ascii(value: Any) -> None:
    text = site_book.packed(value)
    assert text.isascii() and json.loads(json.dumps(text)) == text and '"' not in text and "<" not in text
    assert site_book.unpacked(text) == value
    assert site_book.packed(value) == text, "the same rows pack to the same file, whose digest names it"


def test_a_build_reads_each_claim_s_code_and_data_once_however_many_machines_recorded_it(
    page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A site build asks, for every machine's record, whether the claim's code or the libraries it uses moved:
    the claim's fingerprint and its libraries are made once per claim in a build, not once per machine."""
    b = next(x for x in page.bindings if x.claim_id == "t.max" and not x.in_output)
    results = fleet(page)
    made: list[object] = []
    uses: list[object] = []
    fingerprint, uses_of = provenance._code_fingerprint, provenance._uses_of
    monkeypatch.setattr(provenance, "_code_fingerprint", lambda *args: made.append(args) or fingerprint(*args))
    monkeypatch.setattr(provenance, "_uses_of", lambda *args: uses.append(args) or uses_of(*args))
    with verdicts.judged_once({}):
        assert figure_status.figure_view(b, CLAIMS["t.max"], results).status == "stale"
    assert len(made) == 1 and len(uses) == 1, (made, uses)
    figure_status.figure_view(b, CLAIMS["t.max"], results)
    assert len(made) == 1 + len(results), "outside a build each record is judged afresh"
