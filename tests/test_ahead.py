"""Work done ahead (`verified_book.engine.ahead`): a helper process computes book.toml's `ahead` claims and
runs its `ahead` snippets while the run starts; the records are those of a run without it, the
timed items wait until it is gone, and a helper that fails costs only time."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from harness import faults

from verified_book import backends
from verified_book.engine import ahead as ahead_mod
from verified_book.engine import machine
from verified_book.engine.config import ConfigError, read_config
from verified_book.integration import cli

CLAIMS = '''\
import json
import os
import time
from pathlib import Path

from verified_book.authoring.registry import claim

LOG = Path(__file__).resolve().parent.parent / "runs.jsonl"


def logged(name, seconds=0.0):
    start = time.time()
    time.sleep(seconds)
    with LOG.open("a") as f:
        f.write(json.dumps({"name": name, "pid": os.getpid(), "start": start, "end": time.time()}) + "\\n")


@claim("heavy.product", kind="library", backends=("numpy",))
def heavy(backend):
    """Six sevens, as the library sums them: the claim the helper computes."""
    logged("heavy", 0.3)
    return int(backend.tensor([7] * 6).sum())


@claim("light.sum", kind="exact")
def light():
    """Three and four, computed by the run itself."""
    logged("light")
    return 3 + 4


@claim("work.timed", kind="measured", backends=("numpy",))
def timed(backend):
    """An item that times the machine."""
    logged("timed")
    return 1
'''

SNIPPET = """\
import json
import os
from pathlib import Path

with (Path(os.environ["AHEAD_LOG"])).open("a") as f:
    f.write(json.dumps({"name": "snippet", "pid": os.getpid()}) + "\\n")
print("six sevens: 42")
"""

PAGE = (
    "Heavy: [42](claim:heavy.product); light: [7](claim:light.sum); timed: [1](claim:work.timed).\n\n"
    "```output sevens.py\nsix sevens: [42](claim:heavy.product)\n```\n"
)


IDLE = """
    import json
    import os
    import time
    from pathlib import Path


    def pytest_claims_idle(config):
        with (Path(__file__).parent / "runs.jsonl").open("a") as f:
            f.write(json.dumps({"name": "idle", "pid": os.getpid(), "start": time.time()}) + "\\n")
"""


def sample(root: Path, ahead: str = '["heavy.*", "sevens.py"]') -> faults.SampleBook:
    book = faults.SampleBook(root)
    book.claims("work", CLAIMS)
    book.page("page.md", PAGE)
    (book.root / "book" / "snippets").mkdir()
    (book.root / "book" / "snippets" / "sevens.py").write_text(SNIPPET)
    with (book.root / "book.toml").open("a") as f:
        f.write(f"ahead = {ahead}\n")
    return book


def logs(book: faults.SampleBook) -> dict[str, dict[str, float]]:
    return {r["name"]: r for r in map(json.loads, (book.root / "runs.jsonl").read_text().splitlines())}


def comparable(records: dict[str, dict[str, dict[str, object]]]) -> dict[str, dict[str, dict[str, object]]]:
    # what differs between any two runs: when, how long, and the machine's load around the timed items
    return {
        c: {b: {k: v for k, v in r.items() if k not in ("date", "seconds", "conditions")} for b, r in per.items()}
        for c, per in records.items()
    }


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "snippet.jsonl"
    monkeypatch.setenv("AHEAD_LOG", str(path))
    return path


def test_the_helper_does_the_ahead_work_and_the_records_are_a_plain_runs(
    tmp_path: Path, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ahead, here = sample(tmp_path / "ahead"), sample(tmp_path / "here")
    ahead.conftest(IDLE)
    run = ahead.run("-m", "not slow")  # the snippet in this process's way only, not also as a script
    monkeypatch.setenv("AHEAD_LOG", str(tmp_path / "plain.jsonl"))
    plain = here.run("-m", "not slow", "--no-ahead")
    assert run.ret == plain.ret == 0, run.output[-3000:]
    assert "ahead: 1 claim computed and 1 snippet run by a helper process" in run.output
    done = logs(ahead)
    assert done["heavy"]["pid"] != os.getpid(), "the helper computed the ahead claim"
    assert done["light"]["pid"] == done["timed"]["pid"] == os.getpid(), "the run computed the others"
    assert done["timed"]["start"] >= done["heavy"]["end"], "the timed item waited until the helper was done"
    assert done["idle"]["start"] <= done["heavy"]["end"], "the run said it was idle while the helper worked"
    assert (ahead.root / "runs.jsonl").read_text().count('"idle"') == 1
    assert [json.loads(line)["pid"] != os.getpid() for line in log.read_text().splitlines()] == [True], (
        "the helper ran the snippet, and the run took its output"
    )
    assert [json.loads(line)["pid"] for line in (tmp_path / "plain.jsonl").read_text().splitlines()] == [os.getpid()]
    assert comparable(run.records) == comparable(plain.records)
    assert run.statuses()["heavy.product"] == {"numpy": "verified"}
    outputs = json.loads(ahead.results_file.read_text())["run"]["outputs"]
    assert (
        outputs["sevens.py"]["text"] == "six sevens: 42\n"
        and outputs["sevens.py"]["checked"][0]["status"] == "verified"
    )
    assert all(r["pid"] == os.getpid() for r in logs(here).values()), "--no-ahead does it all in the run"


@pytest.mark.slow  # a run with its helper process
def test_a_helper_that_dies_costs_only_time(tmp_path: Path) -> None:
    tally = faults.helper_dies(tmp_path)
    assert tally.ok, str(tally)


COLLECTING = """
    import json
    from pathlib import Path

    import pytest

    from verified_book.integration.pytest_plugin import state


    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(session):
        with (Path(__file__).parent / "runs.jsonl").open("a") as f:
            f.write(json.dumps({"name": "collecting", "helper": state(session.config).ahead is not None}) + "\\n")
