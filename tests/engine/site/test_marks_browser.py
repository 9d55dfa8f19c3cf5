"""Marks a reader can tell apart, in the built site driven by Debian's Chromium: every mark at least
12 px, each status a shape of its own that stays apart in greyscale and has its name in words, a
figure's panel kept inside a phone's screen, and the Machines tables never breaking a name inside.

Screenshots (colour and greyscale, at 390 and 1280 px) go to `artifacts/screenshots/marks/` for a
person to look at.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.served import served
from test_site import ROOT, build, nav_pages

from verified_book.vocabulary import LABELS

SCREENSHOTS = ROOT / "artifacts" / "screenshots" / "marks"
MARKS = ".vb-mark, .vb-fig__mark"
PHONE = {"width": 390, "height": 700}
#: the least share of two marks' ink that must differ for a reader to tell them apart in greyscale
APART = 0.2
#: the least a mark's drawing spans, in CSS pixels, within its box of at least 12
INK = 11


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = tmp_path_factory.mktemp("marks-site")
    result = build(ROOT, built)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    return built


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    with served(site) as url:
        yield url


def new_page(browser: Any, width: int, height: int = 900, phone: bool = False, scale: int = 1) -> Any:
    context = browser.new_context(
        viewport={"width": width, "height": height}, is_mobile=phone, has_touch=phone, device_scale_factor=scale
    )
    return context.new_page()


def greyscale(png: bytes, path: Path) -> Any:
    """A screenshot as a person without colour sees it, saved beside the colour one."""
    from PIL import Image, ImageOps

    image = ImageOps.grayscale(Image.open(io.BytesIO(png)))
    image.save(path)
    return image


def shoot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    png = page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
    greyscale(png, SCREENSHOTS / f"{name}-grey.png")


@pytest.mark.browser
@pytest.mark.parametrize("width", [390, 1280])
def test_every_mark_on_the_site_is_at_least_12_px(browser: Any, base_url: str, site: Path, width: int) -> None:
    """Each status a figure, the legend or the machines page shows: every one of its marks, drawn
    beside prose, in a table, in code or in a panel's badge, is at least 12 px tall and wide."""
    page = new_page(browser, width)
    found: dict[str, float] = {}
    try:
        for path in nav_pages(site):
            page.goto(base_url + path)
            sizes = page.eval_on_selector_all(
                MARKS,
                """marks => marks.map(m => {
                    const box = m.getBoundingClientRect();
                    const status = m.closest('[data-status]').dataset.status;
                    return [status, Math.min(box.height, box.width)];
                })""",
            )
            for status, size in sizes:
                found[status] = min(size, found.get(status, size))
    finally:
        page.context.close()
    assert {"verified", "cited", "unverified"} <= set(found), f"the site shows too few statuses: {found}"
    small = {status: size for status, size in found.items() if size < 12}
    assert not small, f"marks under 12 px at {width} px: {small}"


def ink_extent(image: Any) -> int:
    """The larger side, in pixels, of the box around a greyscale mark's ink."""
    paper = max(image.tobytes())
    box = image.point(lambda p: 255 if p < paper - 60 else 0).getbbox()
    return max(box[2] - box[0], box[3] - box[1]) if box else 0


def ink(image: Any) -> list[bool]:
    """Which pixels of a greyscale mark, brought to 24 x 24 (a box's fraction of a pixel aside), are ink:
    clearly darker than the lightest of its box."""
    pixels = list(image.resize((24, 24)).tobytes())
    paper = max(pixels)
    return [p < paper - 60 for p in pixels]


