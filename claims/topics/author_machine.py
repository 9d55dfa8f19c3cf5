"""The author's machine: an RTX 5080 with 16 GB of VRAM beside 32 GB of system memory.

The quoted claims read the machine's profile (claims/data/hardware/rtx5080.toml), so
every "16 GB" and "32 GB" in the prose is a figure with a source. What follows from the
card's compute capability (which tensor-core formats it runs) is derived against the
capabilities each format needs (claims/data/cuda_formats.toml). The device claims read
the same facts from the GPU itself and run only on an RTX 5080.
"""

from __future__ import annotations

from fractions import Fraction

from claims.topics.format_defaults import capability
from claims.topics.formats import FORMATS
from claims.topics.memory_lab import gib
from verified_book import Backend, InvariantFailed, claim, exact, vendor

PROFILE = "hardware/rtx5080.toml"
TENSOR_CORE_FORMATS = ("tf32", "bf16", "fp8")


def _as_number(cc: tuple[int, int]) -> Fraction:
    return Fraction(cc[0]) + Fraction(cc[1], 10)


@claim("author_machine.vram_gb", kind="quoted", citation="NVIDIA GeForce RTX 5080 product page")
def vram_gb() -> Fraction:
    """The card's memory, as NVIDIA states it."""
    return exact(vendor(PROFILE, "memory_capacity"))


def card_bytes() -> Fraction:
    """The card's memory in bytes, by the book's rule in its note on the author's machine: NVIDIA's
    "GB" on a card are binary gigabytes, GiB (2^30 bytes), so "16 GB" is 16 × 2^30 bytes."""
    return vram_gb() * gib()


@claim(
    "author_machine.card_bytes",
    kind="exact",
    assumes="the vendor's \u201c16 GB\u201d on a card means 16 GiB (2^30 bytes each), which its page does not say",
)
def card_bytes_claim() -> Fraction:
    """The card's "16 GB" in bytes, read as GiB."""
    return card_bytes()


@claim(
    "author_machine.system_memory_gb",
    kind="given",
    citation="the book's own choice: the author's build, 32 GB of DDR5 (no vendor states it)",
)
def system_memory_gb() -> Fraction:
    """The machine's system DDR5, a separate address space from the card's."""
    return exact(vendor(PROFILE, "system_memory"))


@claim("author_machine.compute_capability", kind="quoted", citation="NVIDIA CUDA GPUs list")
def compute_capability() -> Fraction:
    """The card's compute capability, major.minor."""
    return _as_number(capability(vendor(PROFILE, "compute_capability")))


@claim(
    "author_machine.tensor_core_minimum.{fmt}",
    kind="quoted",
    over={"fmt": TENSOR_CORE_FORMATS},
    citation="NVIDIA PTX ISA",
)
def tensor_core_minimum(fmt: str) -> Fraction:
    """The compute capability at which tensor cores first take a format."""
    return _as_number(capability(vendor("cuda_formats.toml", fmt)))


@claim("author_machine.tensor_core_formats", kind="exact", about="rtx5080")
def tensor_core_formats() -> int:
    """How many of TF32, BF16 and FP8 the card's tensor cores take: those whose minimum it meets."""
    card = capability(vendor(PROFILE, "compute_capability"))
    return sum(1 for fmt in TENSOR_CORE_FORMATS if card >= capability(vendor("cuda_formats.toml", fmt)))


def _device_capability() -> tuple[int, int]:
    import torch

    return tuple(torch.cuda.get_device_capability(0))  # type: ignore[return-value]


@claim(
    "author_machine.device.vram_gib",
    kind="measured",
    backends=("torch:cuda",),
    hardware="rtx5080",
    printed_on="rtx5080",
    tolerance=0.05,
)
def device_vram_gib(backend: Backend) -> Fraction:
    """The memory the device reports, in GiB: NVIDIA's "16 GB" are binary gigabytes, less what the driver keeps."""
    import torch

    total = torch.cuda.get_device_properties(0).total_memory
    stated = vram_gb()
    if not Fraction(9, 10) * card_bytes() <= total <= card_bytes():
        raise InvariantFailed(
            f"the device reports {total / gib():.2f} GiB; the profile states {stated} GB, "
            f"{card_bytes():,} bytes by the book's rule that a card's GB are GiB"
        )
    return Fraction(total, gib())


@claim("author_machine.device.compute_capability", kind="measured", backends=("torch:cuda",), hardware="rtx5080")
def device_compute_capability(backend: Backend) -> Fraction:
    """The compute capability the device reports, which must be the profile's."""
    found = _device_capability()
    stated = capability(vendor(PROFILE, "compute_capability"))
    if found != stated:
        raise InvariantFailed(f"the device reports compute capability {found}; the profile states {stated}")
    return _as_number(found)


@claim("author_machine.device.bf16_step", kind="measured", backends=("torch:cuda",), hardware="rtx5080")
def device_bf16_step(backend: Backend) -> Fraction:
    """BF16's step above 1.0 as the GPU computes it: 1 + 2^-7 survives, 1 + 2^-8 rounds back to 1."""
    import torch

    if not torch.cuda.is_bf16_supported():
        raise InvariantFailed("torch.cuda.is_bf16_supported() is False on the author's card")
    one = torch.ones((), dtype=torch.bfloat16, device="cuda")
    step = FORMATS["bf16"].eps()
    kept = float(((one + float(step)) - one).item())
    lost = float(((one + float(step) / 2) - one).item())
    if lost != 0.0:
        raise InvariantFailed(f"1 + {float(step) / 2} in BF16 on the GPU kept {lost}; half a step should round away")
    return Fraction(kept)


@claim(
    "author_runs.version.{library}",
    kind="quoted",
    over={"library": ("numpy", "torch")},
    citation="the source chapter's output captions, transcribed in claims/data/author_runs.toml",
)
def author_version(library: str) -> tuple[int, ...]:
    """The library version the source's author printed an output with (major, minor, patch): the book
    names it beside each output block, so a reader knows which release the printed figures came from."""
    text = str(vendor("author_runs.toml", f"versions.{library}"))
    parts = text.split(".")
    if not all(part.isdigit() for part in parts):
        raise InvariantFailed(f"claims/data/author_runs.toml: versions.{library} = {text!r} is not a version")
    return tuple(int(part) for part in parts)