"""


@pytest.mark.slow  # runs with their helper process
@pytest.mark.parametrize(
    ("args", "before_collection", "helper_computes"),
    [
        pytest.param((), True, True, id="the whole book"),
        pytest.param(("-m", "not slow"), True, True, id="a mark expression that keeps the helper's claims"),
        pytest.param(("-m", "exact or measured"), False, False, id="a mark expression that drops them"),
        pytest.param(("-k", "heavy"), False, True, id="-k, which only collection can judge"),
        pytest.param(("book/page.md",), False, True, id="a page that prints a helper's figure"),
    ],
)
def test_the_helper_starts_before_collection_where_the_arguments_alone_select_its_work(
    tmp_path: Path, log: Path, args: tuple[str, ...], before_collection: bool, helper_computes: bool
) -> None:
    book = sample(tmp_path / "book")
    book.conftest(COLLECTING)
    run = book.run(*args)
    assert run.ret == 0, run.output[-3000:]
    done = logs(book)
    assert done["collecting"]["helper"] is before_collection
    assert ("heavy" in done and done["heavy"]["pid"] != os.getpid()) is helper_computes, done


ON_A_CARD = '''\
from verified_book.authoring.registry import claim


@claim("heavy.on_a_card", kind="library", backends=("mlx:gpu",))
def on_a_card(backend):
    """A claim of the helper's, computed on a card only, where the helper never computes."""
    return 1
'''


@pytest.mark.slow  # a run with its helper process
@pytest.mark.parametrize(
    "selection",
    [
        pytest.param("light or timed", id="none of the helper's claims"),
        pytest.param("card or light or timed", id="a helper's claim only on a card this machine lacks"),
    ],
)
def test_a_selection_without_ahead_work_stops_the_helper_and_waits_for_nothing(
    tmp_path: Path, log: Path, selection: str
) -> None:
    if any(b.available for b in backends.ADAPTERS["mlx"].detect() if b.name == "mlx:gpu"):
        pytest.skip("this machine has MLX's GPU: heavy.on_a_card[mlx:gpu] is a check it runs")
    book = sample(tmp_path / "book")
    book.claims("card", ON_A_CARD)
    run = book.run("-k", selection)
    assert run.ret == 0, run.output[-3000:]
    assert set(logs(book)) == {"light", "timed"}


AT_EXIT = '''\
import atexit
import json
import os
from pathlib import Path

from verified_book.authoring.registry import claim

LOG = Path(__file__).resolve().parent.parent / "runs.jsonl"


def teardown():
    with LOG.open("a") as f:
        f.write(json.dumps({"name": "teardown", "pid": os.getpid()}) + "\\n")


@claim("heavy.at_exit", kind="library", backends=("numpy",))
def at_exit(backend):
    """A claim that leaves work for its interpreter's teardown, as torch's operator registry does."""
    atexit.register(teardown)
    return 1
