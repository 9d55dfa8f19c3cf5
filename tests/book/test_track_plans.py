"""Set-up's install plan for each track's machine, resolved by pip for that platform.

The tracks: N (x86_64 Linux with an NVIDIA card; the H100 and H200 profiles are the same platform),
S (the DGX Spark: aarch64 Linux with CUDA), X (a Ryzen AI Max+ 395 with ROCm) and M (Apple
silicon). For each, the plan set-up makes (`run.py`'s torch step and the project's extras) is
handed to pip as `pip install --dry-run --report - --platform ... --python-version 3.11
--only-binary=:all:` under an empty pip configuration, and what pip would install is held against
the builds the backend detection accepts on that track's GPU. The fast tests check the plan and
the command with pip's answer given; the slow ones ask PyPI.

pip evaluates environment markers against the machine it runs on, even with `--platform`: torch's
macOS wheel names its CUDA libraries under `platform_system == "Linux"`, which a Linux host reads as
true. The resolver here runs pip with its markers read for the target instead (`PIP_WITH_MARKERS`:
pip's own `packaging.markers.default_environment`, answered with the target's values), and the
project's own requirements are flattened with the same values.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from typing import Any, Callable

import pytest
from harness.paths import ROOT
from harness.pip_env import plain_env
from harness.scripts import run_py
from packaging.requirements import Requirement

# The interpreter's own version, micro included: "3.11" reads as 3.11.0, which the lock's
# pymdown-extensions (Requires-Python >=3.11.5) refuses.
PYTHON = ".".join(map(str, sys.version_info[:3]))


RUN = run_py()
Target = RUN.Target


@dataclass(frozen=True)
class Track:
    """A track's machine: the platform set-up plans for, and the profiles it stands for."""

    name: str
    target: Any
    profiles: tuple[str, ...]


TRACKS = {
    "N": Track("N", Target("Linux", "x86_64", RUN.NVIDIA, (2, 39)), ("rtx5080", "rtx5090")),
    "H": Track("H", Target("Linux", "x86_64", RUN.NVIDIA, (2, 35)), ("h100", "h200")),
    "S": Track("S", Target("Linux", "aarch64", RUN.NVIDIA, (2, 39)), ("dgx_spark",)),
    "X": Track("X", Target("Linux", "x86_64", RUN.AMD, (2, 39)), ("ryzen_ai_max",)),
    "M": Track("M", Target("Darwin", "arm64", None), ("m4_max",)),
}
S_2_28 = Target("Linux", "aarch64", RUN.NVIDIA, (2, 28))  # the oldest glibc torch's wheels take


def platform_tags(target: Any) -> list[str]:
    """The wheel platform tags a machine takes, newest first: pip expands neither manylinux_2_X nor the
    glibc a machine has, so each is named (manylinux_2_39 down to 2_5 or 2_17, the legacy aliases, linux)."""
    if target.system == "Darwin":
        return [f"macosx_15_0_{target.machine}"]  # pip expands a macOS tag to the older releases itself
    assert target.glibc is not None, "a Linux target names its glibc"
    arch, (major, minor) = target.machine, target.glibc
    lowest = 5 if arch == "x86_64" else 17
    tags = [f"manylinux_{major}_{n}_{arch}" for n in range(minor, lowest - 1, -1)]
    legacy = ["manylinux2014", "manylinux2010", "manylinux1"] if arch == "x86_64" else ["manylinux2014"]
    return [*tags, *(f"{name}_{arch}" for name in legacy), f"linux_{arch}"]


def marker_environment(target: Any) -> dict[str, str]:
    return {
        "sys_platform": "darwin" if target.system == "Darwin" else "linux",
        "platform_system": target.system,
        "platform_machine": target.machine,
        "python_version": PYTHON.rsplit(".", 1)[0],
        "python_full_version": PYTHON,
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }


