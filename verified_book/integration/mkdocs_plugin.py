"""MkDocs adapter: hands each page to `verified_book.site.render` and adds the machines and plots pages.

Kept thin on purpose (the site generator may change): the rendering lives in
`verified_book.site.render`, `verified_book.site.machines` and `claims.plots`, which know nothing
of MkDocs. Problems (an unknown claim, a malformed binding, a results file that
does not read) are logged as warnings with file:line, so `mkdocs build --strict`
fails on them, and listed once more in a summary at the end; a plain build shows a
visible marker at the figure instead.
"""

from __future__ import annotations

import contextlib
import datetime
import posixpath
import re
import secrets
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import jinja2
from mkdocs.config import base
from mkdocs.config import config_options as c
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin, get_plugin_logger
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page as MkPage

from verified_book.authoring.registry import REGISTRY
from verified_book.book.bindings import AllowListError, Book, Page, book_pages, generated, read_allowlist
from verified_book.book.lexer import lex
from verified_book.engine import verdicts as verdicts_mod
from verified_book.engine.config import ConfigError, open_book, read_config
from verified_book.engine.figure_status import DISPLAY_ORDER
from verified_book.engine.kept_pages import read_or_raise
from verified_book.engine.long_lived import made_as_it_goes
from verified_book.engine.machine import usable_cpus
from verified_book.engine.snippet_figures import snippet_hashes
from verified_book.errors import Problem
from verified_book.integration import markdown_ext
from verified_book.records.results import ResultsFile
from verified_book.site import build as site_book
from verified_book.site import machines as site_machines
from verified_book.site import plots_process, render, transform

log = get_plugin_logger(__name__)

#: what the marks need in every book, shipped inside the engine (verified_book/assets/) and added to each
#: site at the same path; a file of that path in the book's docs_dir is the book's own and is kept instead
ASSETS = site_book.ASSETS
STYLESHEETS = ("assets/stylesheets/claims.css",)
SCRIPTS = ("assets/javascripts/claims.js",)
#: the link to the legend on every page, put where Material's page content begins (other themes list the
#: legend page in the nav only)
LEGEND_LINK = (ASSETS / "partials" / "legend-link.html").read_text(encoding="utf-8")
_MATERIAL_CONTENT = '<article class="md-content__inner md-typeset">'


class ClaimsConfig(base.Config):
    """The plugin's options in mkdocs.yml."""

    results_dir = c.Optional(c.Type(str))  # per-machine results files, relative to mkdocs.yml; book.toml's by default
    on_missing = c.Choice(("mark", "fail"), default="mark")  # a figure no machine verified: mark it, or fail the build
    machines_page = c.Type(str, default="machines.md")  # generated pages, by their path in the site
    plots_page = c.Type(str, default="plots.md")
    legend_page = c.Type(str, default="marks.md")  # what each mark means, linked from every page
    report_within_days = c.Type(int, default=8)  # a fleet machine quiet for longer shows as not reported this week
    today = c.Type((str, datetime.date), default="")  # the date that is judged by (ISO); the build's own when empty
    stand_ins = c.Type(bool, default=True)  # a nav entry not written yet gets a "being written" page


