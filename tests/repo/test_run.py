"""run.py, the zero-install bootstrap, and `verified-book`, the command it calls: set-up planned for the
reader's machine, jobs checked before any set-up, progress said, Ctrl-C handled as pytest handles it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from harness.paths import ROOT
from harness.scripts import run_py

from verified_book.engine.config import read_config
from verified_book.integration import cli


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


# Set-up: the right torch from the right place, extras per job.


def test_without_a_gpu_on_linux_torch_comes_from_the_cpu_index_only() -> None:
    run = run_py()
    args, sentence = run.torch_plan(run.Target("Linux", "x86_64", None, (2, 39)), True)
    assert args == [run.TORCH, "--index-url", run.CPU_INDEX], "--index-url, so no CUDA wheel can be chosen"
    assert run.CPU_INDEX in sentence and "CPU build" in sentence


def test_where_the_cpu_index_cannot_be_reached_set_up_falls_back_and_says_so() -> None:
    run = run_py()
    args, sentence = run.torch_plan(run.Target("Linux", "x86_64", None, (2, 39)), False)
    assert args == [run.TORCH] and "cannot be reached" in sentence and "pip's configured index" in sentence


@pytest.mark.parametrize("system, gpu", [("Linux", True), ("Darwin", False), ("Windows", False)])
def test_elsewhere_torch_comes_from_pip_s_own_index(system: str, gpu: bool) -> None:
    run = run_py()
    args, _ = run.torch_plan(run.Target(system, "x86_64", run.NVIDIA if gpu else None, (2, 39)), True)
    assert args == [run.TORCH]


def test_mlx_s_build_follows_the_gpu_and_the_two_never_meet() -> None:
    run = run_py()
    linux, nvidia = run.Target("Linux", "x86_64", None, (2, 39)), run.Target("Linux", "x86_64", run.NVIDIA, (2, 39))
    assert run.extras_for("verify", linux) == ("verify", "cpu")
    assert run.extras_for("verify", nvidia) == ("verify", "cuda")
    assert run.extras_for("test", run.Target("Darwin", "arm64", None)) == ("dev",)
    assert run.extras_for("site", linux) == ("site",), "the site is built from records: no torch, no MLX"
    extras = _pyproject()["project"]["optional-dependencies"]
    assert any(r.startswith("mlx[cuda") for r in extras["cuda"]) and any(
        r.startswith("mlx[cpu]") for r in extras["cpu"]
    )
    assert not any("mlx" in r for r in extras["verify"] if "linux" in r), "on Linux MLX comes from cpu or cuda only"


def test_the_site_extra_brings_no_backend() -> None:
    project = _pyproject()["project"]
    names = [
        re.split(r"[<>=\[;! ]", r, maxsplit=1)[0].lower()
        for r in [*project["dependencies"], *project["optional-dependencies"]["site"]]
    ]
    assert not {"torch", "mlx", "transformers", "jax", "gguf"} & set(names)
    assert "mkdocs" in names and any(
        "<2" in r for r in project["optional-dependencies"]["site"] if r.startswith("mkdocs>")
    )


def test_run_py_has_every_job_of_the_command_and_its_help_lists_each() -> None:
    run = run_py()
    assert set(run.JOBS) - {"setup", "notebook"} == set(cli.JOBS)  # setup and notebook are run.py's own
    assert set(run.SUMMARY) == set(run.JOBS), "each job says what it does"
    jobs = run.help_text().split("The jobs:", 1)[1].splitlines()
    listed = {line.split()[0] for line in jobs if re.match(r"  \S", line)}
    assert all(len(line) <= 100 for line in jobs), "the list fits a terminal"
    assert listed == set(run.JOBS)
    command = {line.split()[1] for line in cli.overall_help().splitlines() if line.startswith("  verified-book ")}
    assert command == set(cli.JOBS) and command <= listed, "`run.py --help` lists every job `verified-book --help` does"
    assert _pyproject()["project"]["scripts"]["verified-book"] == "verified_book.integration.cli:run"


def test_set_up_keeps_a_command_s_output_back_unless_it_fails_or_is_asked_for(
    capfd: pytest.CaptureFixture[str],
) -> None:
    run = run_py()
    run._run(sys.executable, "-c", "print('Collecting numpy'); import sys; print('warn', file=sys.stderr)")
    assert capfd.readouterr() == ("", ""), "a step that succeeds says nothing beyond its own line"
    with pytest.raises(subprocess.CalledProcessError):
        run._run(sys.executable, "-c", "print('Collecting numpy'); raise SystemExit('no such version')")
    out, err = capfd.readouterr()
    assert "Collecting numpy" in err and "no such version" in err, "a failure shows the command's whole output"
    run.VERBOSE = True
    run._run(sys.executable, "-c", "print('Collecting numpy')")
    assert "Collecting numpy" in capfd.readouterr().out, "setup -v shows pip's detail as it comes"


def test_each_set_up_step_is_said_before_it_runs_and_pip_keeps_its_detail_for_a_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_py()
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    monkeypatch.setattr(run, "ROOT", tmp_path)
    monkeypatch.setattr(run, "VENV", tmp_path / ".venv")
    monkeypatch.setattr(run, "BIN", tmp_path / ".venv" / "bin")
    monkeypatch.setattr(run, "STAMP", tmp_path / ".venv" / ".installed")
    monkeypatch.setattr(run, "has_nvidia_gpu", lambda: False)
    monkeypatch.setattr(run, "has_amd_gpu", lambda: False)
    monkeypatch.delenv(run.TARGET_VARIABLE, raising=False)
    monkeypatch.setenv(run.INSTALLER_VARIABLE, "pip")  # uv's own path: tests/repo/test_installer.py
    monkeypatch.setattr(run, "reachable", lambda url, timeout=8.0: False)
    monkeypatch.setattr(run, "_has_torch", lambda: False)
    monkeypatch.setattr(run, "_report_builds", lambda target: print("run.py: torch 2.13.0: CPU only build"))
    monkeypatch.setattr(run.platform, "system", lambda: "Linux")
    said: list[str] = []
    commands: list[list[str]] = []

    def fake_run(*cmd: Any, tell_failure: bool = True) -> None:
        said.append(capsys.readouterr().out)
        commands.append([str(c) for c in cmd])
        if cmd[1:3] == ("-m", "venv"):
            (tmp_path / ".venv" / "bin").mkdir(parents=True)
            (tmp_path / ".venv" / "bin" / "python").touch()

    monkeypatch.setattr(run, "_run", fake_run)
    run.setup("verify")
    out = "".join(said) + capsys.readouterr().out
    for step in ("set-up 1/3", "set-up 2/3", "set-up 3/3", "set-up done"):
        assert step in out
    assert "cannot be reached" in out, "the fallback is said"
    pips = [c for c in commands if "pip" in c]
    assert pips and not any({"-q", "--quiet"} & set(c) for c in pips), "pip's detail is there for a failure to show"
    project = next(c for c in pips if "-e" in c)
    assert project[-2:] == ["-e", "."] and "--no-deps" in project, "the project itself, its dependencies already in"
    dependencies = next(c for c in pips if "mkdocs>=1.6,<2" in c)
    assert "-c" in dependencies and "/requirements/lock/linux-" in dependencies[dependencies.index("-c") + 1]
    assert not [c for c in dependencies if c.startswith("verified-book")], "the project's own extras are expanded"
    torch = pips[1]  # after pip's own update
    assert "--no-deps" in torch, "torch alone: its dependencies come from PyPI with the lock's hashes"
    cpu = run.torch_cpu_lock(run.this_machine())
    if cpu:  # its CPU build's own hashes, so PyPI's CUDA build cannot stand in for it
        assert {"--require-hashes", "-r", str(cpu)} <= set(torch)
    else:  # no hashes of the CPU build in hand: installed from its index unchecked, and set-up says so
        assert run.TORCH in torch and "-c" not in torch and "without hash checking" in out
    assert all("run.py: set-up" in s for s in said), "every command is announced as it starts"


def test_a_mistyped_job_fails_at_once_with_the_list_of_jobs(tmp_path: Path) -> None:
    copy = tmp_path / "run.py"
    shutil.copy(ROOT / "run.py", copy)  # no .venv beside it: a set-up would have to create one
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(copy), "verfiy"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and time.monotonic() - started < 10
    assert "unknown job 'verfiy'" in done.stderr
    for job in ("verify", "test", "site", "contribute", "merge-results", "fault-table"):
        assert job in done.stderr
    assert not (tmp_path / ".venv").exists() and "set-up" not in done.stdout


def test_the_command_refuses_a_mistyped_job_too() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "verified_book.integration.cli", "verfiy"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 2 and "verify, test, site" in done.stderr


def test_every_job_says_how_it_is_called_when_asked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # a job runs at its book's root; the test's folder comes back after it
    assert cli.main(["--help"]) == 0
    listed = capsys.readouterr().out
    for job, (call, _, _) in cli.JOBS.items():
        assert f"verified-book {call}\n" in listed, job
    for job in (*cli.OWN_HELP, "merge-results", "serve"):
        with contextlib.suppress(SystemExit):  # argparse's help exits 0
            assert cli.main([job, "--help"]) == 0, job
        out = capsys.readouterr().out
        assert out.startswith(f"usage: verified-book {job}"), out


def test_contribute_refuses_what_it_does_not_take_and_merges_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dataclasses import replace

    local, results = tmp_path / "results.local", tmp_path / "results"
    local.mkdir()
    (local / "box.json").write_text("{}")
    mine = replace(read_config(ROOT), local_results=local, results=results)
    assert cli.contribute(mine, ["--into", "elsewhere"]) == 2
    assert "expected --check-only or --keep-newer, found --into elsewhere" in capsys.readouterr().err
    assert not results.exists()


#: a lock's entry: a pin, then its hashes on the lines that continue it
PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9_.\-]+)==(?P<version>\S+?)(?P<rest>(?: \\\n    --hash=sha256:[0-9a-f]{64})*)$", re.M
)


def _pins(path: Path) -> dict[str, tuple[str, int]]:
    """A lock's pins: name -> (version, how many hashes); a line that is neither a pin, a hash nor a comment fails."""
    text = path.read_text(encoding="utf-8")
    found = {m["name"].lower(): (m["version"], m["rest"].count("--hash=")) for m in PIN.finditer(text)}
    stray = [
        f"{path.name}:{n}: {line}"
        for n, line in enumerate(text.splitlines(), 1)
        if line.strip()
        and not line.startswith(("#", "    --hash=", "    # "))
        and not re.match(r"[A-Za-z0-9_.\-]+==", line)
    ]
    assert not stray, f"lines that are no pin: {stray}"
    return found


