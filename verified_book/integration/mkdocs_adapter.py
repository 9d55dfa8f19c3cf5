"""What `verified-book serve` needs of MkDocs beyond its public API, reached through one function.

The preview renders a page again without building the whole site, and wakes MkDocs' live-reload
server when the author asks for the measured claims at the terminal. MkDocs offers neither as a
public call: the first is `mkdocs.commands.build._populate_page` and `_build_page`, the second the
server's `_want_rebuild` flag under its `_rebuild_cond`. `internals()` is the only place that names
them; it was written against the MkDocs versions in `WRITTEN_FOR`, which a test pins, and on a
MkDocs that lacks them it fails saying so, not with an AttributeError from deep inside a render.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from verified_book.errors import BookError

#: the MkDocs releases whose private names `internals` was read from (mkdocs/commands/build.py,
#: mkdocs/livereload/__init__.py)
WRITTEN_FOR = ("1.6.1",)


class MkDocsChanged(BookError):
    """The MkDocs installed lacks what the preview reaches past its public API."""


class Internals(NamedTuple):
    """The two things the preview does that MkDocs has no public call for."""

    #: render one page of a built site again and write it: (page, config, files, nav, env)
    render_page: Callable[[Any, Any, Any, Any, Any], None]
    #: ask a live-reload server to run its builder, as a saved file does: (server)
    wake: Callable[[Any], None]


def internals() -> Internals:
    """MkDocs' page render and live-reload wake-up, checked to be there."""
    import mkdocs
    from mkdocs.commands import build
    from mkdocs.livereload import LiveReloadServer

    version = getattr(mkdocs, "__version__", "unknown")
    missing = [
        f"mkdocs.commands.build.{name}" for name in ("_populate_page", "_build_page") if not hasattr(build, name)
    ]
    if missing:
        raise MkDocsChanged(
            f"mkdocs {version} has no {' or '.join(missing)}; `verified-book serve` renders a saved page through "
            f"them and was written against mkdocs {', '.join(WRITTEN_FOR)}: install one of those, or use "
            "`verified-book site`, which builds through MkDocs' public API"
        )
    populate, build_page = build._populate_page, build._build_page

    def render_page(page: Any, config: Any, files: Any, nav: Any, env: Any) -> None:
        doc_files = files.documentation_pages()
        populate(page, config, files)
        build_page(page, config, doc_files, nav, env)

    def wake(server: LiveReloadServer) -> None:
        if not hasattr(server, "_rebuild_cond") or not hasattr(server, "_want_rebuild"):
            raise MkDocsChanged(
                f"mkdocs {version}: its LiveReloadServer has no _rebuild_cond or _want_rebuild, which "
                f"`verified-book serve` sets to measure on request; it was written against mkdocs "
                f"{', '.join(WRITTEN_FOR)}"
            )
        with server._rebuild_cond:
            server._want_rebuild = True
            server._rebuild_cond.notify_all()

    return Internals(render_page, wake)