@pytest.mark.browser
def test_the_legend_tells_every_status_apart_in_greyscale_by_shape_and_words(browser: Any, base_url: str) -> None:
    """WCAG 1.4.1: colour is never the only way a status is told. In a greyscale picture of the
    legend, each mark's drawing spans at least 11 px and every two statuses' marks differ in at least
    a fifth of their ink; each row names its status in words, and its mark is drawn from a shape of
    its own (not one shape recoloured)."""
    page = new_page(browser, 1280, scale=2)
    try:
        page.goto(base_url + "marks.html")
        shoot(page, "legend-1280")
        rows = page.locator("table.vb-legend tbody tr")
        statuses = rows.evaluate_all("rows => rows.map(r => r.dataset.status)")
        masks = rows.evaluate_all("rows => rows.map(r => getComputedStyle(r.querySelector('.vb-fig__mark')).maskImage)")
        assert "none" not in masks and len(set(masks)) == len(masks), f"two statuses share a shape: {masks}"
        for row, status in zip(rows.all(), statuses, strict=True):
            assert row.locator("th").inner_text().strip() == LABELS[status], f"{status}: its row does not name it"
        marks: dict[str, list[bool]] = {}
        extents: dict[str, float] = {}
        for row, status in zip(rows.all(), statuses, strict=True):
            png = row.locator(".vb-fig__mark").screenshot()
            image = greyscale(png, SCREENSHOTS / f"legend-mark-{status}-grey.png")
            marks[status] = ink(image)
            extents[status] = ink_extent(image) / 2  # the page is drawn at twice its CSS pixels
    finally:
        page.context.close()
    faint = {status: size for status, size in extents.items() if size < INK}
    assert not faint, f"marks whose drawing is under {INK} px across: {faint}"
    alike = []
    for (a, ink_a), (b, ink_b) in itertools.combinations(marks.items(), 2):
        either = sum(x or y for x, y in zip(ink_a, ink_b, strict=True))
        differ = sum(x != y for x, y in zip(ink_a, ink_b, strict=True))
        if differ < APART * either:
            alike.append(f"{a} and {b} ({differ} of {either} ink pixels differ)")
    assert not alike, "in greyscale these marks look alike: " + "; ".join(alike)


def visible_figures(page: Any) -> Any:
    """The figures a reader can reach on the page (not inside a closed tab)."""
    return page.locator("[data-claim]:visible")


def panel_inside(page: Any, figure: Any, tap: bool) -> tuple[dict[str, float], dict[str, float]]:
    """Open `figure`'s panel as a reader would (a tap, or a click), and return its box and the viewport."""
    box = figure.bounding_box()
    x, y = box["x"] + min(4, box["width"] / 2), box["y"] + box["height"] / 2
    if tap:
        page.touchscreen.tap(x, y)
    else:
        page.mouse.click(x, y)
    page.wait_for_timeout(250)  # the panel's fade
    assert figure.get_attribute("aria-expanded") == "true"
    panel = figure.locator(".vb-panel").bounding_box()
    return panel, page.viewport_size


def scroll_to(page: Any, figure: Any, top: float) -> None:
    """Scroll the page so that `figure` starts `top` px from the top of the screen, as far as it goes."""
    figure.scroll_into_view_if_needed()
    figure.evaluate("(f, top) => window.scrollBy(0, f.getBoundingClientRect().top - top)", top)
    page.wait_for_timeout(100)


def assert_inside(panel: dict[str, float], viewport: dict[str, int], what: str) -> None:
    inside = (
        panel["x"] >= 0
        and panel["y"] >= 0
        and panel["x"] + panel["width"] <= viewport["width"]
        and panel["y"] + panel["height"] <= viewport["height"]
    )
    assert inside, f"{what}: the panel {panel} runs outside the {viewport['width']} x {viewport['height']} screen"


def longest_chapter(site: Path) -> str:
    pages = [p for p in nav_pages(site) if p not in ("index.html", "machines.html", "marks.html", "plots.html")]
    return max(pages, key=lambda p: (site / p).read_text(encoding="utf-8").count("data-claim="))


@pytest.mark.browser
def test_on_a_phone_a_panel_opened_near_the_bottom_is_inside_the_screen(
    browser: Any, base_url: str, site: Path
) -> None:
    """On a 390 x 700 phone the panel of the last figure of a long page, tapped near the bottom of the
    screen, and the tallest panel of the page, tapped mid-screen where it fits neither below nor above,
    are seen whole without the reader scrolling."""
    chapter = longest_chapter(site)
    page = new_page(browser, PHONE["width"], PHONE["height"], phone=True)
    try:
        page.goto(base_url + chapter)
        figures = visible_figures(page)
        last = figures.last
        scroll_to(page, last, PHONE["height"] - 70)
        panel, viewport = panel_inside(page, last, tap=True)
        shoot(page, "panel-last-figure-390")
        assert_inside(panel, viewport, f"{chapter}'s last figure")
        page.keyboard.press("Escape")
        heights = figures.evaluate_all(
            "fs => fs.map(f => { const p = f.querySelector('.vb-panel'); return p ? p.scrollHeight : 0; })"
        )
        tallest = figures.nth(max(range(len(heights)), key=heights.__getitem__))
        scroll_to(page, tallest, PHONE["height"] / 2)
        panel, viewport = panel_inside(page, tallest, tap=True)
        shoot(page, "panel-tallest-390")
        assert_inside(panel, viewport, f"{chapter}'s tallest panel ({max(heights)} px)")
        header = page.locator(".md-header").bounding_box()["height"]
        if max(heights) <= PHONE["height"] - header - tallest.bounding_box()["height"] - 24:
            assert tallest.locator(".vb-panel").evaluate("p => p.scrollHeight <= p.clientHeight + 1"), (
                "a panel that fits the screen below the header is cut to scroll inside itself"
            )
    finally:
        page.context.close()


