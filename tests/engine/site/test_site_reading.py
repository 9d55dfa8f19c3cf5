"""What the site says beside the figures, as plain functions: the status vocabulary and its marks,
the legend, the fleet's quiet machines, and plots that admit where their data contradicts the page."""

from __future__ import annotations

import datetime as dt
from random import Random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from claims import plots as site_plots
from verified_book.engine import figure_status
from verified_book.records.results import ResultsFile
from verified_book.site import machines as site_machines
from verified_book.site import render
from verified_book.vocabulary import NOT_REPORTED, UNVERIFIED, Status

DAY = "2026-11-28T10:00:00+00:00"


def record(status: str, value: Any = None, message: str = "") -> dict[str, Any]:
    return {"status": status, "value": value, "figures": [], "message": message, "version": "2.4.6"}


def sweep_file(gflops: dict[int, float | None], slug: str = "box") -> ResultsFile:
    """A machine's sweep on torch:cpu: None for a batch its time budget skipped."""
    records: dict[str, dict[str, dict[str, Any]]] = {}
    for batch, value in gflops.items():
        skipped = record(
            "skipped",
            None,
            f"torch:cpu: batch {batch} would take about 9 s to measure, past the sweep's budget of 1.6 s",
        )
        records[f"probe.sweep.{batch}.gflops"] = {"torch:cpu": record("verified", value) if value else skipped}
        records[f"probe.sweep.{batch}.weight_gbs"] = {"torch:cpu": record("verified", 40 / batch) if value else skipped}
    return ResultsFile(slug, run={"date": DAY}, records=records)


def test_a_sweep_that_contradicts_the_page_says_so_under_the_chart_once() -> None:
    """torch:cpu falling from batch 1 to 8, with 64 and 256 skipped by the budget, as once recorded:
    each finding one sentence in the caption's list, none drawn into the chart or repeated in the note."""
    plot = site_plots.sweep(sweep_file({1: 9.9, 8: 6.6, 64: None, 256: None}))
    assert plot.svg is not None
    assert plot.warnings == (
        "torch:cpu: GFLOP/s fall from batch 1 to 8 (9.9 → 6.6), against the rise the page states.",
        "torch:cpu: batches 64 and 256 not measured, skipped by the sweep's time budget.",
    )
    assert "⚠" not in plot.svg and "not measured" not in plot.svg and "not measured" not in plot.note
    assert "torch:cpu" in plot.svg and "box, run 2026-11-28" in plot.title, "the series or the run is not named"
    html = site_plots.plot_html(plot)
    assert html.count("not measured") == 1 and html.count("fall from batch 1 to 8") == 1


def test_a_finding_shared_by_backends_is_said_once_with_their_names() -> None:
    reason = (
        "batch {b} is not measured on the CPU: 6.4 GFLOP a call, past the sweep's 0.8 GFLOP a call (a count of work)"
    )
    records: dict[str, dict[str, Any]] = {}
    for batch in (1, 8, 64, 256):
        for what in ("gflops", "weight_gbs"):
            records[f"probe.sweep.{batch}.{what}"] = {
                backend: record("verified", batch * 2.0 if what == "gflops" else 40 / batch)
                if batch < 64
                else record("skipped", None, f"{backend}: " + reason.format(b=batch))
                for backend in ("numpy", "torch:cpu")
            }
    plot = site_plots.sweep(ResultsFile("box", run={"date": DAY}, records=records))
    assert plot.warnings == (
        "numpy, torch:cpu: batches 64 and 256 not measured, batch 64's record says “not measured "
        "on the CPU: 6.4 GFLOP a call, past the sweep's 0.8 GFLOP a call”.",
    )


def test_a_sweep_that_agrees_with_the_page_draws_no_warning() -> None:
    plot = site_plots.sweep(sweep_file({1: 5.0, 8: 30.0, 64: 90.0, 256: 120.0}))
    assert plot.svg is not None and plot.warnings == () and "not measured" not in plot.note
    assert "vb-plot__warnings" not in site_plots.plot_html(plot)


