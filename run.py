#!/usr/bin/env python3
"""Set up on first use and run the book's jobs; needs only Python 3.11+.

    python3 run.py verify    verify the book on this machine, then build the site with its records
    python3 run.py test      run the test suite (arguments after `test` go to pytest)
    python3 run.py site      build the site from the committed results (and this clone's own, if any)
    python3 run.py contribute   copy this machine's records into results/, for a pull request
    python3 run.py setup     set up only

The first call makes `.venv/` and installs what the job needs into it, pinned by
requirements/lock.txt; later calls install again only when pyproject.toml, the lock or this
file change, or when a job needs more than was installed. After set-up each job is the
`verified-book` command of the project's virtual environment (`.venv/bin/verified-book JOB`).

torch comes from PyTorch's CPU wheel index where no NVIDIA GPU is present, so nothing pulls
the multi-gigabyte CUDA build; where that index cannot be reached, from pip's own index,
saying so. Set-up ends by saying which torch and MLX builds it got.
VERIFIED_BOOK_VENV puts the virtual environment elsewhere (the fleet's runners keep it outside
the checkout, which their clean empties).
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("VERIFIED_BOOK_VENV") or ROOT / ".venv").resolve()
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".installed"
LOCK = ROOT / "requirements" / "lock.txt"
TORCH = "torch==2.13.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
INTERRUPTED = 130  # a shell's code for a command stopped by Ctrl-C (128 + SIGINT)

# Each job and the extras of pyproject.toml it needs; MLX's build (`cpu` or `cuda`) is added per machine.
JOBS: dict[str, tuple[str, ...]] = {
    "verify": ("verify",),
    "test": ("dev",),
    "site": ("site",),
    "contribute": (),
    "merge-results": (),
    "fault-table": ("dev",),
    "notebook": ("verify", "notebook"),
    "setup": ("dev",),
}
SUMMARY = {
    "verify": "verify the book on this machine and build the site with its records",
    "test": "run the test suite (pytest arguments may follow)",
    "site": "build the site from the results files",
    "contribute": "copy this machine's records into results/, for a pull request",
    "merge-results": "check results files from other machines and merge them into results/",
    "fault-table": "run every fault scenario and write docs/faults.md",
    "notebook": "set up for running the snippets as notebooks (jupytext --to ipynb --execute)",
    "setup": "set up the virtual environment only (everything the tests need)",
}


def _say(message: str) -> None:
    print(f"run.py: {message}", flush=True)


def _tool_env() -> dict[str, str]:
    """The environment of the tools run here, with Python's bytecode cache allowed.

    pytest rewrites the assertions of every plugin's modules (hypothesis alone brings about
    seventy) and keeps the result only as cached bytecode; where PYTHONDONTWRITEBYTECODE is
    set it redoes that work on every run, seconds each time. The cache lands in __pycache__
    folders, which git ignores.
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("NO_MKDOCS_2_WARNING", "1")  # Material's notice about MkDocs 2 is not the reader's business
    return env


def _run(*cmd: str | Path) -> None:
    subprocess.run([str(c) for c in cmd], cwd=ROOT, check=True, env=_tool_env())


def has_nvidia_gpu() -> bool:
    """Whether an NVIDIA GPU and its driver answer here."""
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def reachable(url: str, timeout: float = 8.0) -> bool:
    """Whether `url` answers at all (any HTTP status counts; no answer does not)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def mlx_extra(system: str, gpu: bool) -> tuple[str, ...]:
    """MLX's build for this machine: CUDA with an NVIDIA GPU on Linux, else CPU (macOS's MLX comes with `verify`)."""
    if system != "Linux":
        return ()
    return ("cuda",) if gpu else ("cpu",)


def torch_plan(system: str, gpu: bool, cpu_index_reachable: bool) -> tuple[list[str], str]:
    """pip's arguments for torch on this machine, and the sentence that says what they do.

    On Linux without an NVIDIA GPU torch comes from PyTorch's CPU index alone (`--index-url`,
    so no CUDA wheel can be chosen); where that index cannot be reached, from pip's own
    configuration. Elsewhere pip's own index has the right build: CUDA on Linux with a GPU,
    CPU and MPS on macOS, CPU on Windows.
    """
    if system == "Linux" and not gpu:
        if cpu_index_reachable:
            return ([TORCH, "--index-url", CPU_INDEX],
                    f"no NVIDIA GPU found: installing torch's CPU build ({TORCH}) from {CPU_INDEX}")
        return ([TORCH],
                f"no NVIDIA GPU found, but {CPU_INDEX} cannot be reached: installing {TORCH} from pip's configured "
                "index instead (on plain PyPI that is the CUDA build; the check after install says which came)")
    where = "with an NVIDIA GPU: the CUDA build" if gpu else f"on {system}"
    return [TORCH], f"installing {TORCH} from pip's configured index ({where})"


def extras_for(job: str, system: str, gpu: bool) -> tuple[str, ...]:
    """The extras a job needs on this machine."""
    wanted = JOBS[job]
    if {"verify", "dev"} & set(wanted):
        wanted += mlx_extra(system, gpu)
    return wanted


def _recipe() -> str:
    parts = [ROOT / "pyproject.toml", Path(__file__), LOCK]
    return hashlib.sha256(b"".join(p.read_bytes() for p in parts if p.exists())).hexdigest()


def _installed() -> set[str] | None:
    """The extras installed for the current recipe, or None where set-up must start over."""
    try:
        stamp = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or stamp.get("recipe") != _recipe():
        return None
    return set(stamp.get("extras", []))


def _has_torch() -> bool:
    probe = "import importlib.metadata as m; m.version('torch')"
    return subprocess.run([str(BIN / "python"), "-c", probe], capture_output=True).returncode == 0


def _report_builds() -> None:
    """Say which torch and MLX builds came; warn where a CPU-only machine got a CUDA build."""
    code = r"""
