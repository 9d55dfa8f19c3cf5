"""The book's machines as their vendors state them, and what arithmetic can check of it.

Each profile in `claims/data/hardware/` carries the vendor's capacity, bandwidth and, for
NVIDIA parts, compute capability. Where the vendor also states the memory interface
(bus width and per-pin data rate, or transfers per second), the bandwidth follows from
it: bits × rate ÷ 8. The derivation must agree with the quoted bandwidth to within the
rounding of a data sheet (half a per cent), or the quoted figure is wrong.
"""

from __future__ import annotations

from fractions import Fraction

from claims.topics.memory_lab import gb, gib
from verified_book import InvariantFailed, claim, exact, table, vendor
from verified_book import device as catalogue_device

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


def _catalogued() -> tuple[str, ...]:
    """The catalogue's devices with figures of their own (not a hardware profile's or a link's)."""
    return tuple(
        key
        for key, entry in table(CATALOGUE).items()
        if isinstance(entry, dict) and "class" in entry and "profile" not in entry and "link" not in entry
    )


CATALOGUE = "devices.toml"


@claim(
    "hardware.catalogue.{device}.{field}",
    kind="quoted",
    over={
        "device": (
            "rtx_4060",
            "rtx_4060_ti",
            "rtx_4070",
            "rtx_4070_ti",
            "rtx_4080",
            "rtx_4090",
            "rtx_5060",
            "rtx_5060_ti",
            "rtx_5070",
            "rtx_5070_ti",
            "rtx_3090",
            "rtx_pro_6000",
            "m4",
            "m4_pro",
            "m3_ultra",
        ),
        "field": ("memory", "bandwidth"),
    },
    citation="the device's vendor page, named with its spec row in claims/data/devices.toml",
)
@claim(
    "hardware.catalogue.{device}.{field}",
    kind="given",
    over={"device": ("rtx_pro_5000",), "field": ("memory", "bandwidth")},
    citation="unsourced: no vendor page in hand; claims/data/devices.toml says what is missing",
)
@claim(
    "hardware.catalogue.{device}.{field}",
    kind="given",
    over={"device": ("m5_ultra",), "field": ("bandwidth",)},
    citation="unsourced: the source chapter's figure, no Apple page in hand; claims/data/devices.toml says so",
)
def catalogued_device(device: str, field: str) -> Fraction | tuple[Fraction, ...]:
    """A catalogued device's memory (GB, every configuration sold) or bandwidth (GB/s), as its vendor states it."""
    if device not in _catalogued():
        raise InvariantFailed(f"claims/data/devices.toml has no device {device!r} with figures of its own")
    values = catalogue_device(device).values("memory" if field == "memory" else "bandwidth")
    if not values:
        raise InvariantFailed(f"claims/data/devices.toml: {device} has no {field}")
    return values[0] if len(values) == 1 else values


@claim(
    "hardware.units.{unit}",
    kind="quoted",
    over={"unit": ("gb", "gib")},
    citation="SI (giga, 10^9) and IEC 80000-13 (gibi, 2^30), in claims/data/given.toml",
)
def unit_bytes(unit: str) -> int:
    """The bytes in a GB and in a GiB, as the standards define them: the one convention every page, panel and
    plot uses, cited from the data file that quotes them."""
    return gb() if unit == "gb" else gib()
