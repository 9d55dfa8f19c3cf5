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
file change, or when a job needs more than was installed. The installer is uv, at the version and with the
hashes of requirements/lock/tools/uv.txt, which pip fetches from PyPI into .cache/tools/ (ignored by git) once;
where uv cannot be had (no pip or no network to fetch it, no wheel for this platform) pip installs instead,
from the same lock with the same torch index, and set-up says in one line which it used.
VERIFIED_BOOK_INSTALLER=pip makes it pip. After set-up each job is the
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
import re
import shutil
import signal
import subprocess
import sys
import tempfile
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
UV_LOCK = LOCKS / "tools" / "uv.txt"  # uv's pin with the hashes of its files, written by scripts/lock
TOOLS = ROOT / ".cache" / "tools"  # where set-up keeps uv (ignored by git)
INSTALLER_VARIABLE = "VERIFIED_BOOK_INSTALLER"  # `pip` makes set-up install with pip though uv could be had
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


def plan_lines(job: str, target: Target, index_reachable: bool, uv: str | None = None) -> list[str]:
    """What set-up would do for `job` on `target`, step by step, as the dry run prints it: with pip, or with uv
    where `uv` says which ("uv 0.13.9")."""
    lines = [f"plan for {target.words()}" + (f" (from {TARGET_VARIABLE})" if os.environ.get(TARGET_VARIABLE) else "")]
    stop = blocked(target)
    if stop:
        return [*lines, f"cannot set up: {stop}"]
    lines += [f"not available here: {why}" for why in unavailable(target)]
    lines.append(f"installer: {uv}, hash-checked by {_shown(UV_LOCK)}, kept in {_shown(TOOLS)}/ "
                 "(pip where it cannot be had)" if uv else "installer: pip")
    install = "uv pip install" if uv else "pip install"
    extras = extras_for(job, target)
    lock = lock_for(target)
    if {"verify", "dev"} & set(extras):
        args, sentence = torch_plan(target, index_reachable)
        cpu = torch_cpu_lock(target) if target.system == "Linux" and target.gpu != NVIDIA and not rocm_torch(target) else None
        pinned = f"--require-hashes -r <torch's entry of {lock.relative_to(ROOT)}>" if uv and lock else (
            f"-c {lock.relative_to(ROOT)}" if lock else "")
        how = (f"--no-deps --require-hashes -r {cpu.relative_to(ROOT)} {' '.join(args[1:])}" if cpu else
               " ".join(args) if rocm_torch(target) or not lock or (target.system == "Linux" and target.gpu != NVIDIA)
               else f"{pinned} --no-deps {' '.join(args)}" if not uv else f"--no-deps {pinned}")
        lines += [f"set-up 2/3: {sentence}", f"  {install} {how}".rstrip()]
    target_spec = f".[{','.join(sorted(extras))}]" if extras else "."
    pinned = f"pinned with hashes by {lock.relative_to(ROOT)}" if lock else "unpinned: no lock for this platform and Python"
    lines.append(f"set-up 3/3: installing the project and its dependencies ({target_spec}), {pinned}")
    if uv and lock:
        lines += [f"  uv pip compile -c {lock.relative_to(ROOT)} <the requirements of {target_spec}>   (the set pip would install)",
                  f"  uv pip install --require-hashes --no-deps -r <that set, each pin with its hashes in {lock.name}>"]
    else:
        lines.append(f"  {install}{f' -c {lock.relative_to(ROOT)}' if lock else ''} <the requirements of {target_spec}>")
    return [*lines, f"  {install} --no-deps --no-build-isolation -e ."]


# The installer: uv where it can be had, else pip; both from the same lock, checking the same hashes.

#: pip's settings for where packages come from, which uv's options of the same names take
PIP_SOURCES = ("index-url", "extra-index-url", "find-links")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.\-]*)==([^\s\\;]+)((?: \\\n    --hash=sha256:[0-9a-f]{64})*)", re.M)


def _shown(path: Path) -> str:
    """`path` as set-up says it: from the project's folder where it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _name(project: str) -> str:
    """A project's name as indexes compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", project).lower()


