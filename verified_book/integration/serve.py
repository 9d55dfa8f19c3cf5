"""`verified-book serve`: a live preview in one warm process, which recomputes only what a saved file changed.

The door between the author's saves and the engine: MkDocs' live-reload server watches the book's
files and calls back; each call asks the warm book (`verified_book.engine.live.Live`) what the files
saved since the last look change, which the engine decides with the rule `--changed` and the site use
(`provenance.outdated_reason`), and shows its answer: the pages whose figures changed rendered again
alone with the same MkDocs plugin as `mkdocs build` (the whole site where a page was added or removed),
the browser reloaded, and one line on the terminal per change: what changed, how many figures it
touched, their statuses, and file:line for every figure that is stale or failed. Where the engine says
a library was upgraded on disk, the process starts again to import it. `m` and Enter at the terminal
asks for the measured claims.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterable

from verified_book.engine.config import BookConfig
from verified_book.engine.live import Live
from verified_book.engine.live_report import Report
from verified_book.engine.long_lived import settle
from verified_book.integration.mkdocs_adapter import internals
from verified_book.records.results import ResultsFile
from verified_book.site.transform import included_paths
from verified_book.vocabulary import Status

# ---------------------------------------------------------------------------
# The site: MkDocs' live-reload server, each changed page rendered again alone


class Site:
    """The book's site built once, then each page whose figures changed rendered again in place."""

    def __init__(self, book: BookConfig, site_dir: Path, host: str, port: int) -> None:
        self.book, self.site_dir, self.host, self.port = book, site_dir, host, port
        self.state: dict[str, Any] = {}
        self.url = f"http://{host}:{port}/"

    def build(self, said: frozenset[str] = frozenset()) -> None:
        """The whole site, as `mkdocs build` makes it, keeping what a page's rebuild needs. The figures at
        `said` (file:line) have their problem on serve's own line already: the build does not log it again."""
        from mkdocs.commands.build import build
        from mkdocs.config import load_config

        config = load_config(str(self.book.root / "mkdocs.yml"), site_dir=str(self.site_dir))
        config.site_url = self.url
        config.plugins["verified-book"].said_elsewhere = said  # type: ignore[attr-defined]
        state = self.state

        class Keep:
            def on_nav(self, nav: Any, config: Any, files: Any) -> Any:
                state.update(nav=nav, files=files)
                return nav

            def on_env(self, env: Any, config: Any, files: Any) -> Any:
                state["env"] = env
                return env

        config.plugins["verified-book-serve"] = Keep()  # type: ignore[assignment]
        state.pop("shown", None)
        build(config, serve_url=self.url)
        state["config"] = config

    def render(
        self,
        pages: Iterable[str],
        results: ResultsFile | None,
        results_path: Path,
        engine: Live,
        said: frozenset[str] = frozenset(),
    ) -> None:
        """Render `pages` (relative to the book's root) again with this machine's records as they are now. The
        figures at `said` (file:line) have their problem on serve's own line already: the render does not log it
        again."""
        config, files = self.state["config"], self.state["files"]
        render_page = internals().render_page
        read = {(self.book.root / rel).resolve(): engine.page(rel) for rel in pages}
        if "shown" not in self.state:  # each page's file, by its path: the build's files stand until the next
            self.state["shown"] = {
                Path(f.abs_src_path).resolve(): f for f in files.documentation_pages() if f.abs_src_path
            }
        shown = self.state["shown"]
        plugin = config.plugins["verified-book"]
        kept = {path: page for path, page in read.items() if page is not None}
        with engine.opened(), plugin.rendering_again(results, results_path, kept, engine.topic_errors, said):
            for path in sorted(read):
                file = shown.get(path)
                if file is not None and file.page is not None:
                    render_page(file.page, config, files, self.state["nav"], self.state["env"])


def including(engine: Live, snippets: Iterable[str]) -> set[str]:
    """The pages (relative to the book's root) that include one of `snippets` (as the book shows them), which
    the site renders again with the snippet's code as saved."""
    names = set(snippets)
    out = set()
    for page in engine.session.book.pages if names else []:
        try:
            if names & included_paths((engine.book.root / page.file).read_text(encoding="utf-8")):
                out.add(page.file)
        except OSError:
            continue
    return out


