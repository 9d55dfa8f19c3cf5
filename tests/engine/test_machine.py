"""Which machine a fingerprint is: each hardware profile recognises its own machine and no neighbour."""

from __future__ import annotations

import os
import sys

import pytest

from verified_book.engine import machine
from verified_book.engine.machine import Machine, field_matches, identify, profiles

# Per profile: fingerprints of the machine itself (as the OS and CUDA name it), and of neighbouring
# products that must not be taken for it (a laptop part, a superchip, another memory configuration).
GiB = 2**30 / 1e9
NAMES: dict[str, tuple[list[dict], list[dict]]] = {
    "rtx5080": (
        [{"gpu": "NVIDIA GeForce RTX 5080"}, {"gpu": "nvidia geforce  rtx 5080"}],
        [
            {"gpu": "NVIDIA GeForce RTX 5080 Laptop GPU"},
            {"gpu": "NVIDIA GeForce RTX 5070 Ti"},
            {"gpu": "NVIDIA GeForce RTX 5090"},
            {"gpu": None},
        ],
    ),
    "rtx5090": (
        [{"gpu": "NVIDIA GeForce RTX 5090"}],
        [
            {"gpu": "NVIDIA GeForce RTX 5090 Laptop GPU"},
            {"gpu": "NVIDIA GeForce RTX 5090 D"},
            {"gpu": "NVIDIA GeForce RTX 5080"},
        ],
    ),
    "h100": (
        [{"gpu": "NVIDIA H100 80GB HBM3"}],
        [
            {"gpu": "NVIDIA H100 PCIe"},
            {"gpu": "NVIDIA H100 NVL"},
            {"gpu": "NVIDIA GH200 480GB"},
            {"gpu": "NVIDIA H800"},
        ],
    ),
    "h200": (
        [{"gpu": "NVIDIA H200"}],
        [
            {"gpu": "NVIDIA H200 NVL"},
            {"gpu": "NVIDIA GH200 144G HBM3e"},
            {"gpu": "NVIDIA GH200 480GB"},
            {"gpu": "NVIDIA H100 80GB HBM3"},
        ],
    ),
    "dgx_spark": (
        [{"gpu": "NVIDIA GB10"}],
        [{"gpu": "NVIDIA GB200"}, {"gpu": "NVIDIA B200"}, {"gpu": "NVIDIA GB100"}],
    ),
    "m4_max": (
        [{"cpu": "Apple M4 Max", "gpu": "Apple M4 Max", "memory_gb": round(128 * GiB, 1)}],
        [
            {"cpu": "Apple M4 Pro", "memory_gb": round(64 * GiB, 1)},
            {"cpu": "Apple M4", "memory_gb": round(128 * GiB, 1)},
            {"cpu": "Apple M3 Max", "memory_gb": round(128 * GiB, 1)},
            {"cpu": "Apple M4 Max", "memory_gb": round(36 * GiB, 1)},
            {"cpu": "Apple M4 Max", "memory_gb": round(64 * GiB, 1)},
            {"cpu": "Apple M4 Max", "memory_gb": None},
        ],
    ),
    "ryzen_ai_max": (
        [{"cpu": "AMD RYZEN AI MAX+ 395 w/ Radeon 8060S"}],
        [
            {"cpu": "AMD RYZEN AI MAX 390 w/ Radeon 8050S"},
            {"cpu": "AMD RYZEN AI MAX+ PRO 395 w/ Radeon 8060S"},
            {"cpu": "AMD Ryzen AI 9 HX 370 w/ Radeon 890M"},
        ],
    ),
}


pytestmark = pytest.mark.usefixtures("project_book")


def test_every_profile_is_pinned_here() -> None:
    assert set(NAMES) == set(profiles()), "add the names a new profile must and must not match to NAMES"


@pytest.mark.parametrize("marker", sorted(NAMES))
def test_a_profile_matches_its_machine_and_no_neighbour(marker: str) -> None:
    profile = profiles()[marker]
    same, neighbours = NAMES[marker]
    for fields in same:
        assert profile.matches(fields), f"{marker} should match {fields}"
        assert identify(fields).markers == (marker,), fields
    for fields in neighbours:
        assert not profile.matches(fields), f"{marker} must not match {fields}"
        assert marker not in identify(fields).markers


def test_match_fields_are_whole_alternatives_or_numbers() -> None:
    assert field_matches("RTX 5080", "rtx  5080") and not field_matches("RTX 5080", "RTX 5080 Laptop GPU")
    assert field_matches(["A", "B"], "b") and not field_matches(["A", "B"], "AB")
    assert field_matches(137.4, 140.0) and not field_matches(137.4, 68.7) and not field_matches(137.4, "many")
    assert not field_matches("x", None)