def test_every_platform_and_python_has_a_lock_and_every_pin_a_hash() -> None:
    run = run_py()
    pythons = ("3.11", "3.12", "3.13", "3.14")
    assert _pyproject()["project"]["requires-python"] == ">=3.11"
    for platform in sorted(set(run.LOCK_PLATFORMS.values())):
        for python in pythons:
            lock = run.LOCKS / f"{platform}-py{python}.txt"
            pins = _pins(lock)
            text = lock.read_text(encoding="utf-8")
            starts = len(re.findall(r"^[A-Za-z0-9_.\-]+==", text, re.M))
            assert len(pins) == starts, f"{lock.name}: a pin the lock's pattern does not read"
            unhashed = [name for name, (_, hashes) in pins.items() if hashes == 0]
            assert not unhashed, f"{lock.name}: pins without a hash: {unhashed}"
            assert pins["torch"][0] == run.TORCH.split("==")[1] and "verified-book" not in pins
            assert {"numpy", "mkdocs", "pytest", "setuptools"} <= set(pins), f"{lock.name}: the extras are not all in"
    # torch's CPU build is locked only where scripts/lock could read its index's own hashes
    for lock in sorted((run.LOCKS / "torch-cpu").glob("*.txt")):
        assert _pins(lock) == {"torch": (run.TORCH.split("==")[1], lock.read_text().count("--hash="))}
        assert lock.read_text().count("--hash=") == lock.read_text().count(".whl"), "each hash names its wheel"


