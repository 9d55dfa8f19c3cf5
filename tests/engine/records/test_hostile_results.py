"""Contributed results files are untrusted input: refused when unsound, shown only as text when sound.

A results file arrives by pull request. `verified_book.records.results.validate` refuses every variant
below before it is merged or rendered; a sound file that carries markup in every string
is built into the site, and headless Chromium shows that none of it runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from harness import faults
from harness.paths import ROOT
from harness.served import served

import verified_book.records.fleet as fleet
import verified_book.records.results as results
from verified_book.authoring.registry import REGISTRY, Kind
from verified_book.book.bindings import Book
from verified_book.engine import selection

WHERE = "results/contrib.json"
KNOWN = {"basic.ratio"}


def _variant(name: str) -> Any:
    data = json.loads(json.dumps(faults.sound_results(text=faults.HOSTILE)))
    replaced = faults.HOSTILE_VARIANTS[name][1](data)
    return replaced if isinstance(replaced, list) else data


def test_a_sound_file_with_markup_in_every_string_is_accepted() -> None:
    """The control for the browser test: markup alone is no reason to refuse, escaping is the defence."""
    assert results.validate(faults.sound_results(text=faults.HOSTILE), WHERE, KNOWN) == []


@pytest.mark.parametrize("name", list(faults.HOSTILE_VARIANTS))
def test_each_hostile_variant_is_refused_naming_the_file(name: str) -> None:
    problems = results.validate(_variant(name), WHERE, KNOWN)
    assert problems, f"{name}: accepted"
    assert all(p.startswith(WHERE) for p in problems), problems


@pytest.mark.parametrize("name", list(faults.HOSTILE_FILES))
def test_each_hostile_file_is_refused_by_the_reader(name: str, tmp_path: Path) -> None:
    path = tmp_path / "contrib.json"
    path.write_bytes(faults.HOSTILE_FILES[name])
    with pytest.raises(results.ResultsError, match=str(path).replace(".", r"\.")):
        results.read(path, KNOWN)


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(results, "MAX_FILE_BYTES", 1000)
    path = tmp_path / "contrib.json"
    path.write_text(json.dumps(faults.sound_results()) + " " * 1000)
    with pytest.raises(results.ResultsError, match="more than a results file from another machine may hold"):
        results.read(path)


def test_the_size_limit_never_applies_to_a_machines_own_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large book's own results file is read back whole, by the writer and by `own` readers: the limit guards
    only what others send, so no run sets a machine's history aside for its size."""
    monkeypatch.setattr(results, "MAX_FILE_BYTES", 1000)
    path = tmp_path / f"{faults.sound_results()['slug']}.json"
    path.write_text(json.dumps(faults.sound_results()) + " " * 1000)
    assert results.read(path, own=True).records
    assert fleet.read_all(tmp_path, pytest.fail, own=True)
    kept, aside = results.read_salvaging(path)
    assert kept.records and not aside
    history, why = selection.recorded(path)  # what --changed and --reading select from
    assert history is not None and history.records and not why
    warnings: list[str] = []
    assert fleet.read_all(tmp_path, warnings.append) == {}
    assert len(warnings) == 1 and "never a machine's own history" in warnings[0]


def test_the_site_reader_reports_a_hostile_file_and_keeps_the_others(tmp_path: Path) -> None:
    (tmp_path / "contrib.json").write_text(json.dumps(_variant("figure line negative")))
    (tmp_path / "good.json").write_text(json.dumps(faults.sound_results(slug="good")))
    warnings: list[str] = []
    found = fleet.read_all(tmp_path, warnings.append, KNOWN)
    assert list(found) == ["good"]
    assert len(warnings) == 1 and str(tmp_path / "contrib.json") in warnings[0] and "line -4" in warnings[0]


# ---------------------------------------------------------------- the built site, in a browser

SLUG = "hostile-contrib"


def _targets(book: Book) -> tuple[str, list[Any]]:
    """A chapter page with figures, and up to two of its figures whose claims exist."""
    pages = [p for p in book.pages if p.bindings and not p.file.endswith("index.md")]
    pages = pages or [p for p in book.pages if p.bindings]
    if not pages:
        pytest.skip("the book has no bound figure yet")
    page = pages[0]
    figures = [b for b in page.bindings if REGISTRY.get(b.claim_id) is not None][:2]
    return page.file, figures


