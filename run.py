#!/usr/bin/env python3
"""Set up on first use and run the book's jobs; needs only Python 3.11+.

    python3 run.py verify    verify the book on this machine, then build the site with its records
    python3 run.py test      run the test suite (arguments after `test` go to pytest)
    python3 run.py site      build the site from the committed results (and this clone's own, if any)
    python3 run.py contribute   copy this machine's records into results/, for a pull request
    python3 run.py setup     set up only, one line a step (-v: with pip's own output as it comes)
    python3 run.py setup --dry-run   say what set-up would install on this machine, install nothing
    python3 run.py --help    this text, and every job with what it does

The first call makes `.venv/` and installs what the job needs into it, pinned with hashes by
the lock of this platform and Python (requirements/lock/, written by scripts/lock): pip checks
every file it installs against the lock's hashes; later calls install again only when pyproject.toml, the lock or this
file change, or when a job needs more than was installed. After set-up each job is the
`verified-book` command of the project's virtual environment (`.venv/bin/verified-book JOB`).

torch comes from PyTorch's CPU wheel index where no GPU is present, so nothing pulls the
multi-gigabyte CUDA build, and from PyTorch's ROCm index where an AMD GPU is (`/dev/kfd`,
`rocminfo` or `amd-smi`); where that index cannot be reached, from pip's own index, saying so and
what to run once it can. What a platform cannot have (MLX below glibc 2.35, torch's ROCm build off
x86_64) is said before anything is installed, and left out. Set-up ends by saying which torch and
MLX builds it got. VERIFIED_BOOK_TARGET="Linux aarch64 nvidia 2.39" (system, machine, GPU vendor
or none, glibc) stands in for this machine, so a dry run shows another machine's plan.
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
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("VERIFIED_BOOK_VENV") or ROOT / ".venv").resolve()
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".installed"
LOCKS = ROOT / "requirements" / "lock"
TORCH = "torch==2.13.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
ROCM = "rocm7.2"  # the variant of PyTorch's ROCm index (download.pytorch.org/whl/<variant>) for TORCH; TORCH_ROCM picks another
TORCH_GLIBC = (2, 28)  # TORCH's Linux wheels are manylinux_2_28
MLX_GLIBC = (2, 35)  # MLX's Linux wheels, its CPU and CUDA builds alike, are manylinux_2_35
NVIDIA, AMD = "nvidia", "amd"  # the GPU vendors set-up tells apart
INTERRUPTED = 130  # a shell's code for a command stopped by Ctrl-C (128 + SIGINT)

# Each job and the extras of pyproject.toml it needs; MLX's build (`cpu` or `cuda`) is added per machine.
JOBS: dict[str, tuple[str, ...]] = {
    "verify": ("verify",),
    "test": ("dev",),
    "site": ("site",),
    "serve": ("verify",),
    "pages": ("site",),
    "contribute": (),
    "merge-results": (),
    "machine": (),
    "plan": ("verify",),
    "fault-table": ("dev",),
    "init": ("book",),
    "notebook": ("verify", "notebook"),
    "setup": ("dev",),
}
SUMMARY = {
    "verify": "verify the book on this machine and build the site with its records",
    "test": "run the test suite (pytest arguments may follow)",
    "site": "build the site from the results files",
    "serve": "a live preview: the claims computed once, each saved page, claim module or data file shown within seconds",
    "pages": "write the Machines, Plots and legend pages and the marks' assets into the pages folder, for Zensical",
    "contribute": "copy this machine's records into results/, for a pull request",
    "merge-results": "check results files from other machines and merge them into results/",
    "machine": "say this machine's identity, the name of its results file (--adopt FILE takes a committed one's back)",
    "plan": "list what a run on one of the book's machines (plan rtx5080) would check, on which backend; run nothing",
    "fault-table": "run every fault scenario and write docs/faults.md",
    "init": "start a book of your own in an empty folder (init FOLDER), which pytest verifies and mkdocs builds",
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


#: whether set-up shows each command's own output as it comes (`setup -v`); else it keeps it, shown only on failure
VERBOSE = False


def _run(*cmd: str | Path, tell_failure: bool = True) -> None:
    """Run one command of set-up: its own output kept back, and shown whole only if it fails (or as it comes,
    with `setup -v`), so set-up says one line a step and a failure is read in full."""
    args = [str(c) for c in cmd]
    if VERBOSE:
        subprocess.run(args, cwd=ROOT, check=True, env=_tool_env())
        return
    done = subprocess.run(args, cwd=ROOT, env=_tool_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        if tell_failure:
            sys.stderr.write(done.stdout)
        raise subprocess.CalledProcessError(done.returncode, args, done.stdout)


def has_nvidia_gpu() -> bool:
    """Whether an NVIDIA GPU and its driver answer here."""
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def has_amd_gpu() -> bool:
    """Whether an AMD GPU's ROCm stack is here: the kernel driver's /dev/kfd, or ROCm's rocminfo or amd-smi on PATH."""
    return Path("/dev/kfd").exists() or any(shutil.which(tool) for tool in ("rocminfo", "amd-smi"))