def test_set_up_finds_its_platform_s_lock_and_none_where_there_is_none() -> None:
    run = run_py()
    linux = run.Target("Linux", "x86_64", None, (2, 39))
    assert run.lock_for(linux, (3, 11)) == run.LOCKS / "linux-x86_64-py3.11.txt"
    assert run.lock_for(run.Target("Darwin", "arm64", None), (3, 13)) == run.LOCKS / "macos-arm64-py3.13.txt"
    assert run.lock_for(run.Target("Windows", "AMD64", None), (3, 11)) is None
    assert run.lock_for(linux, (3, 10)) is None


def test_the_plain_lock_is_the_ci_lock_without_its_hashes() -> None:
    """requirements/lock.txt serves CI's side environments, which install the project editable."""
    run = run_py()
    hashed = {n: v for n, (v, _) in _pins(run.LOCKS / "linux-x86_64-py3.11.txt").items()}
    plain = {n: v for n, (v, _) in _pins(ROOT / "requirements" / "lock.txt").items()}
    assert plain == hashed


def test_the_project_s_requirements_expand_its_own_extras() -> None:
    run = run_py()
    wanted = run.project_requirements(("dev",))
    assert not [r for r in wanted if r.lower().startswith("verified-book")]
    assert {"setuptools>=68", "numpy>=2.0", "playwright>=1.45", "jupytext>=1.16", "mkdocs>=1.6,<2"} <= set(wanted)
    assert not [r for r in run.project_requirements(("site",)) if r.startswith(("torch", "mlx"))]


