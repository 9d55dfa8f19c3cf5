"""The guard a generator without the engine's MkDocs plugin cannot pass: listed under `markdown_extensions`.

The marks are rendered by the engine's MkDocs plugin (`verified_book.mkdocs_plugin`), which MkDocs 1.6
and ProperDocs 1.6 run. A generator that reads the same `mkdocs.yml` but not its plugins (Zensical
ignores every plugin it does not know, and builds with "No issues found") would publish the book with
every figure a raw `claim:` link and no Machines, Plots or legend page. Markdown extensions are what such
a generator does load, so this one, listed in the book's `mkdocs.yml`, stops its build: the plugin tells
it, through its configuration, that the plugin is the one rendering; without that it raises, naming the
generator and what to run instead.
"""
from __future__ import annotations

import sys
from typing import Any

from markdown import Extension, Markdown
from markdown.preprocessors import Preprocessor

from verified_book.errors import BookError

NAME = "verified_book.markdown_ext"
#: what to run instead, for the message
SUPPORTED = ("MkDocs 1.6 with Material for MkDocs (`mkdocs build --strict`) or ProperDocs 1.6 "
             "(`properdocs build --strict -f mkdocs.yml`), each with the `verified-book` plugin listed under `plugins`")


class NoMarksError(BookError, RuntimeError):
    """A site generator is building the book without the plugin that renders its marks."""


def generator() -> str:
    """The site generator this process runs, by its name, as far as its loaded modules tell."""
    for module, name in (("zensical", "Zensical"), ("properdocs", "ProperDocs"), ("mkdocs", "MkDocs")):
        if module in sys.modules:
            return name
    return "this site generator"


class MarksGuard(Extension):
    """Refuses to render a page unless the engine's MkDocs plugin is rendering the book's marks."""

    def __init__(self, **kwargs: Any) -> None:
        self.config = {"rendered_by": ["", "set by the engine's MkDocs plugin when it renders the marks; not for the book"]}
        super().__init__(**kwargs)

    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 (Python-Markdown's name)
        # at the first page's conversion, not here: MkDocs loads the extensions once to check its
        # configuration, before its plugins run
        md.preprocessors.register(_Guard(md, self), "verified_book_guard", 1000)


class _Guard(Preprocessor):
    def __init__(self, md: Markdown, extension: MarksGuard) -> None:
        super().__init__(md)
        self.extension = extension

    def run(self, lines: list[str]) -> list[str]:
        if self.extension.getConfig("rendered_by") != "verified-book":
            raise NoMarksError(
                f"verified-book: {generator()} builds this book without the engine's MkDocs plugin, so its site would "
                f"carry no marks (every figure a raw claim: link, no Machines, Plots or legend page). "
                f"Build it with {SUPPORTED}.")
        return lines


def makeExtension(**kwargs: Any) -> MarksGuard:  # noqa: N802 (Python-Markdown's entry point)
    return MarksGuard(**kwargs)
