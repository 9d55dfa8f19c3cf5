"""What a reader's machine installs: the site without any backend, the snippets as notebooks,
and torch's CPU build where no NVIDIA GPU is present."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from harness.paths import ROOT
from harness.pip_env import plain_env
from harness.scripts import run_py

SNIPPETS = sorted((ROOT / "book" / "snippets").glob("*.py"))
HEAVY = ("torch", "mlx", "transformers", "jax", "gguf", "ml_dtypes", "pytest")


def test_the_site_plugin_and_the_plots_load_no_backend() -> None:
    """What `mkdocs build` imports: the plugin, the book's topics (for the registry) and the plots page."""
    code = f"""
import sys
from verified_book.integration import mkdocs_plugin
from verified_book.engine.config import open_book, read_config
book = read_config({str(ROOT)!r})
opened = open_book(book)
assert not opened.load_errors
with opened.opened():
    from claims import plots
    plots.render_plots_page({{}})
print(",".join(sorted(m for m in {HEAVY!r} if m in sys.modules)))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"the site loads {done.stdout.strip()}, which its extra does not install"


# Snippets as notebooks: paired by jupytext.toml, round-tripping unchanged.


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda p: p.name)
def test_each_snippet_round_trips_through_a_notebook_unchanged(snippet: Path) -> None:
    jupytext = pytest.importorskip("jupytext", reason="the notebook extra is not installed")
    from jupytext.config import load_jupytext_config

    config = load_jupytext_config(str(snippet.parent))
    assert config is not None and "py:percent" in str(config.formats), "jupytext.toml pairs the snippets"
    text = snippet.read_text(encoding="utf-8")
    notebook = jupytext.reads(text, fmt="py:percent")
    as_ipynb = jupytext.writes(notebook, fmt="ipynb")
    assert json.loads(as_ipynb)["cells"], "the notebook has the snippet's cells"
    back = jupytext.reads(as_ipynb, fmt="ipynb")
    config.set_default_format_options(back.metadata.setdefault("jupytext", {}))
    assert jupytext.writes(back, fmt="py:percent", config=config) == text


def test_generated_notebooks_are_ignored_by_git() -> None:
    assert subprocess.run(["git", "check-ignore", "-q", "book/snippets/shapes.ipynb"], cwd=ROOT).returncode == 0


@pytest.mark.slow
def test_a_snippet_executes_as_a_notebook_in_the_project_s_environment(tmp_path: Path) -> None:
    jupytext_cli = Path(sys.executable).parent / "jupytext"
    if not jupytext_cli.exists() or importlib.util.find_spec("ipykernel") is None:
        pytest.skip("the notebook extra is not installed (python3 run.py notebook)")
    snippet = tmp_path / "shapes.py"
    shutil.copy(ROOT / "book" / "snippets" / "shapes.py", snippet)
    shutil.copy(ROOT / "jupytext.toml", tmp_path / "jupytext.toml")
    done = subprocess.run(
        [str(jupytext_cli), "--to", "ipynb", "--execute", str(snippet)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    notebook = json.loads((tmp_path / "shapes.ipynb").read_text())
    assert notebook["metadata"]["kernelspec"]["language"] == "python"
    outputs = [o for c in notebook["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert outputs and not [o for o in outputs if o.get("output_type") == "error"]
    assert snippet.read_text() == (ROOT / "book" / "snippets" / "shapes.py").read_text(), "the .py is left as it was"


# The right torch from the right place: on a plain machine, no NVIDIA library in the plan.


def _dry_run(*requirements: str) -> list[str]:
    """The names pip's resolver would install for `requirements` under an empty configuration."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            "-",
            *requirements,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=plain_env(),
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [item["metadata"]["name"].lower() for item in json.loads(done.stdout)["install"]]


def _answers(url: str) -> bool:
    """Whether `url` answers, asked from a process of its own (the book's offline guard covers this one)."""
    code = (
        "import sys, urllib.request, urllib.error\n"
        "try:\n    urllib.request.urlopen(urllib.request.Request(sys.argv[1], method='HEAD'), timeout=10).close()\n"
        "except urllib.error.HTTPError:\n    pass\n"
        "except OSError:\n    sys.exit(1)\n"
    )
    return subprocess.run([sys.executable, "-c", code, url], capture_output=True, timeout=60).returncode == 0


def _cpu_torch_wheel(run) -> str | None:  # type: ignore[no-untyped-def]
    """A CPU wheel of run.py's torch: from PyTorch's CPU index where it answers, else one this machine's
    pip finds on disk (its find-links); None where neither is there."""
    version = run.TORCH.split("==")[1]
    if _answers(run.CPU_INDEX + "/torch/"):
        return f"torch=={version}+cpu"
    links = os.environ.get("PIP_FIND_LINKS", "").split()
    found = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.find-links"], capture_output=True, text=True
    )
    links += found.stdout.split()
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    for folder in map(Path, links):
        for wheel in sorted(folder.glob(f"torch-{version}+cpu-{tag}-*.whl")) if folder.is_dir() else []:
            return str(wheel)
    return None


