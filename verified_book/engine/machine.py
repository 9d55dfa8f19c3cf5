"""The machine a run happens on: a fingerprint, a slug, and the hardware markers it matches.

Fingerprint fields (all strings or numbers, `None` where not found):

| field | what |
| --- | --- |
| `cpu` | CPU model name |
| `arch` | machine architecture (`x86_64`, `arm64`) |
| `cores` | logical CPUs |
| `memory_gb` | system memory, decimal GB |
| `os` | operating system and release |
| `gpu` | first accelerator's name (CUDA or ROCm device name, or the Apple chip for MPS) |
| `gpu_memory_gb` | its memory, decimal GB (on a ROCm GPU, what torch reports the device may use) |
| `compute_capability` | CUDA compute capability, `major.minor` (none on a ROCm GPU) |
| `driver` | NVIDIA driver version |
| `gfx` | an AMD GPU's architecture as ROCm names it (`gfx1151`), where torch is a ROCm build |
| `hip` | that build's HIP version |
| `python`, `numpy`, `torch`, `mlx`, `ml_dtypes`, `transformers`, `gguf` | versions |

Profiles of the book's hardware live in `<data>/<hardware>/<marker>.toml` (see `book.toml`); a
profile's `[match]` table says which fingerprint it recognises, field by field and exactly:
a string is the whole value of the field (letter case and runs of spaces aside: "NVIDIA GeForce
RTX 5080" is not "NVIDIA GeForce RTX 5080 Laptop GPU"), a list of strings is alternatives, a
number is the field's value within `MATCH_TOLERANCE` (a memory configuration: 128 GiB is 137.4 GB).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from verified_book.authoring import inputs


@dataclass(frozen=True)
class Profile:
    """One of the book's machines: a marker, its vendor figures and how to recognise it."""

    marker: str
    name: str
    backends: tuple[str, ...]
    match: Mapping[str, Any]
    file: str

    def matches(self, fingerprint: Mapping[str, Any]) -> bool:
        """Whether every field of the `[match]` table names this fingerprint exactly (see the module's doc)."""
        if not self.match:
            return False
        return all(field_matches(wanted, fingerprint.get(field_name)) for field_name, wanted in self.match.items())


MATCH_TOLERANCE = 0.05  # a numeric `[match]` field: the fingerprint's value within 5 % (rounding, reserved memory)


def _normal(text: Any) -> str:
    return " ".join(str(text).split()).casefold()


def field_matches(wanted: Any, found: Any) -> bool:
    """One `[match]` field against the fingerprint's value: whole strings, alternatives, or a number."""
    if found is None:
        return False
    if isinstance(wanted, list):
        return any(field_matches(w, found) for w in wanted)
    if isinstance(wanted, bool) or not isinstance(wanted, (int, float)):
        return _normal(wanted) == _normal(found)
    try:
        value = float(found)
    except (TypeError, ValueError):
        return False
    return abs(value - wanted) <= MATCH_TOLERANCE * abs(wanted)


def profiles() -> dict[str, Profile]:
    """Every hardware profile of the open book, by marker (read once per book)."""
    from verified_book.engine.config import current_book

    return current_book().profiles()


def read_profiles(hardware: str) -> dict[str, Profile]:
    """The open book's hardware profiles, from the folder `hardware` of its data folder."""
    out: dict[str, Profile] = {}
    for file in inputs.data_files():
        if not file.startswith(hardware + "/"):
            continue
        data = inputs.table(file)
        marker = data.get("marker") or Path(file).stem
        out[marker] = Profile(
            marker=marker,
            name=data.get("name", marker),
            backends=tuple(data.get("backends", ())),
            match=data.get("match", {}),
            file=file,
        )
    return out


def profile_names(folder: Path) -> dict[str, str]:
    """Each hardware profile's marker and machine name, read from the profiles' files alone, with no book
    open and no library loaded: what pytest's list of markers shows, before (or without) a run."""
    out: dict[str, str] = {}
    if not folder.is_dir():
        return out
    for path in sorted(folder.rglob("*"), key=lambda p: str(p.relative_to(folder))):
        try:
            if path.suffix == ".toml":
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            elif path.suffix == ".json":
                data = json.loads(path.read_text(encoding="utf-8"))
            else:
                continue
        except (OSError, ValueError):  # the book's load reports a profile that does not parse, with its place
            continue
        if isinstance(data, dict):
            marker = str(data.get("marker") or path.stem)
            out[marker] = str(data.get("name", marker))
    return out


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            return subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine()


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) * 1024 / 1e9, 1)
    except OSError:
        pass
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _nvidia_smi(*args: str) -> list[str] | None:
    """The fields of the first line `nvidia-smi ARGS` prints (a CSV query's first GPU); None where it is absent,
    fails or prints nothing."""
    try:
        out = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines() if out.returncode == 0 else []
    return [field.strip() for field in lines[0].split(",")] if lines else None


def _nvidia_driver() -> str | None:
    fields = _nvidia_smi("--query-gpu=driver_version", "--format=csv,noheader")
    return fields[0] if fields else None


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS says it, else every CPU)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


#: the distributions whose versions a run records, in the fingerprint and the run header
VERSIONED = ("numpy", "torch", "mlx", "jax", "ml_dtypes", "transformers", "gguf", "sympy")