def glibc() -> tuple[int, int] | None:
    """This Linux's glibc version, or None where the C library is not glibc."""
    name, version = platform.libc_ver()
    parts = version.split(".")
    if name != "glibc" or len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    return int(parts[0]), int(parts[1])


class Target(NamedTuple):
    """The machine set-up plans for: its system and architecture as `platform` names them, its GPU's
    vendor (NVIDIA, AMD or None) and, on Linux, its glibc (None where unknown or not glibc)."""

    system: str
    machine: str
    gpu: str | None
    glibc: tuple[int, int] | None = None

    def words(self) -> str:
        libc = f", glibc {self.glibc[0]}.{self.glibc[1]}" if self.glibc else ""
        gpu = {NVIDIA: "an NVIDIA GPU", AMD: "an AMD GPU"}.get(self.gpu or "", "no GPU")
        return f"{self.system} {self.machine}{libc}, {gpu}"


TARGET_VARIABLE = "VERIFIED_BOOK_TARGET"


def parse_target(text: str) -> Target:
    """A Target from "SYSTEM MACHINE GPU [GLIBC]" ("Linux aarch64 nvidia 2.39"; GPU nvidia, amd or none)."""
    parts = text.split()
    if len(parts) not in (3, 4) or parts[2] not in (NVIDIA, AMD, "none"):
        raise ValueError(f"{TARGET_VARIABLE}={text!r}: expected \"SYSTEM MACHINE GPU [GLIBC]\", GPU one of nvidia, amd, none "
                         "(\"Linux aarch64 nvidia 2.39\")")
    libc = None
    if len(parts) == 4:
        major, _, minor = parts[3].partition(".")
        if not (major.isdigit() and minor.isdigit()):
            raise ValueError(f"{TARGET_VARIABLE}={text!r}: glibc {parts[3]!r} is not a version such as 2.39")
        libc = (int(major), int(minor))
    return Target(parts[0], parts[1], None if parts[2] == "none" else parts[2], libc)


def this_machine() -> Target:
    """This machine as set-up sees it, or the machine VERIFIED_BOOK_TARGET names."""
    stand_in = os.environ.get(TARGET_VARIABLE)
    if stand_in:
        return parse_target(stand_in)
    gpu = NVIDIA if has_nvidia_gpu() else AMD if has_amd_gpu() else None
    system = platform.system()
    return Target(system, platform.machine(), gpu, glibc() if system == "Linux" else None)


def reachable(url: str, timeout: float = 8.0) -> bool:
    """Whether `url` answers at all (any HTTP status counts; no answer does not)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def rocm_index() -> str:
    """PyTorch's ROCm index set-up installs torch from: ROCM's variant, or TORCH_ROCM's."""
    return f"https://download.pytorch.org/whl/{os.environ.get('TORCH_ROCM') or ROCM}"


#: the locks' names for the platforms they are made for, by `platform`'s system and machine
LOCK_PLATFORMS = {
    ("Linux", "x86_64"): "linux-x86_64",
    ("Linux", "aarch64"): "linux-aarch64",
    ("Linux", "arm64"): "linux-aarch64",
    ("Darwin", "arm64"): "macos-arm64",
}