# verify: what verifies the book, a verdict, records kept apart from the committed ones.


def test_verify_runs_the_book_and_not_the_engine_s_tests() -> None:
    book = read_config(ROOT)
    paths = cli.verify_paths(book)
    assert str(ROOT / "book.toml") in paths and str(book.pages) in paths
    assert not any(Path(p).is_relative_to(ROOT / "tests") for p in paths)


def test_the_verdict_fits_a_terminal_naming_every_status_and_where_things_are() -> None:
    book = read_config(ROOT)
    outcome = cli._Outcome()
    outcome.figures = {"verified": 900, "disputed": 6, "not here": 14}
    outcome.bound = 920
    outcome.slug, outcome.written = "box", book.writes_to / "box.json"
    text = cli.verdict(outcome, 0, 0, book)
    lines = text.splitlines()
    assert lines[0] == "verified-book: verified on box", "the first line says what held, alone"
    assert all(len(line) <= 100 for line in lines), [len(line) for line in lines]
    line = " ".join(part.strip() for part in lines)
    for word in (
        "all 920 bound figures selected",
        "900 verified",
        "0 cited",
        "0 stale",
        "0 failed",
        "6 disputed",
        "0 reference",
        "14 not computable here",
        "on box",
        "site: ",
        "results: results.local/box.json",
    ):
        assert word in line


def test_the_verdict_says_verified_only_where_the_run_verified_a_figure() -> None:
    book = read_config(ROOT)
    outcome = cli._Outcome()
    outcome.bound = 920
    outcome.figures = {}  # `--changed` with nothing changed
    assert cli.verdict(outcome, 0, 0, book).startswith("verified-book: no figure checked\n  figures (0 of the book's")
    outcome.figures = {"cited": 3}  # a `-k` that selected cited figures only
    assert cli.verdict(outcome, 0, 0, book).startswith(
        "verified-book: none stale or failed\n  figures (3 of the book's"
    )
    outcome.figures = {"verified": 2, "cited": 1}
    assert cli.verdict(outcome, 0, 0, book).startswith("verified-book: verified\n  figures (3 of the book's")
    assert cli.verdict(outcome, 1, 0, book).startswith("verified-book: NOT all verified\n  figures")


def test_a_run_writes_to_the_local_results_folder_which_git_ignores() -> None:
    book = read_config(ROOT)
    assert book.writes_to == ROOT / "results.local" and book.results == ROOT / "results"
    ignored = subprocess.run(["git", "check-ignore", "-q", "results.local/x.json"], cwd=ROOT).returncode
    assert ignored == 0


@pytest.mark.parametrize("kept_in", ["store", "json"])
def test_contribute_merges_the_local_records_into_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], kept_in: str
) -> None:
    """A clone's own history, its store (or a JSON history not yet taken into one), goes into results/ as the
    exchange file: the text that history holds, checked as any contributed file."""
    from test_probes import _sound_file

    from verified_book.records import store
    from verified_book.records.results import dumps, merge_into
    from verified_book.records.results import read as read_results

    local, results = tmp_path / "results.local", tmp_path / "results"
    local.mkdir()
    own = local / "test-box.json"
    own.write_text(json.dumps(_sound_file()))
    expected = merge_into(tmp_path / "alone" / "test-box.json", read_results(own, own=True))
    if kept_in == "store":
        merge_into(store.place(local, "test-box"), read_results(own, own=True))
        assert not own.exists(), "taken into the store"
    book = read_config(ROOT)
    monkeypatch.setattr(type(book), "writes_to", property(lambda self: local))
    from dataclasses import replace

    mine = replace(book, local_results=local, results=results)
    assert cli.contribute(mine, []) == 0
    assert read_results(results / "test-box.json").records["probe.bandwidth.copy"]["numpy"].value == 12.5
    assert (results / "test-box.json").read_text() == dumps(expected)
    said = capsys.readouterr().out
    assert "pull request" in said
    assert said.startswith("verified-book contribute: ") and "merge-results" not in said, "it speaks as the job run"
    for path in local.iterdir():
        path.unlink()
    assert cli.contribute(mine, []) == 1 and "nothing to contribute" in capsys.readouterr().err


# Ctrl-C through run.py: pytest's own handling, the records judged so far kept, exit 130.


def _set_up_current() -> bool:
    run = run_py()
    installed = run._installed()
    return installed is not None and "dev" in installed and (run.BIN / "verified-book").exists()


