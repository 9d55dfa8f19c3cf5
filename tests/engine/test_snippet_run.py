"""A snippet run inside the test process behaves as the same file run as a script, and leaves the process as it found
it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from harness.paths import ROOT

from verified_book.engine import snippet_run
from verified_book.engine.snippet_run import (
    LOAD_TIME_VARIABLES,
    SNIPPET_ENV,
    pins_load_time_variables,
    run_as_script,
    run_in_process,
    run_in_process_or_as_script,
)


def write(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def test_a_snippet_that_changes_the_process_leaves_no_trace(tmp_path: Path) -> None:
    write(tmp_path, "helper_beside.py", "VALUE = 7\n")
    snippet = write(
        tmp_path,
        "meddles.py",
        """
        import os, sys, warnings
        import numpy as np
        import torch
        import helper_beside

        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(False)
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.manual_seed(123)
        np.seterr(all="raise")
        np.random.seed(5)
        warnings.simplefilter("error")
        os.environ["SNIPPET_WAS_HERE"] = "1"
        sys.path.append("/nowhere")
        with open("artifact.txt", "w") as f:
            f.write("x")
        print("argv", sys.argv[1:], "hashseed", os.environ["PYTHONHASHSEED"], "helper", helper_beside.VALUE)
    """,
    )
    before = (
        os.getcwd(),
        list(sys.argv),
        list(sys.path),
        torch.get_default_dtype(),
        torch.is_grad_enabled(),
        torch.random.get_rng_state().clone(),
        np.geterr(),
        np.random.get_state()[1].copy(),
        (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
    )

    done = run_in_process(snippet)

    assert (done.exit_status, done.how) == (0, "in process"), done.stderr
    assert done.stdout == f"argv [] hashseed {SNIPPET_ENV['PYTHONHASHSEED']} helper 7\n"
    assert os.getcwd() == before[0] and sys.argv == before[1] and sys.path == before[2]
    assert torch.get_default_dtype() == before[3] and torch.is_grad_enabled() == before[4]
    assert torch.equal(torch.random.get_rng_state(), before[5])
    assert np.geterr() == before[6] and (np.random.get_state()[1] == before[7]).all()
    assert (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()) == (
        before[8]
    )
    assert "SNIPPET_WAS_HERE" not in os.environ and "helper_beside" not in sys.modules
    written = sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__")  # as a script run leaves it
    assert written == ["helper_beside.py", "meddles.py"], "the snippet wrote beside itself, not in its working folder"


@pytest.mark.slow
def test_putting_torch_back_loads_nothing_the_snippet_did_not(tmp_path: Path) -> None:
    """Setting torch's deterministic mode, even to what it was, imports its compiler (a second or more, inside the
    timed items of a run): a snippet that left the mode alone must not pay for it. A fresh interpreter, since this
    one may have loaded the compiler already."""
    snippet = write(tmp_path, "plain.py", "import torch\nprint(torch.ones(2).sum().item())\n")
    probe = (
        "import sys, torch\nfrom pathlib import Path\n"
        "from verified_book.engine.snippet_run import run_in_process\n"
        f"done = run_in_process(Path({str(snippet)!r}))\n"
        "assert done.exit_status == 0, done.stderr\n"
        "print(sorted(m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", f"restoring torch's settings loaded {proc.stdout.strip()}"


def test_a_crash_is_an_exit_status_with_the_scripts_own_traceback(tmp_path: Path) -> None:
    snippet = write(
        tmp_path,
        "crashes.py",
        """
        print("before")
        def inner():
            raise ValueError("the weights are the wrong shape")
        inner()
    """,
    )
    done = run_in_process(snippet)
    assert done.exit_status == 1 and done.stdout == "before\n"
    assert f'File "{snippet}", line 5' in done.stderr and f'File "{snippet}", line 4, in inner' in done.stderr
    assert done.stderr.rstrip().endswith("ValueError: the weights are the wrong shape")
    assert "verified_book/engine/snippet_run.py" not in done.stderr and "runpy" not in done.stderr


@pytest.mark.parametrize(
    ("call", "status", "said"),
    [("sys.exit(3)", 3, ""), ("sys.exit('no GPU here')", 1, "no GPU here\n"), ("sys.exit()", 0, "")],
)
def test_sys_exit_gives_the_status_a_script_would(tmp_path: Path, call: str, status: int, said: str) -> None:
    done = run_in_process(write(tmp_path, "exits.py", f"import sys\n{call}\nprint('not reached')\n"))
    assert (done.exit_status, done.stdout, done.stderr) == (status, "", said)


@pytest.mark.parametrize("name", ["shapes.py", "block_quant.py"])
def test_a_book_snippet_prints_the_same_in_process_as_a_script(name: str) -> None:
    path = ROOT / "book" / "snippets" / name
    inside, outside = run_in_process(path), run_as_script(path)
    assert (inside.exit_status, outside.exit_status) == (0, 0), inside.stderr + outside.stderr
    assert inside.stdout == outside.stdout


def test_a_snippet_pinning_a_thread_pool_runs_as_a_script_where_the_pin_takes_effect(tmp_path: Path) -> None:
    """numpy has read OPENBLAS_NUM_THREADS long before: only a fresh interpreter would honour the pin."""
    pins = write(
        tmp_path,
        "pins.py",
        """
        import os
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        import numpy as np
        print(np.ones(3).sum())
    """,
    )
    plain = write(tmp_path, "plain.py", "print(2 + 2)\n")
    inside = run_in_process(pins)
    assert inside.unhonoured == ("OPENBLAS_NUM_THREADS",) and "OPENBLAS_NUM_THREADS" not in os.environ
    chosen = run_in_process_or_as_script(pins)
    assert (chosen.how, chosen.exit_status, chosen.stdout) == ("script", 0, "3.0\n"), chosen.stderr
    assert run_in_process_or_as_script(plain).how == "in process"


def test_a_pin_the_process_already_has_is_honoured_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    same = write(tmp_path, "same.py", "import os\nos.environ['OMP_NUM_THREADS'] = '1'\nprint('ok')\n")
    assert run_in_process_or_as_script(same).how == "in process"


@pytest.mark.parametrize(
    ("source", "pins"),
    [
        ("print(1)\n", False),
        ("import os\nos.environ['OPENBLAS_NUM_THREADS'] = '1'\n", True),
        ("import os\nos.environ.setdefault('OMP_NUM_THREADS', '1')\n", True),
        ("import os\nname = 'MKL_NUM_THREADS'\nos.environ[name] = '1'\n", True),  # named, but set some other way
        ("import os\nos.environ['CUDA_VISIBLE_DEVICES'] = os.environ.get('GPU', '0')\n", True),  # not a literal
        ("# OMP_NUM_THREADS is left alone here\nprint(1)\n", True),  # mentioned but not set plainly: run it apart
    ],
)
def test_a_pin_written_in_the_source_is_seen_before_running(
    source: str, pins: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in LOAD_TIME_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert pins_load_time_variables(source) is pins


def test_a_pin_to_the_value_the_process_has_is_no_pin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert not pins_load_time_variables("import os\nos.environ['OPENBLAS_NUM_THREADS'] = '1'\n")
    assert pins_load_time_variables("import os\nos.environ['OPENBLAS_NUM_THREADS'] = '2'\n")


def test_a_snippet_whose_source_pins_a_thread_pool_is_not_first_run_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Like matmul_cost.py, which pins BLAS to one core: one run, as a script, not one here thrown away."""
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    pins = write(tmp_path, "pins.py", "import os\nos.environ['OPENBLAS_NUM_THREADS'] = '1'\nprint('ran')\n")

    def not_here(path: Path) -> None:
        raise AssertionError(f"{path} was run in this process")

    monkeypatch.setattr(snippet_run, "run_in_process", not_here)
    chosen = run_in_process_or_as_script(pins)
    assert (chosen.how, chosen.stdout) == ("script", "ran\n")
