"""The MkDocs internals `serve` reaches through `integration/mkdocs_adapter.py`: pinned to the versions read."""

from __future__ import annotations

import threading
from typing import Any

import mkdocs
import pytest
from mkdocs.commands import build

from verified_book.integration import mkdocs_adapter
from verified_book.integration.mkdocs_adapter import WRITTEN_FOR, MkDocsChanged, internals


def test_the_mkdocs_installed_is_one_the_adapter_was_written_against() -> None:
    assert mkdocs.__version__ in WRITTEN_FOR, (
        f"mkdocs {mkdocs.__version__} is installed; verified_book/integration/mkdocs_adapter.py reaches private "
        f"names of mkdocs {', '.join(WRITTEN_FOR)} (mkdocs/commands/build.py: _populate_page, _build_page; "
        "mkdocs/livereload/__init__.py: LiveReloadServer._rebuild_cond, _want_rebuild). Read them in this "
        "version, adapt `internals()` where they changed, and add the version to WRITTEN_FOR"
    )


def test_waking_the_server_asks_its_builder_to_run_as_a_saved_file_does() -> None:
    from mkdocs.livereload import LiveReloadServer

    server = LiveReloadServer(builder=lambda: None, host="127.0.0.1", port=0, root=".")
    woken = threading.Event()

    def wait() -> None:
        with server._rebuild_cond:
            if server._rebuild_cond.wait_for(lambda: server._want_rebuild, timeout=10):
                woken.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    internals().wake(server)
    waiter.join(timeout=10)
    assert woken.is_set()
    server.server_close()


def test_a_mkdocs_without_the_page_render_is_said_with_the_versions_it_was_written_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(build, "_build_page")
    with pytest.raises(MkDocsChanged) as raised:
        internals()
    assert str(raised.value) == (
        f"mkdocs {mkdocs.__version__} has no mkdocs.commands.build._build_page; `verified-book serve` renders a "
        f"saved page through them and was written against mkdocs {', '.join(mkdocs_adapter.WRITTEN_FOR)}: install "
        "one of those, or use `verified-book site`, which builds through MkDocs' public API"
    )


def test_a_server_without_the_rebuild_flag_is_named_not_met_with_an_attribute_error() -> None:
    class Elsewhere:
        pass

    server: Any = Elsewhere()
    with pytest.raises(MkDocsChanged, match="its LiveReloadServer has no _rebuild_cond or _want_rebuild"):
        internals().wake(server)