def lock_for(target: Target, python: tuple[int, int] | None = None) -> Path | None:
    """The lock set-up installs with on `target` under this Python (or `python`): every pin with its hashes;
    None where scripts/lock makes none (then set-up installs unpinned, and says so)."""
    name = LOCK_PLATFORMS.get((target.system, target.machine))
    major, minor = python or sys.version_info[:2]
    path = LOCKS / f"{name}-py{major}.{minor}.txt"
    return path if name and path.exists() else None


def torch_cpu_lock(target: Target, python: tuple[int, int] | None = None) -> Path | None:
    """The hashes of torch's CPU build for `target` under this Python, where scripts/lock could read them: what
    torch is installed with on Linux without an NVIDIA GPU, so PyPI's CUDA build cannot stand in for it."""
    name = LOCK_PLATFORMS.get((target.system, target.machine))
    major, minor = python or sys.version_info[:2]
    path = LOCKS / "torch-cpu" / f"{name}-py{major}.{minor}.txt"
    return path if name and path.exists() else None


def project_requirements(extras: tuple[str, ...] | list[str]) -> list[str]:
    """What installing the project with `extras` asks for, its own extras expanded, and what builds it: each
    installed from the lock with hash checking, which an editable install of the project itself cannot take."""
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project, optional = data["project"], data["project"].get("optional-dependencies", {})
    name = project["name"].lower()
    out, todo, seen = [*data["build-system"]["requires"], *project["dependencies"]], list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for requirement in optional[extra]:
            if requirement.lower().startswith(f"{name}["):
                todo += requirement.split("[", 1)[1].split("]", 1)[0].split(",")
            else:
                out.append(requirement)
    return list(dict.fromkeys(out))


def _older(found: tuple[int, int] | None, needed: tuple[int, int]) -> bool:
    return found is not None and found < needed


def mlx_extra(target: Target) -> tuple[str, ...]:
    """MLX's build for this machine: CUDA with an NVIDIA GPU on Linux, else CPU (macOS's MLX comes with `verify`);
    none where its Linux wheels cannot install (see `unavailable`)."""
    if target.system != "Linux" or _older(target.glibc, MLX_GLIBC):
        return ()
    return ("cuda",) if target.gpu == NVIDIA else ("cpu",)


def rocm_torch(target: Target) -> bool:
    """Whether torch's ROCm build is the one for this machine: an AMD GPU on x86_64 Linux (the only ROCm wheels)."""
    return target.system == "Linux" and target.gpu == AMD and target.machine == "x86_64"


def index_to_check(target: Target) -> str | None:
    """The PyTorch index torch's plan needs here, whose reachability decides the plan; None where pip's own index serves."""
    if rocm_torch(target):
        return rocm_index()
    if target.system == "Linux" and target.gpu != NVIDIA:
        return CPU_INDEX
    return None


def torch_plan(target: Target, index_reachable: bool) -> tuple[list[str], str]:
    """pip's arguments for torch on this machine, and the sentence that says what they do.

    On Linux with an AMD GPU torch comes from PyTorch's ROCm index, without any GPU from its CPU index
    (`--index-url` alone, so no CUDA wheel can be chosen); where that index cannot be reached, from
    pip's own configuration, and the sentence says what to run once it can. Elsewhere pip's own index
    has the right build: CUDA on Linux with an NVIDIA GPU (x86_64 and aarch64 alike), CPU and MPS on
    macOS, CPU on Windows.
    """
    if rocm_torch(target):
        index = rocm_index()
        if index_reachable:
            return ([TORCH, "--index-url", index],
                    f"AMD GPU found (ROCm): installing torch's ROCm build ({TORCH}) from {index}")
        return ([TORCH],
                f"AMD GPU found (ROCm), but {index} cannot be reached: installing {TORCH} from pip's configured index "
                "instead (on plain PyPI that is the CUDA build, which cannot use this GPU); once the index answers, run  "
                f"{BIN / 'pip'} install --force-reinstall {TORCH} --index-url {index}  (or scripts/verify-rocm)")
    if target.system == "Linux" and target.gpu != NVIDIA:
        found = "an AMD GPU off x86_64 (torch's ROCm builds are x86_64 only)" if target.gpu == AMD else "no NVIDIA GPU found"
        if index_reachable:
            return ([TORCH, "--index-url", CPU_INDEX],
                    f"{found}: installing torch's CPU build ({TORCH}) from {CPU_INDEX}")
        return ([TORCH],
                f"{found}, but {CPU_INDEX} cannot be reached: installing {TORCH} from pip's configured "
                "index instead (on plain PyPI that is the CUDA build; the check after install says which came)")
    where = "with an NVIDIA GPU: the CUDA build" if target.gpu == NVIDIA else f"on {target.system}"
    return [TORCH], f"installing {TORCH} from pip's configured index ({where})"


