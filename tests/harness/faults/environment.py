"""Hardware and environment faults: a missing library, a device out of memory, Ctrl-C, the network."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Sequence

from harness.faults.common import (
    SampleBook,
    Tally,
    _pairs,
    _wait_for,
    basic_pairs,
)
from harness.faults.concurrency import summary_rows
from verified_book.vocabulary import NO_BACKEND_NAME

# ---------------------------------------------------------------- hardware and environment faults

ENV_CLAIMS = '''\
from verified_book.authoring.registry import claim


@claim("env.sum.{n}", kind="library", over={"n": (2, 3)})
def total(backend, n):
    """n plus n, summed by the library on its device."""
    return int(backend.tensor([n, n]).sum())
'''

ENV_PAGE = "The sum of twos is [4](claim:env.sum.2), as [16.6](claim:basic.ratio) is a ratio.\n"


def absent_packages(root: Path, packages: Sequence[str] = ("torch", "mlx")) -> list[Tally]:
    """A machine without torch, and one without MLX: their backends are skipped with the reason; the rest runs."""
    books, procs = [], []
    for package in packages:
        book = SampleBook.basic(root / f"without-{package}")
        book.claims("env", ENV_CLAIMS)
        book.page("page.md", ENV_PAGE)
        books.append(book)
        procs.append(book.spawn(absent=(package,)))
    tallies = []
    for package, book, proc in zip(packages, books, procs, strict=True):
        run = book.finish(proc)
        tally = Tally(
            "environment",
            f"{'MLX' if package == 'mlx' else package} not installed",
            f"{package}'s backends skipped with the reason; every other backend runs and is recorded",
        )
        library = "mlx.core" if package == "mlx" else package
        reason = f"{library} does not import (ModuleNotFoundError: No module named '{package}')"
        gone = [f"{package}:{d}" for d in (("cpu", "gpu") if package == "mlx" else ("cpu", "cuda", "mps"))]
        statuses = run.statuses()
        present = {(c, b) for c, per in statuses.items() for b in per if b not in gone}
        computed = {
            (c, b)
            for (c, b) in present
            if statuses[c][b] == "verified"
            or (statuses[c][b] == "skipped" and package not in run.records[c][b].get("message", ""))
        }
        affected = [s for per in statuses.values() for b, s in per.items() if b in gone]
        tally.check(
            run.ret == 0
            and reason in run.output
            and "SKIPPED" in run.output
            and all(s == "skipped" for s in affected)
            and ("env.sum.2", "numpy") in computed,
            f"exit {run.ret}\n{run.output[-2500:]}",
        )
        tally.keep(len(present), len(computed))
        tallies.append(tally)
    return tallies


OOM_CLAIMS = '''\
from verified_book.authoring.registry import claim


@claim("oom.torch_error", kind="library", backends=("torch:cpu",))
def torch_error(backend):
    """Asks for more device memory than there is (as torch reports it)."""
    import torch

    raise torch.cuda.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 15.47 GiB")


@claim("oom.runtime_error", kind="library", backends=("torch:cpu",))
def runtime_error(backend):
    """The same, as older torch builds report it."""
    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.47 GiB total capacity)")


@claim("oom.after", kind="library", backends=("torch:cpu",))
def after(backend):
    """Computed after the out-of-memory claims: still runs."""
    return int(backend.tensor([20, 22]).sum())
'''


def out_of_memory(root: Path) -> Tally:
    """A CUDA device that runs out of memory in one claim: that claim fails alone, with a clear message."""
    import re

    tally = Tally(
        "environment",
        "device out of memory in one claim",
        "that claim fails alone saying so; every other claim recorded",
    )
    book = SampleBook.basic(root / "oom")
    book.claims("oom", OOM_CLAIMS)
    book.page("oom.md", "The sum is [42](claim:oom.after).\n")
    run = book.run()
    statuses = run.statuses()
    for cid, kind in (("oom.torch_error", "OutOfMemoryError"), ("oom.runtime_error", "RuntimeError")):
        said = re.search(
            rf"claim {re.escape(cid)} on torch:cpu: ran out of device memory on torch:cpu \(at .*\): "
            rf"{kind}: CUDA out of memory",
            run.output,
        )
        tally.check(bool(said) and statuses.get(cid, {}).get("torch:cpu") == "failed", f"{cid}\n{run.output[-2500:]}")
    others = {(c, b) for c, per in statuses.items() for b in per if not c.startswith("oom.") or c == "oom.after"}
    kept = {(c, b) for (c, b) in others if statuses[c][b] == "verified"}
    tally.keep(len(others), len(kept))
    return tally


def keyboard_interrupt(root: Path) -> Tally:
    """Ctrl-C during a probe: the run stops, and every record made before it is in the results file."""
    tally = Tally(
        "environment", "Ctrl-C during a claim", "the run stops as interrupted; every record made before it is written"
    )
    book = SampleBook.basic(root / "interrupt")
    book.claims(
        "zz",
        '''
        from verified_book.authoring.registry import claim


        @claim("zz.probe", kind="exact")
        def probe():
            """A long probe the reader interrupts."""
            raise KeyboardInterrupt
    ''',
    )
    book.page("later.md", "Never reached: [1](claim:zz.probe).\n")
    run = book.run()
    expected = basic_pairs()
    kept = expected & _pairs(run.records)
    tally.keep(len(expected), len(kept))
    tally.check(
        run.ret == 2 and "KeyboardInterrupt" in run.output and "results: " in run.output,
        f"exit {run.ret}\n{run.output[-2000:]}",
    )
    return tally


INTERRUPTED_CLAIMS = '''\
from verified_book.authoring.registry import claim


@claim("late.item.{i}", kind="exact", over={"i": (1, 2, 3)})
def item(i):
    """A figure on the page the run is stopped at."""
    return i * 10


@claim("late.vram", kind="measured", hardware="rtx5080")
def vram(backend):
    """About a GPU this machine is not: not computable here, whether the run is stopped or not."""
    return 16
'''

#: the run holds at the second late claim's check, after saying so, until it is interrupted: the basic claims and
#: the first late one are judged by then, the other two late ones and every figure are not
INTERRUPTED_CONFTEST = """
import os
import time
from pathlib import Path