def _hostile_file(figures: list[Any]) -> dict[str, Any]:
    data = faults.sound_results(slug=SLUG, text=faults.HOSTILE)
    template = data["records"].pop("basic.ratio")["numpy"]
    for n, binding in enumerate(figures):
        claim = REGISTRY[binding.claim_id]
        backend = "numpy" if claim.kind in (Kind.LIBRARY, Kind.MEASURED) else "none"
        record = json.loads(json.dumps(template))
        record["kind"] = claim.kind.value
        record["hardware"] = f"hw {faults.HOSTILE}"
        record["figures"] = [
            {
                "file": binding.file,
                "line": binding.line,
                "printed": binding.text,
                "stated": f"{binding.stated}{faults.HOSTILE}",
                "status": "verified",
            }
        ]
        if n == 0:  # a value that is itself a string of markup
            record["value"] = f"value {faults.HOSTILE}"
            record["status"] = record["figures"][0]["status"] = "stale"
        data["records"][binding.claim_id] = {backend: record}
    return data


def _url(md: str) -> str:
    return md.removeprefix("book/").removesuffix(".md") + ".html"


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, list[Any]]]:
    """The project's site built with one extra results file that carries markup in every string."""
    tmp = tmp_path_factory.mktemp("hostile-site")
    book = Book.read(ROOT / "book", ROOT)
    page, figures = _targets(book)
    results_dir = tmp / "results"
    results_dir.mkdir()
    for path in (ROOT / "results").glob("*.json"):
        shutil.copy(path, results_dir / path.name)
    data = _hostile_file(figures)
    assert results.validate(data, SLUG, set(REGISTRY.ids())) == [], (
        "the hostile file must pass validation to be rendered"
    )
    (results_dir / f"{SLUG}.json").write_text(json.dumps(data))
    site = tmp / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CLAIMS_RESULTS_DIR": str(results_dir), "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, f"mkdocs build failed:\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
    with served(site) as url:
        yield url, page, figures


def _visit(browser: Any, url: str, hover: list[str] = ()) -> tuple[Any, list[str], Any]:
    """Open a page, recording dialogs; hover the figures of the given claims so their panels open."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(url, wait_until="networkidle")
    for claim_id in hover:
        figures = page.locator(f'[data-claim="{claim_id}"]:visible')
        if figures.count():
            figures.first.scroll_into_view_if_needed()
            figures.first.hover()
            figures.first.locator(".vb-panel").wait_for(state="visible", timeout=5000)
    page.wait_for_timeout(300)
    return page, dialogs, context


def _nothing_ran(page: Any, dialogs: list[str]) -> None:
    assert dialogs == [], f"a dialog opened: {dialogs}"
    assert page.evaluate("() => window.__pwned") is None, "a script from the results file ran"
    injected = page.evaluate("""() => ({
        scripts: [...document.scripts].filter(s => s.textContent.includes('__pwned')).length,
        images: document.querySelectorAll('img[src="x"]').length,
        handlers: [...document.querySelectorAll('*')].filter(e => e.getAttribute('onerror')).length })""")
    assert injected == {"scripts": 0, "images": 0, "handlers": 0}, injected


@pytest.mark.slow
@pytest.mark.browser
def test_markup_from_a_results_file_shows_as_text_and_never_runs(
    hostile_site: tuple[str, str, list[Any]], browser: Any
) -> None:
    base, chapter, figures = hostile_site
    page, dialogs, context = _visit(browser, base + _url(chapter), hover=[f.claim_id for f in figures])
    try:
        _nothing_ran(page, dialogs)
        claims_on_page = page.evaluate("() => [...document.querySelectorAll('[data-claim]')].map(e => e.dataset.claim)")
        assert figures[0].claim_id in claims_on_page
        text = page.evaluate("() => document.body.textContent")
        assert faults.HOSTILE in text, "the markup from the results file is not shown as text on the chapter page"
        figure = page.locator(f'[data-claim="{figures[0].claim_id}"]:visible').first
        figure.hover()
        figure.locator(".vb-panel").wait_for(state="visible", timeout=5000)
        assert "value <script>" in figure.locator(".vb-panel").inner_text(), (
            "the contributed value is not in the figure's panel as text"
        )
        _nothing_ran(page, dialogs)
    finally:
        context.close()
    page, dialogs, context = _visit(browser, base + "machines.html")
    try:
        _nothing_ran(page, dialogs)
        assert page.locator("h2", has_text=SLUG).count() == 1, "the contributed machine has no section"
        assert faults.HOSTILE in page.evaluate("() => document.body.textContent"), (
            "the markup from the results file is not shown as text on the machines page"
        )
    finally:
        context.close()
