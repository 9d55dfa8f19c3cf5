"""A new book as an author starts one: `verified-book init`, then `pytest`, then `mkdocs build --strict`.

examples/minimal holds no copy of that book, only a pointer to `init`; a book `init` writes verifies and
builds with every figure marked, its panels hidden until a figure is clicked, and its site opens from disk
as from a server with every link leading to a page; and the engine, installed from a wheel with the lean
`book` extra into a fresh environment outside this repository, does the same with no torch,
transformers, ml_dtypes or MLX.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest
from harness.paths import ROOT
from harness.served import served

from verified_book.book.bindings import Book
from verified_book.engine.config import read_config
from verified_book.integration import cli

EXAMPLE = ROOT / "examples" / "minimal"
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
#: what a run or a build leaves in a book's folder, none of it the book
LEFT_BEHIND = {"results", "site", ".cache", "__pycache__", ".pytest_cache"}
MARK = '<span class="vb-fig__mark" aria-hidden="true"></span>'


def _book_files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not LEFT_BEHIND & set(p.relative_to(folder).parts) and p.suffix != ".pyc"
    }


def _init(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verified_book.integration.cli", "init", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=folder.parent,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def marks_by_page(site: Path, book_root: Path) -> dict[str, tuple[int, int]]:
    """Each page of the book: (figures it binds, marks its built HTML carries)."""
    config = read_config(book_root)
    book = Book.read(config.pages, config.root, config.allowlist)
    out = {}
    for page in book.pages:
        relative = (book_root / page.file).relative_to(config.pages).with_suffix("")
        html = next(
            (
                c
                for c in (
                    site / f"{relative}.html",
                    site / relative / "index.html",
                    site / relative.parent / "index.html" if relative.name == "index" else None,
                )
                if c is not None and c.is_file()
            ),
            None,
        )
        out[page.file] = (len(page.bindings), html.read_text(encoding="utf-8").count(MARK) if html else 0)
    return out


def test_examples_minimal_points_at_init_instead_of_holding_a_copy() -> None:
    """The minimal book is what `init` writes, made fresh where it is needed (CI, the tests): no second copy
    of the template to keep equal by hand."""
    assert sorted(p.name for p in EXAMPLE.iterdir()) == ["README.md"]
    assert "verified-book init" in (EXAMPLE / "README.md").read_text(encoding="utf-8")


#: install lines that name something no reader can reach: a repository that does not resolve, or the engine
#: by name from PyPI, which does not hold it
UNREACHABLE = re.compile(r"git\+https://github\.com/verified-book|pip install [\"']?verified-book\[")


@pytest.mark.parametrize("readme", [EXAMPLE / "README.md", ROOT / "verified_book" / "template" / "README.md"])
def test_the_install_lines_name_only_what_resolves(readme: Path) -> None:
    text = readme.read_text(encoding="utf-8")
    found = [
        f"{readme.relative_to(ROOT)}:{n}: {line}"
        for n, line in enumerate(text.splitlines(), 1)
        if UNREACHABLE.search(line)
    ]
    assert not found, "install lines that cannot resolve:\n" + "\n".join(found)


def test_init_writes_the_template_file_for_file(tmp_path: Path) -> None:
    made = tmp_path / "book"
    done = _init(made)
    assert done.returncode == 0, done.stderr
    template = ROOT / "verified_book" / "template"
    assert _book_files(made) == _book_files(template)
    assert "pytest" in done.stdout and "mkdocs build --strict" in done.stdout


def test_init_starts_only_in_an_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    refused = cli.main(["init", str(tmp_path)])
    assert refused == 1 and (tmp_path / "notes.txt").read_text() == "mine\n" and not (tmp_path / "book.toml").exists()
    hidden_only = tmp_path / "repo"
    (hidden_only / ".git").mkdir(parents=True)
    assert cli.main(["init", str(hidden_only)]) == 0 and (hidden_only / "book.toml").is_file()
    assert (hidden_only / ".gitignore").is_file()


@pytest.mark.slow
def test_a_book_init_writes_verifies_and_builds_with_every_figure_marked(tmp_path: Path) -> None:
    made = tmp_path / "book"
    assert _init(made).returncode == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    env.pop("CLAIMS_RESULTS_DIR", None)
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q"], cwd=made, capture_output=True, text=True, timeout=600, env=env
    )
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict"],
        cwd=made,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    counts = marks_by_page(made / "site", made)
    assert counts and all(bound == marked and bound > 0 for bound, marked in counts.values()), counts
    site = made / "site"
    for asset in ("assets/stylesheets/claims.css", "assets/javascripts/claims.js"):
        assert (site / asset).is_file(), f"the engine's {asset} is not in the site"
        assert asset in (site / "index.html").read_text(encoding="utf-8")
    assert (site / "marks.html").is_file() and (site / "machines.html").is_file(), "pages as files, not folders"


@pytest.fixture(scope="module")
def built_book(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A book `init` wrote, verified with `pytest` and built with `mkdocs build --strict` in its folder, as its
    README says; its site is `site/` there."""
    made = tmp_path_factory.mktemp("own") / "my-book"
    assert _init(made).returncode == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    env.pop("CLAIMS_RESULTS_DIR", None)
    for command in (["pytest", "-q", "-p", "no:randomly"], ["mkdocs", "build", "--strict"]):
        done = subprocess.run(
            [sys.executable, "-m", *command], cwd=made, capture_output=True, text=True, timeout=600, env=env
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return made / "site"


@pytest.mark.browser
def test_a_new_book_opens_a_panel_on_click_and_hides_it_otherwise(built_book: Path, browser: Any) -> None:
    """A figure's panel is hidden until the figure is clicked, and shown after; screenshots at a phone's
    width and a desktop's (artifacts/screenshots/minimal-*.png)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with served(built_book) as base:
        for width in (400, 1400):
            context = browser.new_context(viewport={"width": width, "height": 900})
            try:
                page = context.new_page()
                page.goto(base, wait_until="load")
                figures = page.locator("[data-claim]")
                assert figures.count() == 9
                assert page.locator(".vb-panel:visible").count() == 0, "a panel shows before any figure is clicked"
                # the engine's stylesheet reached the page: a screen reader's words take no room on screen
                words = page.locator(".vb-sr").first.bounding_box()
                assert words is not None and words["width"] <= 1 and words["height"] <= 1, (
                    f"the status reads as running text: {words}"
                )
                page.screenshot(path=str(SCREENSHOTS / f"minimal-{width}-closed.png"))
                figure = figures.nth(1)
                figure.click()
                panel = figure.locator(".vb-panel")
                panel.wait_for(state="visible")
                assert page.locator(".vb-panel:visible").count() == 1
                page.wait_for_timeout(500)  # the panel fades in: the screenshot shows it whole
                page.screenshot(path=str(SCREENSHOTS / f"minimal-{width}-open.png"))
                page.locator("h1").first.click()
                panel.wait_for(state="hidden")
            finally:
                context.close()


#: what a link that leads nowhere shows instead of a page: a server's or a browser's listing of a folder
LISTING = re.compile(r"Directory listing for|Index of /", re.IGNORECASE)


def _follow_every_link(browser: Any, start: str) -> dict[str, str]:
    """Every page reachable from `start` by the links of the site's pages, each opened in the browser: the
    URL of each link that does not lead to a page of the site (or to an anchor that page lacks), with what it
    led to."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    root = start.rsplit("/", 1)[0] + "/"
    seen: set[str] = set()
    anchors: dict[str, set[str]] = {}
    todo, broken = [start], {}
    try:
        while todo:
            url = todo.pop()
            if url in seen:
                continue
            seen.add(url)
            response = page.goto(url, wait_until="load")
            status = response.status if response is not None else 200  # file:// answers with no status
            text = page.locator("body").inner_text()
            if status >= 400 or LISTING.search(text) or page.locator("article, .md-content").count() == 0:
                broken[url] = f"status {status}: {text[:80]!r}"
                continue
            for href in page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)"):
                target, _, fragment = href.split("?", 1)[0].partition("#")
                if target.startswith(root):
                    todo.append(target)
                    if fragment:
                        anchors.setdefault(target, set()).add(fragment)
        for target, fragments in sorted(anchors.items()):
            if target in broken:
                continue
            page.goto(target, wait_until="load")
            ids = set(page.eval_on_selector_all("[id]", "nodes => nodes.map(n => n.id)"))
            broken.update({f"{target}#{f}": "no element with that id" for f in sorted(fragments - ids)})
    finally:
        context.close()
    assert len(seen) >= 3, f"the crawl found too few pages to mean anything: {sorted(seen)}"
    return broken


