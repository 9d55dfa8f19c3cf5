"""The built site: every figure carries its status, the panels show each machine, nothing leaves the site.

Builds run `mkdocs build --strict` as a subprocess against the committed `results/`;
the browser tests drive the result in Debian's Chromium through Playwright and save
screenshots under `artifacts/screenshots/` for a person to look at.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from harness.paths import ROOT
from harness.served import served

from verified_book.book.bindings import Book
from verified_book.engine import figure_status
from verified_book.engine.config import open_book, read_config
from verified_book.records.fleet import read_all
from verified_book.records.record import Record, SnippetOutput
from verified_book.records.results import dumps
from verified_book.records.results import read as read_results
from verified_book.site import build as site_book
from verified_book.site.machines import anchor
from verified_book.vocabulary import NOT_REPORTED, UNVERIFIED, Status

SCREENSHOTS = ROOT / "artifacts" / "screenshots"
STATUSES = {*(s.value for s in Status if s is not Status.SKIPPED), UNVERIFIED}  # what a figure can show
MKDOCS = [sys.executable, "-m", "mkdocs"]
TOP = {"x": 0, "y": 0, "width": 1280, "height": 2400}  # screenshots: the first screens of a page


def build(
    project: Path, site: Path, strict: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Build the site of `project` (a folder holding mkdocs.yml) into `site`, from the project's root."""
    command = [*MKDOCS, "build", "-f", str(project / "mkdocs.yml"), "-d", str(site)] + (["--strict"] if strict else [])
    return subprocess.run(
        command,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "CLAIMS_RESULTS_DIR": str(project / "results"), **(env or {})},
    )


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname}: {record.getMessage()}")


def build_here(project: Path, site: Path, strict: bool = True) -> tuple[bool, str]:
    """Build `project` in this process (the claims are already loaded): whether it passed, and its log."""
    from mkdocs.commands.build import build as mkdocs_build
    from mkdocs.config import load_config
    from mkdocs.exceptions import MkDocsException

    collect = _Collect()
    logger = logging.getLogger("mkdocs")
    logger.addHandler(collect)
    cwd = Path.cwd()
    os.chdir(project)
    try:
        config = load_config(str(project / "mkdocs.yml"), site_dir=str(site), strict=strict)
        mkdocs_build(config)
        passed = True
    except MkDocsException as e:
        collect.lines.append(f"ABORT: {e}")
        passed = False
    finally:
        os.chdir(cwd)
        logger.removeHandler(collect)
    return passed, "\n".join(collect.lines)


def copy_project(dest: Path) -> Path:
    """A copy of what a build reads: mkdocs.yml, book.toml, the book, its claims, the committed results."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "mkdocs.yml", dest / "mkdocs.yml")
    shutil.copy(ROOT / "book.toml", dest / "book.toml")
    shutil.copytree(ROOT / "claims", dest / "claims", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "book", dest / "book")
    shutil.copytree(ROOT / "results", dest / "results", ignore=shutil.ignore_patterns("*.lock"))
    return dest


def page_url(md: str) -> str:
    """The URL path MkDocs gives a page: `page.html` (the offline plugin turns directory URLs off)."""
    return md.removeprefix("book/").removesuffix(".md") + ".html"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    result = build(ROOT, site)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    return site


@pytest.fixture(scope="module")
def book() -> Book:
    return Book.read(ROOT / "book", ROOT)


@pytest.fixture(scope="module")
def base_url(built: Path) -> Iterator[str]:
    with served(built) as url:
        yield url


class Visit:
    """A browser page that records console errors, page errors and requests that leave the site."""

    def __init__(self, browser: Any, base_url: str, scheme: str = "light", width: int = 1280) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
        self.page = self.context.new_page()
        self.base = base_url
        self.errors: list[str] = []
        self.outside: list[str] = []
        host = urlparse(base_url).netloc
        scheme_of_site = urlparse(base_url).scheme
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        # a request cut short by the next navigation is not a fault of the site; a 4xx/5xx is
        self.page.on(
            "requestfailed",
            lambda r: (
                None
                if "ERR_ABORTED" in (r.failure or "")
                else self.errors.append(f"request failed: {r.url} ({r.failure})")
            ),
        )
        self.page.on("response", lambda r: self.errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)

        def guard(route: Any) -> None:
            url = route.request.url
            if url.startswith(("data:", "blob:", "about:")) or (
                urlparse(url).scheme == scheme_of_site and urlparse(url).netloc == host
            ):
                route.continue_()
            else:
                self.outside.append(url)
                route.abort()

        self.page.route("**/*", guard)

    def open(self, path: str, settle: bool = False) -> Any:
        """Load a page; `settle` waits until the network is idle (the search index, late requests)."""
        self.page.goto(self.base + path, wait_until="networkidle" if settle else "load")
        return self.page

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def visit(browser: Any, base_url: str) -> Iterator[Visit]:
    v = Visit(browser, base_url)
    yield v
    v.close()


def nav_pages(built: Path) -> list[str]:
    """Every page of the built site, as its path from the site's root."""
    return sorted(
        p.relative_to(built).as_posix()
        for p in built.rglob("*.html")
        if p.relative_to(built).parts[0] not in ("assets", "search") and p.name != "404.html"
    )


def chapter_with_figures(book: Book) -> str:
    """The page to photograph: the first chapter with figures, else the home page."""
    pages = [p for p in book.pages if p.bindings]
    chapters = [p for p in pages if not p.file.endswith("book/index.md")]
    return (chapters or pages)[0].file


def verified_figure(book: Book) -> tuple[Any, Any]:
    """A figure in prose that the committed results verify, to change a digit of."""
    registry = open_book(read_config(ROOT)).registry
    results = read_all(ROOT / "results", lambda _: None)
    for page in book.pages:
        for b in page.bindings:
            if b.in_output or b.title is not None or not re.search(r"\d", b.text):
                continue
            if figure_status.figure_view(b, registry.get(b.claim_id), results).status == "verified":
                return page, b
    pytest.skip("no figure of the book is verified by the committed results yet")


