"""The other machines' rows of a page's panels, loaded from the page's data file when a reader opens a panel, and
the machines page's claims × machines matrix, its rows loaded a chapter at a time from that page's data files: from
disk (file://, where a page may not fetch() a file) and over http, at a phone's and a desktop's width, in the book
built with the committed machines and three more.

Screenshots of each open panel go to `artifacts/screenshots/panels/`, of the matrix to `artifacts/screenshots/matrix/`,
for a person to look at.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from harness.served import served
from test_marks_browser import longest_chapter, new_page
from test_site import ROOT, build, copy_project

SCREENSHOTS = ROOT / "artifacts" / "screenshots" / "panels"
MATRIX_SCREENSHOTS = ROOT / "artifacts" / "screenshots" / "matrix"
MORE = 3  # machines added to the committed ones


@pytest.fixture(scope="module")
def fleet_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, set[str]]]:
    """The book built with the committed results and `MORE` copies of the first as other machines; the site, and
    the machines that recorded each claim."""
    project = copy_project(tmp_path_factory.mktemp("fleet") / "project")
    first = sorted((project / "results").glob("*.json"))[0]
    document = json.loads(first.read_text(encoding="utf-8"))
    for n in range(1, MORE + 1):
        slug = f"{document['slug']}-copy{n}"
        machine = {**document["machine"], "slug": slug, "id": f"copy{n}"}
        (project / "results" / f"{slug}.json").write_text(json.dumps({**document, "slug": slug, "machine": machine}))
    recorded: dict[str, set[str]] = {}
    for path in (project / "results").glob("*.json"):
        for claim_id in json.loads(path.read_text(encoding="utf-8"))["records"]:
            recorded.setdefault(claim_id, set()).add(path.stem)
    site = project / "site"
    result = build(project, site)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    return site, recorded


@pytest.fixture(scope="module")
def fleet_url(fleet_site: tuple[Path, dict[str, set[str]]]) -> Iterator[str]:
    with served(fleet_site[0]) as url:
        yield url


def pinned(page: Any) -> Any:
    """The first figure a reader can see whose panel leaves machines to the data file, found by its panel's id (a
    locator that names the placeholder would lose the figure once its rows come in)."""
    first = page.locator("[data-claim]:visible:has(.vb-panel__more)").first
    return page.locator(f'[aria-describedby="{first.get_attribute("aria-describedby")}"]')


def open_by_hand(page: Any, figure: Any, phone: bool = False) -> None:
    """Open a figure's panel as a reader does: scrolled to below the page's header, tapped or clicked at its first
    characters (the middle of a figure that wraps is between its lines)."""
    figure.scroll_into_view_if_needed()
    figure.evaluate("f => window.scrollBy(0, f.getBoundingClientRect().top - 120)")
    box = figure.bounding_box()
    point = (box["x"] + min(4, box["width"] / 2), box["y"] + box["height"] / 2)
    page.touchscreen.tap(*point) if phone else page.mouse.click(*point)


@contextlib.contextmanager
def without_scripts(browser: Any) -> Iterator[Any]:
    """A desktop page of a browser that runs no script."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
    try:
        yield context.new_page()
    finally:
        context.close()


def errors_of(page: Any) -> list[str]:
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    return errors


@pytest.mark.browser
@pytest.mark.parametrize("how", ["file", "http"])
@pytest.mark.parametrize("width", [390, 1280])
def test_an_opened_panel_shows_every_machine_s_rows_from_the_page_s_data_file(
    browser: Any, fleet_site: tuple[Path, dict[str, set[str]]], fleet_url: str, how: str, width: int
) -> None:
    site, recorded = fleet_site
    chapter = longest_chapter(site)
    phone = width < 500
    page = new_page(browser, width, 700 if phone else 900, phone=phone)
    errors = errors_of(page)
    try:
        page.goto((site.as_uri() + "/" if how == "file" else fleet_url) + chapter)
        figure = pinned(page)
        claim_id = figure.get_attribute("data-claim")
        panel = figure.locator(".vb-panel")
        assert panel.locator(".vb-machine").count() == 1, "the page holds the deciding machine alone"
        assert page.locator("script[src*='.panels.js']").count() == 0, "the data file loads before a panel opens"
        open_by_hand(page, figure, phone)
        panel.locator(".vb-panel__more").wait_for(state="detached", timeout=10_000)
        page.wait_for_timeout(250)  # the panel's fade
        shown = {m.get_attribute("data-machine") for m in panel.locator(".vb-machine").all()}
        assert shown == recorded[str(claim_id)], f"{claim_id}: the panel shows {shown}"
        assert panel.locator(".vb-row").count() >= len(shown)
        assert page.locator("script[src*='.panels.js']").count() == 1
        assert figure.get_attribute("aria-expanded") == "true"
        box, viewport = panel.bounding_box(), page.viewport_size
        assert box["y"] >= 0 and box["y"] + box["height"] <= viewport["height"] + 1, "the panel runs off the screen"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"open-panel-{width}-{how}.png"))
        assert page.locator(".vb-panel__more").count() == 0, "the page's other panels wait for another load"
    finally:
        page.context.close()
    assert not errors, errors


