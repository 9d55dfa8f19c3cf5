"""scripts/verify-cuda and scripts/verify-rocm --dry-run: on this machine, what each would install and
run on a CUDA or a ROCm one; the slow tests resolve their JAX builds with pip for the track's platform."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from harness.distributions import requirement_closure
from harness.paths import ROOT
from packaging.utils import canonicalize_name

SCRIPT = ROOT / "scripts" / "verify-cuda"
ROCM_SCRIPT = ROOT / "scripts" / "verify-rocm"
RTX5080 = "NVIDIA GeForce RTX 5080, 16303 MiB, {driver}, 12.0"
GB10 = "NVIDIA GB10, 122000 MiB, 580.95.05, 12.1"


def locked(name: str) -> str:
    found = re.search(rf"^{re.escape(name)}==(\S+)$", (ROOT / "requirements" / "lock.txt").read_text(), re.M)
    assert found, f"requirements/lock.txt pins {name}"
    return found[1]


def baseline_torch() -> str:
    """The CPU baseline's torch version, read from run.py as the script reads it."""
    found = re.search(r'^TORCH = "torch==([^"]+)"', (ROOT / "run.py").read_text(), re.M)
    assert found, "run.py names the CPU baseline's torch"
    return found[1]


def dry_run(
    gpu: str | None = None, script: Path = SCRIPT, args: tuple[str, ...] = (), **env: str
) -> subprocess.CompletedProcess[str]:
    stand_in = "VERIFY_ROCM_GPU" if script == ROCM_SCRIPT else "VERIFY_CUDA_GPU"
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VERIFY_CUDA_GPU", "VERIFY_ROCM_GPU", "TORCH_CUDA", "TORCH_ROCM", "VENV")
    }
    if gpu is not None:
        environment[stand_in] = gpu
    environment.update(env)
    return subprocess.run(
        [str(script), "--dry-run", *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


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
    assert any(s.endswith(f"pip install --quiet jax[cuda13]=={locked('jax')}") for s in pip), steps
    assert (
        [i for i, s in enumerate(steps) if "torch==" in s]
        < [i for i, s in enumerate(steps) if " -e " in s]
        < [i for i, s in enumerate(steps) if "mlx[cuda13]" in s]
        < [i for i, s in enumerate(steps) if "jax[cuda13]" in s]
    ), "torch first, then the project, then MLX's and JAX's CUDA builds"
    assert any(s.endswith(f"-c {ROOT}/requirements/lock.txt -e {ROOT}[verify,tests]") for s in pip), steps
    assert "driver 580.95.05 is new enough (needs 580.65.06)" in done.stdout
    assert steps[0].endswith(f"-m venv {venv}")
    assert steps[-1].startswith(f"{venv}/bin/pytest -q -p no:cacheprovider")
    assert "nothing was installed or run" in done.stdout


H200 = "NVIDIA H200, 143771 MiB, 580.159.04, 9.0"


def _wheels(folder: Path, *names: str) -> Path:
    """A --wheels folder holding (empty stand-ins for) the named wheels: the dry run reads only their names."""
    folder.mkdir()
    for name in names:
        (folder / name).write_bytes(b"")
    return folder


def test_an_offline_run_installs_from_the_wheels_alone_without_the_lock(tmp_path: Path) -> None:
    """A machine that reaches no index: every install names the folder and no index, the lock's pins (for a
    connected machine) are not applied, and a GPU build the folder lacks is left out and said so."""
    wheels = _wheels(
        tmp_path / "wheels", "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl", "mlx_cpu-0.32.4-py3-none-any.whl"
    )
    venv = tmp_path / "fresh"
    done = dry_run(H200, args=("--wheels", str(wheels)), VENV=str(venv))
    assert done.returncode == 0, done.stderr
    pip = [s for s in planned(done.stdout) if " -m pip " in s]
    offline = f"--no-index --find-links {wheels}"
    assert pip == [
        f"{venv}/bin/python -m pip install --quiet {offline} torch",
        f"{venv}/bin/python -m pip install --quiet {offline} --no-build-isolation -e {ROOT}[verify,tests]",
        f"{venv}/bin/python -m pip install --quiet {offline} mlx[cpu]",
    ], pip
    assert f"mlx:gpu is left out: {wheels} holds no MLX CUDA wheel (mlx_cuda_13-*.whl)" in done.stdout
    assert f"jax:gpu is left out: {wheels} holds no JAX CUDA plugin (jax_cuda13_plugin-*.whl)" in done.stdout


def test_an_offline_run_with_no_torch_to_use_stops_before_installing(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "wheels", "gguf-0.19.0-py3-none-any.whl")
    done = dry_run(H200, args=("--wheels", str(wheels)), VENV=str(tmp_path / "fresh"))
    assert done.returncode == 1
    assert f"{wheels} holds no torch wheel: add a CUDA build of torch" in done.stderr
    assert " -m pip " not in done.stdout, "nothing is installed"


@pytest.mark.parametrize("folder", ["missing", "empty"])
def test_a_wheels_folder_that_holds_no_wheel_is_refused(tmp_path: Path, folder: str) -> None:
    (tmp_path / "empty").mkdir()
    done = dry_run(H200, args=("--wheels", str(tmp_path / folder)))
    assert done.returncode == 2
    assert ("no such folder" if folder == "missing" else "holds no .whl file") in done.stderr


def _module_level_imports(path: Path) -> set[str]:
    """The top-level names a test module imports when it is collected (imports inside functions come later)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_the_scripts_install_what_the_suites_modules_import() -> None:
    """verify-cuda and verify-rocm run the whole suite after installing the verify and tests extras: every
    third-party module a test module imports at collection must come with them, or collection stops the run."""
    installed = requirement_closure("verified-book", {"verify", "tests"})
    owners = importlib.metadata.packages_distributions()
    modules = [ROOT / "conftest.py", *sorted((ROOT / "tests").glob("**/*.py"))]
    local = {"verified_book", "claims", "harness", "conftest", "tests"}
    missing = {
        f"{path.relative_to(ROOT)}: {name} ({', '.join(owners[name])})"
        for path in modules
        for name in _module_level_imports(path) - local - set(sys.stdlib_module_names)
        if name in owners and not {canonicalize_name(d) for d in owners[name]} & installed
    }
    assert not missing, sorted(missing)


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
    assert any(
        s.endswith(f"torch=={baseline_torch()} --index-url https://download.pytorch.org/whl/cu128") for s in steps
    )
    assert any("mlx[cuda12]" in s for s in steps) and not any("mlx[cuda13]" in s for s in steps)


@pytest.mark.slow
def test_a_card_mlx_cannot_use_leaves_mlx_gpu_out_and_says_why(tmp_path: Path) -> None:
    done = dry_run("Tesla V100-SXM2-16GB, 16384 MiB, 580.95.05, 7.0", VENV=str(tmp_path / "fresh"))
    assert done.returncode == 0, done.stderr
    assert "mlx:gpu is left out: compute capability 7.0 is below the 7.5" in done.stdout
    steps = planned(done.stdout)
    assert not any("mlx[" in s for s in steps)
    assert steps[0].endswith(f"-m venv {tmp_path / 'fresh'}"), "a fresh machine gets its environment first"


def test_the_rocm_dry_run_plans_torchs_rocm_build_from_run_pys_index(tmp_path: Path) -> None:
    venv = tmp_path / "fresh"
    done = dry_run("AMD Radeon 8060S, gfx1151", ROCM_SCRIPT, VENV=str(venv))
    assert done.returncode == 0, done.stderr
    steps = planned(done.stdout)
    variant = re.search(r'^ROCM = "([^"]+)"', (ROOT / "run.py").read_text(), re.M)
    assert variant
    torch = [s for s in steps if "torch==" in s]
    assert torch == [
        f"{venv}/bin/python -m pip install --quiet torch=={baseline_torch()} --index-url "
        f"https://download.pytorch.org/whl/{variant[1]}"
    ], steps
    assert any(s.endswith(f"-e {ROOT}[verify,tests,cpu]") for s in steps), "MLX's CPU build: MLX has no ROCm build"
    assert any(s.endswith(f"jax[rocm7-local]=={locked('jax')}") for s in steps)
    assert steps[-1].startswith(f"{venv}/bin/pytest -q -p no:cacheprovider")
    assert "stop unless torch:rocm is usable" in done.stdout and "nothing was installed or run" in done.stdout


def test_a_rocm_variant_that_is_not_one_is_refused() -> None:
    done = dry_run("AMD Radeon 8060S, gfx1151", ROCM_SCRIPT, TORCH_ROCM="cu128")
    assert done.returncode == 1 and "expected one such as rocm7.2" in done.stderr


def _jax_step(output: str) -> str:
    (step,) = [s for s in planned(output) if "pip install --quiet jax[" in s]
    return step.rsplit(" ", 1)[1]


@pytest.mark.slow
@pytest.mark.parametrize(("track", "gpu"), [("N", RTX5080.format(driver="580.95.05")), ("S", GB10)])
def test_the_cuda_scripts_jax_resolves_to_its_cuda_plugin_for_the_tracks_platform(
    track: str, gpu: str, tmp_path: Path
) -> None:
    from test_track_plans import TRACKS, _pypi, resolve

    _pypi()
    requirement = _jax_step(dry_run(gpu, VENV=str(tmp_path / "fresh")).stdout)
    found = resolve(TRACKS[track].target, [requirement], constraints=False)
    assert found.version("jax-cuda13-plugin") == found.version("jaxlib") == locked("jax"), found.words()
    assert found.wheels["jax-cuda13-plugin"][1].endswith(f"_{TRACKS[track].target.machine}.whl")


@pytest.mark.slow
def test_the_rocm_scripts_jax_resolves_to_its_rocm_plugin_on_x86_64(tmp_path: Path) -> None:
    from test_track_plans import TRACKS, _pypi, resolve

    _pypi()
    requirement = _jax_step(dry_run("AMD Radeon 8060S, gfx1151", ROCM_SCRIPT, VENV=str(tmp_path / "fresh")).stdout)
    found = resolve(TRACKS["X"].target, [requirement], constraints=False)
    assert found.version("jax-rocm7-plugin") == found.version("jaxlib") == locked("jax"), found.words()
