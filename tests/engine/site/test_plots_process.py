"""The plots page drawn in a process of its own: the same page as drawn here, or drawn here instead."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest
from harness.paths import ROOT

from verified_book.records.fleet import read_all
from verified_book.site import plots_process
from verified_book.site.render import GeneratedPage

DRAWER = """\
import os
import sys

from verified_book.site.render import GeneratedPage


def draw(results):
    print("a chatty drawing library")  # must not reach the page
    return GeneratedPage(f"# {sorted(results)} drawn in {os.getpid()}", {"T": "<svg/>"})


def broken(results):
    raise ValueError("no such series")


def half(results):
    if "PLOTS_CHILD_DIES" in os.environ:
        sys.stdout.write("not a page")
        sys.stdout.flush()
        os._exit(0)
    return GeneratedPage("# drawn here")
"""


@pytest.fixture
def drawer(tmp_path: Path) -> Path:
    (tmp_path / "drawer_module.py").write_text(textwrap.dedent(DRAWER))
    return tmp_path


def test_the_child_draws_the_page_and_hands_it_back(drawer: Path) -> None:
    page = plots_process.Drawing("drawer_module:draw", drawer, {}).page()
    assert isinstance(page, GeneratedPage) and page.blocks == {"T": "<svg/>"}
    assert page.markdown.startswith("# [] drawn in ") and not page.markdown.endswith(f" {__import__('os').getpid()}")


def test_the_child_starts_before_the_results_and_draws_once_given_them(drawer: Path) -> None:
    drawing = plots_process.Drawing("drawer_module:draw", drawer, None)
    drawing.give({})
    assert drawing.page().markdown.startswith("# [] drawn in ")
    with pytest.raises(ValueError, match="given no results"):
        plots_process.Drawing("drawer_module:draw", drawer, None).page()


@pytest.mark.slow  # reads the committed results in a process of its own
def test_a_child_that_reads_the_results_itself_draws_them_as_the_site_read_them(drawer: Path) -> None:
    """The site hands the child no records (copying them costs the site more than reading them costs the child):
    the child reads the folder the site read, and draws the same machines; a child that cannot gives the page back
    drawn here from the site's own."""
    from verified_book.engine.config import read_config
    from verified_book.site.build import read_results

    shutil.copytree(ROOT / "results", drawer / "results")
    (drawer / "book.toml").write_text('[book]\nresults = "results"\n')
    site = read_results(read_config(drawer), None, "results", lambda p: pytest.fail(str(p)), lambda text: None).files
    drawing = plots_process.Drawing("drawer_module:draw", drawer, None)
    drawing.read_apart(site)
    page = drawing.page().markdown
    assert page.startswith(f"# {sorted(site)} drawn in ") and not page.endswith(f" {os.getpid()}")


def test_a_drawing_error_surfaces_here_with_its_own_message(
    drawer: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(drawer))  # as the book's root is on the path of the process that builds its site
    with pytest.raises(ValueError, match="no such series"):
        plots_process.Drawing("drawer_module:broken", drawer, {}).page()
    assert "no such series" not in capfd.readouterr().err, "the child's traceback is not shown beside this one"


def test_a_child_that_gives_back_no_page_is_drawn_here(drawer: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLOTS_CHILD_DIES", "1")
    drawing = plots_process.Drawing("drawer_module:half", drawer, {})
    monkeypatch.delenv("PLOTS_CHILD_DIES")
    monkeypatch.syspath_prepend(str(drawer))
    assert drawing.page().markdown == "# drawn here"


def test_a_cancelled_drawing_leaves_no_process_and_no_folder(drawer: Path) -> None:
    drawing = plots_process.Drawing("drawer_module:draw", drawer, {})
    folder = Path(drawing._folder.name)
    drawing.cancel()
    assert not folder.exists() and drawing._child is None


@pytest.mark.slow
def test_the_book_s_plots_drawn_apart_are_the_plots_drawn_here() -> None:
    results = read_all(ROOT / "results", lambda text: pytest.fail(text))
    apart = plots_process.Drawing("claims.plots:render_plots_page", ROOT, results).page()
    here = plots_process.function("claims.plots:render_plots_page")(results)
    assert apart == here and "<svg" in "".join(here.blocks.values())


@pytest.mark.slow  # a site build
def test_a_book_with_its_own_plots_page_starts_no_drawing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The drawing starts before the results are read, and before the files are listed; a book that
    keeps a page of a generated page's name (the plots, the machines) gets no drawing, and its own pages are built."""
    from test_site import build_here, copy_project

    from verified_book.engine.machine import usable_cpus

    started: list[str] = []

    class Recorded(plots_process.Drawing):
        def __init__(self, where: str, root: Path, results: object, reads_from: Path | None = None) -> None:
            started.append(where)
            super().__init__(where, root, results, reads_from)  # type: ignore[arg-type]

    monkeypatch.setattr(plots_process, "Drawing", Recorded)
    project = copy_project(tmp_path / "own")
    (project / "book" / "plots.md").write_text("# Plots drawn by hand\n\nNone yet.\n")
    (project / "book" / "machines.md").write_text("# Machines listed by hand\n\nNone yet.\n")
    passed, log = build_here(project, tmp_path / "site", strict=False)
    assert passed, log
    assert "machines.md: the claims plugin generates this page; the book has a file of the same name" in log
    assert "plots.md: the claims plugin generates this page; the book has a file of the same name" in log
    assert "Plots drawn by hand" in (tmp_path / "site" / "plots.html").read_text()
    assert "Machines listed by hand" in (tmp_path / "site" / "machines.html").read_text()
    assert started == []

    started.clear()
    (project / "book" / "plots.md").unlink()
    passed, log = build_here(project, tmp_path / "site", strict=False)
    assert passed, log
    assert started == (["claims.plots:render_plots_page"] if usable_cpus() > 1 else [])