@pytest.mark.slow
def test_on_a_plain_linux_machine_without_a_gpu_the_plan_names_no_nvidia_package() -> None:
    run = run_py()
    if not _answers("https://pypi.org/simple/pip/"):
        pytest.skip("PyPI cannot be reached from here")
    plain = run.Target("Linux", "x86_64", None, (2, 39))
    args, _ = run.torch_plan(plain, True)
    assert args[args.index("--index-url") + 1] == run.CPU_INDEX, "torch alone, from the CPU index alone"
    # The control: what a plain `pip install torch==...` resolves to from PyPI on Linux.
    cuda = _dry_run(run.TORCH)
    assert any(n.startswith("nvidia-") for n in cuda), "the check can see NVIDIA packages where they come"
    wheel = _cpu_torch_wheel(run)
    if wheel is None:
        pytest.skip(f"{run.CPU_INDEX} cannot be reached and no CPU wheel of torch is on disk here")
    extras = ",".join(run.extras_for("verify", plain))
    index = ["--extra-index-url", run.CPU_INDEX] if wheel.startswith("torch==") else []
    plan = _dry_run(*index, wheel, "-c", str(ROOT / "requirements" / "lock.txt"), f".[{extras}]")
    assert "torch" in plan and "mlx-cpu" in plan
    assert not [n for n in plan if n.startswith(("nvidia-", "cuda-")) or n == "triton"], plan


@pytest.mark.slow
def test_the_site_extra_alone_builds_the_site_strictly(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    done = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "-c",
            str(ROOT / "requirements" / "lock.txt"),
            "-e",
            f"{ROOT}[site]",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util as u; print([m for m in ('torch', 'mlx', 'transformers') if u.find_spec(m)])",
        ],
        capture_output=True,
        text=True,
    )
    assert found.stdout.strip() == "[]", "the site extra brings no backend"
    built = subprocess.run(
        [str(python), "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=900,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").exists()
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"


def test_set_up_tells_an_amd_gpu_from_an_nvidia_one_and_plans_each(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """/dev/kfd, rocminfo or amd-smi mean an AMD GPU; nvidia-smi answering means an NVIDIA one, which wins."""
    run = run_py()
    monkeypatch.delenv(run.TARGET_VARIABLE, raising=False)
    monkeypatch.setattr(run, "has_nvidia_gpu", lambda: False)
    monkeypatch.setattr(run.shutil, "which", lambda tool: "/opt/rocm/bin/rocminfo" if tool == "rocminfo" else None)
    assert run.has_amd_gpu() and run.this_machine().gpu == run.AMD
    monkeypatch.setattr(run.shutil, "which", lambda tool: None)
    monkeypatch.setattr(run, "Path", lambda p: tmp_path / "absent" if p == "/dev/kfd" else Path(p))
    assert not run.has_amd_gpu()
    monkeypatch.setattr(run, "has_nvidia_gpu", lambda: True)
    assert run.this_machine().gpu == run.NVIDIA


def test_the_dry_run_prints_each_tracks_plan_and_installs_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "VERIFIED_BOOK_VENV": str(tmp_path / "venv"), "VERIFIED_BOOK_INSTALLER": "pip"}
    python = f"py{sys.version_info.major}.{sys.version_info.minor}"
    for target, wanted in [
        ("Linux x86_64 amd 2.39", "--index-url https://download.pytorch.org/whl/rocm"),
        (
            "Linux aarch64 nvidia 2.39",
            f"pip install -c requirements/lock/linux-aarch64-{python}.txt <the requirements of .[cuda,dev]>",
        ),
        ("Linux aarch64 nvidia 2.28", "not available here: MLX: its Linux wheels need glibc 2.35"),
        (
            "Darwin arm64 none",
            f"pip install -c requirements/lock/macos-arm64-{python}.txt <the requirements of .[dev]>",
        ),
    ]:
        done = subprocess.run(
            [sys.executable, str(ROOT / "run.py"), "setup", "--dry-run"],
            capture_output=True,
            text=True,
            env={**env, "VERIFIED_BOOK_TARGET": target},
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert wanted in done.stdout and "dry run: nothing was installed" in done.stdout, done.stdout
    assert not (tmp_path / "venv").exists()


def test_the_dry_run_plans_uv_from_its_lock_with_the_same_lock_for_the_project(tmp_path: Path) -> None:
    run = run_py()
    python = f"py{sys.version_info.major}.{sys.version_info.minor}"
    env = {k: v for k, v in os.environ.items() if k != run.INSTALLER_VARIABLE}
    done = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "setup", "--dry-run"],
        capture_output=True,
        text=True,
        env={**env, "VERIFIED_BOOK_VENV": str(tmp_path / "venv"), "VERIFIED_BOOK_TARGET": "Linux aarch64 nvidia 2.39"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lock = f"requirements/lock/linux-aarch64-{python}.txt"
    pin = run.uv_pin()
    assert pin and f"installer: {pin.replace('==', ' ')}, hash-checked by requirements/lock/tools/uv.txt" in done.stdout
    assert f"uv pip compile -c {lock} <the requirements of .[cuda,dev]>" in done.stdout, done.stdout
    assert f"uv pip install --no-deps --require-hashes -r <torch's entry of {lock}>" in done.stdout
    assert not (tmp_path / "venv").exists() and not list((tmp_path).iterdir())
