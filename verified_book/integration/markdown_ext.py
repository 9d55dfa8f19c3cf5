"""The book's marks for a generator that runs Python-Markdown but not the engine's MkDocs plugin (Zensical),
listed under `markdown_extensions`; with the plugin (MkDocs 1.6, ProperDocs 1.6) it does nothing.

The MkDocs plugin (`verified_book.integration.mkdocs_plugin`) renders the marks and generates the Machines, Plots
and legend pages. Zensical reads the same `mkdocs.yml` but runs none of its plugins, and ignores them
without a word: the book would be published with every figure a raw `claim:` link. Markdown extensions
are what it does load, so this one does the plugin's page step itself: it opens the book (its
`book.toml` in the folder of the generator's configuration, or the current one), reads the results
files the generated pages were written from, and hands each page's Markdown to
`verified_book.site.build.render_page`, as the plugin does; a postprocessor puts each figure's HTML back.
The generated pages are written before the build by `verified-book pages`, with the marks' stylesheet
and script; where they are missing, older than the results or the book's pages, or their stylesheet or
script is not listed, the build fails with a message saying what to run, never succeeds without marks.
"""

from __future__ import annotations

import posixpath
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markdown import Extension, Markdown
from markdown.postprocessors import Postprocessor
from markdown.preprocessors import Preprocessor
from markdown.treeprocessors import Treeprocessor

from verified_book.errors import BookError, Problem

NAME = "verified_book.integration.markdown_ext"
#: what else builds the book, for the messages
SUPPORTED = (
    "MkDocs 1.6 with Material for MkDocs (`mkdocs build --strict`) or ProperDocs 1.6 "
    "(`properdocs build --strict -f mkdocs.yml`), each with the `verified-book` plugin listed under `plugins`"
)
#: the link to the legend at the top of every other page, as the plugin puts it
LEGEND_LINK = (Path(__file__).resolve().parents[1] / "assets" / "partials" / "legend-link.html").read_text(
    encoding="utf-8"
)


class NoMarksError(BookError, RuntimeError):
    """A site generator would build the book without its marks, or without its generated pages."""


def generator() -> str:
    """The site generator this process runs, by its name, as far as its loaded modules tell."""
    for module, name in (("zensical", "Zensical"), ("properdocs", "ProperDocs"), ("mkdocs", "MkDocs")):
        if module in sys.modules:
            return name
    return "this site generator"


def _refuse(root: Path | None, what: str) -> NoMarksError:
    where = f" in {root}" if root is not None else ""
    return NoMarksError(
        f"verified-book: {generator()} runs no MkDocs plugin, so this extension renders the book's marks, and "
        f"cannot: {what}. Run `verified-book pages`{where} (the engine installed with its `site` extra) before "
        f"the build, or build with {SUPPORTED}."
    )


@dataclass
class _Build:
    """The book as a build without the plugin renders it: opened once, while its inputs stay as they are."""

    key: tuple[Any, ...]
    root: Path
    docs: Path
    written: Any  # site_book.Written
    pages: dict[Path, Any]  # the book's pages by their resolved path
    texts: dict[str, str]  # each page's text by its path in the pages folder, to find a page by its Markdown
    context: Any  # transform.Context
    verdicts: dict[Any, Any]
    problems: list[Any]
    settings: dict[str, Any]  # the generator's configuration, as far as it is read here
    book: Any  # the OpenBook, current while a page of it renders


_LOCK = threading.Lock()
_BUILD: _Build | None = None


def _settings() -> tuple[Path, dict[str, Any]]:
    """The book's root and the generator's configuration: Zensical's, where it is the one running."""
    if "zensical" in sys.modules:
        from zensical.config import get_config  # noqa: PLC0415 (only inside Zensical)

        config = get_config()
        return Path(config["root_dir"]).resolve(), config
    from verified_book.engine.config import find_root  # noqa: PLC0415

    root = find_root(Path.cwd())
    if root is None:
        raise _refuse(None, f"no book.toml in {Path.cwd()} or a folder above it")
    return root, {}


def _key(root: Path, docs: Path) -> tuple[Any, ...]:
    """What the build was opened from, by modification time: a change reopens it."""
    from verified_book.site import build as site_book  # noqa: PLC0415

    watched = [root / site_book.PAGES_FILE, *sorted(docs.rglob("*.md")), *sorted((root / "results").glob("*.json"))]
    return (root, *((str(p), p.stat().st_mtime_ns) for p in watched if p.is_file()))


def _build() -> _Build:
    global _BUILD  # noqa: PLW0603
    root, settings = _settings()
    docs = (root / settings.get("docs_dir", "docs")).resolve() if settings else root
    with _LOCK:
        key = _key(root, docs)
        if _BUILD is None or _BUILD.key != key:
            _BUILD = _open(root, docs, settings, key)
        return _BUILD


