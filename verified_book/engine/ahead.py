"""Work done ahead: by a helper process that starts with the run, while the run starts.

Some claims import a library nothing else in a run needs: transformers takes seconds to load,
and torch's forward mode, its optimizers and its GradScaler load torch's compiler; a snippet
may import the same. A book lists them in `book.toml` (`ahead`: claim ids or fnmatch patterns,
and snippet file names, which end in `.py`). On a machine with a core to spare, a plain run
(not under xdist, whose workers share the cores already) starts one helper: `verified-book verify`
before it imports pytest (`start_early`; the run takes it over), pytest as soon as the book is
open where its arguments alone select that work (`selects_ahead_work` in the pytest plugin),
else once collection shows it selected some of it; and the run stops one that collection
shows it does not need: a check on a card, or on a library this machine lacks, is never the
helper's (`computes_on`). The helper opens the same book, computes those claims on this
machine's CPU backends with the engine's own `evaluate`, runs those snippets as the default
run does (`run_in_process_or_as_script`), and when it exits hands back each outcome (the value
or the failure, the inputs it read, the seconds it took) and each snippet's run. It exits as
soon as that is written, skipping its interpreter's teardown: unregistering what torch and
transformers registered takes over a second, for which the run would wait.

Meanwhile the run imports its own backends, collects and checks everything else. Its items for
the helper's work come after those, and the timed items, which must have the machine to
themselves, wait until the helper has exited; a snippet that prints a measured figure is
timed, so it is never done ahead.

Nothing about a value changes with where it was computed: the same code, the same data, the
same machine, in the same run. Where the helper fails, the run does its work itself and its
summary says why.
"""

from __future__ import annotations

import fnmatch
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, KeysView

from verified_book.authoring.registry import Claim, Kind, Registry
from verified_book.backends import Backend
from verified_book.engine.outcome import Outcome
from verified_book.vocabulary import OutcomeStatus

if TYPE_CHECKING:  # the run's CLI starts a helper before anything heavier than this module is imported
    from verified_book.engine.snippet_run import SnippetRun

RESULTS = "outcomes.pickle"
OUTPUT = "output.txt"


def is_snippet(entry: str) -> bool:
    """Whether an `ahead` entry names a snippet (a file name) rather than claims."""
    return entry.endswith(".py")


def matching(patterns: Iterable[str], registry: Registry) -> tuple[list[Claim], list[str]]:
    """The claims `patterns` name that the helper may compute, and each pattern that names none (a stale
    entry in book.toml). A measured claim is never done ahead: it times the machine, so it runs alone."""
    patterns = [p for p in patterns if not is_snippet(p)]
    claims = [
        c for c in registry if c.kind is not Kind.MEASURED and any(fnmatch.fnmatchcase(c.id, p) for p in patterns)
    ]
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(c.id, p) for c in registry)]
    return claims, unmatched


def only_timed(patterns: Iterable[str], registry: Registry) -> list[tuple[str, list[Claim]]]:
    """Each `ahead` entry that names claims, all of them measured: nothing the helper may do."""
    found = []
    for p in (p for p in patterns if not is_snippet(p)):
        named = [c for c in registry if fnmatch.fnmatchcase(c.id, p)]
        if named and all(c.kind is Kind.MEASURED for c in named):
            found.append((p, named))
    return found


def on_cpu(backend: Backend) -> bool:
    """Whether a backend computes on the CPU: the helper makes no device context of its own."""
    return backend.device == "cpu"


def core_to_spare() -> bool:
    """Whether this process may run on a second CPU, for the helper to use while the run uses the first."""
    from verified_book.engine.machine import usable_cpus

    return usable_cpus() >= 2


def computes_on(backend: Backend) -> bool:
    """Whether the helper computes on a backend: one present on this machine, on its CPU. A check on any
    other (a card, a library not installed) is not the helper's work, and nothing waits for it."""
    return backend.available and on_cpu(backend)


def snippet_paths(entries: Iterable[str], snippets_dir: Path) -> list[Path]:
    """The snippets `entries` name, each a file of `snippets_dir`, whether it exists or not."""
    return [snippets_dir / name for name in entries if is_snippet(name)]