@pytest.mark.slow
def test_ctrl_c_through_run_py_keeps_this_run_s_records_and_exits_130(tmp_path: Path) -> None:
    if not _set_up_current():
        pytest.skip("run.py's set-up is not current here (python3 run.py setup first), and this test must not install")
    results = tmp_path / "results"
    proc = subprocess.Popen(
        [
            sys.executable,
            "run.py",
            "test",
            "-v",
            "-p",
            "no:cacheprovider",
            "--results-dir",
            str(results),
            "book.toml",
            "-k",
            "probe or formats",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    passed = 0
    deadline = time.monotonic() + 240
    while passed < 3 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        passed += " PASSED" in line
    assert passed >= 3, "the run did not get going"
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C: the whole foreground group
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (
        f"exit {proc.returncode}\n--- stdout's end:\n{out[-2000:]}\n--- stderr:\n{err[-20000:]}"
    )
    assert "KeyboardInterrupt" in out, "pytest reports the interrupt as it does on its own"
    assert "Traceback" not in err, "no traceback from run.py"
    (written,) = results.glob("*.json")
    records = json.loads(written.read_text())["records"]
    assert sum(len(per_backend) for per_backend in records.values()) >= 3, "the records judged so far are kept"


def test_the_command_exits_with_the_job_s_code_after_its_exit_handlers_and_output() -> None:
    """`cli.run` skips the interpreter's teardown, not what an exit owes: the handlers a job's libraries register,
    flushed output, the code."""
    script = (
        "import atexit, sys\nfrom verified_book.integration import cli\n"
        "job = cli.main\n"
        "def main():\n"
        "    atexit.register(lambda: print('handler ran'))\n"
        "    print('said before', end='')\n"
        "    return job()\n"
        "cli.main = main\n"
        "sys.argv = ['verified-book', *sys.argv[1:]]\ncli.run()\n"
    )
    unknown = subprocess.run(
        [sys.executable, "-c", script, "verfiy"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert unknown.returncode == 2 and "unknown job 'verfiy'" in unknown.stderr
    assert unknown.stdout == "said beforehandler ran\n"
    helped = subprocess.run(
        [sys.executable, "-c", script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (
        helped.returncode == 0 and "verified-book verify" in helped.stdout and helped.stdout.endswith("handler ran\n")
    )


@pytest.mark.slow
def test_verify_that_ran_nothing_builds_no_site_and_gives_no_verdict() -> None:
    """A command line pytest refuses, or one that selects nothing, runs nothing: the site of the last run stays,
    no verdict line speaks of a run that did not happen, and an error names the job the reader typed."""
    index = ROOT / "site" / "index.html"
    before = index.stat().st_mtime_ns if index.exists() else None
    nothing = "verified-book: nothing was checked (see the error above); the site is left as it was"
    refusals = {
        ("--reading", "hardware/dgx.toml"): ("claims/data/hardware/dgx.toml is no data file of the book", nothing, 4),
        ("--no-such-option",): ("verified-book verify: error: unrecognized arguments: --no-such-option", nothing, 4),
        ("-k", "no_such_check"): (
            " deselected in ",
            "verified-book: the arguments selected none of the book's checks, so nothing was checked; the site is "
            "left as it was",
            5,
        ),
    }
    for arguments, (said, then, code) in refusals.items():
        refused = subprocess.run(
            [sys.executable, "-m", "verified_book.integration.cli", "verify", *arguments],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert refused.returncode == code, refused.stdout[-2000:] + refused.stderr[-2000:]
        assert said in refused.stdout + refused.stderr and then in refused.stderr
        assert "verified on" not in refused.stdout + refused.stderr and "Building documentation" not in refused.stderr
        assert (index.stat().st_mtime_ns if index.exists() else None) == before


@pytest.mark.parametrize(
    ("args", "distributed"),
    [
        ([], True),
        (["-q", "-p", "no:cacheprovider", "--no-results"], True),
        (["-n", "0"], False),
        (["-n3"], False),
        (["--numprocesses=3"], False),
        (["--dist", "loadfile"], False),
        (["-p", "no:xdist"], False),
        (["-pno:xdist"], False),
    ],
)
def test_the_suite_runs_on_the_cpus_unless_told_how(
    monkeypatch: pytest.MonkeyPatch, args: list[str], distributed: bool
) -> None:
    """`verified-book test` spreads the suite over xdist's workers where there are CPUs to spread it on, and
    leaves a reader's own distribution (or none) as they said it."""
    from verified_book.engine import machine

    monkeypatch.setattr(machine, "usable_cpus", lambda: 16)
    assert cli.workers_for(args) == (["-n", str(cli.TEST_WORKERS)] if distributed else [])
    monkeypatch.setattr(machine, "usable_cpus", lambda: 1)
    assert cli.workers_for(args) == [], "one CPU: the run stays in this process"