def _open(root: Path, docs: Path, settings: dict[str, Any], key: tuple[Any, ...]) -> _Build:
    from verified_book.book.bindings import AllowListError, Book  # noqa: PLC0415
    from verified_book.engine.config import ConfigError, open_book, read_config  # noqa: PLC0415
    from verified_book.engine.snippet_figures import snippet_hashes  # noqa: PLC0415
    from verified_book.site import build as site_book
    from verified_book.site import machines as site_machines
    from verified_book.site import transform  # noqa: PLC0415 (the engine, loaded at the first page)

    try:
        book_config = read_config(root)
    except ConfigError as e:
        raise _refuse(root, str(e)) from None
    if not settings:
        docs = book_config.pages
    pages_file = root / site_book.PAGES_FILE
    if not pages_file.is_file():
        raise _refuse(
            root,
            f"{pages_file} is missing: the Machines, Plots and Reading the marks pages and the marks' "
            "stylesheet and script are not written",
        )
    written = site_book.Written.load(pages_file.read_text(encoding="utf-8"))
    problems: list[Problem] = []
    results_dir = written.settings["results_dir"]
    results = site_book.read_results(
        book_config,
        (root / results_dir).resolve() if results_dir else None,
        results_dir or "results",
        problems.append,
        lambda _: None,
    )
    try:
        book = Book.read(docs, root, book_config.allowlist)
    except AllowListError as e:
        problems.append(Problem(str(book_config.allowlist), str(e)))
        book = Book(root, [], [])
    now = site_book.stamp(results.read, [root / page.file for page in book.pages])
    if now != written.stamp:
        raise _refuse(
            root,
            f"the generated pages in {docs} are older than the results or the book's pages they "
            f"show (written from {written.stamp}, these are {now})",
        )
    for src, page in written.pages.items():
        path = docs / src
        if not path.is_file() or site_book.without_mark(path.read_text(encoding="utf-8")) != page.markdown:
            raise _refuse(root, f"{path} is missing or is not the page {site_book.PAGES_COMMAND} wrote")
    engine = site_book.engine_assets()
    listed = {
        "css": [str(c) for c in settings.get("extra_css", [])],
        "js": [str(j.get("path") if isinstance(j, dict) else j) for j in settings.get("extra_javascript", [])],
    }
    for src, origin in engine.items():
        path = docs / src
        if (
            written.assets.get(src) != site_book.digest(origin.read_text(encoding="utf-8"))
            or not path.is_file()
            or site_book.digest(site_book.without_mark(path.read_text(encoding="utf-8"))) != written.assets[src]
        ):
            raise _refuse(root, f"{path} is missing or is not the engine's {src}")
        kind = "css" if src.endswith(".css") else "js"
        if settings and src not in listed[kind]:
            raise _refuse(
                root,
                f"{settings.get('config_file_path') or 'mkdocs.yml'}: "
                f"extra_{'css' if kind == 'css' else 'javascript'} does not list {src}, which every "
                f"page needs for its marks; add it there (the MkDocs plugin keeps it where it is listed)",
            )
    opened = open_book(book_config)
    problems.extend(opened.load_errors)
    quiet = site_machines.quiet_machines(
        results.files, site_machines.today(written.settings["today"]), written.settings["report_within_days"]
    )
    bases = settings.get("mdx_configs", {}).get("pymdownx.snippets", {}).get("base_path", ["."])
    folders = [root / folder for folder in ([bases] if isinstance(bases, str) else bases)]

    def included(path: str) -> str | None:
        for folder in folders:
            if (folder / path).is_file():
                return (folder / path).read_text(encoding="utf-8")
        return None

    context = transform.Context(
        results.files,
        opened.registry.get,
        settings.get("repo_url"),
        opened.registry.near,
        quiet,
        included,
        snippet_hash=snippet_hashes(book_config.snippets),
    )
    pages = {(root / page.file).resolve(): page for page in book.pages}
    texts = {
        path.relative_to(docs).as_posix(): path.read_text(encoding="utf-8")
        for path in pages
        if path.is_relative_to(docs)
    }
    build = _Build(key, root, docs, written, pages, texts, context, {}, problems, settings, opened)
    for problem in problems:
        _report(build, problem)
    return build


def _report(build: _Build, problem: Any) -> None:
    print(f"WARNING -  verified-book: {problem}", file=sys.stderr)
    if build.settings.get("strict"):
        raise NoMarksError(f"verified-book: {problem} (a strict build stops at a problem with the book's figures)")


