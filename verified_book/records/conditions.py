"""What the machine was doing while a run timed it: other runs of the book, and the load average.

A measured figure describes the machine only if nothing else was using it. Two `verify` runs
at once each time the machine while the other loads it, and both would record their timings
as if it were quiet. So every run of a book (`verify`, `test`, plain pytest) takes the book's
run lock for the whole run, an advisory `fcntl.flock` on `machine.lock` in the lock folder
(the book's local results folder, else a folder of the system's temporary directory):

| a run is | it holds | so that |
| --- | --- | --- |
| working on untimed items | the lock shared | runs that time nothing never wait for each other |
| timing the machine (measured claims, snippets) | the lock alone | nothing of this book runs beside its timings |
| waiting | nothing | two runs that both want to time never wait for each other |

A run that finds the machine taken waits for it, saying so in one line, for at most
`WAIT_LIMIT` seconds. Waiting is the default because a reader who starts a second run
expects figures that describe the machine, not the two runs: waiting costs minutes, a
contended figure costs the record. `--beside-other-runs` (or a wait that ran out) runs beside
the other instead, and both runs' measurements are marked contended.

The run that holds the lock alone writes its name on the lock file's first line; a run that goes
beside others adds a line `beside: pid N (job)`, so that the runs it went beside learn who ran
beside them.

A measured record carries `conditions` (see `RunConditions.entry`): the 1-minute load average
before and after the run's timed items, the machine's cores, and who ran beside it. It is
contended (`contended`) when another run was beside it, or when the load average exceeded
`HEAVY_LOAD_PER_CORE` times the cores.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

LOCK_NAME = "machine.lock"
FOLDER_NAME = ".runs"  # the lock folder's name inside the book's local results folder
#: a run of a book started from inside another run of it (a test that runs the book, an xdist
#: worker) is part of that run: it takes no lock; "<lock path>|<pid>"
RUN_ENV = "VERIFIED_BOOK_RUN"
#: how long a run waits for another to finish timing the machine: longer than a whole `verify`
#: on the book's slowest machine, so a wait ends because the other run ended, not because it ran out
WAIT_LIMIT = 20 * 60.0
BESIDE = "beside: "  # a line of the lock file: a run that ran beside the one holding it alone
POLL = 0.2  # seconds between tries of a lock that is taken: flock has no wait with a timeout
#: the load average, per core, above which the machine was busy with something else. A run alone
#: keeps at most every core busy (a threaded matmul, its helper while it starts), so an average up
#: to the core count can be the run's own; half as much again means other work had runnable threads
#: for a good part of the last minute, and the timed work waited for a CPU behind them
HEAVY_LOAD_PER_CORE = 1.5


def heavy(load: float | None, cores: int | None) -> bool:
    """Whether a 1-minute load average says the machine was busy beyond what one run makes."""
    return load is not None and bool(cores) and load > HEAVY_LOAD_PER_CORE * (cores or 1)


def contended(entry: Any) -> str | None:
    """Why a record's `conditions` (verified_book.records.record.Conditions, or its JSON) makes its measurement
    contended, in words; None when quiet or not conditions at all."""
    from verified_book.records.record import Conditions as Entry

    if isinstance(entry, Mapping):
        entry = entry_of(entry)
    if not isinstance(entry, Entry):
        return None
    why = []
    if entry.beside:
        why.append(f"another run of this book was running beside it ({entry.beside})")
    loads = [v for v in (entry.load_before, entry.load_after) if v is not None]
    if loads and heavy(max(loads), entry.cores):
        why.append(
            f"the load average was {max(loads):g} on {entry.cores} cores (above {HEAVY_LOAD_PER_CORE:g} per core)"
        )
    return "; ".join(why) or None


def entry_of(value: Any) -> Any:
    """A `conditions` entry as the results schema's model (verified_book.records.record.Conditions), or None if it is
    not one."""
    from pydantic import ValidationError

    from verified_book.records.record import Conditions as Entry

    try:
        return Entry.model_validate(value)
    except ValidationError:
        return None


def is_entry(value: Any) -> bool:
    """Whether a value is a well-formed `conditions` entry of a record (the results schema's check)."""
    return entry_of(value) is not None


def load_average() -> float | None:
    """The 1-minute load average, or None where the system has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


@dataclass
class RunConditions:
    """What one run saw around its timed items."""

    cores: int | None = field(default_factory=os.cpu_count)  # the load average counts the whole system's CPUs
    load_before: float | None = None
    load_after: float | None = None
    beside: list[str] = field(default_factory=list)

    def entry(self) -> dict[str, Any]:
        """The record's `conditions`: {load_before, load_after, cores, beside ("pid N (job), ..." or None)}."""
        return {
            "load_before": self.load_before,
            "load_after": self.load_after,
            "cores": self.cores,
            "beside": ", ".join(sorted(set(self.beside))) or None,
        }


def lock_folder(local_results: Path | None, book_root: Path) -> Path:
    """Where a book's run lock lives: its local results folder, else (not set, or not writable) a
    folder of the system's temporary directory named after the book's place, so that every run of
    one book meets the same lock and runs of two books never do."""
    if local_results is not None:
        folder = local_results / FOLDER_NAME
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if os.access(folder, os.W_OK):
                return folder
        except OSError:
            pass
    tag = hashlib.sha256(str(book_root.resolve()).encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"verified-book-runs-{tag}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def job_name() -> str:
    """What this process is, as another run names it: the `verified-book` job, else pytest."""
    name = Path(sys.argv[0]).name if sys.argv else ""
    if name.startswith("verified-book") and len(sys.argv) > 1:
        return f"verified-book {sys.argv[1]}"
    return "pytest"


def _try(fd: int, how: int) -> bool:
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise


class RunLock:
    """This run's hold on the book's run lock and what it saw (see the module's doc).

    `say` prints one line to the reader; `beside_others` is `--beside-other-runs`; `limit` bounds each wait.
    """

    def __init__(
        self,
        folder: Path,
        say: Callable[[str], None],
        beside_others: bool = False,
        limit: float = WAIT_LIMIT,
        job: str | None = None,
    ) -> None:
        self.folder = folder
        self.say = say
        self.beside_others = beside_others
        self.limit = limit
        self.pid = os.getpid()
        self.describe = f"pid {self.pid} ({job or job_name()})"
        self.conditions = RunConditions()
        self.passive = False  # part of another process's run: it takes no lock
        self.exclusive = False
        self.beside = False
        self._fd: int | None = None
        self._previous_env: str | None = None
        self.lock_path = folder / LOCK_NAME

    def start(self, exclusive: bool = False) -> None:
        """Take the lock shared for the whole run (or exclusive, for a run that cannot tell when it times),
        waiting while another run times the machine; a run inside another run of this book takes none."""
        inherited = os.environ.get(RUN_ENV, "")
        path, _, owner = inherited.rpartition("|")
        if path == str(self.lock_path) and owner.isdigit():
            self.passive = True
            return
        self._previous_env = os.environ.get(RUN_ENV)
        os.environ[RUN_ENV] = f"{self.lock_path}|{self.pid}"
        self._fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        if exclusive:
            self.before_timing()
            return
        if _try(self._fd, fcntl.LOCK_SH):
            return
        holder = self._holder()
        if not self.beside_others:
            self.say(f"another run of this book is timing the machine ({holder}); waiting for it before starting")
            if self._wait(fcntl.LOCK_SH):
                return
            self.say(
                f"the other run ({holder}) is still timing the machine after {self.limit:.0f} s; running beside it, "
                "and the measurements of both are marked contended"
            )
        self._go_beside(holder)

    def before_timing(self) -> None:
        """Have the machine to this run before its first timed item: the lock exclusively, once every other
        run of the book has finished or is waiting; then the load average. Later calls do nothing."""
        if self.conditions.load_before is not None:
            return
        if not self.passive and self._fd is not None and not self.exclusive and not self.beside:
            if _try(self._fd, fcntl.LOCK_EX):
                self._took_machine()
            else:
                if not self.beside_others:
                    self.say("another run of this book is in progress; waiting for it before timing the machine")
                if not self.beside_others and self._wait(fcntl.LOCK_EX):
                    self._took_machine()
                else:
                    if not self.beside_others:
                        self.say(
                            f"the other run is still in progress after {self.limit:.0f} s; timing beside it, and "
                            "the measurements of both are marked contended"
                        )
                    _try(self._fd, fcntl.LOCK_SH)  # so no run starts timing beside this one unannounced
                    self._go_beside("another run of this book")
        self.conditions.load_before = load_average()

    def after_timed_item(self) -> None:
        """The load average after a timed item: the last one's stands."""
        if self.conditions.load_before is not None:
            self.conditions.load_after = load_average()

    def seen(self) -> RunConditions:
        """What this run saw, with every run that said it ran beside this one until now."""
        self.conditions.beside = sorted(set(self.conditions.beside) | set(self._told()))
        return self.conditions

    def release(self) -> None:
        """Let the lock go (closing the descriptor drops its flock); an exclusive holder clears its lines."""
        if self.passive:
            return
        if self._fd is not None:
            if self.exclusive:
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None
        if self._previous_env is None:
            os.environ.pop(RUN_ENV, None)
        else:
            os.environ[RUN_ENV] = self._previous_env

    def _wait(self, how: int) -> bool:
        """Try the lock until it is this run's or `limit` has passed."""
        deadline = time.monotonic() + self.limit
        while time.monotonic() < deadline:
            assert self._fd is not None
            if _try(self._fd, how):
                return True
            time.sleep(POLL)
        return False

    def _took_machine(self) -> None:
        """The lock is this run's alone: its first line names this run."""
        assert self._fd is not None
        self.exclusive = True
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{self.describe}\n".encode(), 0)

    def _lines(self) -> list[str]:
        try:
            return self.lock_path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return []

    def _holder(self) -> str:
        """The run that holds the lock exclusively, as its first line describes it."""
        lines = self._lines()
        return lines[0].strip() if lines and lines[0].strip() else "pid unknown"

    def _go_beside(self, other: str) -> None:
        """Record that this run runs beside `other`, and tell the holder of the lock in a line of its file."""
        self.beside = True
        self.conditions.beside.append(other)
        try:
            with self.lock_path.open("a", encoding="utf-8") as f:
                f.write(f"{BESIDE}{self.describe}\n")
        except OSError:
            pass  # a line that cannot be left costs the other run its mark, not this run its records

    def _told(self) -> list[str]:
        """The other runs that said in the lock's file that they ran beside the runs holding it; the file is
        emptied whenever a run takes the machine alone and when it lets it go."""
        if self.passive:
            return []
        told = [line[len(BESIDE) :].strip() for line in self._lines() if line.startswith(BESIDE)]
        return [t for t in told if t != self.describe]