'''


@pytest.mark.slow  # a run with its helper process
def test_the_helper_exits_once_its_outcomes_are_written_without_tearing_its_interpreter_down(
    tmp_path: Path, log: Path
) -> None:
    book = sample(tmp_path / "book")
    book.claims("at_exit", AT_EXIT)
    run = book.run("-k", "at_exit or timed")
    assert run.ret == 0, run.output[-3000:]
    assert run.statuses()["heavy.at_exit"] == {"numpy": "verified"}, run.output[-3000:]
    assert "ahead: 2 claims computed" in run.output
    assert "teardown" not in logs(book), "the run waited for the helper's teardown"


@pytest.mark.slow  # a run with its helper process
def test_a_helper_started_before_pytest_is_the_one_the_run_takes_over(tmp_path: Path, log: Path) -> None:
    book = sample(tmp_path / "book")
    ahead_mod.start_early(book.root)  # as `verify` does
    started = ahead_mod._EARLY[book.root.resolve()]
    pid = started._process.pid if started._process else None
    run = book.run("-m", "not slow")
    assert run.ret == 0, run.output[-3000:]
    assert "ahead: 1 claim computed and 1 snippet run by a helper process" in run.output
    assert logs(book)["heavy"]["pid"] == pid, "the run took over the helper started before it"
    assert not ahead_mod._EARLY and not started.running


@pytest.mark.slow  # a run with its helper process
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("--no-ahead",), id="--no-ahead"),
        pytest.param(("-k", "light or timed"), id="a selection without the helper's work"),
    ],
)
def test_a_helper_started_before_pytest_that_the_run_does_not_want_is_stopped(
    tmp_path: Path, log: Path, args: tuple[str, ...]
) -> None:
    book = sample(tmp_path / "book")
    ahead_mod.start_early(book.root)
    started = ahead_mod._EARLY[book.root.resolve()]
    run = book.run(*args)
    assert run.ret == 0, run.output[-3000:]
    assert not ahead_mod._EARLY and not started.running
    assert all(r.get("pid", os.getpid()) == os.getpid() for r in logs(book).values()), logs(book)


@pytest.mark.parametrize(
    ("args", "early"),
    [
        pytest.param([], True, id="verify"),
        pytest.param(["-q", "--no-results"], True, id="options that narrow nothing"),
        pytest.param(["-p", "benchmarks.phases"], True, id="a plugin loaded"),
        pytest.param(["-p", "no:cacheprovider"], False, id="a plugin turned off"),
        pytest.param(["-n", "2"], False, id="xdist"),
        pytest.param(["--no-ahead"], False, id="--no-ahead"),
        pytest.param(["-k", "heavy"], False, id="-k"),
        pytest.param(["book/page.md"], False, id="a page"),
    ],
)
def test_verify_starts_the_helper_before_pytest_only_where_its_arguments_select_the_whole_book(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], early: bool
) -> None:
    monkeypatch.setattr(machine, "usable_cpus", lambda: 2)
    book = read_config(sample(tmp_path / "book").root)
    assert cli.starts_helper_early(book, args) is early
    monkeypatch.setattr(machine, "usable_cpus", lambda: 1)
    assert not cli.starts_helper_early(book, args), "no core to spare"
    monkeypatch.setattr(machine, "usable_cpus", lambda: 2)
    assert not cli.starts_helper_early(read_config(faults.SampleBook(tmp_path / "plain").root), args)


@pytest.mark.slow  # a run with its helper process
def test_each_ahead_entry_that_names_nothing_usable_fails_the_run_at_its_line(tmp_path: Path, log: Path) -> None:
    book = sample(tmp_path / "book", '[\n  "heavy.*",\n  "haevy.*",\n  "missing.py",\n]')
    snippets = book.root / "book" / "snippets"
    run = book.run()
    assert run.ret == 1
    assert "book.toml:8: [book] ahead names 'haevy.*', which matches no claim" in run.output
    assert (
        f"book.toml:9: [book] ahead names 'missing.py', which is not a snippet in {snippets.relative_to(book.root)}"
        in run.output
    )
    (snippets / "timer.py").write_text("print('took 1 s')\n")
    (book.root / "book" / "page.md").write_text(
        PAGE + "\n```output timer.py varies=1\ntook [1](claim:work.timed) s\n```\n"
    )
    (book.root / "book.toml").write_text((book.root / "book.toml").read_text().replace("missing.py", "timer.py"))
    run = book.run()
    assert (
        "book.toml:9: [book] ahead names 'timer.py', which prints a measured figure: a snippet that times the "
        "machine runs alone" in run.output
    )
    (book.root / "book.toml").write_text((book.root / "book.toml").read_text().replace('"haevy.*"', '"work.*"'))
    run = book.run()
    assert (
        "book.toml:8: [book] ahead names 'work.*', which matches only measured claims (work.timed): a claim that "
        "times the machine runs alone" in run.output
    )
    (book.root / "book.toml").write_text((book.root / "book.toml").read_text().replace('"work.*"', '"*"'))
    run = book.run("-m", "not slow")
    assert "ahead names '*'" not in run.output, "an entry that names other claims too only leaves the measured out"
    done = logs(book)
    assert done["heavy"]["pid"] != os.getpid(), "the helper computed the claim it may"
    assert done["timed"]["pid"] == os.getpid(), "the run timed the measured claim itself"


@pytest.mark.parametrize("value", ['"heavy.*"', "[1]", '[""]'])
def test_ahead_must_be_a_list_of_names(tmp_path: Path, value: str) -> None:
    book = faults.SampleBook(tmp_path / "book")
    with (book.root / "book.toml").open("a") as f:
        f.write(f"ahead = {value}\n")
    with pytest.raises(ConfigError, match=r"\[book\] ahead must be a list of claim ids or patterns"):
        read_config(book.root)