def project_requirements(extras: tuple[str, ...], target: Any) -> list[str]:
    """The project's requirements with these extras, as the target's pip would read them."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    name = project["name"]
    environment = marker_environment(target)
    out: list[str] = []
    seen: set[str] = set()

    def add(lines: list[str], extra: str) -> None:
        for line in lines:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate({**environment, "extra": extra}):
                continue
            if requirement.name == name:
                for inner in sorted(requirement.extras):
                    if inner not in seen:
                        seen.add(inner)
                        add(project["optional-dependencies"][inner], inner)
                continue
            requirement.marker = None
            out.append(str(requirement))

    add(project["dependencies"], "")
    for extra in extras:
        if extra not in seen:
            seen.add(extra)
            add(project["optional-dependencies"][extra], extra)
    return out


PIP_WITH_MARKERS = """
import json, sys
from pip._vendor.packaging import markers
environment = {**markers.default_environment(), **json.loads(sys.argv[1])}
markers.default_environment = lambda: dict(environment)
from pip._internal.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def pip_command(target: Any, requirements: list[str], constraints: bool = True) -> list[str]:
    platforms = [arg for tag in platform_tags(target) for arg in ("--platform", tag)]
    lock = ["-c", str(ROOT / "requirements" / "lock.txt")] if constraints else []
    return [
        sys.executable,
        "-c",
        PIP_WITH_MARKERS,
        json.dumps(marker_environment(target)),
        "install",
        "--dry-run",
        "--ignore-installed",
        "--quiet",
        "--report",
        "-",
        *platforms,
        "--python-version",
        PYTHON,
        "--only-binary=:all:",
        *lock,
        *requirements,
    ]


Runner = Callable[[list[str], dict[str, str]], subprocess.CompletedProcess[str]]


def real_pip(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)


@dataclass(frozen=True)
class Resolved:
    """What pip would install: each distribution's version and wheel file, by lower-case name."""

    wheels: dict[str, tuple[str, str]]

    def version(self, name: str) -> str | None:
        found = self.wheels.get(name)
        return found[0] if found else None

    def named(self, prefix: str) -> list[str]:
        return sorted(n for n in self.wheels if n.startswith(prefix))

    def words(self) -> str:
        keep = ("torch", "mlx", "jax", "cuda-toolkit", "nvidia-cuda-runtime")
        return ", ".join(f"{n} {v[0]} ({v[1]})" for n, v in sorted(self.wheels.items()) if n.startswith(keep))


def resolve(target: Any, requirements: list[str], runner: Runner = real_pip, constraints: bool = True) -> Resolved:
    done = runner(pip_command(target, requirements, constraints), plain_env())
    assert done.returncode == 0, f"pip could not resolve {requirements} for {target.words()}:\n{done.stderr[-3000:]}"
    report = json.loads(done.stdout)
    return Resolved(
        {
            item["metadata"]["name"].lower(): (
                item["metadata"]["version"],
                item["download_info"]["url"].rsplit("/", 1)[-1],
            )
            for item in report["install"]
        }
    )


def setup_requirements(target: Any, job: str = "verify") -> list[str]:
    """set-up's torch step and the project's extras for `job`, as one list of requirements for pip
    (the torch step's index is PyPI's here; where set-up names another index, see the tests)."""
    args, _ = RUN.torch_plan(target, True)
    torch = [a for a in args if not a.startswith("--") and "://" not in a]
    return [*torch, *project_requirements(RUN.extras_for(job, target), target)]


# --- the plan logic, with pip's answer given ---------------------------------------------------------


def report(*wheels: tuple[str, str, str]) -> str:
    return json.dumps(
        {
            "install": [
                {"metadata": {"name": n, "version": v}, "download_info": {"url": f"https://x/{f}"}}
                for n, v, f in wheels
            ]
        }
    )


def test_each_track_plans_its_gpus_torch_and_mlx_builds() -> None:
    torch_args = {name: RUN.torch_plan(track.target, True)[0] for name, track in TRACKS.items()}
    for name in ("N", "H", "S", "M"):
        assert torch_args[name] == [RUN.TORCH], f"track {name}: torch from PyPI, whose build is the one for its GPU"
    assert torch_args["X"] == [RUN.TORCH, "--index-url", RUN.rocm_index()], "track X: the ROCm index alone"
    assert RUN.rocm_index() == f"https://download.pytorch.org/whl/{RUN.ROCM}"
    extras = {name: RUN.extras_for("verify", track.target) for name, track in TRACKS.items()}
    assert extras == {
        "N": ("verify", "cuda"),
        "H": ("verify", "cuda"),
        "S": ("verify", "cuda"),
        "X": ("verify", "cpu"),
        "M": ("verify",),
    }