@pytest.mark.browser
def test_every_page_loads_clean_and_marks_every_figure(built: Path, visit: Visit, book: Book) -> None:
    """No console errors, no request beyond the site, math typeset, one status mark per binding."""
    bindings = {page_url(p.file): len(p.bindings) for p in book.pages}
    for n, url in enumerate(nav_pages(built)):
        page = visit.open(url, settle=n == 0)
        assert not visit.errors, f"/{url}: {visit.errors}"
        assert not visit.outside, f"/{url} asked another host for {visit.outside}"
        assert page.locator("h1").count() >= 1, f"/{url} has no title"
        if page.locator(".arithmatex").count():
            page.wait_for_function(
                "() => [...document.querySelectorAll('.arithmatex')].every(e => e.querySelector('.katex'))",
                timeout=10000,
            )
        figures = page.locator("[data-claim]")
        expected = bindings.get(url, 0)
        assert figures.count() == expected, (
            f"/{url}: {figures.count()} figures on the page, {expected} bindings in the text"
        )
        statuses = set(figures.evaluate_all("els => els.map(e => e.dataset.status)"))
        assert statuses <= STATUSES, f"/{url}: statuses {statuses - STATUSES}"
        assert page.locator("[data-claim] > .vb-fig__mark").count() == expected
        assert page.locator("a[href^='claim:']").count() == 0
        text = page.evaluate(
            "() => { const c = document.querySelector('.md-content').cloneNode(true);"
            " c.querySelectorAll('code, pre').forEach(e => e.remove()); return c.textContent; }"
        )
        assert "](claim:" not in text and "VBCLAIM" not in text, f"/{url}: raw binding text on the page"
    assert sum(bindings.values()) == 0 or any(bindings.values())


@pytest.mark.browser
def test_the_panel_shows_each_machines_value_on_hover_and_on_focus(visit: Visit, book: Book) -> None:
    results = sorted(p.stem for p in (ROOT / "results").glob("*.json"))
    page = next(p for p in book.pages if p.bindings)
    browser_page = visit.open(page_url(page.file))
    figure = browser_page.locator("[data-claim]").first
    panel = figure.locator(".vb-panel")
    assert not panel.is_visible()
    figure.hover()
    panel.wait_for(state="visible")
    assert figure.get_attribute("data-claim") in panel.inner_text()
    recorded = [m for m in results if panel.locator(f'[data-machine="{m}"]').count()]
    if figure.get_attribute("data-status") != "unverified":
        assert recorded, "a verified figure's panel names no machine"
        rows = panel.locator(".vb-row")
        assert rows.count() >= 1 and rows.first.locator(".vb-row__value").inner_text().strip() not in ("", "—")
    link = panel.locator(".vb-panel__source a")
    if link.count():  # the pointer can travel from the figure into the panel, to the claim's code
        box = link.bounding_box()
        assert box
        browser_page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=12)
        browser_page.wait_for_timeout(300)
        assert panel.is_visible() and "/blob/main/claims/" in (link.get_attribute("href") or "")
    browser_page.mouse.move(0, 0)
    panel.wait_for(state="hidden")
    browser_page.keyboard.press("Tab")
    for _ in range(60):
        if browser_page.evaluate("() => !!document.activeElement.closest('[data-claim]')"):
            break
        browser_page.keyboard.press("Tab")
    focused = browser_page.locator("[data-claim]:focus-within")
    assert focused.count() == 1, "no figure can be reached with the keyboard"
    focused.locator(".vb-panel").wait_for(state="visible")
    assert focused.get_attribute("tabindex") == "0"
    browser_page.keyboard.press("Escape")
    focused.locator(".vb-panel").wait_for(state="hidden")


@pytest.mark.browser
def test_a_panel_opened_in_a_box_that_scrolls_sideways_is_shown_whole(visit: Visit, book: Book) -> None:
    """A wide table scrolls in its box, whose edge fades while there is more to see; the fade
    must not cut off the panel of a figure in it, which reaches past the box."""
    for page in (p for p in book.pages if p.bindings):
        browser_page = visit.open(page_url(page.file))
        faded = browser_page.locator("[data-vb-more~=right]:has([data-claim])")
        if faded.count():
            break
    else:
        pytest.fail("no page at 1280 px has a figure in a box that scrolls sideways; the test has nothing to check")
    # handles, not locators: hovering scrolls the box to the figure, after which it no longer fades on the right
    box = faded.first.element_handle()
    edge = box.bounding_box()
    assert edge
    figure = max(
        (f for f in box.query_selector_all("[data-claim]") if f.is_visible()),
        key=lambda f: (f.bounding_box() or {"x": -1.0})["x"],
    )
    figure.hover()
    panel = figure.query_selector(".vb-panel")
    assert panel, f"the figure {figure.get_attribute('data-claim')} has no panel"
    panel.wait_for_element_state("visible")
    browser_page.wait_for_timeout(300)  # the fade's and the panel's transitions
    shown = panel.bounding_box()
    assert shown and shown["x"] + shown["width"] > edge["x"] + edge["width"], "the panel stays inside the box"
    for fx in (0.1, 0.5, 0.9):  # points across the panel, past the box's edge too: the panel is what is there
        on_top = browser_page.evaluate(
            "([p, fx]) => { const r = p.getBoundingClientRect();"
            " const at = document.elementFromPoint(r.left + r.width * fx, r.top + r.height / 2);"
            " return !!at && p.contains(at); }",
            [panel, fx],
        )
        assert on_top, f"at {fx:.0%} of its width the panel of {figure.get_attribute('data-claim')} is hidden"
    mask = box.evaluate("b => getComputedStyle(b).maskImage || getComputedStyle(b).webkitMaskImage")
    assert mask in ("none", ""), f"the box still fades while the panel is open: {mask}"


@pytest.mark.browser
def test_on_a_phone_a_chart_keeps_legible_labels_and_scrolls_sideways(browser: Any, base_url: str) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        phone = context.new_page()
        phone.goto(base_url + "plots.html", wait_until="load")
        charts = phone.locator("figure.vb-plot")
        assert charts.count() >= 1, "the plots page drew no chart from the committed results"
        for i in range(charts.count()):
            chart = charts.nth(i)
            heights = chart.locator("svg text").evaluate_all("ts => ts.map(t => t.getBoundingClientRect().height)")
            assert heights and min(h for h in heights if h > 0) >= 8.5, f"chart {i}: labels {min(heights):.1f} px tall"
            box = chart.locator(".vb-scroll")
            assert box.evaluate("b => b.scrollWidth > b.clientWidth"), f"chart {i} is shrunk, not scrolled"
            assert box.get_attribute("data-vb-more") == "right", f"chart {i} does not say there is more to the right"
    finally:
        context.close()