class ClaimsPlugin(BasePlugin[ClaimsConfig]):
    """Renders every bound figure from `results/`, and generates the machines and plots pages."""

    said_elsewhere: frozenset[str] = frozenset()  # places whose problem the caller reports itself (serve)

    def on_config(self, config: MkDocsConfig) -> MkDocsConfig:
        self.root = Path(config.config_file_path or ".").resolve().parent
        self.docs = Path(config.docs_dir).resolve()
        self.problems: list[Problem] = []
        self.unverified: list[str] = []
        self.figures = 0
        self.rendered: dict[str, transform.RenderedPage] = {}
        self.generated: dict[str, render.GeneratedPage] = {}
        self._drawing: plots_process.Drawing | None = None
        self._pages: dict[Path, Page] = {}  # the book's pages by their path, read once in on_files
        self._panels: dict[str, list[str]] = {}  # each page's figure panels, set aside for the search index
        self._nonce = f"vb-panel-{secrets.token_hex(6)}"  # no page's own text holds it
        self._verdicts: verdicts_mod.Verdicts = {}  # each record judged (outdated? its figures?) once in this build
        self._legend_file: File | None = None  # the legend page, every other page links it
        self._matrix_rows: site_machines.MatrixRows | None = None  # the machines page's, for its data files
        self.matrix_in_files = True  # False: on the page, for a generator that copies no data file
        try:
            self.book_config = read_config(self.root)
        except ConfigError as e:
            raise PluginError(str(e)) from None
        self._opened = contextlib.ExitStack()  # the book, current from here to the build's end
        self._opened.enter_context(made_as_it_goes())  # each judgement is kept to the build's end
        generates_plots = not self._own(self.config.plots_page)
        if generates_plots:
            self._start_plots()
        self.results: dict[str, ResultsFile] = {}
        self.local: dict[str, str] = {}  # this clone's own runs, by the name the site shows: the file they are in
        self._read_results()
        if self._drawing is not None:  # it reads and draws while the topics load, which it does not need
            self._drawing.read_apart(self.results)
        self.opened_book = open_book(self.book_config)
        self._opened.enter_context(self.opened_book.opened())
        load_errors = self.opened_book.load_errors
        for line in load_errors:
            self._problem(line)
        if generates_plots:
            self._plots_function()  # a `plots` that names no function fails the build here, not at its page
        try:
            today = site_machines.today(str(self.config.today))
        except ValueError as e:
            raise PluginError(f"{config.config_file_path}: plugins.claims.today: {e}") from e
        self.today = today
        self.quiet = site_machines.quiet_machines(self.results, today, self.config.report_within_days)
        bases = config.mdx_configs.get("pymdownx.snippets", {}).get("base_path", ["."])
        self._include_bases = [self.root / folder for folder in ([bases] if isinstance(bases, str) else bases)]
        self.context = transform.Context(
            self.results,
            REGISTRY.get,
            config.repo_url,
            REGISTRY.near,
            self.quiet,
            self._included,
            load_errors,
            snippet_hashes(self.book_config.snippets),
            own=tuple(self.local),
        )
        self.site_dir = Path(config.site_dir)
        self._add_assets(config)
        self._add_to_nav(config)
        # the guard a generator that skips this plugin cannot pass (verified_book/integration/markdown_ext.py) passes
        # here
        config.mdx_configs.setdefault(markdown_ext.NAME, {})["rendered_by"] = "verified-book"
        return config

    def _own(self, src: str) -> bool:
        """Whether the book has a file of this path, its own (not one `verified-book pages` wrote)."""
        return (self.docs / src).exists() and not generated(self.docs / src)

    def _add_assets(self, config: MkDocsConfig) -> None:
        """The marks' stylesheet and script on every page, after the book's own (which a book that lists
        them itself keeps where it put them)."""
        for path in STYLESHEETS:
            if path not in [str(css) for css in config.extra_css]:
                config.extra_css.append(path)
        for path in SCRIPTS:
            if path not in [str(getattr(script, "path", script)) for script in config.extra_javascript]:
                config.extra_javascript.append(path)  # MkDocs takes a plain path as well as a script value

    def _generated_pages(self) -> dict[str, str]:
        """The pages this plugin writes, by path, with their titles: the plots page only for a book that draws plots."""
        pages = {self.config.machines_page: "Results by machine"}
        if self.book_config.plots:
            pages[self.config.plots_page] = "Plots"
        pages[self.config.legend_page] = "Reading the marks"
        return pages

    def _add_to_nav(self, config: MkDocsConfig) -> None:
        """A generated page the book's nav does not list is added at its end, so no page of the site
        is reachable only by its address (a nav that MkDocs makes itself lists them already)."""
        if not config.nav:
            return
        listed = {src for src, _ in _nav_pages(config.nav)}
        for src, title in self._generated_pages().items():
            if src not in listed and not self._own(src):
                log.info(f"{src} (generated) is not in the nav; it is added at its end as {title!r}")
                config.nav.append({title: src})

    def _included(self, path: str) -> str | None:
        """The text of a file an include names, found where pymdownx.snippets looks (its base_path)."""
        for folder in self._include_bases:
            candidate = folder / path
            if candidate.is_file():
                return candidate.read_text(encoding="utf-8")
        return None

    def _read_results(self) -> None:
        """Every machine's results file, committed and (unless the build is pointed at a folder) this clone's own."""
        read = site_book.read_results(
            self.book_config, self._results_dir(), str(self.config.results_dir or "results"), self._problem, log.info
        )
        self.results, self.local, self.results_read = read.files, read.local, read.read

    def _results_dir(self) -> Path | None:
        """The results folder mkdocs.yml points the build at (`results_dir`); None for the book's own."""
        return (self.root / self.config.results_dir).resolve() if self.config.results_dir else None

    def _problem(self, problem: Problem) -> None:
        self.problems.append(problem)
        if problem.where not in self.said_elsewhere:
            log.warning(str(problem))

    @contextlib.contextmanager
    def rendering_again(
        self,
        records: ResultsFile | None,
        records_path: Path,
        pages: Mapping[Path, Page],
        load_errors: Sequence[Problem],
        said: frozenset[str] = frozenset(),
    ) -> Iterator[None]:
        """Within, pages of a build kept warm (`verified-book serve`) are rendered again: with `records` as the
        records of the results file `records_path` now, the book's `pages` (by path) as the caller read them and
        the claims' `load_errors` as they were last loaded. The problems at `said` (file:line) are the caller's
        to say: they are not logged; and only this render's problems are kept."""
        self.problems, self.said_elsewhere = [], said
        if records is not None:
            shown = self.book_config.shown(records_path)
            names = [name for name, where in self.local.items() if where == shown]
            if not names and records_path.parent == self.book_config.results and records_path.stem in self.results:
                names = [records_path.stem]  # a book with no local results folder: its runs write the committed one
            for name in names:
                self.results[name] = records
        self._verdicts = {}  # the records are new: each is judged afresh
        self.context.load_errors = load_errors
        self._pages.update(pages)
        try:
            yield
        finally:
            self.said_elsewhere = frozenset()

    def on_env(self, env: jinja2.Environment, *, config: MkDocsConfig, files: Files) -> jinja2.Environment:
        """Keep the theme's compiled templates between builds, in `.cache/jinja/` at the book's root.

        Compiling Material's templates is a fixed second or so of every build; jinja's own
        bytecode cache checks each entry against its template's source before using it.
        """
        folder = self.root / ".cache" / "jinja"
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            return env  # a read-only checkout builds without the cache
        env.bytecode_cache = jinja2.FileSystemBytecodeCache(str(folder))
        return env

    def on_files(self, files: Files, config: MkDocsConfig) -> Files:
        try:
            pages = read_or_raise(book_pages(self.docs), self.root)
            self.book = Book(self.root, pages, read_allowlist(self.book_config.allowlist))
        except AllowListError as e:
            self._problem(Problem(str(self.book_config.allowlist), str(e)))
            self.book = Book(self.root, [], [])
        self._pages = {(self.root / page.file).resolve(): page for page in self.book.pages}
        for path in (*STYLESHEETS, *SCRIPTS, *self._generated_pages()):
            # what `verified-book pages` wrote for a generator that runs no plugin: this build makes its own
            written = files.get_file_from_path(path)
            if written is not None and written.abs_src_path and generated(Path(written.abs_src_path)):
                files.remove(written)
        for path in (*STYLESHEETS, *SCRIPTS):
            if files.get_file_from_path(path) is None:
                files.append(
                    File(
                        path,
                        src_dir=str(ASSETS.parent),
                        dest_dir=config.site_dir,
                        use_directory_urls=config.use_directory_urls,
                    )
                )
        for page_name in self._generated_pages():
            if files.get_file_from_path(page_name) is not None:
                self._problem(
                    Problem(
                        page_name,
                        "the claims plugin generates this page; the book has a file "
                        "of the same name, which is kept instead",
                    )
                )
                continue
            files.append(File.generated(config, page_name, content=f"# {page_name}\n"))
        plots_file = files.get_file_from_path(self.config.plots_page)
        if (plots_file is None or not plots_file.generated_by) and self._drawing is not None:
            self._drawing.cancel()  # the page is the book's own after all: nothing to draw
            self._drawing = None
        self._legend_file = files.get_file_from_path(self.config.legend_page)
        if self.config.stand_ins:
            missing = [
                (src, title)
                for src, title in _nav_pages(config.nav or [])
                if src.endswith(".md") and files.get_file_from_path(src) is None
            ]
            anchors = _anchors_into({src for src, _ in missing}, files)
            for src, title in missing:
                log.info(f"{src} is in the nav but not written yet; a stand-in page takes its place")
                files.append(
                    File.generated(
                        config, src, content=site_book.stand_in(title or posixpath.basename(src), anchors.get(src, []))
                    )
                )
        return files

    def on_page_markdown(self, markdown: str, page: MkPage, config: MkDocsConfig, files: Files) -> str:
        with verdicts_mod.judged_once(self._verdicts):  # the machines page judges the records as the pages do
            return self._page_markdown(markdown, page, files)

    def _page_markdown(self, markdown: str, page: MkPage, files: Files) -> str:
        src = page.file.src_uri
        if page.file.generated_by:  # the book's own file of a generated page's name is kept, and rendered as any page
            if src == self.config.machines_page:
                return self._machines(page, files)
            if src == self.config.plots_page:
                return self._plots()
            if src == self.config.legend_page:
                return self._legend(page, files)
            return markdown
        if not page.file.abs_src_path:
            return markdown
        machines = files.get_file_from_path(self.config.machines_page)
        rows = render.PanelRows(f"{self._nonce}-rows", machines.url_relative_to(page.file) if machines else None)
        rendered = site_book.render_page(
            markdown, Path(page.file.abs_src_path), self.root, self._pages, self.context, self._verdicts, rows
        )
        for problem in rendered.problems:
            self._problem(problem)
        self.figures += len(rendered.views)
        for binding in rendered.missing:
            what = f"figure {binding.text} ({binding.claim_id}) is verified on no machine yet"
            self.unverified.append(f"{binding.where}: {what}")
            if self.config.on_missing == "fail":
                self._problem(Problem(binding.where, f"{what} (on_missing: fail)"))
        self.rendered[src] = rendered
        return rendered.markdown

    def on_page_content(self, html: str, page: MkPage, config: MkDocsConfig, files: Files) -> str:
        return self._set_aside_panels(transform.separate_tab_labels(self._filled(html, page)), page)

    def on_post_page(self, output: str, page: MkPage, config: MkDocsConfig) -> str:
        return self._legend_link(self._put_back_panels(output, page), page)

    def _legend_link(self, output: str, page: MkPage) -> str:
        """Every page but the legend links it, above its content (in Material's layout)."""
        legend = self._legend_file
        if legend is None or page.file.src_uri == legend.src_uri or _MATERIAL_CONTENT not in output:
            return output
        link = LEGEND_LINK.format(href=legend.url_relative_to(page.file)).rstrip("\n")
        return output.replace(_MATERIAL_CONTENT, f"{_MATERIAL_CONTENT}\n    {link}", 1)

    def _set_aside_panels(self, html: str, page: MkPage) -> str:
        """The page's content with what the search leaves out (`_SET_ASIDE`) replaced by a short comment each,
        until `on_post_page`. The search plugin parses every page's content, tag by tag, and the panels are most
        of a chapter's tags: set aside, a build parses a fraction of them, and the index holds the book's prose.
        Nothing else reads the content in between."""
        panels: list[str] = []

        def aside(match: re.Match[str]) -> str:
            panels.append(match.group(0))
            return f"<!--{self._nonce}:{len(panels) - 1}-->"

        html = _SET_ASIDE.sub(aside, html)
        if panels:
            self._panels[page.file.src_uri] = panels
        return html

    def _put_back_panels(self, output: str, page: MkPage) -> str:
        panels = self._panels.pop(page.file.src_uri, None)
        if not panels:
            return output
        back = re.compile(rf"<!--{self._nonce}:(\d+)-->")
        return back.sub(lambda m: panels[int(m.group(1))], output)

    def _filled(self, html: str, page: MkPage) -> str:
        src = page.file.src_uri
        if src in self.generated:
            html = render.fill_blocks(html, self.generated[src].blocks)
            if src == self.config.machines_page and self._matrix_rows is not None:
                html = site_book.with_matrix_rows(html, self.site_dir, page.file.dest_uri, self._matrix_rows)
                self._matrix_rows = None  # written: not kept to the build's end
            return html
        rendered = self.rendered.get(src)
        if rendered is None:
            return html
        html, problems = transform.fill(html, rendered, rendered.file)
        for problem in problems:
            self._problem(problem)
        if rendered.rows is not None and rendered.rows.rows:  # the other machines' rows, in a file beside the page
            url = site_book.write_panel_rows(self.site_dir, page.file.dest_uri, rendered.rows.rows)
            html, rendered.rows.rows = html.replace(rendered.rows.url, url), {}  # written: not kept to the build's end
        if rendered.titles:
            page.title = transform.plain_title(page.title or "", rendered)
            for item in _toc_items(page.toc):
                item.title = transform.plain_title(item.title, rendered)
                item.id = transform.plain_anchor(item.id, rendered)
        return html

    def _machines(self, page: MkPage, files: Files) -> str:
        chapters: dict[str, site_machines.Chapter] = {}
        for book_page in self.book.pages:
            path = self.root / book_page.file
            if not path.is_relative_to(self.docs):
                continue
            file = files.get_file_from_path(path.relative_to(self.docs).as_posix())
            if file is None or not file.page:
                continue
            title = _title_of(path) or file.src_uri
            chapters[book_page.file] = site_machines.Chapter(book_page.file, title, file.url_relative_to(page.file))
        plots = files.get_file_from_path(self.config.plots_page)
        sources = {c.id: f"{c.defined_at}" for c in REGISTRY}
        self._matrix_rows = site_machines.MatrixRows(f"{self._nonce}-matrix") if self.matrix_in_files else None
        generated = site_machines.render_machines(
            self.results,
            self.book,
            REGISTRY.ids(),
            chapters,
            sources,
            self.context.repo_url,
            posixpath.relpath(plots.src_uri, posixpath.dirname(page.file.src_uri) or ".") if plots else None,
            self.quiet,
            self.config.report_within_days,
            self.local,
            self._matrix_rows,
        )
        self.generated[page.file.src_uri] = generated
        return generated.markdown

    def _plots_function(self) -> plots_process.Draw | None:
        """The function `plots` in book.toml names (`module:function`), which draws the plots page."""
        where = self.book_config.plots
        if not where:
            return None
        try:
            return plots_process.function(where)
        except (ImportError, AttributeError) as e:
            raise PluginError(
                f"{self.book_config.root / 'book.toml'}: plots = {where!r} does not name a function: {e}"
            ) from None

    def _start_plots(self) -> None:
        """Start drawing the charts in a process of their own, where a second core is free (see
        `verified_book.site.plots_process`), before the results are read: the drawing takes longer than
        reading them, loading the topics and rendering the chapters, so it is ready when the build reaches its page."""
        where = self.book_config.plots
        if where and usable_cpus() > 1:
            self._drawing = plots_process.Drawing(where, self.root, results=None, reads_from=self._results_dir())

    def _plots_page(self) -> render.GeneratedPage:
        """The plots page: the drawing `_start_plots` began, else drawn here."""
        drawing, self._drawing = self._drawing, None
        if drawing is not None:
            return drawing.page()
        draw = self._plots_function()
        if draw is None:
            return render.GeneratedPage("# Plots\n\nThis book draws no charts.\n")
        return plots_process.drawn(draw, self.results, self.root)

    def _legend(self, page: MkPage, files: Files) -> str:
        machines = files.get_file_from_path(self.config.machines_page)
        # the legend's table is HTML, which MkDocs does not rewrite: the link is the built page's URL, not its source's
        href = machines.url_relative_to(page.file) if machines else None
        token = "VBLEGENDTABLEZ"
        self.generated[page.file.src_uri] = render.GeneratedPage("", {token: render.render_legend(href)})
        return (
            "# Reading the marks\n\n"
            "Every number the book prints is a figure bound to a claim that computes it, and every figure "
            "carries a mark: its status across the machines that ran the book's suite. Each status has its "
            "own shape, so the marks read without colour.\n\n"
            "**A figure opens a panel** with what every machine computed for it, on which backend, when, and "
            "where the claim's code lives: hover it, tap it, or reach it with Tab (Enter opens and closes the "
            "panel, Escape closes it). A screen reader announces the status after the figure and reads the "
            "panel as its description.\n\n"
            f"{token}\n\n"
            f"A figure shows the first of {', '.join(DISPLAY_ORDER[:-1])} that any "
            "machine found; the panel lists each machine's own status, and a backend that skipped the claim "
            "is named there with the reason.\n\n"
            "**What is counted where.** Every surface that counts the book's figures counts each printed figure "
            "once, so its parts add up to the figures bound: a run's last line (`figures (...)`) for the "
            "figures it selected on one machine, the Machines page for each machine's records, and these marks "
            "for every machine together. A run's summary table counts checks instead, one per claim and "
            "backend (a figure of a library's answer is checked on every backend present), and `contribute` "
            "counts the records it merges in the same unit.\n"
        )

    def _plots(self) -> str:
        self.generated[self.config.plots_page] = self._plots_page()
        return self.generated[self.config.plots_page].markdown

    def _give_back(self) -> None:
        drawing, self._drawing = getattr(self, "_drawing", None), None
        if drawing is not None:
            drawing.cancel()
        opened: contextlib.ExitStack | None = getattr(self, "_opened", None)
        self._opened = contextlib.ExitStack()
        if opened is not None:  # the book that was current before the build (a test's, or none) is again
            opened.close()

    def on_build_error(self, error: Exception) -> None:
        self._give_back()

    def on_post_build(self, config: MkDocsConfig) -> None:
        self._give_back()
        log.info(
            f"{self.figures} figures rendered from {len(self.results)} results file(s); "
            f"{len(self.unverified)} not yet verified on any machine"
        )
        if self.unverified:
            log.debug("not yet verified:\n  " + "\n  ".join(self.unverified))
        unsaid = [p for p in self.problems if p.where not in self.said_elsewhere]
        if unsaid:
            log.warning(
                f"{len(unsaid)} problem(s) with the book's figures or results:\n  " + "\n  ".join(map(str, unsaid))
            )
        if self.config.on_missing == "fail" and self.unverified:
            raise PluginError(
                f"{len(self.unverified)} figure(s) verified on no machine, with on_missing: fail; see the list above"
            )


