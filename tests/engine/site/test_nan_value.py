"""A computed NaN is a value: judged against the printed figure like any other, kept in the record, and shown with
the figure's status at the terminal, in the panel and on the Machines page, never as a claim that could not compute.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from harness import faults

from verified_book.authoring.registry import REGISTRY
from verified_book.book.bindings import read_page
from verified_book.engine.config import open_book, read_config
from verified_book.engine.figure_status import figure_view, recorded_value
from verified_book.records.record import Record
from verified_book.records.results import read
from verified_book.site import machines, render
from verified_book.vocabulary import MEANINGS, Status

pytest_plugins = ["pytester"]

CLAIMS = '''
import math
from verified_book.authoring.registry import claim

@claim("sample.inf_cast", kind="exact")
def inf_cast():
    """An infinity cast to a format with no infinity: this library's answer is NaN."""
    return math.nan
'''

PAGE = "An infinity cast to E4M3 gives [448](claim:sample.inf_cast), saturated.\n"
COULD_NOT = MEANINGS[Status.FAILED]  # "the claim could not compute, ..."


@pytest.fixture
def ran(pytester: pytest.Pytester) -> tuple[Any, Path]:
    book = faults.sample_book(pytester, CLAIMS, PAGE, "sample.py")
    result = faults.run_book(book)
    (path,) = (book.path / "results").glob("*.json")
    return result, path


def test_a_computed_nan_is_recorded_and_judged_stale(ran: tuple[Any, Path]) -> None:
    result, path = ran
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*book/page.md:1: figure 448 (sample.inf_cast) is stale in exact arithmetic: computed nan*"]
    )
    assert "returned NaN" not in result.stdout.str() and "cannot be checked" not in result.stdout.str()
    record = json.loads(path.read_text())["records"]["sample.inf_cast"]["none"]
    assert record["value"] == "nan"
    assert record["status"] == "stale" and record["figures"][0]["status"] == "stale"


def test_the_panel_and_the_machines_page_show_the_nan_as_stale(
    ran: tuple[Any, Path], pytester: pytest.Pytester
) -> None:
    _, path = ran
    results = read(path)
    config = read_config(pytester.path)
    with open_book(config).opened():
        (binding,) = read_page(pytester.path / "book" / "page.md", pytester.path).bindings
        view = figure_view(binding, REGISTRY.get(binding.claim_id), {results.slug: results})
        assert view.status == Status.STALE
        (measured,) = view.measurements
        assert isinstance(measured.value, float) and math.isnan(measured.value)
        panel = str(render.render_panel(view, {results.slug: results}, None, "p1"))
        assert '<span class="vb-row__value">NaN</span>' in panel and 'data-status="stale"' in panel
        assert COULD_NOT not in panel
        status, cell = machines._cell(binding.claim_id, results)
        assert status == Status.STALE and "none: NaN (stale)" in str(cell)


def test_a_nan_recorded_as_failed_before_is_judged_as_the_value_it_was(
    ran: tuple[Any, Path], pytester: pytest.Pytester
) -> None:
    """Records written before a NaN was kept as a value say "returned NaN" with no value: read as that NaN."""
    _, path = ran
    data = json.loads(path.read_text())
    record = data["records"]["sample.inf_cast"]["none"]
    record.update(status="failed", value=None, message="returned NaN")
    for figure in record["figures"]:
        figure["status"] = "failed"
    path.write_text(json.dumps(data))
    results = read(path)
    assert math.isnan(recorded_value(Record.model_validate(record)))
    with open_book(read_config(pytester.path)).opened():
        (binding,) = read_page(pytester.path / "book" / "page.md", pytester.path).bindings
        view = figure_view(binding, REGISTRY.get(binding.claim_id), {results.slug: results})
    (measured,) = view.measurements
    assert view.status == Status.STALE and math.isnan(measured.value)
    assert measured.message.startswith("recorded as failed before a computed NaN was kept as a value")