@pytest.mark.browser
def test_a_tap_opens_the_panel_and_a_tap_elsewhere_closes_it(browser: Any, base_url: str, book: Book) -> None:
    page = next(p for p in book.pages if p.bindings)
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True)
    try:
        phone = context.new_page()
        phone.goto(base_url + page_url(page.file), wait_until="load")
        figure = phone.locator("[data-claim]").first
        figure.scroll_into_view_if_needed()
        figure.tap()
        panel = figure.locator(".vb-panel")
        panel.wait_for(state="visible")
        box = panel.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, "the panel leaves the screen"
        # elsewhere: the page's text beside the panel, below it where it leaves room (it opens upward near the top)
        below = box["y"] + box["height"] + 40
        phone.touchscreen.tap(195, below if below < 800 else box["y"] - 40)
        panel.wait_for(state="hidden")
    finally:
        context.close()


@pytest.mark.browser
def test_the_machines_page_and_the_plots_render(visit: Visit, built: Path) -> None:
    results = sorted(p.stem for p in (ROOT / "results").glob("*.json"))
    page = visit.open("machines.html")
    for slug in results:
        assert page.locator(f"h2#{anchor(slug)}").count() == 1, f"no section for {slug}"
    rows = page.locator(".vb-matrix__table tbody tr")
    rows.first.wait_for()  # the first chapter's rows, from the page's data file
    total = rows.count()
    assert total > 0
    page.select_option('[data-vb-filter="status"]', "stale")
    shown = page.locator(".vb-matrix__table tbody tr:not([hidden])").count()
    assert shown == page.locator('.vb-matrix__table tbody tr[data-statuses~="stale"]').count()
    page.select_option('[data-vb-filter="status"]', "")
    assert page.locator(".vb-matrix__table tbody tr:not([hidden])").count() == total
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "machines.png"), full_page=True, clip=TOP)

    plots = visit.open("plots.html")
    drawn = plots.locator("figure.vb-plot svg")
    notes = plots.locator(".vb-plot__missing")
    assert drawn.count() + notes.count() >= 1 + 2 * len(results)
    for i in range(drawn.count()):
        box = drawn.nth(i).bounding_box()
        assert box and box["width"] > 300 and box["height"] > 150
    assert not visit.errors


@pytest.mark.browser
def test_screenshots_of_a_chapter_in_both_palettes(browser: Any, base_url: str, book: Book) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    chapter = chapter_with_figures(book)
    for scheme in ("light", "dark"):
        v = Visit(browser, base_url, scheme)
        page = v.open(page_url(chapter))
        expected = "slate" if scheme == "dark" else "default"
        assert page.evaluate("() => document.body.getAttribute('data-md-color-scheme')") == expected
        page.screenshot(path=str(SCREENSHOTS / f"chapter-{scheme}.png"), full_page=True, clip=TOP)
        recorded = page.locator('[data-claim]:not([data-status="unverified"])')
        figure = recorded.first if recorded.count() else page.locator("[data-claim]").first
        figure.scroll_into_view_if_needed()
        figure.hover()
        figure.locator(".vb-panel").wait_for(state="visible")
        page.wait_for_timeout(250)  # the panel fades in
        page.screenshot(path=str(SCREENSHOTS / f"chapter-{scheme}-panel.png"))
        assert not v.errors and not v.outside
        v.close()


@pytest.mark.browser
def test_a_changed_digit_shows_as_stale(tmp_path: Path, browser: Any, book: Book) -> None:
    """A copy of the book with one printed digit changed, built against the same results."""
    project = copy_project(tmp_path / "project")
    page, target = verified_figure(book)
    digit = re.search(r"\d", target.text)
    assert digit
    changed = target.text[: digit.start()] + str((int(digit.group()) + 1) % 10) + target.text[digit.end() :]
    source = project / page.file
    lines = source.read_text(encoding="utf-8").split("\n")
    line = lines[target.line - 1]
    old = f"[{target.text}](claim:{target.claim_id})"
    assert old in line
    lines[target.line - 1] = line.replace(old, f"[{changed}](claim:{target.claim_id})", 1)
    source.write_text("\n".join(lines), encoding="utf-8")

    site = tmp_path / "site"
    passed, log = build_here(project, site, strict=False)  # pages being written may warn; staleness is not a warning
    assert passed, log
    with served(site) as url:
        v = Visit(browser, url)
        browser_page = v.open(page_url(page.file))
        figure = browser_page.locator(f'[data-claim="{target.claim_id}"]', has_text=changed.split(" ")[0]).first
        assert figure.get_attribute("data-status") == "stale"
        assert "stale" in figure.locator(".vb-sr").inner_text()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        figure.scroll_into_view_if_needed()
        figure.focus()
        figure.locator(".vb-panel").wait_for(state="visible")
        browser_page.wait_for_timeout(250)
        browser_page.screenshot(path=str(SCREENSHOTS / "stale-figure.png"))
        v.close()


def probe_records(slug: str, scale: float) -> dict[str, dict[str, Record]]:
    """Measured records as a machine with `scale` times a small CPU's speed would write them (a test fixture)."""

    def record(value: float) -> Record:
        return Record(status="verified", value=value, figures=[], message="", version="2.4.6")

    records: dict[str, dict[str, Record]] = {
        "probe.bandwidth.read": {"numpy": record(20.0 * scale)},
        "probe.matmul.fp32": {"numpy": record(150.0 * scale)},
        "probe.matmul.bf16": {"numpy": record(60.0 * scale)},
        "probe.decode_ceiling.qwen3_8b.bf16": {"numpy": record(1.2 * scale)},
        "probe.decode_ceiling.qwen3_8b.q4_k_m": {"numpy": record(3.9 * scale)},
        "flops.job.decode_bf16.intensity": {"none": record(1.0)},
        "flops.job.prefill_bf16.intensity": {"none": record(512.0)},
    }
    for batch in (1, 8, 64, 256):
        records[f"probe.sweep.{batch}.gflops"] = {"numpy": record(min(60.0, 20.0 * batch) * scale)}
        records[f"probe.sweep.{batch}.weight_gbs"] = {"numpy": record(min(60.0, 20.0 * batch) * scale / batch)}
    return records


