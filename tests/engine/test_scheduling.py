"""Under `-n N` the timed items run last, on one worker, alone: the scheduler on simulated
workers that behave as xdist's do, in every order hypothesis can find, and on real ones."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from harness import faults
from hypothesis import given, settings
from hypothesis import strategies as st
from xdist.remote import Producer

from verified_book.engine.session import claim_of_nodeid
from verified_book.integration.scheduling import QuietLastScheduling


class FakeConfig:
    """What LoadScheduling reads from pytest's config: the workers asked for, the chunk limit."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def getvalue(self, name: str) -> Any:
        return {"tx": [f"{self.workers}*popen"]}[name]

    def getoption(self, name: str) -> Any:
        return {"maxschedchunk": None}[name]


class FakeWorker:
    """An xdist worker as the scheduler sees it. Like the real one it runs an item only once it
    holds the next (its teardown depends on what follows), or once told to shut down."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.torun: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        assert not self.shutting_down, f"{self.name} was sent items after its shutdown"
        self.torun.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True

    def can_run(self) -> bool:
        return len(self.torun) >= 2 or (self.shutting_down and bool(self.torun))

    def __repr__(self) -> str:
        return self.name


def simulate(
    quiet_flags: list[bool], workers: int, rng: random.Random, cuda_flags: list[bool] | None = None
) -> list[tuple[str, int]]:
    """Run a collection through the scheduler on fake workers, picking at random which worker
    finishes an item next; the (worker, index) pairs in the order they ran."""
    cuda_flags = cuda_flags or [False] * len(quiet_flags)
    ids = [
        f"t{i}" + (" cuda" if c else "") + (" timed" if q else "")
        for i, (q, c) in enumerate(zip(quiet_flags, cuda_flags, strict=True))
    ]
    sched = QuietLastScheduling(
        FakeConfig(workers),
        Producer("sched", enabled=False),
        runs_alone=lambda nodeid: nodeid.endswith(" timed"),
        pinned=lambda nodeid: " cuda" in nodeid,
    )
    nodes = [FakeWorker(f"gw{i}") for i in range(workers)]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        sched.add_node_collection(node, ids)
    sched.schedule()
    ran: list[tuple[str, int]] = []
    active = list(nodes)
    while active:
        if sched.tests_finished:  # what xdist's DSession does after every event
            for node in active:
                node.shutdown()
        movable = [n for n in active if n.can_run() or (n.shutting_down and not n.torun)]
        assert movable, f"stuck: {[(n, n.torun, n.shutting_down) for n in active]}, held {sched.quiet}"
        node = rng.choice(movable)
        if node.torun:
            index = node.torun.pop(0)
            ran.append((node.name, index))
            sched.mark_test_complete(node, index)
        else:
            active.remove(node)
            assert sched.remove_node(node) is None
    return ran


@settings(max_examples=200, deadline=None)
@given(
    flags=st.lists(st.tuples(st.booleans(), st.booleans()), max_size=40),
    workers=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_cuda_items_share_one_worker_and_timed_ones_still_run_last(
    flags: list[tuple[bool, bool]], workers: int, seed: int
) -> None:
    """Every CUDA item runs on gw0 (one CUDA context on the card, not one per worker); the timed
    ones, CUDA or not, still run last and alone, there too."""
    quiet_flags, cuda_flags = [q for q, _ in flags], [c for _, c in flags]
    ran = simulate(quiet_flags, workers, random.Random(seed), cuda_flags)
    assert sorted(i for _, i in ran) == list(range(len(flags))), "every item runs exactly once"
    on_cuda = {w for w, i in ran if cuda_flags[i]}
    assert on_cuda <= {"gw0"}, f"CUDA items ran on {on_cuda}"
    timed = [(w, i) for w, i in ran if quiet_flags[i]]
    if any(cuda_flags):
        assert {w for w, _ in timed} <= {"gw0"}, f"timed items ran away from the CUDA worker: {timed}"
    if timed:
        late = [i for _, i in ran[ran.index(timed[0]) :] if not quiet_flags[i]]
        assert not late, f"items {late} ran after the first timed one, possibly beside it"


@settings(max_examples=300, deadline=None)
@given(quiet_flags=st.lists(st.booleans(), max_size=40), workers=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_timed_items_run_once_last_and_on_one_worker(quiet_flags: list[bool], workers: int, seed: int) -> None:
    ran = simulate(quiet_flags, workers, random.Random(seed))
    assert sorted(i for _, i in ran) == list(range(len(quiet_flags))), "every item runs exactly once"
    timed = [(w, i) for w, i in ran if quiet_flags[i]]
    assert len({w for w, _ in timed}) <= 1, f"timed items spread over workers: {timed}"
    if timed:
        first = ran.index(timed[0])
        late = [i for _, i in ran[first:] if not quiet_flags[i]]
        assert not late, f"items {late} ran after the first timed one, possibly beside it"
        assert [i for _, i in timed] == sorted(i for _, i in timed), "timed items keep the collection's order"


def test_with_nothing_timed_it_is_plain_load_scheduling() -> None:
    ran = simulate([False] * 30, 3, random.Random(0))
    assert len({w for w, _ in ran}) > 1


@pytest.mark.parametrize(
    ("nodeid", "claim"),
    [
        ("book.toml::probe.matvec.fraction[torch:cpu]", "probe.matvec.fraction"),
        ("book.toml::models.qwen3_8b.total[none]", "models.qwen3_8b.total"),
        ("book/hardware.md::line 12: 3.35 (hardware.h200.bandwidth)", "hardware.h200.bandwidth"),
        ("book/hardware.md::line 12: (3.35) (hardware.h200.bandwidth)", "hardware.h200.bandwidth"),
        ("book/hardware.md::every number is bound", None),
        ("examples/minimal/book.toml::half.of_ten[none]", "half.of_ten"),
        ("book/hardware.md::line 12, column 40: 3.35 (hardware.h200.bandwidth)", "hardware.h200.bandwidth"),
        ("tests/engine/site/test_render.py::test_plots_are_drawn", None),
        ("tests/engine/records/test_record.py::test_the_schema_takes_a_committed_file[cpu-x86_64-2c.json]", None),
        ("tests/test_x.py::test_y[a (b)]", None),
    ],
)
def test_the_claim_of_an_item_is_read_back_from_its_node_id(nodeid: str, claim: str | None) -> None:
    assert claim_of_nodeid(nodeid) == claim


TIMED_CLAIMS = '''\
import json
import os
import time
from pathlib import Path

from verified_book.authoring.registry import claim

LOG = Path(__file__).resolve().parent.parent / "runs.jsonl"


def logged(name, seconds):
    start = time.time()
    time.sleep(seconds)
    with LOG.open("a") as f:
        f.write(json.dumps({"name": name, "worker": os.environ.get("PYTEST_XDIST_WORKER"),
                            "start": start, "end": time.time()}) + "\\n")
    return 1


@claim("work.plain.{i}", kind="exact", over={"i": tuple(range(12))})
def plain(i):
    """An item any worker may run at any time."""
    return logged(f"plain {i}", 0.05)


@claim("work.timed.{i}", kind="measured", backends=("numpy",), over={"i": tuple(range(3))})
def timed(backend, i):
    """An item that times the machine."""
    return logged(f"timed {i}", 0.05)
'''


@pytest.mark.slow  # three pytest processes
def test_under_xdist_measured_claims_run_after_everything_else_on_one_worker(tmp_path: Path) -> None:
    book = faults.SampleBook(tmp_path / "xdist")
    book.claims("work", TIMED_CLAIMS)
    book.page("page.md", "Plain items: [1](claim:work.plain.0); a timed one: [1](claim:work.timed.0).\n")
    run = book.run_apart("-n", "2", "--no-results", absent=("torch", "mlx"))
    assert run.ret == 0, run.output[-3000:]
    runs = [json.loads(line) for line in (book.root / "runs.jsonl").read_text().splitlines()]
    plain = [r for r in runs if r["name"].startswith("plain")]
    timed = [r for r in runs if r["name"].startswith("timed")]
    assert {r["name"] for r in timed} == {"timed 0", "timed 1", "timed 2"}
    assert {r["worker"] for r in plain} == {"gw0", "gw1"}, "the plain items are shared out"
    assert len({r["worker"] for r in timed}) == 1
    # alone: no other item's computation overlaps the timed ones (a worker's end of session, where it judges its
    # records' evidence by computing claims again, comes after them on the quiet worker)
    begin, end = min(r["start"] for r in timed), max(r["end"] for r in timed)
    assert all(r["end"] <= begin or r["start"] >= end for r in plain), (begin, end, plain)
    assert max(r["end"] for r in plain if r["worker"] != timed[0]["worker"]) <= begin, "the other worker finished first"


SKIPPED_ON_NUMPY = '''

from verified_book.authoring.registry import NotOnBackend


@claim("work.elsewhere", kind="library", backends=("numpy",))
def elsewhere(backend):
    """A case its backend cannot compute: a skipped status among the workers' statuses."""
    raise NotOnBackend("not on this backend")