def _nav_pages(nav: list[Any]) -> list[tuple[str, str | None]]:
    """Every Markdown page the nav names, with its title where the nav gives one."""
    out: list[tuple[str, str | None]] = []
    for item in nav:
        if isinstance(item, str):
            out.append((item, None))
        elif isinstance(item, dict):
            for title, value in item.items():
                if isinstance(value, str):
                    out.append((value, title))
                elif isinstance(value, list):
                    out += _nav_pages(value)
    return out


#: what the site's search leaves out of its index, set aside while it parses each page: every
#: figure's panel (it holds no other panel) with the mark and the screen reader's words before it
#: (no text, and excluded text), and the machines page's claims × machines matrix (a status in
#: each cell, found with the page's own filters; the table holds no other table)
_SET_ASIDE = re.compile(
    rf"(?:{re.escape(render.FIGURE_MARK + render.SCREEN_READER)}[^<]*</span>)?<vb-panel\b.*?</vb-panel>"
    rf"|{re.escape(site_machines.MATRIX_TABLE)}.*?</table>",
    re.DOTALL,
)
_LINK = re.compile(r"\]\((?P<path>[^)\s#]+\.md)#(?P<anchor>[\w-]+)\)")


def _anchors_into(targets: set[str], files: Files) -> dict[str, list[str]]:
    """The anchors written pages already link to in pages not written yet."""
    out: dict[str, list[str]] = {}
    for file in files.documentation_pages():
        if not file.abs_src_path:
            continue
        text = Path(file.abs_src_path).read_text(encoding="utf-8")
        for match in _LINK.finditer(text):
            target = posixpath.normpath(posixpath.join(posixpath.dirname(file.src_uri), match.group("path")))
            if target in targets and match.group("anchor") not in out.setdefault(target, []):
                out[target].append(match.group("anchor"))
    return out