@pytest.mark.browser
def test_several_machines_show_in_panels_tabs_and_plots(
    tmp_path: Path, browser: Any, book: Book, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The committed results plus a second machine with measurements, as a temp results folder."""
    results = tmp_path / "results"
    shutil.copytree(ROOT / "results", results, ignore=shutil.ignore_patterns("*.lock"))
    first = sorted(results.glob("*.json"))[0]
    data = read_results(first)
    data.records.update(probe_records(data.slug, 1.0))
    first.write_text(dumps(data), encoding="utf-8")
    data.slug = "second-machine"
    data.machine = data.machine.model_copy(update={"slug": "second-machine", "id": "second-machine-id"})
    data.records.update(probe_records("second-machine", 25.0))
    data.outputs = {
        name: SnippetOutput(text=f"printed by {name} on the second machine\n", date="2026-11-28", seconds=0.1)
        for name in (p.name for p in (ROOT / "book" / "snippets").glob("*.py"))
    }
    (results / "second-machine.json").write_text(dumps(data), encoding="utf-8")
    monkeypatch.setenv("CLAIMS_RESULTS_DIR", str(results))
    site = tmp_path / "site"
    passed, log = build_here(ROOT, site, strict=False)
    assert passed, log
    with served(site) as url:
        v = Visit(browser, url)
        plots = v.open("plots.html")
        drawn = plots.locator("figure.vb-plot svg")
        machines = len(list(results.glob("*.json")))
        assert drawn.count() == 2 * machines + 1, (  # a roofline and a sweep per machine, one bar chart
            machines,
            plots.locator(".vb-plot__missing").all_inner_texts(),
        )
        for i in range(drawn.count()):
            box = drawn.nth(i).bounding_box()
            assert box and box["width"] > 300 and box["height"] > 150
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        plots.screenshot(path=str(SCREENSHOTS / "plots.png"), full_page=True, clip=TOP)

        page, target = verified_figure(book)
        chapter = v.open(page_url(page.file))
        figure = chapter.locator(f'[data-claim="{target.claim_id}"]').first
        figure.hover()
        panel = figure.locator(".vb-panel")
        panel.wait_for(state="visible")
        panel.locator(".vb-panel__more").wait_for(state="detached")  # the other machines' rows, from the data file
        for slug in (first.stem, "second-machine"):
            assert panel.locator(f'[data-machine="{slug}"] .vb-row').count() >= 1, f"no row for {slug}"
        tabs = chapter.locator(".tabbed-set")
        if tabs.count():
            assert tabs.first.locator("label", has_text="second-machine").count() == 1
        assert not v.errors and not v.outside
        v.close()


@pytest.mark.slow
def test_strict_build_fails_on_unknown_claims_malformed_bindings_and_bad_results(tmp_path: Path) -> None:
    project = copy_project(tmp_path / "project")
    index = project / "book" / "index.md"
    text = index.read_text(encoding="utf-8")
    lines = text.split("\n")
    lines += [
        "",
        "A figure bound to nothing: [16.6](claim:no.such.claim), and one in words: "
        "[sixteen](claim:formats.finfo.fp16.bits).",
    ]
    index.write_text("\n".join(lines), encoding="utf-8")
    (project / "results" / "broken.json").write_text(
        '{"schema_version": 1,\n "slug": "broken",\n "records": {', encoding="utf-8"
    )
    line = len(lines)

    passed, log = build_here(project, tmp_path / "strict")
    assert not passed
    assert f"book/index.md:{line}: figure 16.6 binds to unknown claim 'no.such.claim'" in log
    assert f"book/index.md:{line}: 'sixteen' is not a printed number" in log
    assert re.search(r"results/broken\.json:\d+: not valid JSON", log)
    assert "problem(s) with the book's figures or results" in log

    passed, log = build_here(project, tmp_path / "plain", strict=False)
    assert passed, log
    assert f"WARNING: verified_book: book/index.md:{line}: figure 16.6 binds to unknown claim" in log
    html = (tmp_path / "plain" / "index.html").read_text(encoding="utf-8")
    assert html.count('data-status="error"') == 2
    assert 'href="claim:' not in html and "](claim:" not in html

    config = project / "mkdocs.yml"
    config.write_text(
        config.read_text(encoding="utf-8").replace("on_missing: mark", "on_missing: fail"), encoding="utf-8"
    )
    (project / "results" / "broken.json").unlink()
    lines[-1] = "A figure no machine has run: [16](claim:formats.finfo.bf16.bits)."
    index.write_text("\n".join(lines), encoding="utf-8")
    for results in (project / "results").glob("*.json"):
        data = json.loads(results.read_text(encoding="utf-8"))
        data["records"].pop("formats.finfo.bf16.bits", None)
        results.write_text(json.dumps(data), encoding="utf-8")
    passed, log = build_here(project, tmp_path / "fail", strict=False)
    assert not passed
    assert f"book/index.md:{line}: figure 16 (formats.finfo.bf16.bits) is verified on no machine yet" in log


# ---------------------------------------------------------------------------
# The site as readers open it: from disk and served, on a phone and a desktop


WIDTHS = (400, 1400, 1920)


def nav_links(page: Any) -> list[str]:
    """Every page of this site the navigation links to, as absolute URLs, in the order it lists them
    (a link to another site, such as the engine's docs, is not one of its pages)."""
    hrefs = page.evaluate(
        "() => [...document.querySelectorAll('.md-nav--primary a.md-nav__link[href]')]"
        ".filter(a => a.protocol === location.protocol && a.host === location.host).map(a => a.href)"
    )
    return list(dict.fromkeys(h.split("#", 1)[0] for h in hrefs if h.split("#", 1)[0]))


@pytest.mark.browser
@pytest.mark.parametrize("how", ["file", "http"])
def test_from_disk_and_served_every_nav_link_opens_a_page_and_search_answers(
    how: str, built: Path, browser: Any, base_url: str
) -> None:
    """Opened as `site/index.html` from disk and over http alike: each navigation link is a page
    (not a folder listing), and search finds a word of the book."""
    base = built.as_uri() + "/" if how == "file" else base_url
    v = Visit(browser, base)
    try:
        page = v.open("index.html", settle=True)
        links = nav_links(page)
        pages = {base + p for p in nav_pages(built)}
        assert set(links) == pages, (
            f"{how}: the navigation links {sorted(set(links) ^ pages)} differently from the pages built"
        )
        for link in links:
            page.goto(link, wait_until="load")
            assert page.url.endswith(".html"), f"{how}: {link} opened {page.url}, not a page"
            assert page.locator("article h1").count() >= 1, f"{how}: {link} shows no page: {page.title()!r}"
            assert "Index of" not in page.title(), f"{how}: {link} opened a folder listing"
        page.goto(base + "index.html", wait_until="load")
        page.locator("input.md-search__input").click()
        page.locator("input.md-search__input").press_sequentially(
            "bandwidth", delay=30
        )  # keystrokes, as a reader types
        results = page.locator(".md-search-result__item")
        results.first.wait_for(state="visible", timeout=15000)
        assert results.count() >= 1
        results.first.locator("a").first.click()
        page.wait_for_load_state("load")
        assert "bandwidth" in page.locator("article").inner_text().lower()
        assert not v.errors, f"{how}: {v.errors}"
        assert not v.outside, f"{how}: asked another host for {v.outside}"
    finally:
        v.close()


OVERFLOW = """() => {
  const root = document.documentElement;
  const wide = [...document.querySelectorAll('body *')].filter(e => {
    const r = e.getBoundingClientRect();
    return r.width > 0 && r.right > root.clientWidth + 1
      && !e.closest('[data-vb-scrolls], .md-sidebar, .md-search, .vb-panel, .md-tooltip, .md-tooltip2');
  }).slice(0, 5).map(e => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')} `
    + `right=${Math.round(e.getBoundingClientRect().right)}`);
  return {scrollWidth: root.scrollWidth, clientWidth: root.clientWidth, wide};
}"""

UNCUED = """() => [...document.querySelectorAll('.md-content *')].filter(e => {
  const s = getComputedStyle(e);
  return ['auto', 'scroll'].includes(s.overflowX) && e.scrollWidth - e.clientWidth > 1 && e.offsetParent !== null;
}).filter(e => !e.hasAttribute('data-vb-more') || getComputedStyle(e).maskImage === 'none')
  .map(e => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')}`)"""

TAG = ".katex-display .katex-tag"  # KaTeX 0.19's class for an equation's number (\\tag)
TAG_OVERLAPS = """() => [...document.querySelectorAll('.katex-display .katex-tag')].flatMap(tag => {
  const t = tag.getBoundingClientRect();
  const number = tag.textContent.trim();
  return [...tag.parentElement.querySelectorAll(':scope > .katex-base')].filter(b => {
    const r = b.getBoundingClientRect();
    return r.width > 0 && r.left < t.right - 0.5 && t.left < r.right - 0.5 && r.top < t.bottom && t.top < r.bottom;
  }).map(b => `${number} overlaps "${b.textContent.slice(-30)}"`);
})"""


MATH_SHOWN = """() => ({
  rendered: document.querySelectorAll('.md-content .arithmatex .katex').length,
  raw: [...document.querySelectorAll('.md-content .arithmatex')].filter(e => !e.querySelector('.katex'))
        .slice(0, 3).map(e => e.textContent.slice(0, 60)),
})"""

#: every table of the page and the box it scrolls in (Material wraps a table where its script runs)
TABLES_CUT = """() => [...document.querySelectorAll('.md-content table')]
  .map(t => t.closest('.md-typeset__scrollwrap') || t)
  .filter(box => box.scrollWidth - box.clientWidth > 1)
  .map(box => `${box.textContent.trim().slice(0, 40)} (${box.scrollWidth} px in ${box.clientWidth})`)"""

#: the widest box of the page that scrolls sideways, as [x, y, width, height] once scrolled into view
WIDEST = """() => {
  const boxes = [...document.querySelectorAll('.md-content [data-vb-scrolls]')].filter(e => e.offsetParent !== null);
  if (!boxes.length) return null;
  const box = boxes.reduce((a, b) => (b.scrollWidth > a.scrollWidth ? b : a));
  box.scrollIntoView({block: 'center'});
  const r = box.getBoundingClientRect();
  return [r.x, r.y, r.width, r.height];
}"""


def source_formulas(built: Path, url: str) -> int:
    """How many formulas the page's HTML holds for KaTeX to typeset, read from the file, before any script."""
    return (built / url).read_text(encoding="utf-8").count('class="arithmatex"')


def visit_page(v: Visit, url: str) -> Any:
    """Open a page and wait until what the site's scripts do on it is done: math typeset, boxes marked."""
    page = v.open(url)
    if page.locator(".arithmatex").count():
        page.wait_for_function(
            "() => [...document.querySelectorAll('.arithmatex')].every(e => e.querySelector('.katex'))", timeout=10000
        )
    page.wait_for_function("() => document.documentElement.dataset.vbPage === location.pathname")
    page.wait_for_timeout(500)  # the script looks at the boxes again once math and fonts settle
    return page


@pytest.mark.browser
@pytest.mark.parametrize(("how", "scheme"), [("file", "light"), ("http", "light"), ("http", "dark")])
def test_every_page_reads_whole_on_a_phone_and_on_desktops(
    how: str, scheme: str, built: Path, browser: Any, base_url: str
) -> None:
    """From disk and served, at 400, 1400 and 1920 px: every formula typeset (counted against the page's
    own), no page scrolls sideways, at desktop widths no table needs to, every box that does scrolls
    inside itself with its edge faded, equation numbers sit clear of their equations, the legend is a
    link away. Each page is photographed at each width, and the widest scrolling box of each page
    (artifacts/screenshots/pages/)."""
    shots = SCREENSHOTS / "pages"
    shots.mkdir(parents=True, exist_ok=True)
    base = built.as_uri() + "/" if how == "file" else base_url
    tagged = formulas = 0
    for width in WIDTHS:
        v = Visit(browser, base, scheme, width)
        try:
            for url in nav_pages(built):
                page = visit_page(v, url)
                where = f"{url} at {width} px ({how}, {scheme})"
                math = page.evaluate(MATH_SHOWN)
                assert math["rendered"] == source_formulas(built, url), f"{where}: formulas left raw: {math}"
                formulas += math["rendered"]
                found = page.evaluate(OVERFLOW)
                assert found["scrollWidth"] <= found["clientWidth"], f"{where} scrolls sideways: {found}"
                if width >= 1400:
                    assert page.evaluate(TABLES_CUT) == [], f"{where}: a table is cut at the column's edge"
                assert page.evaluate(UNCUED) == [], f"{where}: a box scrolls sideways with no cue"
                overlaps = page.evaluate(TAG_OVERLAPS)
                assert overlaps == [], f"{where}: {overlaps}"
                tagged += page.locator(TAG).count()
                if url != "marks.html":
                    link = page.locator("a.vb-legend-link")
                    assert link.count() == 1, f"{where}: no link to the legend"
                    assert (link.get_attribute("href") or "").endswith("marks.html")
                    assert link.is_visible()
                name = f"{url.replace('/', '--').removesuffix('.html')}-{width}-{how}-{scheme}"
                page.screenshot(
                    path=str(shots / f"{name}.png"),
                    full_page=True,
                    clip={"x": 0, "y": 0, "width": width, "height": 2400},
                )
                widest = page.evaluate(WIDEST)
                if widest is not None:
                    page.screenshot(
                        path=str(shots / f"{name}-widest.png"),
                        clip={"x": 0, "y": max(0, widest[1] - 40), "width": width, "height": min(900, widest[3] + 80)},
                    )
            assert not v.errors and not v.outside, (v.errors, v.outside)
        finally:
            v.close()
    assert tagged > 0, "no numbered equation was looked at"
    assert formulas > 0, "no formula was looked at"


@pytest.mark.browser
@pytest.mark.parametrize("how", ["file", "http"])
def test_the_header_names_the_page_and_the_contents_follow_the_reading(
    how: str, built: Path, browser: Any, base_url: str
) -> None:
    """Scrolled past its title, a chapter's header shows the page's name, and its table of contents marks
    the section being read: Material's own scripts run whether the site is opened from disk or served."""
    v = Visit(browser, built.as_uri() + "/" if how == "file" else base_url, width=1400)
    try:
        page = visit_page(v, "gpus-and-precision/1-tensors-and-bandwidth.html")
        heading = page.locator("article h2").nth(2)
        heading.scroll_into_view_if_needed()
        page.mouse.wheel(0, 200)
        page.wait_for_function("() => document.querySelector('.md-header__title--active') !== null")
        page.wait_for_function("() => document.querySelector('.md-nav--secondary .md-nav__link--active') !== null")
        active = page.locator(".md-sidebar--secondary .md-nav__link--active").first.inner_text().strip()
        sections = [t.strip() for t in page.locator("article h2").all_inner_texts()]
        assert active.rstrip("¶").strip() in [s.rstrip("¶").strip() for s in sections[1:4]], (
            f"{how}: the contents mark {active!r} while {sections[2]!r} is read"
        )
        topic = page.locator(".md-header__topic").nth(1).inner_text().strip()
        assert topic == "Tensors and bandwidth", f"{how}: the header reads {topic!r}"
        assert not v.errors, v.errors
    finally:
        v.close()


CHAPTER_1 = "book/gpus-and-precision/1-tensors-and-bandwidth.md"
_BOUND = re.compile(r"\[([^\]]*)\]\(claim:[^)]*\)")


def printed_block(md: Path, snippet: str) -> str:
    """The book's output block for `snippet` as a reader reads it: the Markdown's lines, each binding as its text."""
    lines = md.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"```output {snippet}")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "```")
    return "\n".join(_BOUND.sub(r"\1", line) for line in lines[start + 1 : end])