def unavailable(target: Target) -> list[str]:
    """What this platform cannot have of what the book uses, each in a sentence; said before set-up installs."""
    out = []
    if target.system == "Linux" and _older(target.glibc, MLX_GLIBC):
        assert target.glibc is not None
        out.append(f"MLX: its Linux wheels need glibc {MLX_GLIBC[0]}.{MLX_GLIBC[1]} or newer (manylinux_2_35) and this "
                   f"machine has {target.glibc[0]}.{target.glibc[1]}, so MLX is left out and mlx:cpu and mlx:gpu are skipped")
    if target.system == "Linux" and target.gpu == AMD:
        out.append("MLX has no ROCm build: MLX runs on the CPU here (mlx:cpu), not on the AMD GPU")
        if target.machine != "x86_64":
            out.append(f"torch's ROCm builds are x86_64 only: on {target.machine} torch runs on the CPU, not on the AMD GPU")
    return out


def blocked(target: Target) -> str | None:
    """Why set-up cannot install torch here at all, or None."""
    if target.system == "Linux" and _older(target.glibc, TORCH_GLIBC):
        assert target.glibc is not None
        return (f"{TORCH}'s Linux wheels need glibc {TORCH_GLIBC[0]}.{TORCH_GLIBC[1]} or newer (manylinux_2_28); this "
                f"machine has {target.glibc[0]}.{target.glibc[1]}, so the book's backends cannot be installed here")
    return None


def extras_for(job: str, target: Target) -> tuple[str, ...]:
    """The extras a job needs on this machine."""
    wanted = JOBS[job]
    if {"verify", "dev"} & set(wanted):
        wanted += mlx_extra(target)
    return wanted


def plan_lines(job: str, target: Target, index_reachable: bool) -> list[str]:
    """What set-up would do for `job` on `target`, step by step, as the dry run prints it."""
    lines = [f"plan for {target.words()}" + (f" (from {TARGET_VARIABLE})" if os.environ.get(TARGET_VARIABLE) else "")]
    stop = blocked(target)
    if stop:
        return [*lines, f"cannot set up: {stop}"]
    lines += [f"not available here: {why}" for why in unavailable(target)]
    extras = extras_for(job, target)
    if {"verify", "dev"} & set(extras):
        args, sentence = torch_plan(target, index_reachable)
        cpu = torch_cpu_lock(target) if target.system == "Linux" and target.gpu != NVIDIA and not rocm_torch(target) else None
        lock = lock_for(target)
        how = (f"--no-deps --require-hashes -r {cpu.relative_to(ROOT)} {' '.join(args[1:])}" if cpu else
               " ".join(args) if rocm_torch(target) or not lock or (target.system == "Linux" and target.gpu != NVIDIA)
               else f"-c {lock.relative_to(ROOT)} --no-deps {' '.join(args)}")
        lines += [f"set-up 2/3: {sentence}", f"  pip install {how}".rstrip()]
    target_spec = f".[{','.join(sorted(extras))}]" if extras else "."
    lock = lock_for(target)
    pinned = f"pinned with hashes by {lock.relative_to(ROOT)}" if lock else "unpinned: no lock for this platform and Python"
    lines += [f"set-up 3/3: installing the project and its dependencies ({target_spec}), {pinned}",
              f"  pip install{f' -c {lock.relative_to(ROOT)}' if lock else ''} <the requirements of {target_spec}>",
              "  pip install --no-deps --no-build-isolation -e ."]
    return lines


def _recipe() -> str:
    parts = [ROOT / "pyproject.toml", Path(__file__), *sorted(LOCKS.glob("*.txt"))]
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