def _toc_items(toc: Any) -> list[Any]:
    out = []
    for item in toc or []:
        out.append(item)
        out += _toc_items(item.children)
    return out


def _title_of(path: Path) -> str | None:
    """A page's first level-one heading in prose, as the lexer reads the page (a `# ` line in a code block is code)."""
    try:
        document = lex(path.read_text(encoding="utf-8").splitlines())
    except OSError:
        return None
    return next((line[2:].strip() for prose in document.prose() for line in prose.lines if line.startswith("# ")), None)


def generated_pages(config_file: Path) -> tuple[site_book.Written, ClaimsPlugin]:
    """The Machines, Plots and legend pages this plugin generates for `config_file`'s book, made as a build makes
    them, for `verified-book pages` to write where a generator that runs no plugin reads them."""
    from mkdocs.config import load_config
    from mkdocs.structure.files import get_files

    config = load_config(str(config_file))
    config = config.plugins.on_config(config)
    plugin = next((p for p in config.plugins.values() if isinstance(p, ClaimsPlugin)), None)
    if plugin is None:
        raise PluginError(f"{config_file}: plugins lists no verified-book; the pages are the plugin's to generate")
    plugin.matrix_in_files = False  # its pages are copied as they are written, without data files beside them
    try:
        files = plugin.on_files(get_files(config), config)
        pages: dict[str, render.GeneratedPage] = {}
        for src in plugin._generated_pages():
            file = files.get_file_from_path(src)
            if file is None or not file.generated_by:
                continue  # the book's own page of that name
            markdown = plugin._page_markdown("", MkPage(None, file, config), files)
            pages[src] = render.GeneratedPage(markdown, plugin.generated[src].blocks)
    finally:
        plugin._give_back()
    settings = {
        "results_dir": str(plugin.config.results_dir or ""),
        "today": plugin.today.isoformat(),
        "report_within_days": plugin.config.report_within_days,
        "legend_page": plugin.config.legend_page,
    }
    stamp = site_book.stamp(plugin.results_read, [plugin.root / page.file for page in plugin.book.pages])
    return site_book.Written(settings, stamp, pages), plugin