def serve(book: BookConfig, args: list[str]) -> int:
    """`verified-book serve [--port N] [--host H] [--measured]`."""
    parser = argparse.ArgumentParser(prog="verified-book serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--measured", action="store_true", help="compute the measured claims too (else only on `m`)")
    parser.add_argument(
        "--poll",
        type=float,
        metavar="SECONDS",
        help="look at the watched files every SECONDS instead of being told of each save by the system: for a "
        "file system that tells nothing (some network and container mounts)",
    )
    options = parser.parse_args(args)
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    problem = address_problem(options.host, options.port)
    if problem:  # said at once, not after the book is computed
        print(f"verified-book serve: cannot listen on {options.host}:{options.port}: {problem}", file=sys.stderr)
        return 1
    started = time.perf_counter()
    print("verified-book serve: computing the book's claims ...", flush=True)
    engine = Live(book, measured=options.measured)
    report = engine.start()
    say(report, f"{len(report.recomputed)} (claim, backend) computed in {time.perf_counter() - started:.1f} s")
    from mkdocs.livereload import LiveReloadServer

    site_dir = Path(tempfile.mkdtemp(prefix="verified-book-serve-"))
    site = Site(book, site_dir, options.host, options.port)
    site.build()
    settle()  # the values held and the site built live as long as the preview: a save's collection walks its own
    asked = threading.Event()

    def builder() -> None:
        report = engine.look(measure=asked.is_set())
        if report.restart:
            restart(report.restart)
        asked.clear()
        failed = frozenset(b.where for b, status in report.figures.items() if status == Status.FAILED)
        with engine.opened():  # livereload's build thread works in the book as last loaded (the look may reload it)
            if report.rebuild:
                engine.written()  # the whole build reads the records from the results file
                site.build(said=failed)
            elif report.pages or report.snippets:
                pages = report.pages | including(engine, report.snippets)
                site.render(pages, engine.merged, engine.results_path, engine, said=failed)
        if report.what:
            print(report.line(), flush=True)

    server = LiveReloadServer(
        builder=builder, host=options.host, port=options.port, root=str(site_dir), polling_interval=options.poll or 1
    )
    server.build_delay = 0.05
    for path in engine.watched():
        path.mkdir(parents=True, exist_ok=True) if not path.exists() else None
    watcher = Watcher(server, engine.watched(), options.poll)
    if sys.stdin.isatty():
        threading.Thread(target=_keys, args=(server, asked), daemon=True).start()
    threading.Thread(target=_announce, args=(watcher, site.url), daemon=True).start()
    code = 0
    _stop_on_signals()
    try:
        server.serve()
    except KeyboardInterrupt:
        pass
    except OSError as e:  # the port taken while the book was computed: the probe above was free
        problem = bind_problem(e)
        if problem is None or server.serve_thread.is_alive():
            raise
        print(f"verified-book serve: cannot listen on {options.host}:{options.port}: {problem}", file=sys.stderr)
        code = 1
    finally:
        watcher.stop()
        server.shutdown()
        engine.written()
        shutil.rmtree(site_dir, ignore_errors=True)
    return 1 if engine.unkept else code


def _stop_on_signals() -> None:
    """Stop the preview on a request to end (SIGTERM: `kill`, a service manager, a container stopping; SIGHUP: the
    terminal closed) as on Ctrl-C, so that its records are written and its site's folder removed: without a
    handler the process would end at once, leaving both undone."""

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    for name in ("SIGTERM", "SIGHUP"):  # Windows has no SIGHUP
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), stop)


def _keys(server: Any, asked: threading.Event) -> None:
    """Read the terminal: `m` and Enter asks for the measured claims, and wakes the server to compute them."""
    wake = internals().wake
    for line in sys.stdin:
        if line.strip() == "m":
            asked.set()
            wake(server)


class Watcher:
    """What tells the server a watched file was saved: the system's file events (inotify, FSEvents, ...), each
    waking the server, whose builder then asks the engine what changed (`Live.look`, which reads the files'
    times itself); or, with `poll` seconds, MkDocs' own watcher, which walks every watched folder at that
    interval. A walk costs what the book's files number, on the server's process, every interval: the events
    cost nothing while nothing is saved."""

    def __init__(self, server: Any, paths: Iterable[Path], poll: float | None) -> None:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        self.observer: Any = server.observer
        if poll:
            for path in paths:
                server.watch(str(path))
            return
        wake = internals().wake

        class Waking(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                if event.event_type not in ("opened", "closed_no_write"):  # a read is no save
                    wake(server)

        self.observer = Observer()
        folders: dict[Path, bool] = {}  # a file is watched through its folder, that folder alone
        for path in paths:
            folder = path if path.is_dir() else path.parent
            folders[folder] = folders.get(folder, False) or path.is_dir()
        for folder, recursive in folders.items():
            self.observer.schedule(Waking(), str(folder), recursive=recursive)
        self.observer.start()

    def ready(self) -> bool:
        """Whether every watch has had its first look, so that a save from now on is seen."""
        return bool(self.observer.is_alive() and all(e.is_alive() for e in self.observer.emitters))

    def stop(self) -> None:
        if self.observer.is_alive():
            self.observer.stop()


def _announce(watcher: Watcher, url: str) -> None:
    """Say where the preview is once the watchers have their first look, so a save from then on is seen."""
    while not watcher.ready():
        time.sleep(0.01)
    print(f"verified-book serve: {url} (Ctrl-C stops; m and Enter measures)", flush=True)


def address_problem(host: str, port: int) -> str | None:
    """Why the preview could not listen on host:port (in use, or not an address of this machine), and what
    to do, or None.

    Asked with a socket bound as the server binds its own (MkDocs's, which binds only once it starts serving,
    after the book is computed)."""
    try:
        family = socket.AF_INET6 if isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address) else socket.AF_INET
    except ValueError:  # a name, not an address
        family = socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as http.server's HTTPServer does
        try:
            probe.bind((host, port))
        except OSError as e:
            return bind_problem(e) or f"{e.strerror or e}; choose an address of this machine with --host"
        except OverflowError as e:  # a port outside 0-65535
            return f"{str(e).rstrip('.')}; choose a port with --port"
    return None


def bind_problem(error: OSError) -> str | None:
    """What a failed bind says, with what to change; None for an error that is not about the address."""
    if error.errno == errno.EADDRINUSE:
        return f"{error.strerror}; another server holds it: choose another port with --port"
    if error.errno == errno.EACCES:
        return f"{error.strerror}; a port below 1024 needs privileges: choose another port with --port"
    if error.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or isinstance(error, socket.gaierror):
        return f"{error.strerror or error}; choose an address of this machine with --host"
    return None


def say(report: Report, what: str) -> None:
    counts = Report(what, [], report.figures, report.problems, held_back=report.held_back)
    print(counts.line().replace("; no claim ran", ""), flush=True)


def restart(why: str) -> None:
    """A library on disk is not the one imported: say what it invalidates, and start again."""
    print(why, flush=True)
    os.execv(sys.executable, [sys.executable, *sys.argv])