@pytest.mark.browser
def test_without_scripts_a_panel_says_where_the_other_machines_results_are(
    browser: Any, fleet_site: tuple[Path, dict[str, set[str]]]
) -> None:
    site, recorded = fleet_site
    with without_scripts(browser) as page:
        page.goto(site.as_uri() + "/" + longest_chapter(site))
        figure = pinned(page)
        figure.scroll_into_view_if_needed()
        page.mouse.wheel(0, figure.bounding_box()["y"] - 120)
        page.wait_for_timeout(200)
        figure.hover()
        more = figure.locator(".vb-panel__more")
        more.wait_for(state="visible")
        others = len(recorded[str(figure.get_attribute("data-claim"))]) - 1
        assert f"{others} more machines recorded this claim" in more.inner_text()
        link = more.locator("a")
        assert link.inner_text() == "Machines page"
        assert Path(urlparse(link.evaluate("a => a.href")).path).name == "machines.html"
        assert Path(urlparse(link.evaluate("a => a.href")).path).is_file()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "no-script-panel-1280.png"))


@pytest.mark.browser
def test_a_browser_that_cannot_unpack_the_rows_keeps_the_panel_s_note_and_raises_nothing(
    browser: Any, fleet_site: tuple[Path, dict[str, set[str]]]
) -> None:
    """The data files hold the rows packed (gzip): a browser without `DecompressionStream` (before Firefox 113 and
    Safari 16.4) loads the file and keeps the note on where the other machines' rows are, as a page that could not
    load it does."""
    site, _ = fleet_site
    page = new_page(browser, 1280, 900)
    page.add_init_script(
        "delete window.DecompressionStream; window.vbAdded = [];"
        "new MutationObserver(changes => changes.forEach(c => c.addedNodes.forEach(n => n.src && vbAdded.push(n.src))))"
        ".observe(document, {childList: true, subtree: true});"
    )
    errors = errors_of(page)
    try:
        page.goto(site.as_uri() + "/" + longest_chapter(site))
        figure = pinned(page)
        open_by_hand(page, figure)
        page.wait_for_function("() => vbAdded.some(src => src.includes('.panels.js'))")
        page.wait_for_timeout(500)  # what the file's call starts has run
        panel = figure.locator(".vb-panel")
        assert panel.locator(".vb-panel__more").is_visible() and panel.locator(".vb-machine").count() == 1
        assert page.locator("script[src*='.panels.js']").count() == 0, "the file is let go, to be asked for again"
    finally:
        page.context.close()
    assert not errors, errors


ROWS = ".vb-matrix__table tbody tr"


def shown_claims(page: Any) -> list[str]:
    return page.locator(f"{ROWS}:not([hidden])").evaluate_all("rows => rows.map(r => r.dataset.claimRow)")


@pytest.mark.browser
@pytest.mark.parametrize("how", ["file", "http"])
@pytest.mark.parametrize("width", [390, 1280])
def test_the_matrix_shows_the_chapter_picked_and_every_claim_once_under_all_chapters(
    browser: Any, fleet_site: tuple[Path, dict[str, set[str]]], fleet_url: str, how: str, width: int
) -> None:
    site, _ = fleet_site
    page = new_page(browser, width, 900, phone=width < 500)
    errors = errors_of(page)
    try:
        page.goto((site.as_uri() + "/" if how == "file" else fleet_url) + "machines.html")
        matrix = page.locator("[data-vb-matrix]")
        files = json.loads(matrix.get_attribute("data-vb-rows") or "{}")
        total = int(matrix.get_attribute("data-vb-total") or 0)
        assert "c0" in files and total > 0
        page.locator(ROWS).first.wait_for(timeout=10_000)
        first = shown_claims(page)
        chapters = page.locator(ROWS).evaluate_all("rows => rows.map(r => r.dataset.chapters.split(' '))")
        assert first and all("c0" in keys for keys in chapters), "the first chapter's claims, and only those"
        assert page.locator("[data-vb-count]").inner_text() == f"{len(first)} of {total} claims"
        assert page.locator("[data-vb-wait]").is_hidden()
        assert page.locator("[data-claim]").count() == 0, "a row of the matrix is no figure of the page"
        page.locator("#claims-by-machine").scroll_into_view_if_needed()
        MATRIX_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(MATRIX_SCREENSHOTS / f"matrix-{width}-{how}.png"))

        page.select_option('[data-vb-filter="chapter"]', "")
        page.wait_for_function(f"() => document.querySelectorAll({ROWS!r}).length === {total}", timeout=10_000)
        every = shown_claims(page)
        assert every == sorted(set(every)) and len(every) == total, "each claim once, in order"
        assert set(first) <= set(every)
        assert page.locator("[data-vb-count]").inner_text() == f"{total} claims"

        page.select_option('[data-vb-filter="status"]', "verified")
        verified = shown_claims(page)
        marked = page.locator(f'{ROWS}[data-statuses~="verified"]').count()
        assert len(verified) == marked and page.locator("[data-vb-count]").inner_text() == f"{marked} of {total} claims"
    finally:
        page.context.close()
    assert not errors, errors


@pytest.mark.browser
def test_without_scripts_the_matrix_says_its_rows_load_with_the_page_s_script(
    browser: Any, fleet_site: tuple[Path, dict[str, set[str]]]
) -> None:
    with without_scripts(browser) as page:
        page.goto(fleet_site[0].as_uri() + "/machines.html")
        wait = page.locator("[data-vb-wait]")
        assert wait.is_visible() and "a chapter at a time" in wait.inner_text()
        assert page.locator(ROWS).count() == 0
