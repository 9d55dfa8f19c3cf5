"""`verified-book serve`, the door: the pages a save renders again, the address it listens on, and the
preview itself, started as a process and read from the HTML it serves.

What a save computes again is the warm book's to decide (tests/engine/test_live.py, tests/engine/test_invalidation.py).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
from harness.live_book import EXAMPLE, opened_copy, saving, started
from harness.paths import ROOT

from verified_book.engine.config import read_config
from verified_book.engine.live import Live
from verified_book.integration.serve import Watcher, including


@pytest.fixture
def book(tmp_path: Path) -> Iterator[Path]:
    """A copy of the book `init` writes, opened in this process and given back after."""
    with opened_copy(tmp_path / "minimal") as root:
        yield root


def test_a_saved_snippet_renders_the_pages_that_show_it_and_says_how_to_run_it(book: Path) -> None:
    (book / "pages" / "code.md").write_text('# Its code alone\n\n```python\n--8<-- "pages/snippets/half_sum.py"\n```\n')
    (book / "pages" / "prose.md").write_text("# Its name alone\n\nThe script `pages/snippets/half_sum.py` sums ones.\n")
    engine = started(book)
    snippet = book / "pages" / "snippets" / "half_sum.py"
    saved = saving(engine, snippet)(snippet.read_text() + "# what it adds, in words\n")
    assert saved.what == "pages/snippets/half_sum.py saved" and not saved.recomputed and not saved.rebuild
    shown = saved.pages | including(engine, saved.snippets)
    assert shown == {"pages/index.md", "pages/code.md"}, "the pages that include its code or show its output"
    assert saved.problems == [
        "pages/snippets/half_sum.py: serve does not run snippets; `pytest pages/snippets/half_sum.py` runs it "
        "and checks its output blocks"
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


MARK = re.compile(r'data-claim="([a-z0-9_.]+)" data-status="([a-z ]+)"')


def _woken_within(server: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with server._rebuild_cond:
            if server._want_rebuild:
                server._want_rebuild = False
                return True
        time.sleep(0.01)
    return False


def test_a_save_wakes_the_preview_through_the_systems_events_and_a_read_does_not(tmp_path: Path) -> None:
    """The watcher walks no folder: the system tells it of a save to a watched folder or file, and it wakes the
    server, whose builder then asks the engine what changed. Reading a page wakes nothing."""
    from types import SimpleNamespace

    server = SimpleNamespace(_rebuild_cond=threading.Condition(), _want_rebuild=False, observer=None)
    pages, config = tmp_path / "pages", tmp_path / "mkdocs.yml"
    (pages / "part").mkdir(parents=True)
    (pages / "part" / "a.md").write_text("one\n")
    config.write_text("site_name: one\n")
    watcher = Watcher(server, [pages, config], poll=None)
    try:
        while not watcher.ready():
            time.sleep(0.01)
        (pages / "part" / "a.md").read_text()
        assert not _woken_within(server, 0.5), "a read is no save"
        (pages / "part" / "a.md").write_text("two\n")
        assert _woken_within(server, 5), "a page saved in a folder below a watched one"
        _woken_within(server, 0.3)  # the same save's other events
        config.write_text("site_name: two\n")
        assert _woken_within(server, 5), "a watched file saved"
    finally:
        watcher.stop()


def test_an_address_the_preview_cannot_listen_on_is_said_with_what_to_change() -> None:
    from verified_book.integration.serve import address_problem

    assert address_problem("127.0.0.1", _free_port()) is None
    assert address_problem("127.0.0.1", 70000) == "bind(): port must be 0-65535; choose a port with --port"
    not_here = address_problem("192.0.2.1", _free_port())  # TEST-NET-1 (RFC 5737): no machine's own address
    assert not_here is not None and not_here.endswith("; choose an address of this machine with --host")


def test_an_address_in_use_is_said_at_once_before_anything_is_computed(tmp_path: Path) -> None:
    root = tmp_path / "minimal"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", "results", "site", ".cache"))
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        refused = subprocess.run(
            [sys.executable, "-m", "verified_book.integration.cli", "serve", "--port", str(port)],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    assert refused.returncode == 1, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert refused.stderr == (
        f"verified-book serve: cannot listen on 127.0.0.1:{port}: Address already in use; another server holds it: "
        "choose another port with --port\n"
    )
    assert "computing" not in refused.stdout, "nothing is computed for a preview that cannot be served"
    assert not (root / "results").exists(), "nothing is written"


def test_a_port_taken_while_the_book_is_computed_is_said_as_a_port_in_use(
    book: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from verified_book.integration import serve as serve_mod

    port = _free_port()
    taken = socket.socket()
    start = Live.start

    def start_while_another_takes_the_port(self: Live) -> Any:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        return start(self)

    monkeypatch.setattr(Live, "start", start_while_another_takes_the_port)
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")  # set by serve, undone after the test
    monkeypatch.chdir(book)
    try:
        code = serve_mod.serve(read_config(book), ["--port", str(port)])
    finally:
        taken.close()
    assert code == 1
    assert capsys.readouterr().err.endswith(
        f"verified-book serve: cannot listen on 127.0.0.1:{port}: Address already in use; another server holds it: "
        "choose another port with --port\n"
    )


class _Serving:
    """`verified-book serve` started as a process on a copy of the minimal book, and what it printed so far."""

    def __init__(self, tmp_path: Path, **env: str) -> None:
        self.root = tmp_path / "minimal"
        shutil.copytree(EXAMPLE, self.root, ignore=shutil.ignore_patterns("__pycache__", "results", "site", ".cache"))
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "verified_book.integration.cli", "serve", "--port", str(self.port)],
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1", **env},
        )
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(self.proc.stdout or []), daemon=True).start()

    def wait(self, predicate: Any, what: str, limit: float = 120) -> None:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            if predicate():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{what}; serve said:\n{''.join(self.lines)[-4000:]}")


@pytest.mark.slow
def test_serve_ended_by_a_signal_ends_as_on_ctrl_c_and_removes_its_site(tmp_path: Path) -> None:
    """`kill`, a service manager or a closed terminal ends the preview as Ctrl-C does, through the same ending (the
    last change's records waited for): it exits as it does there, and the folder it built the site in is removed
    (367 MB a preview at 64 times this book's size), where the signal ended the process in the middle."""
    temp = tmp_path / "temp"
    temp.mkdir()
    serving = _Serving(tmp_path, TMPDIR=str(temp))
    try:
        serving.wait(lambda: any("serve: http://" in line for line in serving.lines), "serve never started")
        assert [p.name[: len("verified-book-serve-")] for p in temp.iterdir()] == ["verified-book-serve-"]
        serving.proc.send_signal(signal.SIGTERM)
        assert serving.proc.wait(timeout=60) == 0, "".join(serving.lines)[-4000:]
    finally:
        serving.proc.kill()
    assert list(temp.iterdir()) == []


@pytest.mark.slow
def test_serve_shows_each_saved_change_and_says_what_it_recomputed(tmp_path: Path) -> None:
    serving = _Serving(tmp_path)
    root, port, proc, lines, wait = serving.root, serving.port, serving.proc, serving.lines, serving.wait

    def marks(page: str = "") -> list[tuple[str, str]]:
        try:
            served = urllib.request.urlopen(f"http://127.0.0.1:{port}/{page}", timeout=10)
            return MARK.findall(served.read().decode())
        except OSError:  # not served (yet, or any more): a 404 is an HTTPError, an OSError
            return []

    def said(start: int, pattern: str) -> str | None:
        return next((line for line in lines[start:] if re.search(pattern, line)), None)

    try:
        wait(lambda: said(0, "serve: http://"), "serve never started")
        assert ("half.max", "verified") in marks()
        start = len(lines)
        page = root / "pages" / "index.md"
        page.write_text(page.read_text().replace("[65504](claim:half.max)", "[65505](claim:half.max)"))
        wait(lambda: ("half.max", "stale") in marks(), "the edited figure never showed stale")
        wait(lambda: said(start, r"pages/index.md saved: .*no claim ran"), "no line for the page")
        assert said(start, r"pages/index.md:5: figure 65505 \(half.max\) is stale")

        start = len(lines)
        page.write_text(page.read_text().replace("[65505](claim:half.max)", "[65505](claim:half.maxx)"))
        wait(lambda: said(start, r"pages/index.md saved: .*1 failed"), "no line for the figure of an unknown claim")
        time.sleep(0.5)  # the page's render, which would log its own line for the figure
        named = [line for line in lines[start:] if "half.maxx" in line]
        assert named == [
            "  pages/index.md:5: figure 65505 binds to unknown claim 'half.maxx'; did you mean half.max, half.sum_ms?\n"
        ], named
        page.write_text(page.read_text().replace("[65505](claim:half.maxx)", "[65505](claim:half.max)"))
        wait(lambda: ("half.max", "stale") in marks(), "the figure's claim never came back")

        start = len(lines)
        data = root / "book_claims" / "data" / "formats.toml"
        data.write_text(data.read_text().replace("value = 10", "value = 11"))  # the mantissa: four claims read it
        wait(lambda: ("half.eps", "stale") in marks(), "the data edit never showed")
        line = said(start, r"formats.toml saved")
        assert line is not None and line.rstrip().endswith(
            "4 (claim, backend) recomputed: half.eps, half.finfo_eps, half.mantissa_bits, half.max"
        ), line

        start = len(lines)
        topic = root / "book_claims" / "topics" / "half.py"
        topic.write_text(
            topic.read_text().replace(
                'return int(given("half.sum_count"))\n', 'return int(given("half.sum_count")) + 1\n', 1
            )
        )
        wait(lambda: ("half.sum_count", "stale") in marks(), "the claim module's edit never showed")
        line = said(start, r"half.py saved")
        assert line is not None and line.rstrip().endswith("1 (claim, backend) recomputed: half.sum_count"), line

        start = len(lines)
        second = root / "pages" / "second.md"
        second.write_text("# Second\n\nFP16 tops out at [65504](claim:half.max), below [7](claim:half.nope).\n")
        wait(lambda: ("half.max", "stale") in marks("second.html"), "a new page was never served")
        wait(lambda: said(start, r"pages/second.md saved: 2 figure"), "no line for the new page")
        time.sleep(0.5)
        named = [line for line in lines[start:] if "half.nope" in line]
        assert len(named) == 1, f"the whole build logs nothing serve said: {named}"
        second.unlink()
        wait(lambda: said(start, r"pages/second.md removed: "), "no line for the page removed")
        wait(lambda: marks("second.html") == [], "the removed page is still served")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
