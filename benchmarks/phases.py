"""A pytest plugin the benchmark loads into the run it times: where that run's seconds go.

    pytest -p benchmarks.phases ...   (with BENCHMARK_PHASES=<file.json> in the environment)

It stamps the clock when the session starts, when collection ends and when the session
ends, and adds up each item's setup, call and teardown under one of three headings: the
items that time the machine (those the xdist scheduler holds back to run alone, see
`verified_book.engine.session.Session.runs_alone`), the book's other items (each claim on each
backend, each figure, each page's unbound-number check), and the machinery's own tests.
What lies between the items' own durations is pytest's per-item work. Each heading's CPU
seconds are added up too (`cpu_seconds`: this process's, with those of the children it waited
for within an item, such as a snippet run as a script), so the benchmark can say the least
any order of the same work could take. The file is written
when pytest unconfigures, with the modules the run imported; the benchmark adds the moments it
launched the command and saw it exit.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

OUT_ENV = "BENCHMARK_PHASES"
HEADINGS = ("timed", "book", "machinery")
SLOWEST = 5  # items named under each heading


def cpu_seconds(children_only: bool = False) -> float:
    """CPU seconds this process has used, user and system, with those of every child it has waited for
    (and of theirs); `children_only`, the children's alone. `getrusage`'s microseconds where there is one,
    as `os.times`' clock ticks (a hundredth of a second on Linux) would miss much of an item's few
    milliseconds."""
    try:
        import resource
    except ImportError:  # Windows
        used = os.times()
        return used.children_user + used.children_system + (0.0 if children_only else used.user + used.system)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = 0.0 if children_only else sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
    return own + children.ru_utime + children.ru_stime


def pytest_configure(config: pytest.Config) -> None:
    out = os.environ.get(OUT_ENV)
    if out:
        config.pluginmanager.register(Phases(config, Path(out)), "benchmark-phases")


class Phases:
    """The clock stamps and the items' durations of one run, written to `out` at its end."""

    def __init__(self, config: pytest.Config, out: Path) -> None:
        self.config = config
        self.out = out
        self.stamps: dict[str, float] = {}
        self.items: dict[str, float] = {}
        self.cpu: dict[str, float] = {}  # CPU seconds of each item, from its setup to its last report

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.stamps["session_start"] = time.time()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.stamps["collected"] = time.time()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Under xdist the workers collect, not this process: collection ends when the first worker's does."""
        self.stamps.setdefault("collected", time.time())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        before = cpu_seconds()
        try:
            return (yield)
        finally:
            self.cpu[item.nodeid] = self.cpu.get(item.nodeid, 0.0) + cpu_seconds() - before

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.items[report.nodeid] = self.items.get(report.nodeid, 0.0) + report.duration

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.stamps["session_finish"] = time.time()

    def heading(self, nodeid: str) -> str:
        from verified_book.engine.session import claim_of_nodeid
        from verified_book.integration.pytest.stash import state

        run = state(self.config)
        if run.runs_alone(nodeid):
            return "timed"
        if claim_of_nodeid(nodeid) or (run.root / nodeid.split("::", 1)[0]).is_relative_to(run.book_dir):
            return "book"
        return "machinery"

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        totals: dict[str, dict[str, Any]] = {
            h: {"items": 0, "seconds": 0.0, "cpu_seconds": 0.0, "slowest": []} for h in HEADINGS
        }
        for nodeid, seconds in sorted(self.items.items(), key=lambda kv: -kv[1]):
            row = totals[self.heading(nodeid)]
            row["items"] += 1
            row["seconds"] += seconds
            row["cpu_seconds"] += self.cpu.get(nodeid, 0.0)
            if len(row["slowest"]) < SLOWEST:
                row["slowest"].append([nodeid, round(seconds, 3)])
        loaded = sorted(name for name in sys.modules if not name.startswith("_"))  # what the run imported, for floors
        workers = int(getattr(config.option, "numprocesses", 0) or 0)
        recorded = {"stamps": self.stamps, "items": totals, "modules": loaded, "workers": workers}
        self.out.write_text(json.dumps(recorded, indent=1), encoding="utf-8")
