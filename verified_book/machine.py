"""The machine a run happens on: a fingerprint, a slug, and the hardware markers it matches.

Fingerprint fields (all strings or numbers, `None` where not found):

| field | what |
| --- | --- |
| `cpu` | CPU model name |
| `arch` | machine architecture (`x86_64`, `arm64`) |
| `cores` | logical CPUs |
| `memory_gb` | system memory, decimal GB |
| `os` | operating system and release |
| `gpu` | first accelerator's name (CUDA device name, or the Apple chip for MPS) |
| `gpu_memory_gb` | its memory, decimal GB |
| `compute_capability` | CUDA compute capability, `major.minor` |
| `driver` | NVIDIA driver version |
| `python`, `numpy`, `torch`, `mlx`, `ml_dtypes`, `transformers`, `gguf` | versions |

Profiles of the book's hardware live in `<data>/<hardware>/<marker>.toml` (see `book.toml`); a
profile's `[match]` table says which fingerprint it recognises.
"""
from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from verified_book import inputs

HARDWARE_DIR = "hardware"  # the profiles' folder inside the book's data folder (`hardware` in book.toml)


def use_hardware_dir(folder: str) -> None:
    """Read profiles from this folder of the data folder from now on."""
    global HARDWARE_DIR
    HARDWARE_DIR = folder
    profiles.cache_clear()


@dataclass(frozen=True)
class Profile:
    """One of the book's machines: a marker, its vendor figures and how to recognise it."""

    marker: str
    name: str
    backends: tuple[str, ...]
    match: Mapping[str, str]
    file: str

    def matches(self, fingerprint: Mapping[str, Any]) -> bool:
        if not self.match:
            return False
        for field_name, needle in self.match.items():
            found = fingerprint.get(field_name)
            if found is None or needle.lower() not in str(found).lower():
                return False
        return True


@functools.cache
def profiles() -> dict[str, Profile]:
    """Every hardware profile of the book, by marker."""
    out: dict[str, Profile] = {}
    for file in inputs.data_files():
        if not file.startswith(HARDWARE_DIR + "/"):
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
            return subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5).stdout.strip()
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


def _nvidia_driver() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def fingerprint() -> dict[str, Any]:
    """What this machine is, read from the OS and the libraries present."""
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
    for dist in ("numpy", "torch", "mlx", "ml_dtypes", "transformers", "gguf", "sympy"):
        info[dist] = _version(dist)
    try:
        import torch

        if torch.cuda.is_available():
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

    def describe(self) -> str:
        """How the machine reads in a skip reason: what hardware was found."""
        parts = [self.slug, str(self.info.get("cpu"))]
        if self.info.get("gpu") and self.info.get("gpu") != self.info.get("cpu"):
            parts.append(f"{self.info['gpu']} ({self.info.get('gpu_memory_gb')} GB)")
        else:
            parts.append("no GPU")
        matched = f"; matches {', '.join(self.markers)}" if self.markers else "; matches none of the book's hardware profiles"
        return ", ".join(parts) + matched


def identify(info: Mapping[str, Any], slug: str | None = None) -> Machine:
    markers = tuple(sorted(m for m, p in profiles().items() if p.matches(info)))
    return Machine(dict(info), slug or slug_of(info), markers)