@pytest.mark.parametrize(
    ("info", "words"),
    [
        (
            {"cpu": "Apple M4 Max", "gpu": "Apple M4 Max", "memory_gb": 137.4},
            "GPU on the chip, sharing 137.4 GB of unified memory",
        ),
        (
            {"cpu": "Apple M4 Max", "gpu": None, "memory_gb": 137.4},
            "GPU on the chip",
        ),  # torch without MPS still runs on the chip
        ({"cpu": "AMD EPYC", "gpu": "NVIDIA H200", "gpu_memory_gb": 150.0}, "NVIDIA H200 (150.0 GB)"),
        ({"cpu": "AMD EPYC", "gpu": None}, "no GPU"),
    ],
)
def test_the_description_names_the_gpu_an_apple_chip_has(info: dict, words: str) -> None:
    described = Machine(info, "m", ()).describe()
    assert words in described
    if info["cpu"].startswith("Apple"):
        assert "no GPU" not in described


H200_SMI = "NVIDIA H200, 143771, 9.0, 580.159.04"


def _fake_nvidia_smi(tmp_path, monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    """An `nvidia-smi` on PATH that answers `answer` to the fingerprint's query, as the H200 of a first CUDA run
    did, and keeps the arguments it was given in `args`."""
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path / 'args'}\nprintf '%s\\n' '{answer}'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def _cuda_torch_that_cannot_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA build of torch, as its version.py says, that fails to import (sys.modules holds None for it): a GPU
    the fingerprint names can only have come from nvidia-smi."""
    monkeypatch.setattr(machine, "torch_build", lambda: {"cuda": "13.0", "hip": "None"})
    monkeypatch.setitem(sys.modules, "torch", None)


def test_a_cuda_machine_is_fingerprinted_from_nvidia_smi_without_torch(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a CUDA build of torch the GPU is read from nvidia-smi, never from torch: `import torch` fails here
    (sys.modules holds None for it), so the GPU named can only have come from nvidia-smi."""
    _fake_nvidia_smi(tmp_path, monkeypatch, H200_SMI)
    _cuda_torch_that_cannot_load(monkeypatch)
    info = machine.fingerprint()
    assert (info["gpu"], info["gpu_memory_gb"], info["compute_capability"], info["driver"], info["cuda"]) == (
        "NVIDIA H200",
        round(143771 * 2**20 / 1e9, 1),
        "9.0",
        "580.159.04",
        "13.0",
    )
    assert identify(info).markers == ("h200",)


@pytest.mark.parametrize("answer", ["", "No devices were found", "NVIDIA H200, [N/A]"])
def test_an_nvidia_smi_that_names_no_gpu_leaves_the_gpu_to_torch(
    tmp_path, monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    _fake_nvidia_smi(tmp_path, monkeypatch, answer)
    _cuda_torch_that_cannot_load(monkeypatch)  # torch cannot answer either: no GPU is named
    assert machine.fingerprint()["gpu"] is None


def test_a_cpu_build_of_torch_reads_no_gpu(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_nvidia_smi(tmp_path, monkeypatch, H200_SMI)
    monkeypatch.setattr(machine, "torch_build", lambda: {"cuda": "None", "hip": "None"})
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(machine.platform, "system", lambda: "Linux")
    assert machine.fingerprint()["gpu"] is None, "a torch that cannot reach the GPU is not fingerprinted with it"


@pytest.mark.parametrize(("visible", "asked"), [("2,3", "--id=2"), ("GPU-8f3c", "--id=GPU-8f3c"), (None, "")])
def test_the_gpu_read_is_the_first_one_cuda_sees(
    tmp_path, monkeypatch: pytest.MonkeyPatch, visible: str | None, asked: str
) -> None:
    _fake_nvidia_smi(tmp_path, monkeypatch, H200_SMI)
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    _cuda_torch_that_cannot_load(monkeypatch)
    assert machine.fingerprint()["gpu"] == "NVIDIA H200"
    assert (tmp_path / "args").read_text().startswith(f"{asked} --query-gpu" if asked else "--query-gpu")


@pytest.mark.parametrize("visible", ["", "-1"])
def test_no_gpu_is_read_where_cuda_sees_none(tmp_path, monkeypatch: pytest.MonkeyPatch, visible: str) -> None:
    _fake_nvidia_smi(tmp_path, monkeypatch, H200_SMI)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    _cuda_torch_that_cannot_load(monkeypatch)
    assert machine.fingerprint()["gpu"] is None
