"""scripts/verify-cuda --dry-run: on this machine, what it would install and run on a CUDA one."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "verify-cuda"
RTX5080 = "NVIDIA GeForce RTX 5080, 16303 MiB, {driver}, 12.0"


def baseline_torch() -> str:
    """The CPU baseline's torch version, read from run.py as the script reads it."""
    found = re.search(r'^CPU_TORCH = "torch==([^"]+)"', (ROOT / "run.py").read_text(), re.M)
    assert found, "run.py names the CPU baseline's torch"
    return found[1]


def dry_run(gpu: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("VERIFY_CUDA_GPU", "TORCH_CUDA", "VENV")}
    if gpu is not None:
        environment["VERIFY_CUDA_GPU"] = gpu
    environment.update(env)
    return subprocess.run([str(SCRIPT), "--dry-run"], cwd=ROOT, env=environment, capture_output=True, text=True,
                          timeout=120)


def planned(output: str) -> list[str]:
    return [line.split("would run: ", 1)[1] for line in output.splitlines() if "would run: " in line]


def test_the_dry_run_plans_the_baselines_torch_as_a_cuda_build_and_mlx_on_the_gpu(tmp_path: Path) -> None:
    """For a fresh environment (the plan does not depend on what this machine has installed)."""
    venv = tmp_path / "fresh"
    done = dry_run(RTX5080.format(driver="580.95.05"), VENV=str(venv))
    assert done.returncode == 0, done.stderr
    steps = planned(done.stdout)
    torch = baseline_torch()
    pip = [s for s in steps if " -m pip install" in s]
    assert any(s.endswith(f"pip install --quiet torch=={torch}") for s in pip), steps
    assert any(re.search(r"pip install --quiet mlx\[cuda13\](==[0-9.]+)?$", s) for s in pip), steps
    assert [i for i, s in enumerate(steps) if "torch==" in s] < [i for i, s in enumerate(steps) if " -e " in s] \
        < [i for i, s in enumerate(steps) if "mlx[cuda13]" in s], "torch first, then the project, then MLX's CUDA build over its CPU one"
    assert "driver 580.95.05 is new enough (needs 580.65.06)" in done.stdout
    assert steps[0].endswith(f"-m venv {venv}")
    assert steps[-1].startswith(f"{venv}/bin/pytest -q -p no:cacheprovider")
    assert "nothing was installed or run" in done.stdout


@pytest.mark.slow
def test_a_driver_too_old_stops_before_any_install() -> None:
    done = dry_run(RTX5080.format(driver="570.133.07"))
    assert done.returncode == 1
    assert "driver 570.133.07 is older than 580.65.06" in done.stderr and "TORCH_CUDA=cu128" in done.stderr
    assert not planned(done.stdout), "nothing is planned past the driver check"


@pytest.mark.slow
def test_an_older_cuda_variant_pairs_torch_and_mlx_builds_of_that_cuda(tmp_path: Path) -> None:
    done = dry_run(RTX5080.format(driver="570.133.07"), TORCH_CUDA="cu128", VENV=str(tmp_path / "fresh"))
    assert done.returncode == 0, done.stderr
    steps = planned(done.stdout)
    assert any(s.endswith(f"torch=={baseline_torch()} --index-url https://download.pytorch.org/whl/cu128") for s in steps)
    assert any("mlx[cuda12]" in s for s in steps) and not any("mlx[cuda13]" in s for s in steps)


@pytest.mark.slow
def test_a_card_mlx_cannot_use_leaves_mlx_gpu_out_and_says_why(tmp_path: Path) -> None:
    done = dry_run("Tesla V100-SXM2-16GB, 16384 MiB, 580.95.05, 7.0", VENV=str(tmp_path / "fresh"))
    assert done.returncode == 0, done.stderr
    assert "mlx:gpu is left out: compute capability 7.0 is below the 7.5" in done.stdout
    steps = planned(done.stdout)
    assert not any("mlx[" in s for s in steps)
    assert steps[0].endswith(f"-m venv {tmp_path / 'fresh'}"), "a fresh machine gets its environment first"
