"""A folder of machines' results files read at once, as the site and a run's verdict read a fleet: every file
checked as `results.read` checks one, the files not checked before side by side in worker processes."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Callable, Iterator

from verified_book.records import kept, results
from verified_book.records.errors import ResultsError
from verified_book.records.results import ResultsFile

#: by file, the check a worker makes of it as `read_all` reads (`_checking_ahead`)
Ahead = dict[Path, Future[None]]


def read_all(
    results_dir: Path,
    warn: Callable[[str], None],
    known_claims: set[str] | None = None,
    kept_in: Path | None = None,
    *,
    own: bool = False,
) -> dict[str, ResultsFile]:
    """Every readable results file by slug; a bad file is said through `warn` and skipped (`kept_in`, `own`: see
    `read`). With `kept_in`, the files not kept yet are checked side by side as it reads (`_checking_ahead`)."""
    out: dict[str, ResultsFile] = {}
    paths = sorted(results_dir.glob("*.json"))
    with _checking_ahead(paths, known_claims, kept_in, own) as ahead:
        for path in paths:
            if path in ahead:
                with contextlib.suppress(Exception):  # a worker that failed leaves the file to `read`
                    ahead[path].result()
            try:
                out[path.stem] = results.read(path, known_claims, kept_in, own=own, let_go=False)
            except ResultsError as e:
                warn(str(e))
    if kept_in is not None:
        kept.let_go_oldest(kept_in, max(results.KEEP_CHECKED, 2 * len(paths)), ".pickle")
    return out


@contextlib.contextmanager
def _checking_ahead(
    paths: list[Path], known_claims: set[str] | None, kept_in: Path | None, own: bool
) -> Iterator[Ahead]:
    """Within, the files not kept in `kept_in` yet are checked by worker processes, one a core, and kept if sound:
    by file, what to wait for before `read` takes it. Checking is most of a first read of a fleet; the caller reads
    each file back while the workers check the next. Without two such files and cores, a key for what is kept
    (`checking_code`) or workers that can start (`_workers_can_start`), `read` checks each file as it comes."""
    code = results.checking_code()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if kept_in is None or code is None or cores < 2 or not _workers_can_start():
        yield {}
        return
    waiting: list[Path] = []
    ahead: Ahead = {}
    for path in paths:
        with contextlib.suppress(OSError):  # a file past the limit is not read, as `read` reads none
            if not results.within_limit(path.stat().st_size, own):
                continue
            if not results.kept_place(kept_in, path.read_bytes(), known_claims, code).exists():
                waiting.append(path)
    if len(waiting) < 2:
        yield ahead
        return
    try:  # a pool that cannot start leaves each file to `read`, as without one
        context = multiprocessing.get_context("spawn")  # no fork of a process with threads (`serve`'s)
        pool = ProcessPoolExecutor(min(cores, len(waiting)), mp_context=context)
    except Exception:  # noqa: BLE001
        yield ahead
        return
    try:
        with contextlib.suppress(Exception):  # a pool that breaks as it is asked leaves the rest to `read`
            ahead.update((path, pool.submit(_check_and_keep, path, known_claims, kept_in, code)) for path in waiting)
        yield ahead
    finally:
        pool.shutdown(cancel_futures=True)


def _workers_can_start() -> bool:
    """Whether a spawned worker can start: it runs the caller's main module again, by its name or file, and a script
    read from standard input (`<stdin>`) has neither: each worker would fail, and print why."""
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None):
        return True
    path = getattr(main, "__file__", None)
    started_in = getattr(multiprocessing.process, "ORIGINAL_DIR", None) or ""  # where a relative path is from
    return path is None or os.path.isfile(os.path.join(started_in, path))


def _check_and_keep(path: Path, known_claims: set[str] | None, kept_in: Path, code: str) -> None:
    """One file checked ahead, in a worker: kept under the caller's key if sound, else left to the caller's `read`."""
    try:
        raw = path.read_bytes()
        found = results.check_bytes(raw, path, known_claims)
    except Exception:  # noqa: BLE001 - whatever a bad file raises, the caller's own read of it says
        return
    kept.keep(results.kept_place(kept_in, raw, known_claims, code), found, None)
