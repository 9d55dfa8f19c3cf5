"""The book's machines as their vendors state them, and what arithmetic can check of it.

Each profile in `claims/data/hardware/` carries the vendor's capacity, bandwidth and, for
NVIDIA parts, compute capability. Where the vendor also states the memory interface
(bus width and per-pin data rate, or transfers per second), the bandwidth follows from
it: bits × rate ÷ 8. The derivation must agree with the quoted bandwidth to within the
rounding of a data sheet (half a per cent), or the quoted figure is wrong.
"""

from __future__ import annotations

from fractions import Fraction

from verified_book import InvariantFailed, claim, exact, table, vendor

MACHINES = ("rtx5080", "rtx5090", "dgx_spark", "ryzen_ai_max", "m4_max", "h100", "h200")
NVIDIA = ("rtx5080", "rtx5090", "dgx_spark", "h100", "h200")
DATA_SHEET_ROUNDING = Fraction(1, 200)


def _profile(machine: str) -> str:
    return f"hardware/{machine}.toml"


def _with_interface() -> tuple[str, ...]:
    return tuple(m for m in MACHINES if "memory_bus_bits" in table(_profile(m)))


@claim(
    "hardware.{machine}.memory_capacity",
    kind="quoted",
    over={"machine": MACHINES},
    citation="the machine's data sheet, cited in its hardware profile",
)
def memory_capacity(machine: str) -> Fraction:
    """The memory the accelerator reads at full speed, in GB, as the vendor states it."""
    return exact(vendor(_profile(machine), "memory_capacity"))


@claim(
    "hardware.{machine}.memory_bandwidth",
    kind="quoted",
    over={"machine": MACHINES},
    citation="the machine's data sheet, cited in its hardware profile",
)
def memory_bandwidth(machine: str) -> Fraction:
    """The vendor's memory bandwidth in GB/s: the divisor of every decode ceiling."""
    return exact(vendor(_profile(machine), "memory_bandwidth"))


@claim(
    "hardware.{machine}.compute_capability",
    kind="quoted",
    over={"machine": NVIDIA},
    citation="NVIDIA's CUDA GPUs list, cited in the hardware profile",
)
def compute_capability(machine: str) -> Fraction:
    """The CUDA compute capability, major.minor, which decides shared memory and formats."""
    return exact(vendor(_profile(machine), "compute_capability"))


@claim("hardware.{machine}.bandwidth_from_interface", kind="exact", over={"machine": _with_interface()})
def bandwidth_from_interface(machine: str) -> Fraction:
    """Bandwidth from the memory interface: bus bits × rate ÷ 8, checked against the quoted figure."""
    profile = table(_profile(machine))
    bits = exact(vendor(_profile(machine), "memory_bus_bits"))
    if "memory_data_rate" in profile:
        derived = bits * exact(vendor(_profile(machine), "memory_data_rate")) / 8
    else:
        derived = bits / 8 * exact(vendor(_profile(machine), "memory_transfer_rate")) / 1000
    quoted = memory_bandwidth(machine)
    if abs(derived - quoted) > DATA_SHEET_ROUNDING * quoted:
        raise InvariantFailed(
            f"the interface gives {float(derived):g} GB/s but the quoted bandwidth is "
            f"{float(quoted):g} GB/s: one of the {machine} figures is wrong"
        )
    return derived


@claim("hardware.{machine}.interface_over_vendor", kind="exact", over={"machine": ("m4_max",)})
def interface_over_vendor(machine: str) -> Fraction:
    """How far the bandwidth from the interface lies above the vendor's rounded figure, in GB/s."""
    return bandwidth_from_interface(machine) - memory_bandwidth(machine)