def pytest_runtest_setup(item):
    if item.nodeid.endswith("late.item.2[none]"):
        Path(os.environ["CLAIMS_STARTED"]).touch()
        time.sleep(120)
"""

#: what a whole-book run stopped by Ctrl-C says of the figures it never reached, and of the one it cannot compute
INTERRUPTED_SAYS = ("0 verified", "1 not computable here", "5 not run (interrupted)")


def interrupted_whole_run(root: Path) -> Tally:
    """Ctrl-C (SIGINT) to `verified-book verify` of a whole book, after some claims were judged: the verdict and
    the summary table count what the run never reached as not run (interrupted), apart from what this machine
    cannot compute, and every record made before it is in the results file."""
    tally = Tally(
        "environment",
        "Ctrl-C part-way through a whole-book verify",
        "what it never ran counted apart, as not run (interrupted); every record made before it written",
    )
    book = SampleBook.basic(root / "interrupted-run")
    book.claims("late", INTERRUPTED_CLAIMS)
    book.page("z-late.md", "Reached last: [10](claim:late.item.1), [20](claim:late.item.2), [30](claim:late.item.3).\n")
    book.page("hardware.md", "The card holds [16](claim:late.vram) GB.\n")
    book.conftest(INTERRUPTED_CONFTEST)
    proc = book.verify_apart(absent=("torch", "mlx"))
    reached = _wait_for(book.started, 120, proc)
    if reached:
        proc.send_signal(signal.SIGINT)
    run = book.finish(proc)
    lines = run.output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("verified-book: interrupted")), len(lines))
    verdict = " ".join(lines[start:])  # its first line, then the figures and the records, indented
    here = {(c, b) for c, b in basic_pairs() if not b.startswith(("torch", "mlx"))}  # as the run sees this machine
    expected = here | {("late.item.1", "none")}
    tally.keep(len(expected), len(expected & _pairs(run.records)))
    table = summary_rows(run.output)
    tally.check(
        reached
        and run.ret == 130
        and all(words in verdict for words in INTERRUPTED_SAYS)
        and table.get(NO_BACKEND_NAME, {}).get("not_run") == 2
        and not {c for c, _ in _pairs(run.records)} & {"late.item.2", "late.item.3"},
        f"exit {run.ret}\n{run.output[-2500:]}",
    )
    return tally


NETWORK_CLAIMS = '''\
import os
import socket

from verified_book.authoring.registry import claim


@claim("net.reach", kind="exact")
def reach():
    """Reaches for a server away from this machine."""
    with socket.create_connection(("192.0.2.1", 80), timeout=5):
        return 1


@claim("net.offline", kind="exact")
def offline():
    """How many of the hub's offline switches are on during the run."""
    return sum(os.environ.get(k) == "1" for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
'''


def network(root: Path) -> Tally:
    """A claim that reaches for the network fails alone; the hub's offline switches are on for the run."""
    import re

    tally = Tally(
        "environment",
        "a claim reaching for the network",
        "refused with the address named; that claim fails alone; the hub is offline for the run",
    )
    book = SampleBook.basic(root / "network")
    with (book.root / "book.toml").open("a") as f:
        f.write("offline = true\n")  # as this book's own book.toml says: the run, not its caller, turns the network off
    book.claims("net", NETWORK_CLAIMS)
    book.page("net.md", "Both switches are on: [2](claim:net.offline).\n")
    run = book.run()
    statuses = run.statuses()
    said = re.search(
        r"claim net\.reach on none: raised NetworkRefused: network access is off during verification: "
        r"connection to \('192\.0\.2\.1', 80\) refused",
        run.output,
    )
    tally.check(
        bool(said)
        and statuses.get("net.reach", {}).get("none") == "failed"
        and statuses.get("net.offline", {}).get("none") == "verified",
        run.output[-2000:],
    )
    others = {(c, b) for c, per in statuses.items() for b in per if c != "net.reach"}
    tally.keep(len(others), len({(c, b) for (c, b) in others if statuses[c][b] == "verified"}))
    return tally