def _report_builds(target: Target) -> None:
    """Say which torch and MLX builds came; warn where a CPU-only machine got a CUDA build."""
    code = r"""
import importlib.util, sys
gpu, index = sys.argv[1], sys.argv[2]
if importlib.util.find_spec("torch"):
    import torch
    cuda, hip = torch.version.cuda, getattr(torch.version, "hip", None)
    mps = getattr(torch.backends, "mps", None)
    mps = bool(mps and mps.is_built())
    build = f"ROCm (HIP {hip})" if hip else f"CUDA {cuda}" if cuda else ("CPU and MPS" if mps else "CPU only")
    print(f"run.py: torch {torch.__version__}: {build} build")
    if cuda and gpu != "nvidia":
        kind = "the ROCm build" if gpu == "amd" else "the CPU build"
        print(f"run.py: warning: this machine has no NVIDIA GPU but torch is a CUDA build, with its NVIDIA "
              f"libraries: reinstall {kind} with  {sys.prefix}/bin/pip install --force-reinstall "
              f"torch=={torch.__version__.split('+')[0]} --index-url {index}")
if importlib.util.find_spec("mlx"):
    import importlib.metadata as md
    import mlx.core as mx
    names = {d.metadata["Name"].lower() for d in md.distributions()}
    build = ("Metal" if mx.metal.is_available() else
             "CUDA" if any(n.startswith("mlx-cuda") for n in names) else "CPU")
    print(f"run.py: mlx {md.version('mlx')}: {build} build")
"""
    index = rocm_index() if rocm_torch(target) else CPU_INDEX
    subprocess.run([str(BIN / "python"), "-c", code, target.gpu or "none", index], cwd=ROOT, env=_tool_env())


def setup(job: str = "setup") -> None:
    """Make the virtual environment and install what `job` needs, saying each step as it starts."""
    if sys.version_info < (3, 11):
        sys.exit(f"run.py: Python 3.11 or newer is needed; this is {platform.python_version()}")
    try:
        target = this_machine()
    except ValueError as e:
        sys.exit(f"run.py: {e}")
    stop = blocked(target)
    if stop:
        sys.exit(f"run.py: {stop}")
    wanted = set(extras_for(job, target))
    installed = _installed()
    if installed is not None and wanted <= installed and (BIN / "verified-book").exists():
        return
    extras = sorted(wanted | (installed or set()))
    for why in unavailable(target):
        _say(f"not available on {target.words()}: {why}")
    if not (BIN / "python").exists():
        _say(f"set-up 1/3: creating the virtual environment {VENV}")
        _run(sys.executable, "-m", "venv", VENV)
        _say("set-up 1/3: bringing pip in it up to date")
        _run(BIN / "python", "-m", "pip", "install", "--upgrade", "pip")
    else:
        _say(f"set-up 1/3: the virtual environment {VENV.relative_to(ROOT)}/ is there")
    pip = [BIN / "python", "-m", "pip", "install", "--progress-bar", "on" if VERBOSE else "off"]
    lock = lock_for(target)
    pinned = ["-c", str(lock)] if lock else []
    if {"verify", "dev"} & set(extras) and not _has_torch():
        index = index_to_check(target)
        args, sentence = torch_plan(target, index is not None and reachable(index + "/torch/"))
        _say(f"set-up 2/3: {sentence}")
        cpu = torch_cpu_lock(target)
        # torch alone: its dependencies come in step 3, from PyPI with the lock's hashes, whichever index it came from
        if rocm_torch(target):
            # scripts/lock reads PyPI's and the CPU index's hashes only
            _say("set-up 2/3: torch's ROCm build has no hashes in the lock: installed without hash checking")
            _run(*pip, *args)
        elif target.system == "Linux" and target.gpu != NVIDIA and cpu and "--index-url" in args:
            _run(*pip, "--no-deps", "--require-hashes", "-r", cpu, *args[1:])
        elif target.system == "Linux" and target.gpu != NVIDIA and cpu:
            # the CPU index does not answer: the CPU build where pip's configuration offers it (a find-links
            # folder), else PyPI's build, each checked against its hashes
            try:
                _run(*pip, "--no-deps", "--require-hashes", "-r", cpu, tell_failure=False)
            except subprocess.CalledProcessError:
                _say("set-up 2/3: pip's configured index has no CPU build of torch: PyPI's build instead, hash-checked")
                _run(*pip, *pinned, "--no-deps", TORCH)
        elif target.system == "Linux" and target.gpu != NVIDIA:
            _say(f"set-up 2/3: the lock has no hashes of torch's CPU build for {target.machine} with Python "
                 f"{platform.python_version()} (scripts/lock reads them where {CPU_INDEX} answers): installed "
                 "without hash checking")
            _run(*pip, "--no-deps", *args)
        else:
            _run(*pip, *pinned, "--no-deps", *args)
    else:
        _say("set-up 2/3: torch is there or not needed for this job")
    spec = f".[{','.join(extras)}]" if extras else "."
    where = (f"pinned with hashes by {lock.relative_to(ROOT) if lock.is_relative_to(ROOT) else lock}" if lock else
             f"unpinned: {LOCKS.relative_to(ROOT)}/ has no lock for {target.system} {target.machine} with Python "
             f"{platform.python_version()}")
    _say(f"set-up 3/3: installing the project's dependencies ({spec}), {where}")
    _run(*pip, *pinned, *project_requirements(extras))
    _say("set-up 3/3: installing the project itself, editable")
    _run(*pip, "--no-deps", "--no-build-isolation", "-e", ".")
    if {"notebook", "dev"} & set(extras):
        # jupytext --execute picks the kernel whose python is the one running it: this venv's, named here
        _say("set-up: registering this environment's Jupyter kernel (for jupytext --execute on the snippets)")
        _run(BIN / "python", "-m", "ipykernel", "install", "--sys-prefix", "--name", "verified-book",
             "--display-name", "Python (verified book)")
    if {"verify", "dev"} & set(extras):
        _report_builds(target)
    STAMP.write_text(json.dumps({"recipe": _recipe(), "extras": extras}))
    _say("set-up done")