def test_where_the_rocm_index_cannot_be_reached_set_up_says_what_to_run() -> None:
    args, sentence = RUN.torch_plan(TRACKS["X"].target, False)
    assert args == [RUN.TORCH]
    assert f"install --force-reinstall {RUN.TORCH} --index-url {RUN.rocm_index()}" in sentence
    assert "cannot be reached" in sentence and "cannot use this GPU" in sentence


def test_what_a_platform_cannot_have_is_said_and_left_out() -> None:
    said = RUN.unavailable(S_2_28)
    assert any("glibc 2.35" in why and "has 2.28" in why for why in said), said
    assert RUN.extras_for("verify", S_2_28) == ("verify",), "no MLX extra, so set-up does not fail on its wheels"
    assert RUN.blocked(S_2_28) is None
    assert "glibc 2.28 or newer" in (RUN.blocked(Target("Linux", "x86_64", None, (2, 17))) or "")
    assert any("MLX has no ROCm build" in why for why in RUN.unavailable(TRACKS["X"].target))
    off_x86 = Target("Linux", "aarch64", RUN.AMD, (2, 39))
    assert RUN.torch_plan(off_x86, True)[0] == [RUN.TORCH, "--index-url", RUN.CPU_INDEX]
    assert any("x86_64 only" in why for why in RUN.unavailable(off_x86))
    assert not RUN.unavailable(TRACKS["S"].target) and not RUN.unavailable(TRACKS["M"].target)


def test_a_target_is_read_from_the_environment_and_a_bad_one_says_what_is_expected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(RUN.TARGET_VARIABLE, "Linux aarch64 nvidia 2.39")
    assert RUN.this_machine() == TRACKS["S"].target
    with pytest.raises(ValueError, match='expected "SYSTEM MACHINE GPU'):
        RUN.parse_target("Linux aarch64 radeon")
    with pytest.raises(ValueError, match="is not a version such as 2.39"):
        RUN.parse_target("Linux aarch64 amd new")