@pytest.mark.parametrize(
    ("gflops", "traffic", "expected"),
    [
        ({1: 2.0, 8: 1.0}, {1: 4.0, 8: 0.5}, "GFLOP/s fall from batch 1 to 8"),
        (
            {1: 1.0, 8: 2.0, 64: 3.0, 256: 4.0},
            {1: 1.0, 8: 2.0, 64: 1.0, 256: 0.5},
            "weight GB/s rise from batch 1 to 8",
        ),
    ],
)
def test_each_contradiction_is_named(gflops: dict[int, float], traffic: dict[int, float], expected: str) -> None:
    found = site_plots.sweep_findings(gflops, traffic, {})
    assert any(f.startswith(expected) for f in found), found


def test_every_status_of_the_vocabulary_has_a_label_a_shape_and_a_meaning() -> None:
    for status in (*figure_status.VOCABULARY, UNVERIFIED, NOT_REPORTED, "error"):
        assert render.LABELS[status] and render.MEANINGS[status] and render.SHAPES[status]
    glyphs = [render.SHAPES[s][0] for s in render.SHAPES]
    assert len(set(glyphs)) == len(glyphs), "two statuses share a glyph"
    legend = render.render_legend("machines.html")
    for status in render.LEGEND_ORDER:
        assert f'<tr data-status="{status}">' in legend
    assert render.LABELS[NOT_REPORTED] in legend


def test_a_status_the_site_does_not_know_shows_under_its_own_name() -> None:
    assert figure_status.status_of("reference") == "reference" and figure_status.status_of("outdated") == "outdated"
    assert figure_status.status_of("provisional") == "provisional"
    assert figure_status.status_of('"><script>') == "failed" and figure_status.status_of(None) == "failed"
    assert figure_status.shown_status(["verified", "provisional"]) == "verified"
    assert figure_status.shown_status(["provisional", "skipped"]) == "provisional"
    assert figure_status.shown_status(["reference", "outdated", "verified", "stale"]) == "stale"
    assert figure_status.shown_status(["skipped"]) == UNVERIFIED


STATUS_NAMES = st.sampled_from([*figure_status.DISPLAY_ORDER, *Status, "provisional", "zz-newer"])


@given(st.lists(STATUS_NAMES, max_size=6), st.randoms())
def test_a_machine_s_status_depends_on_which_statuses_its_backends_have_not_their_order(
    statuses: list[str], random: Random
) -> None:
    """What `on_machine` and `shown_status` answer is kept by the set of statuses asked about (they are asked at
    every figure of every machine): the order, a repeat, or a status given as its vocabulary member or its plain
    name changes nothing."""
    shuffled = [*statuses, *statuses[:1]]
    random.shuffle(shuffled)
    plain = [str(s) for s in shuffled]
    assert figure_status.on_machine(statuses) == figure_status.on_machine(shuffled) == figure_status.on_machine(plain)
    assert figure_status.shown_status(statuses) == figure_status.shown_status(plain)
    found = figure_status.on_machine(statuses)
    ran = [s for s in statuses if s != Status.SKIPPED]
    if statuses and not ran:
        assert found == Status.SKIPPED
    else:
        assert found in {*ran, UNVERIFIED}


def machine(slug: str, date: str, markers: list[str]) -> ResultsFile:
    return ResultsFile(slug, machine={"slug": slug, "markers": markers}, run={"date": date} if date else {})


def test_a_fleet_machine_quiet_for_longer_than_the_window_is_not_reported_this_week() -> None:
    results = {
        "fresh": machine("fresh", "2026-11-28T03:17:00+00:00", ["rtx5080"]),
        "quiet": machine("quiet", "2026-11-10T03:17:00+00:00", ["m4_max"]),
        "undated": machine("undated", "", ["h100"]),
        "contributed": machine("contributed", "2025-01-01T00:00:00+00:00", []),
    }
    quiet = site_machines.quiet_machines(results, dt.date(2026, 11, 30), 8)
    assert quiet == {"quiet", "undated"}
    page = site_machines.render_machines(results, _empty_book(), [], {}, quiet=quiet, report_within_days=8)
    overview = next(b for b in page.blocks.values() if "vb-overview" in b)
    assert overview.count("not reported this week") == 2
    assert 'data-machine="quiet" data-quiet' in overview and 'data-machine="fresh">' in overview


def _empty_book() -> Any:
    from pathlib import Path

    from verified_book.book.bindings import Book

    return Book(Path("."), [], [])
