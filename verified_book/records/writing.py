"""Writing a machine's results file: merged under a lock, replaced atomically, and nothing a run computed lost.

A run of a subset keeps every other record; a crash mid-write leaves the previous file whole. A file with bad
parts keeps its sound records (verified_book.records.salvage); records a run could not write are kept elsewhere
(beside the file, or in the user's state folder: verified_book.records.unsaved) until a run can.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from filelock import FileLock, Timeout

from verified_book.records import footprints as footprints_mod
from verified_book.records import salvage, unsaved
from verified_book.records.errors import NewerSchema, OtherMachine, ResultsError
from verified_book.records.results import ResultsFile, read, read_salvaging, same_machine, validate

if TYPE_CHECKING:
    from verified_book.records import store


def write_side_file(side: Path, aside: list[salvage.SetAside]) -> None:
    """The parts set aside from a machine's history, each with where it was and why, as JSON in `side`."""
    text = json.dumps([part.to_json() for part in aside], indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    _atomic_write(side, text)


def keep_set_aside(path: Path, kept: ResultsFile, aside: list[salvage.SetAside]) -> str:
    """Write the parts set aside from `path` to a side file beside it; the lines that say so."""
    side = path.with_name(f"{path.name}.set-aside-{_dt.datetime.now().strftime('%Y%m%dT%H%M%S%f')}")
    write_side_file(side, aside)
    kept_count = sum(len(per) for per in kept.records.values())
    head = (
        f"{path}: {kept_count} records kept, {salvage.records_among(aside)} set aside "
        f"({len(aside)} part{'s' if len(aside) != 1 else ''} in all) in {side.name}:"
    )
    return "\n".join([head, *(f"  {path}{part.where()}: {part.why}" for part in aside[:50])])


def read_keeping_aside(
    path: Path, warn: Callable[[str], None], instead: str, update: ResultsFile | None = None
) -> ResultsFile | None:
    """The history in the results file at `path`, its bad parts set aside beside it and reported; a file that is
    not a results file at all moved aside whole to `<name>.corrupt-<time>` and reported (`instead` says what takes
    its place), and None. A file from a newer schema, or (given the `update` meant for it) another machine's, is
    left alone: `NewerSchema` or `OtherMachine` is raised, before anything is set aside."""
    try:
        history, parts = read_salvaging(path)
    except NewerSchema:
        raise
    except ResultsError as e:
        aside = path.with_name(f"{path.name}.corrupt-{_dt.datetime.now().strftime('%Y%m%dT%H%M%S%f')}")
        os.replace(path, aside)
        warn(f"{e}\n{path}: kept aside as {aside.name}; {instead}")
        return None
    other = same_machine(history, update) if update is not None else None
    if other is not None:
        raise OtherMachine(f"{path}: {other}")
    if parts:
        warn(keep_set_aside(path, history, parts))
    return history


def folder_problem(folder: Path) -> str | None:
    """Why no results file could be written in `folder`, found before a run computes anything; None where one
    can (a missing folder is made when the file is written)."""
    if folder.exists() and not folder.is_dir():
        return "is a file; expected a folder to write this machine's <machine>.json in (made where missing)"
    existing = next(p for p in (folder.absolute(), *folder.absolute().parents) if p.exists())
    if not existing.is_dir():
        return f"{existing} is a file, so no folder can be made under it"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} cannot be written to here"
    return None


def _atomic_write(path: Path, text: str) -> None:
    """Write beside the file and rename over it: a reader, or a crash, sees the old file or the new one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would make the committed file private
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    try:
        folder = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(folder)
    except OSError:  # some file systems cannot sync a folder; the rename is done all the same
        pass
    finally:
        os.close(folder)


def write_text(path: Path, text: str) -> None:
    """`text` written to `path` whole or not at all (see `_atomic_write`)."""
    _atomic_write(path, text)


def _remove_leftovers(path: Path) -> list[Path]:
    """Temporary files of a writer killed mid-write; only the lock holder writes them, so none is live."""
    leftovers = sorted(path.parent.glob(f".{path.name}.*.tmp"))
    for item in leftovers:
        item.unlink(missing_ok=True)
    return leftovers


def dumps(results: ResultsFile) -> str:
    """The file's text: the document's fields as given, keys sorted, two spaces deep, so a rerun's diff is small."""
    return json.dumps(results.to_dict(), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def merge_into(
    path: Path,
    update: ResultsFile,
    warn: Callable[[str], None] = lambda _: None,
    timeout: float = 120,
    footprints: footprints_mod.Footprints | None = None,
) -> ResultsFile:
    """Merge `update` into the file at `path` under a lock, atomically; return what was written.

    An existing file with bad parts keeps every sound record: each bad part is set aside to
    `<name>.set-aside-<time>` (JSON) with its key path and reason, and reported. A file that is
    not a results file at all is moved aside whole to `<name>.corrupt-<time>` and reported, never
    silently replaced; a file from a newer schema is left alone and the merge refused. Records an
    earlier run could not write to `path` (verified_book.records.unsaved) are merged first, then
    let go, and the merge says so.
    A machine's own store (`verified_book.records.store`, a `.sqlite` path) takes the rows the update names,
    merged by the same rules, and returns what it holds of them, not the whole history, keeping each record's
    footprint from `footprints` (`verified_book.records.footprints`; a results file has no place for one).
    The lock is filelock's: an OS lock the kernel releases when its holder dies, so a
    killed run leaves no stale lock, only a temporary file that the next merge removes.
    """
    problems = validate(update.to_dict(), f"{path} (this run's records)")
    if problems:
        raise ResultsError("\n".join(problems))
    from verified_book.records import store

    if store.is_store(path):
        return _merge_into_store(store.Store(path, update.slug), update, warn, timeout, footprints)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(path) + ".lock", timeout=timeout):
            _remove_leftovers(path)
            current = ResultsFile(update.slug)
            if path.exists():
                current = read_keeping_aside(path, warn, "a new file holds this run's records", update) or current
            taken = []
            for earlier, records in _earlier_runs(path, update, warn):
                current.merge(records)
                taken.append(earlier)
            current.merge(update)
            _atomic_write(path, dumps(current))
            _let_go(path, taken, warn)
            return current
    except Timeout:
        raise ResultsError(
            f"{path}: another run has held its lock ({path.name}.lock) for {timeout:.0f} s; nothing was merged"
        ) from None


