"""The book under every site generator a user may run: its marks, or a build that fails saying why.

MkDocs 1.6 with Material is the default (tests/engine/site/test_site.py). ProperDocs 1.6, the MkDocs 1.x fork that
keeps plugins, builds the same mkdocs.yml with the engine's plugin: every page's marks, counted in its
HTML, equal the figures it binds, and the Machines, Plots and legend pages are there. Zensical reads
mkdocs.yml but runs none of its plugins: the engine's Markdown extension renders the marks there, after
`verified-book pages` has written the generated pages, and the same count holds; without those pages,
or with pages older than the results, its build fails with a message saying what to run. Each generator is pinned in a
venv of its own
(requirements/properdocs.txt, requirements/zensical.txt), which .ci/run installs; where one is not
installed its test is skipped, unless VB_GENERATORS=required (as .ci/run sets) makes that a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import markdown
import pytest
from harness.paths import ROOT
from harness.served import served
from test_init import marks_by_page
from test_site import copy_project

from verified_book.integration import markdown_ext

EXAMPLE = ROOT / "verified_book" / "template"  # the book `verified-book init` writes
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
#: each generator's command, in the venv requirements/<name>.txt describes
GENERATORS = {
    "properdocs": ROOT / ".venv-properdocs" / "bin" / "properdocs",
    "zensical": ROOT / ".venv-zensical" / "bin" / "zensical",
}
CONFIGS = [ROOT / "mkdocs.yml", EXAMPLE / "mkdocs.yml"]
RAW_CLAIM_LINK = re.compile(r"""href=["']?claim:""")


def _generator(name: str) -> Path:
    command = GENERATORS[name]
    if not command.is_file():
        where = f"{command.relative_to(ROOT)} is missing (requirements/{name}.txt says how to install it)"
        if os.environ.get("VB_GENERATORS") == "required":
            pytest.fail(where)
        pytest.skip(where)
    return command