class Ahead:
    """The helper process of one run, and what it handed back.

    It is started before this process has loaded the book's claims, so it plans its work from
    book.toml itself; `expect` then says which of that work this process will take from it.
    """

    def __init__(self, root: Path) -> None:
        self.snippets: set[Path] = set()
        self.problem: str | None = None  # why the helper's outcomes are not used, once it has exited
        self.waited = 0.0  # seconds this process stood idle waiting for the helper to exit
        self.done_at: float | None = None  # when the helper had its work done (`time.time()`), once it has exited
        self._outcomes: dict[tuple[str, str], Outcome] | None = None
        self._runs: dict[Path, SnippetRun] = {}
        self._claims: dict[str, Claim] = {}
        self._folder = tempfile.TemporaryDirectory(prefix="verified-book-ahead-")
        folder = Path(self._folder.name)
        with open(folder / OUTPUT, "wb") as output:
            self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", "verified_book.engine.ahead", str(root), str(folder / RESULTS)],
                cwd=root,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )

    def expect(self, claims: Iterable[Claim], snippets: Iterable[Path]) -> None:
        """The claims and snippets this process will take from the helper instead of doing them itself."""
        self._claims = {c.id: c for c in claims}
        self.snippets = {Path(p) for p in snippets}

    @property
    def claim_ids(self) -> KeysView[str]:
        """The ids of the claims this process takes from the helper."""
        return self._claims.keys()

    def covers(self, claim: Claim, backend: Backend) -> bool:
        return claim.id in self.claim_ids and computes_on(backend)

    @property
    def running(self) -> bool:
        return self._process is not None and self._outcomes is None

    def take(self, claim: Claim, backend: Backend) -> Outcome | None:
        """The helper's outcome of (claim, backend), waiting for it to exit if need be; None where it
        has none to give (a claim it does not compute, or a helper that failed)."""
        if not self.covers(claim, backend):
            return None
        return self.wait().get((claim.id, backend.name))

    def snippet(self, path: Path) -> SnippetRun | None:
        """The helper's run of a snippet, waiting for it if need be; None where it has none."""
        if Path(path) not in self.snippets:
            return None
        self.wait()
        return self._runs.get(Path(path))

    def wait(self) -> dict[tuple[str, str], Outcome]:
        """Wait until the helper exits, and read what it handed back."""
        if self._outcomes is not None:
            return self._outcomes
        assert self._process is not None
        started = time.perf_counter()
        code = self._process.wait()
        self.waited = time.perf_counter() - started
        folder = Path(self._folder.name)
        self._outcomes = {}
        if code != 0:
            self.problem = f"exited with status {code}{_last_line(folder / OUTPUT)}"
        else:
            try:
                shipped = pickle.loads((folder / RESULTS).read_bytes())
            except Exception as e:  # noqa: BLE001 - whatever is wrong with the file, the run computes the claims itself
                self.problem = f"handed back no readable outcomes ({type(e).__name__}: {e})"
            else:
                for claim_id, backend_name, status, value, message, reads, seconds in shipped["claims"]:
                    if claim_id in self._claims:
                        self._outcomes[(claim_id, backend_name)] = Outcome(
                            self._claims[claim_id],
                            backend_name,
                            OutcomeStatus(status),
                            value,
                            message,
                            list(reads),
                            seconds,
                        )
                self._runs = {Path(path): done for path, done in shipped["snippets"] if Path(path) in self.snippets}
                self.done_at = shipped.get("done_at")
        self._folder.cleanup()
        return self._outcomes

    def cancel(self) -> None:
        """Stop the helper (nothing selected needs it, or the run is over) and forget it."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process = None
        if self._outcomes is None:
            self._outcomes = {}
        self._folder.cleanup()


#: helpers started before pytest was imported (`start_early`), by the resolved root of their book
_EARLY: dict[Path, Ahead] = {}


def start_early(root: Path) -> None:
    """Start the helper of the book at `root` now, before pytest and the book's modules are imported: its
    libraries then load while this process starts. `verified-book verify` does so where its arguments select
    the whole book; the run takes it over (`adopt`) where it wants a helper, and stops it otherwise."""
    _EARLY.setdefault(root.resolve(), Ahead(root))


def adopt(root: Path) -> Ahead:
    """The helper of the book at `root`: the one started early, else a new one."""
    return _EARLY.pop(root.resolve(), None) or Ahead(root)


def stop_early() -> None:
    """Stop every helper started early that no run took over: its work is not wanted."""
    while _EARLY:
        _EARLY.popitem()[1].cancel()


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return f": {lines[-1].strip()}" if lines else ""


def compute(root: Path) -> dict[str, object]:
    """In the helper: open the book at `root`, compute each claim its `ahead` names on every CPU
    backend the claim runs on, and run each snippet it names; `done_at` says when that was done, the
    moment before which the run's timed items cannot start."""
    from verified_book import backends as backends_mod
    from verified_book.authoring.registry import REGISTRY
    from verified_book.engine import offline
    from verified_book.engine.check import BROKEN, backends_for, evaluate
    from verified_book.engine.config import open_book, read_config
    from verified_book.engine.snippet_run import run_in_process_or_as_script

    book = read_config(root)
    if book.offline:
        offline.set_hub_offline()
        offline.install()
    open_book(book)
    claims = matching(book.ahead, REGISTRY)[0]
    wanted = {name for c in claims for name in (c.backends or backends_mod.NAMES)}
    libraries = {name.split(":")[0] for name in wanted}
    found = {
        b.name: b
        for library in libraries
        if library in backends_mod.ADAPTERS
        for b in backends_mod.ADAPTERS[library].detect()
    }
    here = {name: found[name] for name in backends_mod.NAMES if name in found}  # detect()'s order, these libraries only
    shipped: list[tuple[object, ...]] = []
    for claim in claims:
        for backend in backends_for(claim, here):
            if not computes_on(backend):
                continue
            outcome = evaluate(claim, backend)
            if outcome.status == BROKEN:  # the run meets the same environment, and says what it lost
                continue
            entry = (
                claim.id,
                backend.name,
                outcome.status,
                outcome.value,
                outcome.message,
                list(outcome.inputs),
                outcome.seconds,
            )
            try:
                pickle.dumps(entry)
            except Exception:  # noqa: BLE001 - a value that cannot travel is computed by the run itself
                continue
            shipped.append(entry)
    runs: list[tuple[object, ...]] = []
    for path in snippet_paths(book.ahead, book.snippets):
        if path.is_file():
            runs.append((str(path), run_in_process_or_as_script(path)))
    return {"claims": shipped, "snippets": runs, "done_at": time.time()}


def main(argv: list[str]) -> int:
    """`python -m verified_book.engine.ahead ROOT OUT`: do the book's `ahead` work, write what came of it to OUT."""
    root, out = Path(argv[0]), Path(argv[1])
    try:
        shipped = compute(root)
        partial = out.with_name(out.name + ".partial")
        partial.write_bytes(pickle.dumps(shipped))
        os.replace(partial, out)
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the run says so, not the helper
        return 130
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # Everything is handed back (written, then renamed). The interpreter's own teardown would now
    # unregister every operator torch, its compiler and transformers registered, over a second in
    # which the run stands waiting for this process to exit; nothing is left that needs it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