import importlib.util, sys
gpu = sys.argv[1] == "1"
if importlib.util.find_spec("torch"):
    import torch
    cuda = torch.version.cuda
    mps = getattr(torch.backends, "mps", None)
    mps = bool(mps and mps.is_built())
    build = f"CUDA {cuda}" if cuda else ("CPU and MPS" if mps else "CPU only")
    print(f"run.py: torch {torch.__version__}: {build} build")
    if cuda and not gpu:
        print(f"run.py: warning: this machine has no NVIDIA GPU but torch is a CUDA build, with its NVIDIA "
              "libraries: reinstall the CPU build with  .venv/bin/pip install --force-reinstall "
              f"torch=={torch.__version__.split('+')[0]} --index-url https://download.pytorch.org/whl/cpu")
if importlib.util.find_spec("mlx"):
    import importlib.metadata as md
    import mlx.core as mx
    names = {d.metadata["Name"].lower() for d in md.distributions()}
    build = ("Metal" if mx.metal.is_available() else
             "CUDA" if any(n.startswith("mlx-cuda") for n in names) else "CPU")
    print(f"run.py: mlx {md.version('mlx')}: {build} build")
"""
    subprocess.run([str(BIN / "python"), "-c", code, "1" if has_nvidia_gpu() else "0"], cwd=ROOT, env=_tool_env())


def setup(job: str = "setup") -> None:
    """Make the virtual environment and install what `job` needs, saying each step as it starts."""
    if sys.version_info < (3, 11):
        sys.exit(f"run.py: Python 3.11 or newer is needed; this is {platform.python_version()}")
    system, gpu = platform.system(), has_nvidia_gpu()
    wanted = set(extras_for(job, system, gpu))
    installed = _installed()
    if installed is not None and wanted <= installed and (BIN / "verified-book").exists():
        return
    extras = sorted(wanted | (installed or set()))
    if not (BIN / "python").exists():
        _say(f"set-up 1/3: creating the virtual environment {VENV}")
        _run(sys.executable, "-m", "venv", VENV)
        _say("set-up 1/3: bringing pip in it up to date")
        _run(BIN / "python", "-m", "pip", "install", "--upgrade", "pip")
    else:
        _say(f"set-up 1/3: the virtual environment {VENV.relative_to(ROOT)}/ is there")
    pip = [BIN / "python", "-m", "pip", "install", "--progress-bar", "on"]
    if {"verify", "dev"} & set(extras) and not _has_torch():
        cpu_index = system == "Linux" and not gpu and reachable(CPU_INDEX + "/torch/")
        args, sentence = torch_plan(system, gpu, cpu_index)
        _say(f"set-up 2/3: {sentence}")
        _run(*pip, *args)
    else:
        _say("set-up 2/3: torch is there or not needed for this job")
    target = f".[{','.join(extras)}]" if extras else "."
    constraints = ["-c", LOCK] if LOCK.exists() else []
    _say(f"set-up 3/3: installing the project and its dependencies ({target}), pinned by "
         f"{LOCK.relative_to(ROOT) if constraints and LOCK.is_relative_to(ROOT) else LOCK if constraints else 'nothing (no lock file)'}")
    _run(*pip, *constraints, "-e", target)
    if {"notebook", "dev"} & set(extras):
        # jupytext --execute picks the kernel whose python is the one running it: this venv's, named here
        _say("set-up: registering this environment's Jupyter kernel (for jupytext --execute on the snippets)")
        _run(BIN / "python", "-m", "ipykernel", "install", "--sys-prefix", "--name", "verified-book",
             "--display-name", "Python (verified book)")
    if {"verify", "dev"} & set(extras):
        _report_builds()
    STAMP.write_text(json.dumps({"recipe": _recipe(), "extras": extras}))
    _say("set-up done")


def usage() -> str:
    return "\n".join(f"  {name:<14} {text}" for name, text in SUMMARY.items())


def _job(job: str, rest: list[str]) -> int:
    """Run a job through the virtual environment's `verified-book`, leaving Ctrl-C to it."""
    command = [str(BIN / "verified-book"), job, *rest]
    # The job stops itself on Ctrl-C and keeps its records; run.py only waits for it. A handler that does
    # nothing, not SIG_IGN, which the job would inherit and so never see the Ctrl-C.
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        code = subprocess.run(command, cwd=ROOT, env=_tool_env()).returncode
    finally:
        signal.signal(signal.SIGINT, previous)
    return INTERRUPTED if code == -signal.SIGINT else code


def main(argv: list[str]) -> int:
    job, rest = (argv[0], argv[1:]) if argv else ("help", [])
    if job in ("help", "-h", "--help"):
        print(__doc__)
        return 0
    if job not in JOBS:
        print(f"run.py: unknown job {job!r}; the jobs are:\n{usage()}", file=sys.stderr)
        return 2
    try:
        setup(job)
    except KeyboardInterrupt:
        print("\nrun.py: set-up interrupted; the next call starts it again", file=sys.stderr)
        return INTERRUPTED
    except subprocess.CalledProcessError as e:
        print(f"run.py: set-up failed: {' '.join(map(str, e.cmd))} exited {e.returncode}", file=sys.stderr)
        return e.returncode or 1
    if job in ("setup", "notebook"):
        return 0
    return _job(job, rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