def clipboard(page: Any) -> str:
    return str(page.evaluate("() => navigator.clipboard.readText()"))


@pytest.mark.browser
@pytest.mark.parametrize("how", ["file", "http"])
def test_an_output_block_copies_exactly_what_was_printed(how: str, built: Path, browser: Any, base_url: str) -> None:
    """Selected with the mouse and copied, or copied with its button, an output block gives the text the
    book prints (its figures as printed, no panel, mark or screen-reader words, no broken lines); each
    machine's tab gives what the snippet printed there. Dragging across figures opens no panel."""
    results = read_results(ROOT / "results" / "cpu-x86_64-2c.json")
    ran = results.outputs.get("shapes.py") if isinstance(results.outputs, dict) else None
    context = browser.new_context(
        viewport={"width": 1400, "height": 900}, permissions=["clipboard-read", "clipboard-write"]
    )
    try:
        page = context.new_page()
        page.goto((built.as_uri() + "/" if how == "file" else base_url) + page_url(CHAPTER_1), wait_until="load")
        page.wait_for_function("() => document.documentElement.dataset.vbPage === location.pathname")
        block = page.locator(".vb-output--book").first
        block.scroll_into_view_if_needed()
        code = block.locator("pre > code")
        box = code.bounding_box()
        assert box is not None
        page.mouse.move(box["x"] + 2, box["y"] + 4)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] - 4, steps=12)
        page.mouse.up()
        assert page.locator(".vb-fig.vb-open").count() == 0, f"{how}: a drag across the block opened a panel"
        dragged = page.evaluate("() => getSelection().toString()")
        page.keyboard.press("Control+C")
        copied = clipboard(page)
        expected = printed_block(ROOT / CHAPTER_1, "shapes.py")
        assert copied and expected.startswith(copied.rstrip()), (
            f"{how}: the dragged selection copied {copied!r}; the page printed {expected!r} (selected {dragged!r})"
        )
        code.evaluate(
            "c => { const r = document.createRange(); r.selectNodeContents(c);"
            " getSelection().removeAllRanges(); getSelection().addRange(r); }"
        )
        page.keyboard.press("Control+C")
        assert clipboard(page) == expected, f"{how}: the whole block copied {clipboard(page)!r}"
        page.evaluate("() => getSelection().removeAllRanges()")
        block.hover()
        block.locator(".md-code__button").click()
        assert clipboard(page) == expected, f"{how}: the copy button gave {clipboard(page)!r}"
        if isinstance(ran, dict):
            tabs = block.locator("xpath=ancestor::div[contains(@class, 'tabbed-set')]")
            tabs.locator("label", has_text="cpu-x86_64-2c").click()
            machine = tabs.locator(".vb-output--machine").first
            machine.hover()
            machine.locator(".md-code__button").click()
            assert clipboard(page) == ran["text"].rstrip("\n"), f"{how}: the machine's tab copied {clipboard(page)!r}"
        assert page.locator(".vb-output .md-code__button").count() == page.locator(".vb-output").count(), (
            f"{how}: an output block has no copy button"
        )
        assert page.locator(".md-content pre .md-code__button").count() == page.locator(".md-content pre").count(), (
            f"{how}: a code block has no copy button"
        )
    finally:
        context.close()