class Installer(NamedTuple):
    """What installs into the virtual environment: pip, or uv's binary reading from where pip is configured to."""

    name: str
    uv: Path | None = None
    sources: tuple[str, ...] = ()  # pip's configured indexes and find-links, as uv's arguments

    def command(self, *args: str | Path, verb: str = "install") -> list[str | Path]:
        """The command that runs `verb` (install, or uv's compile) into the virtual environment with `args`."""
        if self.uv is None:
            return [BIN / "python", "-m", "pip", verb, "--progress-bar", "on" if VERBOSE else "off", *args]
        sources = list(self.sources)
        if "--index-url" in args and "--index-url" in sources:  # the command's own index wins, as it does for pip
            at = sources.index("--index-url")
            del sources[at : at + 2]
        return [self.uv, "pip", verb, "--no-config", "--python", BIN / "python", *sources, *args]


def pip_sources() -> tuple[str, ...]:
    """uv's arguments for where pip, as configured here (its files and PIP_ variables), looks for packages.

    uv reads no pip configuration; without this a machine whose pip finds torch's CPU build in a
    find-links folder, or everything through a mirror, would send uv to PyPI instead. uv is told to
    pick the best version over all of them, as pip does (its own default stops at the first index
    that has the project).
    """
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ()
    found: dict[str, tuple[int, list[str]]] = {}
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        key, _, value = line.partition("=")
        section, _, option = key.rpartition(".")
        rank = {":env:": 2, "install": 1}.get(section, 0)  # pip's order: its variables, its install section, global
        if option in PIP_SOURCES and rank >= found.get(option, (-1, []))[0]:
            found[option] = (rank, value.strip().strip("'\"").split())
    args = [arg for option in PIP_SOURCES for value in found.get(option, (0, []))[1] for arg in (f"--{option}", value)]
    return (*args, "--index-strategy", "unsafe-best-match")


def uv_pin() -> str | None:
    """uv's pin in its lock (`uv==X.Y.Z`), or None where the lock is not there."""
    try:
        found = PIN.search(UV_LOCK.read_text(encoding="utf-8"))
    except OSError:
        return None
    return f"uv=={found.group(2)}" if found and found.group(1) == "uv" else None