def _merge_into_store(
    history: "store.Store",
    update: ResultsFile,
    warn: Callable[[str], None],
    timeout: float,
    footprints: footprints_mod.Footprints | None,
) -> ResultsFile:
    """`merge_into` for a machine's own store: the runs kept unsaved for it first, oldest first, then `update`."""
    taken = []
    for earlier, records in _earlier_runs(history.path, update, warn):
        history.merge(records, warn, timeout)
        taken.append(earlier)
    merged = history.merge(update, warn, timeout, footprints)
    _let_go(history.path, taken, warn)
    return merged


def _let_go(path: Path, taken: list[Path], warn: Callable[[str], None]) -> None:
    """The unsaved records taken into `path` removed from where they were kept, and said."""
    for earlier in taken:
        unsaved.remove(earlier)
    if taken:
        runs = "an earlier run" if len(taken) == 1 else f"{len(taken)} earlier runs"
        warn(
            f"{path}: took in the records of {runs} that could not write them, kept in "
            f"{', '.join(map(str, taken))} (removed from there now)"
        )


def _earlier_runs(path: Path, update: ResultsFile, warn: Callable[[str], None]) -> list[tuple[Path, ResultsFile]]:
    """The records earlier runs kept in the state folder because they could not write `path`, oldest first (so
    this run's own records still come last), each with its file. One that cannot be read, or is another
    machine's, is left where it is and said."""
    out = []
    for earlier in unsaved.meant_for(path):
        try:
            records = read(earlier, own=True)
        except ResultsError as e:
            warn(f"{e}\n{earlier}: left where it is; it was kept for {path}")
            continue
        other = same_machine(records, update) if records.slug == update.slug else "another machine's name"
        if other is not None:
            warn(f"{earlier}: left where it is; it was kept for {path}, but {other}")
            continue
        out.append((earlier, records))
    return out


def keep_unsaved(path: Path, update: ResultsFile, why: BaseException) -> unsaved.Unsaved:
    """Where a run keeps the records its results file `path` would not take, so that nothing it computed is lost.

    A merge refused (another machine's file, a lock held too long) keeps them beside the file, to be merged by
    hand once the cause is fixed; a folder that cannot be written keeps them in the user's state folder
    (verified_book.records.unsaved), where the next run that can write `path` and `verified-book contribute` take
    them from."""
    text = dumps(update)
    places = [path.with_name(f"{path.name}.unmerged-{_dt.datetime.now().strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")]
    if not isinstance(why, ResultsError):
        places = []
    places.append(unsaved.place_for(path, update.slug))
    failed = []
    for place in places:
        try:
            place.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(place, text)
        except OSError as e:
            failed.append(f"{place}: {e.strerror or e}")
            continue
        if place.parent == path.parent:
            return unsaved.Unsaved(
                place,
                f"this run's records are kept in {place}; merge them by hand once the cause is fixed",
                f"this run's records could not be written to {path}; they are kept in {place}",
            )
        return unsaved.Unsaved(
            place,
            f"{path} cannot be written, so this run's records are kept in {place}: the next run that can write "
            f"{path.name} takes them in, and `verified-book contribute` finds them there",
            f"{path} cannot be written; this run's records are kept in {place}",
        )
    return unsaved.Unsaved(
        None,
        "this run's records could not be kept either: " + "; ".join(failed),
        f"this run's records could not be written to {path}, nor kept anywhere else: they are lost",
    )