class BookMarks(Extension):
    """Renders the book's marks where the engine's MkDocs plugin does not; where it does, stands aside."""

    def __init__(self, **kwargs: Any) -> None:
        self.config = {
            "rendered_by": ["", "set by the engine's MkDocs plugin when it renders the marks; not for the book"]
        }
        super().__init__(**kwargs)

    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 (Python-Markdown's name)
        # the book is opened at the first page's conversion, not here: MkDocs loads the extensions once to
        # check its configuration, before its plugins run
        state = _Page()
        md.preprocessors.register(_Marks(md, self, state), "verified_book_marks", 1000)
        md.treeprocessors.register(_Converted(md, state), "verified_book_converted", -1000)
        md.postprocessors.register(_Fill(md, state), "verified_book_fill", -1000)


class _Page:
    """One conversion's figures, from the preprocessor to the postprocessor."""

    def __init__(self) -> None:
        self.build: _Build | None = None
        self.rendered: Any = None  # transform.RenderedPage of a book's page
        self.blocks: dict[str, str] | None = None  # a generated page's
        self.legend_href: str | None = None
        self.converted = False  # the tree is done: what the postprocessors see next is the page, not a heading


class _Converted(Treeprocessor):
    """Marks the end of the tree's processing: before it, the table of contents runs the postprocessors
    on each heading's text, which keeps its figures' printed text (as the plugin's titles do)."""

    def __init__(self, md: Markdown, state: _Page) -> None:
        super().__init__(md)
        self.state = state

    def run(self, root: Any) -> None:
        self.state.converted = True


class _Marks(Preprocessor):
    def __init__(self, md: Markdown, extension: BookMarks, state: _Page) -> None:
        super().__init__(md)
        self.extension = extension
        self.state = state

    def run(self, lines: list[str]) -> list[str]:
        from verified_book.site import build as site_book  # noqa: PLC0415

        self.state.__init__()  # type: ignore[misc]
        if self.extension.getConfig("rendered_by") == "verified-book":
            return lines
        build = self.state.build = _build()
        markdown = "\n".join(lines)
        src, url = self._page(build, markdown)
        legend = build.written.settings["legend_page"]
        if url is not None and src != legend:
            self.state.legend_href = _href(url, legend, bool(build.settings.get("use_directory_urls")))
        if src in build.written.pages:
            self.state.blocks = build.written.pages[src].blocks
            return lines
        if src is None or src not in build.texts:
            return lines  # not one of the book's pages
        with build.book.opened():
            rendered = site_book.render_page(
                markdown, build.docs / src, build.root, build.pages, build.context, build.verdicts
            )
        for problem in rendered.problems:
            _report(build, problem)
        self.state.rendered = rendered
        return rendered.markdown.split("\n")

    def _page(self, build: _Build, markdown: str) -> tuple[str | None, str | None]:
        """The page's path in the pages folder and its URL: as Zensical tells them, else the page whose text
        ends with this Markdown (front matter taken off)."""
        if "zensical" in sys.modules:
            from zensical.extensions.context import ContextPreprocessor  # noqa: PLC0415

            context = ContextPreprocessor.from_markdown(self.md)
            if context is not None:
                return context.page.path, context.page.url
        for src, page in build.written.pages.items():
            if page.markdown.strip() and page.markdown.strip() == markdown.strip():
                return src, None
        found = [
            src for src, text in build.texts.items() if markdown.strip() and text.rstrip().endswith(markdown.rstrip())
        ]
        return (found[0] if len(found) == 1 else None), None


def _href(url: str, legend_src: str, directory_urls: bool) -> str:
    """The legend page's address from the page at `url`."""
    target = legend_src[: -len(".md")] + ("/" if directory_urls else ".html")
    base = url if url.endswith("/") else posixpath.dirname(url)
    relative = posixpath.relpath(target, base or ".")
    return relative + "/" if target.endswith("/") else relative


class _Fill(Postprocessor):
    def __init__(self, md: Markdown, state: _Page) -> None:
        super().__init__(md)
        self.state = state

    def run(self, text: str) -> str:
        from verified_book.site import render, transform  # noqa: PLC0415

        state, build = self.state, self.state.build
        if build is None or not state.converted:
            return text
        if state.blocks is not None:
            text = render.fill_blocks(text, state.blocks)
        elif state.rendered is not None:
            rendered = state.rendered
            text, problems = transform.fill(text, rendered, rendered.file)
            for problem in problems:
                _report(build, problem)
            text = transform.separate_tab_labels(text)
            if rendered.titles:
                _plain_toc(getattr(self.md, "toc_tokens", []), rendered)
        if state.legend_href is not None:
            text = LEGEND_LINK.format(href=state.legend_href).rstrip("\n") + "\n" + text
        return text


def _plain_toc(items: list[dict[str, Any]], rendered: Any) -> None:
    """The table of contents with figure tokens back as their printed text, as the plugin leaves it."""
    from verified_book.site import transform  # noqa: PLC0415

    for item in items:
        item["name"] = transform.plain_title(item["name"], rendered)
        item["html"] = transform.plain_title(item["html"], rendered)
        item["id"] = transform.plain_anchor(item["id"], rendered)
        _plain_toc(item.get("children", []), rendered)


def makeExtension(**kwargs: Any) -> BookMarks:  # noqa: N802 (Python-Markdown's entry point)
    return BookMarks(**kwargs)