def find_uv() -> tuple[Path | None, str]:
    """uv's binary, fetched by pip into TOOLS with its lock's hashes the first time; or None and why it cannot be had."""
    if os.environ.get(INSTALLER_VARIABLE, "").strip().lower() == "pip":
        return None, f"{INSTALLER_VARIABLE}=pip"
    pin = uv_pin()
    if pin is None:
        return None, f"{_shown(UV_LOCK)} names no uv"
    folder = TOOLS / pin.replace("==", "-")
    binary = folder / ("Scripts" if os.name == "nt" else "bin") / ("uv.exe" if os.name == "nt" else "uv")
    if not binary.exists():
        partial = folder.with_name(folder.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        try:
            _run(sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-deps", "--only-binary",
                 ":all:", "--require-hashes", "--retries", "1", "--target", partial, "-r", UV_LOCK, tell_failure=False)
        except subprocess.CalledProcessError as e:
            lines = [line.strip() for line in (e.output or "").splitlines() if line.strip() and "WARNING" not in line]
            shutil.rmtree(partial, ignore_errors=True)
            return None, f"pip could not fetch {pin}: {lines[-1] if lines else f'exit {e.returncode}'}"
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
    try:
        answers = subprocess.run([str(binary), "--version"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        answers = False
    return (binary, pin.replace("==", " ")) if answers else (None, f"{binary} does not run here")


def choose_installer() -> Installer:
    """uv where it can be had, else pip; said in one line."""
    uv, words = find_uv()
    if uv is None:
        _say(f"set-up: installing with pip, since uv cannot be had ({words})")
        return Installer("pip")
    _say(f"set-up: installing with {words} ({_shown(UV_LOCK)}, kept in {_shown(TOOLS)}/)")
    return Installer("uv", uv, pip_sources())


def hashed(lock: Path, pins: list[tuple[str, str]]) -> str:
    """The lock's entries for `pins` (name, version), each with its hashes: uv takes hashes from requirements
    alone, where pip takes them from its constraints as well. A pin the lock does not hold fails, as in pip."""
    entries = {(_name(m.group(1)), m.group(2)): m.group(0) for m in PIN.finditer(lock.read_text(encoding="utf-8"))}
    missing = [f"{name}=={version}" for name, version in pins if (_name(name), version) not in entries]
    if missing:
        raise SystemExit(f"run.py: set-up failed: {lock}: no pin with hashes for {', '.join(missing)}")
    return "".join(entries[_name(name), version] + "\n" for name, version in pins)


def _installed_requires(project: str) -> list[str]:
    """What an installed project of the virtual environment requires, as its metadata says."""
    code = "import importlib.metadata as m, json, sys; print(json.dumps(m.requires(sys.argv[1]) or []))"
    done = subprocess.run([str(BIN / "python"), "-c", code, project], capture_output=True, text=True, check=True)
    return list(json.loads(done.stdout))


def uv_locked(installer: Installer, lock: Path, requirements: list[str], scratch: Path) -> None:
    """Install `requirements` with uv as pip does with the lock as constraints: the same set, each file hash-checked.

    uv resolves them against the lock first (`uv pip compile`), then installs exactly that set, each pin
    with the lock's hashes, without resolving again. torch, where set-up installed it from its own index,
    stays as it came and brings what its build requires, as pip takes it from the installed metadata.
    """
    wanted, resolved, override = scratch / "wanted.in", scratch / "resolved.txt", scratch / "override.txt"
    overrides: list[str | Path] = []
    if _has_torch():
        requirements = [*requirements, *_installed_requires("torch")]
        override.write_text("torch; sys_platform == 'never'\n", encoding="utf-8")  # uv's way to leave a project out
        overrides = ["--override", override]
    wanted.write_text("\n".join(requirements) + "\n", encoding="utf-8")
    _run(*installer.command("-c", lock, *overrides, wanted, "--no-header", "--no-annotate", "-o", resolved,
                            verb="compile"))
    pins = [(m.group(1), m.group(2)) for m in PIN.finditer(resolved.read_text(encoding="utf-8"))]
    (scratch / "hashed.txt").write_text(hashed(lock, pins), encoding="utf-8")
    _run(*installer.command("--require-hashes", "--no-deps", "-r", scratch / "hashed.txt"))


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


def _create_venv(installer: Installer) -> None:
    """Step 1: the virtual environment, with pip in it for the tools that call it (and CI's side installs)."""
    if (BIN / "python").exists():
        _say(f"set-up 1/3: the virtual environment {_shown(VENV)}/ is there")
        return
    _say(f"set-up 1/3: creating the virtual environment {VENV}")
    if installer.uv is not None:
        _run(installer.uv, "venv", "--no-config", "--allow-existing", "--python", sys.executable, VENV)
        _say("set-up 1/3: installing pip in it")
        _run(*installer.command("pip"))
    else:
        _run(sys.executable, "-m", "venv", VENV)
        _say("set-up 1/3: bringing pip in it up to date")
        _run(*installer.command("--upgrade", "pip"))


def _pinned(installer: Installer, lock: Path | None, requirement: str, scratch: Path) -> list[str | Path]:
    """The arguments that install `requirement` (NAME==VERSION) checked against the lock's hashes, where there is one."""
    if lock is None:
        return [requirement]
    if installer.uv is None:
        return ["-c", lock, requirement]
    name, _, version = requirement.partition("==")
    (scratch / "pinned.txt").write_text(hashed(lock, [(name, version)]), encoding="utf-8")
    return ["--require-hashes", "-r", scratch / "pinned.txt"]


def _install_torch(installer: Installer, target: Target, lock: Path | None, scratch: Path) -> None:
    """Step 2: torch alone, from the index its build comes from; its dependencies come in step 3, from PyPI with
    the lock's hashes, whichever index it came from."""
    index = index_to_check(target)
    args, sentence = torch_plan(target, index is not None and reachable(index + "/torch/"))
    _say(f"set-up 2/3: {sentence}")
    cpu = torch_cpu_lock(target)
    install = installer.command
    if rocm_torch(target):
        # scripts/lock reads PyPI's and the CPU index's hashes only
        _say("set-up 2/3: torch's ROCm build has no hashes in the lock: installed without hash checking")
        _run(*install(*args))
    elif target.system == "Linux" and target.gpu != NVIDIA and cpu and "--index-url" in args:
        _run(*install("--no-deps", "--require-hashes", "-r", cpu, *args[1:]))
    elif target.system == "Linux" and target.gpu != NVIDIA and cpu:
        # the CPU index does not answer: the CPU build where pip's configuration offers it (a find-links
        # folder), else PyPI's build, each checked against its hashes
        try:
            _run(*install("--no-deps", "--require-hashes", "-r", cpu), tell_failure=False)
        except subprocess.CalledProcessError:
            _say("set-up 2/3: pip's configured index has no CPU build of torch: PyPI's build instead, hash-checked")
            _run(*install("--no-deps", *_pinned(installer, lock, TORCH, scratch)))
    elif target.system == "Linux" and target.gpu != NVIDIA:
        _say(f"set-up 2/3: the lock has no hashes of torch's CPU build for {target.machine} with Python "
             f"{platform.python_version()} (scripts/lock reads them where {CPU_INDEX} answers): installed "
             "without hash checking")
        _run(*install("--no-deps", *args))
    else:
        _run(*install("--no-deps", *_pinned(installer, lock, TORCH, scratch), *args[1:]))


def _install_project(installer: Installer, target: Target, lock: Path | None, extras: list[str], scratch: Path) -> None:
    """Step 3: the project's dependencies pinned with hashes by the lock, then the project itself, editable."""
    spec = f".[{','.join(extras)}]" if extras else "."
    where = (f"pinned with hashes by {_shown(lock)}" if lock else
             f"unpinned: {LOCKS.relative_to(ROOT)}/ has no lock for {target.system} {target.machine} with Python "
             f"{platform.python_version()}")
    _say(f"set-up 3/3: installing the project's dependencies ({spec}), {where}")
    if lock is not None and installer.uv is not None:
        uv_locked(installer, lock, project_requirements(extras), scratch)
    else:
        _run(*installer.command(*(["-c", lock] if lock else []), *project_requirements(extras)))
    _say("set-up 3/3: installing the project itself, editable")
    _run(*installer.command("--no-deps", "--no-build-isolation", "-e", "."))


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
    installer = choose_installer()
    _create_venv(installer)
    lock = lock_for(target)
    with tempfile.TemporaryDirectory(prefix="run-py-") as folder:
        if {"verify", "dev"} & set(extras) and not _has_torch():
            _install_torch(installer, target, lock, Path(folder))
        else:
            _say("set-up 2/3: torch is there or not needed for this job")
        _install_project(installer, target, lock, extras, Path(folder))
    if {"notebook", "dev"} & set(extras):
        # jupytext --execute picks the kernel whose python is the one running it: this venv's, named here
        _say("set-up: registering this environment's Jupyter kernel (for jupytext --execute on the snippets)")
        _run(BIN / "python", "-m", "ipykernel", "install", "--sys-prefix", "--name", "verified-book",
             "--display-name", "Python (verified book)")
    if {"verify", "dev"} & set(extras):
        _report_builds(target)
    STAMP.write_text(json.dumps({"recipe": _recipe(), "extras": extras, "installer": installer.name}))
    _say(f"set-up done (installed with {installer.name})")


def dry_run(job: str) -> int:
    """Print what set-up would install for `job` on this machine (or VERIFIED_BOOK_TARGET's); install nothing."""
    try:
        target = this_machine()
    except ValueError as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 2
    index = index_to_check(target)
    answers = index is not None and reachable(index + "/torch/")
    pin = uv_pin() if os.environ.get(INSTALLER_VARIABLE, "").strip().lower() != "pip" else None
    for line in plan_lines(job, target, answers, pin.replace("==", " ") if pin else None):
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