def torch_build() -> dict[str, str] | None:
    """The CUDA and HIP versions torch was built for, as its `torch/version.py` states them (`"None"` where
    it names none), read without importing torch (over a second); None where that file cannot be read."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        text = (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, StopIteration):
        return None
    found = dict(re.findall(r"^(cuda|hip)\b[^=\n]*=\s*(.+?)\s*$", text, re.MULTILINE))
    return {name: value.strip("'\"") for name, value in found.items()}


def torch_may_see_a_device() -> bool:
    """Whether torch could reach an accelerator here, told without importing torch: a build whose
    `torch/version.py` names neither a CUDA nor a HIP version sees none, except on a Mac (MPS).
    Where torch is loaded already, or its build cannot be read, it is asked."""
    if "torch" in sys.modules:
        return True
    try:
        if importlib.util.find_spec("torch") is None:
            return False
    except (ImportError, ValueError):
        return False
    if platform.system() == "Darwin":
        return True
    built_for = torch_build()
    if built_for is None:
        return True
    return set(built_for) != {"cuda", "hip"} or any(value != "None" for value in built_for.values())


def _nvidia_smi_gpu() -> dict[str, Any] | None:
    """The GPU CUDA's programs see first (the first of CUDA_VISIBLE_DEVICES where it is set, else nvidia-smi's
    first) as `nvidia-smi` reports it, in the fingerprint's fields; None where it is absent or lists none. Read
    so on every run where it answers, torch loaded or not, so that one machine has one fingerprint; the check
    of one page then never pays for importing torch and starting CUDA. (On a machine of mixed GPUs, CUDA counts
    the fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, and nvidia-smi in bus order: the two may differ.)"""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    first = visible.split(",")[0].strip() if visible is not None else None
    if first is not None and (not first or first.startswith("-")):  # "" or "-1": CUDA sees no GPU
        return None
    fields = _nvidia_smi(
        *([f"--id={first}"] if first else []),
        "--query-gpu=name,memory.total,compute_cap,driver_version",
        "--format=csv,noheader,nounits",
    )
    if fields is None or len(fields) != 4 or not fields[0]:
        return None
    name, mib, capability, driver = fields
    try:
        memory_gb: float | None = round(float(mib) * 2**20 / 1e9, 1)
    except ValueError:  # "[N/A]" on some boards
        memory_gb = None
    return {"gpu": name, "gpu_memory_gb": memory_gb, "compute_capability": capability or None, "driver": driver or None}


def fingerprint() -> dict[str, Any]:
    """What this machine is, read from the OS and the libraries present (torch's device only where
    torch may see one: `torch_may_see_a_device`)."""
    info: dict[str, Any] = {
        "cpu": _cpu_model(),
        "arch": platform.machine(),
        "cores": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "os": f"{platform.system()} {platform.release()}",
        "gpu": None,
        "gpu_memory_gb": None,
        "compute_capability": None,
        "driver": None,
        "python": platform.python_version(),
    }
    for dist in VERSIONED:
        info[dist] = _version(dist)
    if not torch_may_see_a_device():
        return info
    built_for = torch_build() or {}
    if built_for.get("cuda", "None") != "None" and (nvidia := _nvidia_smi_gpu()):
        info.update(nvidia)
        info["cuda"] = built_for["cuda"]
        return info
    try:
        import torch

        from verified_book.backends.torch import gfx_arch

        hip = getattr(torch.version, "hip", None)
        if torch.cuda.is_available() and hip:
            props = torch.cuda.get_device_properties(0)
            info["gpu"] = props.name
            info["gpu_memory_gb"] = round(props.total_memory / 1e9, 1)
            info["gfx"] = gfx_arch(torch) or None
            info["hip"] = str(hip)
        elif torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            info["gpu"] = props.name
            info["gpu_memory_gb"] = round(props.total_memory / 1e9, 1)
            info["compute_capability"] = f"{props.major}.{props.minor}"
            info["driver"] = _nvidia_driver()
            info["cuda"] = torch.version.cuda
        elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            info["gpu"] = info["cpu"]
    except Exception:
        pass
    return info


def slug_of(info: Mapping[str, Any]) -> str:
    """A file-name-safe name for a machine: its accelerator, else its CPU architecture and cores."""
    if info.get("gpu"):
        base = str(info["gpu"])
    elif str(info.get("cpu", "")).lower().startswith("apple"):
        base = str(info["cpu"])
    else:
        base = f"cpu-{info.get('arch') or 'unknown'}-{info.get('cores') or 0}c"
    return re.sub(r"[^a-z0-9_]+", "-", base.lower()).strip("-")


@dataclass(frozen=True)
class Machine:
    """This machine: its fingerprint, slug, and the book's hardware markers it matches."""

    info: Mapping[str, Any]
    slug: str
    markers: tuple[str, ...]
    id: str = ""  # this machine's identity (verified_book.records.identity): two machines never share a results file

    def describe(self) -> str:
        """How the machine reads in a skip reason: what hardware was found."""
        parts = [self.slug, str(self.info.get("cpu")), self.gpu_words()]
        matched = (
            f"; matches {', '.join(self.markers)}" if self.markers else "; matches none of the book's hardware profiles"
        )
        return ", ".join(parts) + matched

    def gpu_words(self) -> str:
        """The accelerator in words: a discrete card with its memory, the GPU of an Apple chip, or none."""
        gpu, cpu = self.info.get("gpu"), self.info.get("cpu")
        if gpu and gpu != cpu:
            return f"{gpu} ({self.info.get('gpu_memory_gb')} GB)"
        if gpu or str(cpu or "").lower().startswith("apple"):
            memory = self.info.get("memory_gb")
            shared = f", sharing {memory} GB of unified memory" if memory else ""
            return f"GPU on the chip{shared}"
        return "no GPU"


def identify(info: Mapping[str, Any], slug: str | None = None, machine_id: str = "") -> Machine:
    markers = tuple(sorted(m for m, p in profiles().items() if p.matches(info)))
    return Machine(dict(info), slug or slug_of(info), markers, machine_id)