@pytest.mark.browser
def test_on_a_desktop_a_panel_still_opens_below_its_figure(browser: Any, base_url: str, site: Path) -> None:
    """Where there is room below, the panel opens just below the figure, at the figure's left, as before."""
    page = new_page(browser, 1280, 900)
    try:
        page.goto(base_url + longest_chapter(site))
        figure = visible_figures(page).first
        scroll_to(page, figure, 120)
        panel, viewport = panel_inside(page, figure, tap=False)
        shoot(page, "panel-first-figure-1280")
        box = figure.bounding_box()
        assert box["y"] + box["height"] <= panel["y"] <= box["y"] + box["height"] + 8
        assert abs(panel["x"] - box["x"]) < 1
        assert_inside(panel, viewport, "the first figure")
    finally:
        page.context.close()


#: every whitespace-separated word of a table's text whose letters lie on more than one line
BROKEN_WORDS = """tables => {
  const broken = [];
  for (const table of tables) {
    const walker = document.createTreeWalker(table, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.textContent.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(table.className + ': ' + m[0]);
      }
    }
  }
  return broken;
}"""


@pytest.mark.browser
@pytest.mark.parametrize("how", ["file", "http"])
def test_the_machines_tables_never_break_a_name_at_400_px(browser: Any, base_url: str, site: Path, how: str) -> None:
    """At 400 px no machine, marker, version or date in the Machines page's tables is broken inside,
    neither at a hyphen nor between letters; a table wider than the screen scrolls in its own box."""
    page = new_page(browser, 400, 800)
    url = (site.as_uri() + "/" if how == "file" else base_url) + "machines.html"
    try:
        page.goto(url)
        tables = page.locator(".md-content table")
        assert tables.count() >= 3
        broken = tables.evaluate_all(BROKEN_WORDS)
        styles = tables.evaluate_all("ts => ts.map(t => getComputedStyle(t).overflowWrap)")
        boxes = page.locator(".md-content .vb-scroll, .md-content .vb-matrix__scroll").evaluate_all(
            "bs => bs.map(b => getComputedStyle(b).overflowX)"
        )
        page_width = page.evaluate("() => document.documentElement.scrollWidth")
        page.locator(".vb-overview").scroll_into_view_if_needed()
        shoot(page, f"machines-400-{how}")
    finally:
        page.context.close()
    assert not broken, f"names broken inside at 400 px: {broken}"
    assert set(styles) == {"normal"}, f"a table may still break a word between two letters: {styles}"
    assert boxes and set(boxes) == {"auto"}, f"a table's box does not scroll sideways: {boxes}"
    assert page_width <= 400, f"the page itself is {page_width} px wide: a table pushed it"


@pytest.mark.browser
def test_on_a_phone_the_legend_reads_each_meaning_across_the_screen(browser: Any, base_url: str) -> None:
    """At 390 px a status's meaning takes the screen's width under its mark and name, not a
    column one word wide."""
    page = new_page(browser, PHONE["width"], PHONE["height"], phone=True, scale=2)
    try:
        page.goto(base_url + "marks.html")
        widths = page.locator("table.vb-legend tbody td:last-child").evaluate_all(
            "cells => cells.map(c => c.getBoundingClientRect().width)"
        )
        page.locator("table.vb-legend").scroll_into_view_if_needed()
        shoot(page, "legend-390")
    finally:
        page.context.close()
    assert widths and min(widths) >= 0.8 * (PHONE["width"] - 32), f"the legend's meanings at 390 px: {widths}"