def test_the_resolver_asks_pip_for_the_targets_platform_under_an_empty_configuration() -> None:
    asked: list[tuple[list[str], dict[str, str]]] = []

    def pip(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        asked.append((command, env))
        return subprocess.CompletedProcess(
            command,
            0,
            report(
                ("torch", "2.13.0", "torch-2.13.0-cp311-cp311-manylinux_2_28_aarch64.whl"),
                ("mlx-cuda-13", "0.32.4", "mlx_cuda_13-0.32.4-py3-none-manylinux_2_35_aarch64.whl"),
            ),
            "",
        )

    found = resolve(TRACKS["S"].target, setup_requirements(TRACKS["S"].target), pip)
    ((command, env),) = asked
    assert env["PIP_CONFIG_FILE"] == os.devnull and not any(
        k.startswith("PIP_") and k not in ("PIP_CONFIG_FILE", "PIP_CERT", "PIP_DISABLE_PIP_VERSION_CHECK") for k in env
    )
    tags = [command[i + 1] for i, a in enumerate(command) if a == "--platform"]
    assert tags[0] == "manylinux_2_39_aarch64" and "manylinux_2_35_aarch64" in tags and "manylinux_2_17_aarch64" in tags
    assert "manylinux2014_aarch64" in tags and not [t for t in tags if "x86_64" in t]
    assert "--only-binary=:all:" in command and command[command.index("--python-version") + 1] == PYTHON
    assert json.loads(command[3])["platform_machine"] == "aarch64", "pip reads markers as the target's"
    assert "mlx[cuda13]>=0.31" in command and RUN.TORCH in command
    assert found.version("mlx-cuda-13") == "0.32.4" and found.named("torch") == ["torch"]


def test_a_plan_pip_cannot_resolve_fails_with_pips_words() -> None:
    def pip(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution found for mlx==0.32.4")

    with pytest.raises(AssertionError, match="No matching distribution found for mlx"):
        resolve(S_2_28, ["mlx[cpu]==0.32.4"], pip)


def test_the_project_requirements_follow_the_targets_markers() -> None:
    mac = project_requirements(("verify",), TRACKS["M"].target)
    linux = project_requirements(("verify", "cuda"), TRACKS["S"].target)
    assert "mlx>=0.31" in mac and not any(
        r.startswith("mlx") for r in project_requirements(("verify",), TRACKS["N"].target)
    )
    assert "mlx[cuda13]>=0.31" in linux and "mkdocs<2,>=1.6" in linux, "the site extra comes in through verify"


def test_each_profile_lists_the_gpu_backend_its_tracks_plan_installs() -> None:
    from verified_book.engine.machine import profiles

    wanted = {"N": "torch:cuda", "H": "torch:cuda", "S": "torch:cuda", "X": "torch:rocm", "M": "torch:mps"}
    for name, track in TRACKS.items():
        for marker in track.profiles:
            assert wanted[name] in profiles()[marker].backends, (marker, profiles()[marker].backends)
    assert "mlx:gpu" in profiles()["dgx_spark"].backends, "MLX's CUDA build resolves for aarch64 (glibc 2.35 or newer)"


# --- the plans resolved by pip against PyPI -------------------------------------------------------


def _pypi() -> None:
    if not _answers("https://pypi.org/simple/pip/"):
        pytest.skip("PyPI cannot be reached from here")


def _answers(url: str) -> bool:
    code = (
        "import sys, urllib.request, urllib.error\n"
        "try:\n    urllib.request.urlopen(urllib.request.Request(sys.argv[1], method='HEAD'), timeout=10).close()\n"
        "except urllib.error.HTTPError:\n    pass\n"
        "except OSError:\n    sys.exit(1)\n"
    )
    return subprocess.run([sys.executable, "-c", code, url], capture_output=True, timeout=60).returncode == 0


def _cuda_13(found: Resolved) -> None:
    """A torch wheel that is PyPI's CUDA 13 build: no local version (+cpu, +rocm), CUDA 13's runtime beside it."""
    version = found.version("torch")
    assert version == RUN.TORCH.split("==")[1], found.words()
    assert (found.version("nvidia-cuda-runtime") or "").startswith("13."), found.words()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["N", "H", "S"])
def test_an_nvidia_tracks_plan_resolves_to_torchs_and_mlxs_cuda_13_builds(name: str) -> None:
    _pypi()
    track = TRACKS[name]
    found = resolve(track.target, setup_requirements(track.target))
    _cuda_13(found)
    wheel = found.wheels["torch"][1]
    assert wheel.endswith(f"_{track.target.machine}.whl"), wheel
    assert found.version("mlx-cuda-13") == found.version("mlx"), found.words()
    assert "mlx-cpu" not in found.wheels, "MLX's CPU and CUDA builds must not share an environment"


@pytest.mark.slow
def test_track_s_at_glibc_2_28_resolves_torch_and_leaves_mlx_out() -> None:
    _pypi()
    found = resolve(S_2_28, setup_requirements(S_2_28))
    _cuda_13(found)
    assert not found.named("mlx"), found.words()
    done = real_pip(pip_command(S_2_28, ["mlx[cpu]==0.32.4"], constraints=False), plain_env())
    assert done.returncode != 0 and "mlx" in done.stderr, (
        "MLX's Linux wheels need glibc 2.35: that is why it is left out"
    )


@pytest.mark.slow
def test_track_m_resolves_torch_with_mps_and_mlx_with_metal() -> None:
    _pypi()
    found = resolve(TRACKS["M"].target, setup_requirements(TRACKS["M"].target))
    assert found.wheels["torch"][1].endswith("_arm64.whl") and not found.named("nvidia"), found.words()
    assert found.version("mlx-metal") == found.version("mlx"), found.words()


@pytest.mark.slow
def test_track_x_finds_no_rocm_torch_on_pypi_so_set_up_names_the_index() -> None:
    """PyPI's torch for x86_64 is the CUDA build, which torch:rocm refuses (it has no torch.version.hip);
    the ROCm build is only on PyPI's neighbour, PyTorch's ROCm index, which set-up names."""
    _pypi()
    track = TRACKS["X"]
    args, _ = RUN.torch_plan(track.target, True)
    assert args[args.index("--index-url") + 1] == RUN.rocm_index()
    found = resolve(track.target, setup_requirements(track.target))
    _cuda_13(found)
    assert found.version("mlx-cpu") == found.version("mlx"), "MLX's CPU build beside it"
    local = real_pip(pip_command(track.target, [f"{RUN.TORCH}+{RUN.ROCM}"], constraints=False), plain_env())
    assert local.returncode != 0, "PyPI has no ROCm build of torch"
    _, sentence = RUN.torch_plan(track.target, False)
    assert f"--index-url {RUN.rocm_index()}" in sentence