'''


@pytest.mark.slow  # four pytest processes
def test_under_xdist_the_summary_and_the_records_are_those_of_a_plain_run(tmp_path: Path) -> None:
    """The workers hand their statuses to the controller; one whose statuses cannot travel (a Status
    is not a builtin str) dies at its end, and the table and the verdict read zero."""

    def run(*args: str) -> faults.Run:
        book = faults.SampleBook(tmp_path / ("xdist" if args else "plain"))
        book.claims("work", TIMED_CLAIMS + SKIPPED_ON_NUMPY)
        book.page(
            "page.md",
            "Plain: [1](claim:work.plain.0), [1](claim:work.plain.1); timed: [1](claim:work.timed.0); "
            "skipped on numpy: [2](claim:work.elsewhere).\n",
        )
        return book.run_apart(*args, absent=("torch", "mlx"))

    def summary(run: faults.Run) -> list[str]:
        lines = run.output.splitlines()
        start = next(i for i, line in enumerate(lines) if "verified book" in line)
        return [line for line in lines[start + 1 :] if line.startswith(("numpy ", "none ", "all ", "figures "))]

    plain, parallel = run(), run("-n", "2")
    assert plain.ret == parallel.ret == 0, parallel.output[-3000:]
    assert "DumpError" not in parallel.output
    assert any(line.startswith("figures (") and ": 3 verified" in line for line in summary(plain)), summary(plain)
    assert summary(parallel) == summary(plain)
    assert parallel.statuses() == plain.statuses()


@pytest.mark.slow  # three pytest processes
def test_under_xdist_a_worker_whose_statuses_are_lost_fails_the_run_and_says_so(tmp_path: Path) -> None:
    book = faults.SampleBook(tmp_path / "lost")
    book.claims("work", TIMED_CLAIMS)
    book.page("page.md", "Plain: [1](claim:work.plain.0).\n")
    book.conftest("""
        import os

        import pytest


        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(session):
            if os.environ.get("PYTEST_XDIST_WORKER") == "gw1":
                session.config.workeroutput.pop("claims_tally", None)
    """)
    run = book.run_apart("-n", "2", "--no-results", absent=("torch", "mlx"))
    assert run.ret == pytest.ExitCode.INTERNAL_ERROR, run.output[-3000:]
    assert "the statuses of worker gw1 (it handed back no statuses) did not reach this process" in run.output


def test_the_cuda_items_are_the_torch_cuda_cases_and_the_figures_computed_there() -> None:
    """Which node ids the scheduler pins to the CUDA worker, on a machine whose torch sees a card."""
    from verified_book.authoring.registry import REGISTRY
    from verified_book.backends import Backend
    from verified_book.engine.session import Session

    library = next(c for c in REGISTRY if c.kind.value == "library" and c.backends is None)
    exact = next(c for c in REGISTRY if c.kind.value == "exact")
    cuda = Backend("torch:cuda", True, "CUDA device NVIDIA GeForce RTX 5080")
    run = SimpleNamespace(
        backends={"torch:cuda": cuda},
        verifier=SimpleNamespace(backends_for=lambda c: [cuda] if c.runs_on("torch:cuda") else []),
    )
    pinned = lambda nodeid: Session.runs_on_cuda(run, nodeid)  # noqa: E731
    assert pinned(f"book.toml::{library.id}[torch:cuda]")
    assert not pinned(f"book.toml::{library.id}[torch:cpu]")
    assert pinned(f"book/x.md::line 3: 4 ({library.id})")
    assert not pinned(f"book/x.md::line 3: 4 ({exact.id})")
    run.backends["torch:cuda"] = Backend("torch:cuda", False, "no device")
    assert not pinned(f"book.toml::{library.id}[torch:cuda]"), "without a card nothing is pinned"


def test_the_gpu_items_of_rocm_and_jax_share_that_worker_too() -> None:
    """A ROCm card and JAX's GPU hold a context in the card's memory as CUDA does: their cases are pinned."""
    from verified_book.authoring.registry import REGISTRY
    from verified_book.backends import Backend
    from verified_book.engine.session import Session

    library = next(c for c in REGISTRY if c.kind.value == "library" and c.backends is None)
    found = {name: Backend(name, True, "a GPU") for name in ("torch:rocm", "jax:gpu")}
    run = SimpleNamespace(
        backends={**found, "jax:cpu": Backend("jax:cpu", True, "CPU")},
        verifier=SimpleNamespace(backends_for=lambda c: list(found.values())),
    )
    pinned = lambda nodeid: Session.runs_on_cuda(run, nodeid)  # noqa: E731
    assert pinned(f"book.toml::{library.id}[torch:rocm]") and pinned(f"book.toml::{library.id}[jax:gpu]")
    assert not pinned(f"book.toml::{library.id}[jax:cpu]")
    assert pinned(f"book/x.md::line 3: 4 ({library.id})")