def dry_run(job: str) -> int:
    """Print what set-up would install for `job` on this machine (or VERIFIED_BOOK_TARGET's); install nothing."""
    try:
        target = this_machine()
    except ValueError as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 2
    index = index_to_check(target)
    answers = index is not None and reachable(index + "/torch/")
    for line in plan_lines(job, target, answers):
        _say(line)
    if index is not None:
        _say(f"{index} {'answers' if answers else 'cannot be reached'} from here")
    _say("dry run: nothing was installed")
    return 1 if blocked(target) else 0


def usage() -> str:
    """Every job with what it does, one line each (the jobs of `verified-book`, and run.py's own)."""
    import textwrap

    return "\n".join(
        "\n".join(textwrap.wrap(text, width=100, initial_indent=f"  {name:<14} ", subsequent_indent=" " * 17))
        for name, text in SUMMARY.items()
    )


def help_text() -> str:
    """What `run.py --help` prints: how it is called, then every job."""
    return f"{__doc__.rstrip()}\n\nThe jobs:\n{usage()}"


def _job(job: str, rest: list[str]) -> int:
    """Run a job through the virtual environment's `verified-book`, leaving Ctrl-C to it: in the project's
    folder, which holds the book, except `init`, whose folder is named from where run.py was called."""
    command = [str(BIN / "verified-book"), job, *rest]
    where = Path.cwd() if job == "init" else ROOT
    # The job stops itself on Ctrl-C and keeps its records; run.py only waits for it. A handler that does
    # nothing, not SIG_IGN, which the job would inherit and so never see the Ctrl-C.
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        code = subprocess.run(command, cwd=where, env=_tool_env()).returncode
    finally:
        signal.signal(signal.SIGINT, previous)
    return INTERRUPTED if code == -signal.SIGINT else code


def main(argv: list[str]) -> int:
    job, rest = (argv[0], argv[1:]) if argv else ("help", [])
    if job in ("help", "-h", "--help"):
        print(help_text())
        return 0
    if job not in JOBS:
        print(f"run.py: unknown job {job!r}; the jobs are:\n{usage()}", file=sys.stderr)
        return 2
    if job == "setup" and rest == ["--dry-run"]:
        return dry_run(job)
    if job == "setup" and rest in (["-v"], ["--verbose"]):
        global VERBOSE
        VERBOSE = True
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