#: each text of each chart: its size on screen, and any other text of the chart whose box it overlaps
CHART_TEXT = """() => [...document.querySelectorAll('svg.vb-plot__svg')].map(svg => {
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim()).map(t => ({
    text: t.textContent.trim(), px: parseFloat(getComputedStyle(t).fontSize) * scale, r: t.getBoundingClientRect()}));
  const overlaps = [];
  texts.forEach((a, i) => texts.slice(i + 1).forEach(b => {
    if (a.r.left < b.r.right - 0.5 && b.r.left < a.r.right - 0.5
        && a.r.top < b.r.bottom - 0.5 && b.r.top < a.r.bottom - 0.5)
      overlaps.push(`${a.text} / ${b.text}`);
  }));
  return {chart: svg.getAttribute('aria-label'), texts: texts.length,
          small: texts.filter(t => t.px < 11).map(t => `${t.text} (${t.px.toFixed(1)} px)`), overlaps};
})"""


@pytest.mark.browser
@pytest.mark.parametrize("width", [400, 1400, 1920])
def test_every_chart_label_is_legible_and_each_warning_is_said_once(
    width: int, built: Path, browser: Any, base_url: str
) -> None:
    """Every text a chart draws is 11 px or more on screen and overlaps no other; what a chart's records
    contradict is said once, a sentence each, in its caption, never cut short."""
    v = Visit(browser, base_url, width=width)
    try:
        page = visit_page(v, "plots.html")
        charts = page.evaluate(CHART_TEXT)
        assert charts and all(c["texts"] > 5 for c in charts), charts
        for chart in charts:
            assert chart["small"] == [], f"{chart['chart']} at {width} px: {chart['small']}"
            assert chart["overlaps"] == [], f"{chart['chart']} at {width} px: {chart['overlaps']}"
        for figure in page.locator("figure.vb-plot").all():  # each machine's chart says its own findings
            caption = figure.locator("figcaption").inner_text()
            for warning in figure.locator(".vb-plot__warnings li").all_inner_texts():
                sentence = warning.removeprefix("⚠").strip()
                assert sentence.endswith(".") and sentence.count(". ") == 0, f"not one sentence: {warning!r}"
                nested = "((" in sentence.replace(" ", "")
                assert "…" not in sentence and not nested, f"cut short or nested: {warning!r}"
                assert caption.count(sentence) == 1, f"said more than once: {sentence!r}"
        page.screenshot(path=str(SCREENSHOTS / f"plots-{width}.png"), full_page=True)
        assert not v.errors, v.errors
    finally:
        v.close()