@pytest.mark.browser
def test_every_link_of_a_new_book_s_site_leads_to_a_page_from_disk_and_from_a_server(
    built_book: Path, browser: Any
) -> None:
    """A reader opens `site/index.html` from disk, or serves the folder: every link of every page, followed
    in the browser, opens a page of the site, never a folder's listing or a 404; screenshots of the index and
    the Machines page at a phone's width and a desktop's (artifacts/screenshots/own-book-*.png)."""
    from_disk = _follow_every_link(browser, (built_book / "index.html").as_uri())
    assert not from_disk, f"links that lead to no page from file://: {from_disk}"
    with served(built_book) as base:
        over_http = _follow_every_link(browser, base + "index.html")
        assert not over_http, f"links that lead to no page over http: {over_http}"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for width in (390, 1280):
            context = browser.new_context(viewport={"width": width, "height": 800})
            try:
                page = context.new_page()
                for name, path in (("index", "index.html"), ("machines", "machines.html")):
                    page.goto(base + path, wait_until="load")
                    page.screenshot(path=str(SCREENSHOTS / f"own-book-{name}-{width}.png"), full_page=True)
            finally:
                context.close()


@pytest.mark.slow
def test_the_wheel_with_the_book_extra_starts_verifies_and_builds_a_book_outside_the_repository(tmp_path: Path) -> None:
    """The engine as an author gets it: a wheel built from this repository, installed with `[book]` into a
    fresh environment (PyPI only, no torch on offer); `init`, `pytest`, `mkdocs build --strict` there."""
    dist = tmp_path / "dist"
    wheel_built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert wheel_built.returncode == 0, wheel_built.stderr[-2000:]
    (wheel,) = dist.glob("verified_book-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {
        "verified_book/assets/stylesheets/claims.css",
        "verified_book/assets/javascripts/claims.js",
        "verified_book/assets/partials/legend-link.html",
        "verified_book/template/book.toml",
        "verified_book/template/.gitignore",
    } <= set(names)
    assert not [n for n in names if n.startswith(("book/", "claims/", "results/", "tests/"))], names

    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV", "CLAIMS_"))}
    clean.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", NO_MKDOCS_2_WARNING="1")
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"{wheel}[book]"],
        capture_output=True,
        text=True,
        timeout=900,
        env=clean,
    )
    if installed.returncode != 0 and re.search(
        r"Could not find a version|NewConnectionError|Network is unreachable", installed.stderr
    ):
        pytest.skip(f"PyPI cannot be reached: {installed.stderr.strip().splitlines()[-1]}")
    assert installed.returncode == 0, installed.stderr[-3000:]
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json"], capture_output=True, text=True, env=clean, check=True
    )
    packages = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert not packages & {"torch", "transformers", "mlx", "ml-dtypes", "ml_dtypes", "jax", "matplotlib"}, packages

    made = tmp_path / "elsewhere" / "my-book"
    made.parent.mkdir()
    bin_dir = env_dir / "bin"
    started = subprocess.run(
        [str(bin_dir / "verified-book"), "init", "my-book"],
        cwd=made.parent,
        capture_output=True,
        text=True,
        timeout=120,
        env=clean,
    )
    assert started.returncode == 0, started.stderr
    tested = subprocess.run(
        [str(bin_dir / "pytest"), "-q"], cwd=made, capture_output=True, text=True, timeout=600, env=clean
    )
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
    assert "torch" not in tested.stdout.split("short test summary")[0].split("verified book")[-1]
    built = subprocess.run(
        [str(bin_dir / "mkdocs"), "build", "--strict"], cwd=made, capture_output=True, text=True, timeout=600, env=clean
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    counts = marks_by_page(made / "site", made)
    assert all(bound == marked and bound > 0 for bound, marked in counts.values()), counts


def test_init_says_to_change_folder_only_where_the_book_is_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert cli.main(["init"]) == 0
    assert "  cd " not in capsys.readouterr().out, "the book is in this folder already"
    assert cli.main(["init", str(tmp_path / "there")]) == 0
    assert f"  cd {tmp_path / 'there'}\n" in capsys.readouterr().out