def _build(name: str, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(_generator(name)), "build", "-f", str(project / "mkdocs.yml"), *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CLAIMS_RESULTS_DIR": str(project / "results"), "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_site_config_lists_the_guard(config: Path) -> None:
    """Without the guard, a generator that skips the plugin would build the book with no marks and no complaint."""
    assert re.search(
        rf"^\s*-\s*{re.escape(markdown_ext.NAME)}\s*(#.*)?$", config.read_text(encoding="utf-8"), re.MULTILINE
    ), f"{config.relative_to(ROOT)}: markdown_extensions does not list {markdown_ext.NAME}"


def test_without_the_plugin_or_its_pages_the_extension_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No plugin and no generated pages: the page is not converted, and the message says what to run."""
    monkeypatch.chdir(tmp_path)  # no book.toml here or above
    with pytest.raises(markdown_ext.NoMarksError, match=r"runs no MkDocs plugin.*no book.toml"):
        markdown.markdown("A figure: [16.6](claim:decode.ceiling)", extensions=[markdown_ext.NAME])
    book = copy_project(tmp_path / "book")
    monkeypatch.chdir(book)
    with pytest.raises(
        markdown_ext.NoMarksError, match=r"pages.json is missing.*Run `verified-book pages`.*mkdocs build --strict"
    ):
        markdown.markdown("A figure: [16.6](claim:decode.ceiling)", extensions=[markdown_ext.NAME])
    passed = markdown.markdown(
        "A page.",
        extensions=[markdown_ext.NAME],
        extension_configs={markdown_ext.NAME: {"rendered_by": "verified-book"}},
    )
    assert passed == "<p>A page.</p>"


def _pages(project: Path) -> subprocess.CompletedProcess[str]:
    """`verified-book pages` in the book's copy, by the engine in this process's environment."""
    return subprocess.run(
        [sys.executable, "-m", "verified_book.integration.cli", "pages"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT), "CLAIMS_RESULTS_DIR": str(project / "results")},
    )


@pytest.fixture(scope="module")
def properdocs_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """This book built by ProperDocs, strictly: (the book's copy, its site)."""
    project = copy_project(tmp_path_factory.mktemp("properdocs") / "book")
    site = project.parent / "site"
    built = _build("properdocs", project, "--strict", "-d", str(site))
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return project, site


@pytest.fixture(scope="module")
def zensical_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """This book built by Zensical after `verified-book pages`: (the book's copy, its site)."""
    _generator("zensical")
    project = copy_project(tmp_path_factory.mktemp("zensical") / "book")
    written = _pages(project)
    assert written.returncode == 0, written.stdout[-3000:] + written.stderr[-3000:]
    built = _build("zensical", project, "--strict")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert "WARNING" not in built.stdout + built.stderr, built.stdout[-3000:] + built.stderr[-3000:]
    return project, project / "site"


@pytest.mark.slow
@pytest.mark.parametrize("generator", ["properdocs", "zensical"])
def test_the_generator_builds_the_book_with_every_figure_marked(generator: str, request: pytest.FixtureRequest) -> None:
    """Every page's marks equal its bound figures, the generated pages are whole, no raw `claim:` link is left,
    and every page links the legend and the marks' stylesheet and script."""
    project, site = request.getfixturevalue(f"{generator}_site")
    marks = marks_by_page(site, project)
    assert marks and sum(bound for bound, _ in marks.values()) > 0
    unmarked = {page: counts for page, counts in marks.items() if counts[0] != counts[1]}
    assert not unmarked, f"pages whose marks differ from their bound figures (bound, marked): {unmarked}"
    for generated in ("machines.html", "plots.html", "marks.html"):
        assert (site / generated).is_file(), f"{generator} built no {generated}"
        assert not re.search(r"VB[A-Z]+[0-9A-F]*Z", (site / generated).read_text(encoding="utf-8")), (
            f"{generated} keeps a block's placeholder"
        )
    raw = [
        p.relative_to(site).as_posix()
        for p in site.rglob("*.html")
        if RAW_CLAIM_LINK.search(p.read_text(encoding="utf-8"))
    ]
    assert not raw, f"raw claim: links in {raw}"
    index = (site / "index.html").read_text(encoding="utf-8")
    assert (
        "vb-legend-link" in index
        and "assets/stylesheets/claims.css" in index
        and "assets/javascripts/claims.js" in index
    )


@pytest.mark.slow
def test_zensical_refuses_pages_older_than_the_results(tmp_path: Path) -> None:
    """The results change after `verified-book pages`: the build fails saying to run it again."""
    project = copy_project(tmp_path / "book")
    assert _pages(project).returncode == 0
    results = next((project / "results").glob("*.json"))
    results.write_text(results.read_text(encoding="utf-8").replace('"records"', '"records" ', 1), encoding="utf-8")
    built = _build("zensical", project)
    output = built.stdout + built.stderr
    assert built.returncode != 0, f"Zensical built pages older than the results:\n{output[-3000:]}"
    assert "older than the results" in output and "Run `verified-book pages`" in output, output[-3000:]


@pytest.mark.browser
@pytest.mark.parametrize("generator", ["properdocs", "zensical"])
def test_a_chapter_the_generator_built_opens_a_panel_on_click(
    generator: str, request: pytest.FixtureRequest, browser: Any
) -> None:
    """The first chapter as ProperDocs or Zensical built it, at a desktop's width, a figure's panel opened by a click
    (artifacts/screenshots/<generator>-1400-open.png)."""
    _, site = request.getfixturevalue(f"{generator}_site")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with served(site) as base:
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        try:
            page = context.new_page()
            page.goto(base + "gpus-and-precision/1-tensors-and-bandwidth.html", wait_until="load")
            assert page.locator(".vb-panel:visible").count() == 0, "a panel shows before any figure is clicked"
            figure = page.locator("p [data-claim]").first
            figure.scroll_into_view_if_needed()
            figure.click()
            figure.locator(".vb-panel").wait_for(state="visible")
            assert page.locator(".vb-panel:visible").count() == 1
            page.wait_for_timeout(500)  # the panel fades in: the screenshot shows it whole
            page.screenshot(path=str(SCREENSHOTS / f"{generator}-1400-open.png"))
        finally:
            context.close()


@pytest.mark.slow
def test_zensical_refuses_a_book_whose_pages_are_not_written(tmp_path: Path) -> None:
    """The book `init` writes, without `verified-book pages`: the build fails, naming Zensical and what to run, and
    no page is written."""
    project = tmp_path / "minimal"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("site", "results", ".cache", "__pycache__"))
    built = _build("zensical", project)
    output = built.stdout + built.stderr
    assert built.returncode != 0, f"Zensical built a book without its generated pages:\n{output[-3000:]}"
    assert "NoMarksError: verified-book: Zensical runs no MkDocs plugin" in output, output[-3000:]
    assert "Run `verified-book pages`" in output and "mkdocs build --strict" in output
    site = project / "site"
    pages = [p for p in site.rglob("*.html") if p.name != "404.html"] if site.is_dir() else []
    assert not pages, f"Zensical wrote pages although the build failed: {pages}"