def search_docs(built: Path) -> list[dict[str, str]]:
    return list(json.loads((built / "search" / "search_index.json").read_text(encoding="utf-8"))["docs"])


def test_a_chapter_s_panels_leave_the_other_machines_to_its_data_file_which_search_does_not_index(
    built: Path, book: Book
) -> None:
    """Each panel holds the machine that decides its figure; every other committed machine's rows are in the
    chapter's data file beside it, under the panel's id, and the search index holds none of them."""
    committed = {p.stem for p in (ROOT / "results").glob("*.json")}
    left_out = 0
    for page in (p for p in book.pages if p.bindings):
        path = built / page_url(page.file)
        html = path.read_text(encoding="utf-8")
        panels = re.findall(r'<vb-panel class="vb-panel" id="([^"]+)".*?</vb-panel>', html, re.DOTALL)
        more = dict(
            re.findall(
                r'<vb-panel class="vb-panel" id="([^"]+)"(?:(?!</vb-panel>).)*?data-vb-rows="([^"]+)"', html, re.DOTALL
            )
        )
        for body in re.findall(r"<vb-panel\b.*?</vb-panel>", html, re.DOTALL):
            assert len(set(re.findall(r'class="vb-machine" data-machine="([^"]+)"', body))) <= 1, page.file
        if not more:
            continue
        (url,) = set(more.values())
        name, _, version = url.partition("?v=")
        function, (rows,) = site_book.read_data_file(path.parent / name)
        assert function == site_book.ROWS_FUNCTION
        assert set(rows) == set(more) and set(more) <= set(panels), page.file
        for uid, held in rows.items():
            machines = set(re.findall(r'class="vb-machine" data-machine="([^"]+)"', held))
            assert machines and machines <= committed, (page.file, uid, machines)
            assert machines.isdisjoint(re.findall(rf'id="{uid}".*?</vb-panel>', html, re.DOTALL)[0]), uid
        left_out += len(rows)
    assert left_out, "no figure on the book's pages was recorded by more than one committed machine"
    index = (built / "search" / "search_index.json").read_text(encoding="utf-8")
    assert "vb-panel__more" not in index and "more machine" not in index


def test_search_holds_each_output_once_with_its_tabs_named_apart(built: Path) -> None:
    """The site's search index has the book's text of each output block once (a machine's run repeats
    it and is left out), and tab labels as separate words."""
    docs = search_docs(built)
    text = " ".join(d["text"] for d in docs)
    first_line = printed_block(ROOT / CHAPTER_1, "shapes.py").splitlines()[0]
    assert text.count(first_line) == 1, f"{first_line!r} is in the index {text.count(first_line)} times"
    assert "The bookcpu" not in text and "The book cpu-x86_64-2c" in text
    for doc in docs:
        blocks = re.findall(r"<pre><code>(.*?)</code></pre>", doc["text"], re.DOTALL)
        repeated = {b[:60] for b in blocks if blocks.count(b) > 1}
        assert not repeated, f"{doc['location']}: code shown twice in the index: {repeated}"


def test_snippets_show_their_code_without_cell_markers(built: Path, book: Book) -> None:
    """Each page that includes a lab snippet shows its code, every line of it, with no jupytext marker."""
    from verified_book.book.snippet_display import reading_form

    shown = 0
    for md in sorted((ROOT / "book").rglob("*.md")):
        for path in re.findall(r'--8<-- "(book/snippets/[^"]+\.py)"', md.read_text(encoding="utf-8")):
            html_text = (built / page_url(md.relative_to(ROOT).as_posix())).read_text(encoding="utf-8")
            code = re.sub(r"<[^>]+>", "", html_text)
            code = (
                code.replace("&quot;", '"')
                .replace("&#39;", "'")
                .replace("&gt;", ">")
                .replace("&lt;", "<")
                .replace("&amp;", "&")
            )
            assert "# %%" not in code, f"{md.name} shows a cell marker of {path}"
            for line in reading_form((ROOT / path).read_text(encoding="utf-8")).splitlines():
                assert line.strip() in code, f"{md.name} does not show {path}'s line {line!r}"
            shown += 1
    assert shown == 6, f"{shown} snippets looked at"


@pytest.mark.browser
def test_the_legend_tells_every_status_apart_without_colour(visit: Visit) -> None:
    """Each status of the vocabulary has a row in the legend with a mark of its own shape."""
    page = visit.open("marks.html")
    rows = page.locator("table.vb-legend tbody tr")
    statuses = rows.evaluate_all("rs => rs.map(r => r.dataset.status)")
    assert set(figure_status.VOCABULARY) | {UNVERIFIED} <= set(statuses)
    shapes = page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('table.vb-legend tbody tr')]
        .map(r => [r.dataset.status, getComputedStyle(r.querySelector('.vb-fig__mark')).maskImage]))""")
    assert all(s != "none" for s in shapes.values()), shapes
    assert len(set(shapes.values())) == len(shapes), f"two statuses share a shape: {shapes}"
    quiet = page.locator(f'.vb-legend__machine .vb-mark[data-status="{NOT_REPORTED}"]')
    assert getComputedStyle_mask(page, quiet) not in set(shapes.values()) | {"none"}


def getComputedStyle_mask(page: Any, locator: Any) -> str:
    return locator.evaluate("e => getComputedStyle(e).maskImage")


@pytest.fixture(scope="module")
def instant_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The site built for the address it is served at, as instant navigation needs (its sitemap's)."""
    site = tmp_path_factory.mktemp("instant-site")
    with served(site) as url:
        result = build(ROOT, site, env={"CLAIMS_SITE_URL": url})
        assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
        yield url


@pytest.mark.browser
def test_panels_work_after_instant_navigation_and_from_the_keyboard(
    browser: Any, instant_site: str, book: Book
) -> None:
    """Material's instant navigation swaps the page without reloading it: the script sets up each
    page it lands on (the matrix filters, the boxes that scroll), and a figure opens with Enter."""
    visit = Visit(browser, instant_site)
    page = visit.open("index.html", settle=True)
    page.evaluate("() => { window.__sameDocument = true; }")
    page.locator(".md-nav--primary a.md-nav__link[href$='machines.html']").first.click()
    page.wait_for_function("() => (document.documentElement.dataset.vbPage || '').endsWith('machines.html')")
    assert page.evaluate("() => window.__sameDocument") is True, "the link reloaded the page: instant navigation is off"
    matrix = page.locator("[data-vb-matrix]")
    assert matrix.get_attribute("data-vb-ready") == ""
    page.locator(".vb-matrix__table tbody tr").first.wait_for()
    page.select_option('[data-vb-filter="status"]', "verified")
    shown = page.locator(".vb-matrix__table tbody tr:not([hidden])").count()
    assert shown == page.locator('.vb-matrix__table tbody tr[data-statuses~="verified"]').count()

    chapter = next(p for p in book.pages if p.bindings and not p.file.endswith("book/index.md"))
    page.locator(f".md-nav--primary a.md-nav__link[href$='{page_url(chapter.file).split('/')[-1]}']").first.click()
    page.wait_for_function(
        f"() => (document.documentElement.dataset.vbPage || '').endsWith({page_url(chapter.file)!r})"
    )
    assert page.evaluate("() => window.__sameDocument") is True
    figure = page.locator("[data-claim]").first
    figure.focus()
    page.keyboard.press("Escape")
    figure.locator(".vb-panel").wait_for(state="hidden")
    page.keyboard.press("Enter")
    figure.locator(".vb-panel").wait_for(state="visible")
    assert figure.get_attribute("aria-expanded") == "true"
    assert figure.get_attribute("role") == "button"
    described = figure.get_attribute("aria-describedby")
    assert described and page.locator(f"#{described}").count() == 1
    page.keyboard.press("Enter")
    figure.locator(".vb-panel").wait_for(state="hidden")
    assert figure.get_attribute("aria-expanded") == "false"
    assert not visit.errors and not visit.outside
    visit.close()


@pytest.fixture(scope="module")
def clone_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A copy of the book with a reader's own records in results.local/, built as a reader builds it:
    the project, its site, and the build's log."""
    tmp_path = tmp_path_factory.mktemp("clone")
    project = copy_project(tmp_path / "project")
    committed = sorted((project / "results").glob("*.json"))[0]  # any committed machine, as a reader's own
    local = project / "results.local"
    local.mkdir()
    data = json.loads(committed.read_text())
    data["slug"] = data["machine"]["slug"] = "readers-laptop"
    (local / "readers-laptop.json").write_text(json.dumps(data))
    env = {k: v for k, v in os.environ.items() if k != "CLAIMS_RESULTS_DIR"}
    command = [*MKDOCS, "build", "--strict", "-d", str(tmp_path / "site")]
    done = subprocess.run(
        command, cwd=project, capture_output=True, text=True, timeout=300, env={**env, "NO_MKDOCS_2_WARNING": "1"}
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return project, tmp_path / "site", done.stderr


@pytest.mark.slow
def test_a_clone_s_own_records_show_beside_the_committed_machines(clone_site: tuple[Path, Path, str]) -> None:
    project, site, log = clone_site
    every = sorted((project / "results").glob("*.json"))
    assert (
        "results.local/readers-laptop.json (this clone's run, not contributed) is shown as readers-laptop, "
        "beside the committed machines"
    ) in log
    machines = (site / "machines.html").read_text()
    assert "readers-laptop" in machines
    assert machines.count('<tr data-machine="readers-laptop" data-local>') == 1, (
        "the overview does not mark the clone's run"
    )
    for committed in every:
        assert f'<tr data-machine="{committed.stem}">' in machines, f"{committed.stem} reads as this clone's"
    assert sorted((project / "results").glob("*.json")) == every, "results/ is untouched"


@pytest.mark.slow
def test_every_figure_keeps_its_panel_and_the_search_index_holds_none(
    clone_site: tuple[Path, Path, str], book: Book
) -> None:
    """The build sets the panels aside while the search plugin indexes a page, and puts them back."""
    _, site, _ = clone_site
    for page in book.pages:
        html = (site / page_url(page.file)).read_text(encoding="utf-8")
        figures = len(re.findall(r'<span class="vb-fig" data-claim=', html))
        assert figures == len(page.bindings), page.file
        assert len(re.findall(r"<vb-panel\b", html)) == len(re.findall(r"</vb-panel>", html)) == figures, page.file
        assert "<!--vb-panel-" not in html, f"{page.file}: a panel was set aside and not put back"
    index = (site / "search" / "search_index.json").read_text(encoding="utf-8")
    assert "vb-panel" not in index and "Printed " not in index
