"""The memory hierarchy in numbers: each level's size and bandwidth, and what reading a model from it costs.

Per-SM figures come from the CUDA programming guide's table by compute capability
(`claims/data/cuda_sm.toml`); device memories from the hardware profiles and the catalogue of
real devices (`claims/data/devices.toml`), against which every range is held; links and
modules from `claims/data/links.toml`, where every derived rate is checked by arithmetic
(two channels × transfers × bytes, a quarter of an x16 link for four lanes, bits ÷ 8).
On a machine with a CUDA device the driver's own per-SM figures are read and compared
with the guide's row for the device's compute capability.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Callable

from claims.topics.decode import bandwidth_gbps
from claims.topics.models import WHOLE_FILE_READ, checkpoint_gb
from verified_book import (
    Backend,
    InvariantFailed,
    NotOnBackend,
    check_range,
    claim,
    device,
    devices,
    exact,
    excuse,
    given,
    span,
    table,
    vendor,
)

# why figures that divide by a file's size stand beside the dispute that a token reads all of it
SAME_FACTOR = (
    "The table keeps the source's whole-file reading, as the page says above it: over the 15.1 GB a token "
    "reads, every time is 8% shorter and every ceiling 8% higher (221 rather than 204 tokens/s on the H100), "
    "the same factor on every row, so no comparison between levels moves; a level's bandwidth does not use "
    "the size."
)
BYTES_NOT_TENSORS = (
    "The source's example places 16.4 GB of bytes, not tensors: a token reads 1.24 GB less, from whichever "
    "side holds the embedding, which the example does not say. On the card, the VRAM part takes 6.0 ms and "
    "the total 74.8 ms, 13 tokens/s; in system memory, 56.0 ms in all and 18 tokens/s. Either way the slow "
    "part takes about nine tenths of the time, the point the table makes."
)

BITS_PER_BYTE = 8
KIB = 1024
MS_PER_S = 1000
CAPABILITIES = ("cc_8_0", "cc_9_0", "cc_10_0", "cc_12_x")


def link(key: str) -> Fraction:
    """A link or module figure from links.toml."""
    return exact(vendor("links.toml", key))


def nvme_gbps(generation: int) -> Fraction:
    """A four-lane NVMe link's ceiling: the x16 per-direction figure scaled to four lanes."""
    x16 = link(f"pcie_gen{generation}_x16_per_direction")
    return x16 * link("nvme_lanes") / link("pcie_lanes_x16")


def ddr5_gbps() -> Fraction:
    """Two channels of DDR5-5600: channels × million transfers per second × bytes per transfer."""
    return link("desktop_memory_channels") * link("ddr5_5600_transfer_rate") * link("ddr5_channel_bytes") / 1000


def ethernet_10gbe_gbps() -> Fraction:
    return link("ethernet_10gbe") / BITS_PER_BYTE


def spark_network_gbps() -> Fraction:
    return exact(vendor("hardware/dgx_spark.toml", "network")) / BITS_PER_BYTE


# Levels of the read-time table, fastest first: the bandwidth decode would read the weights at.
LEVELS: dict[str, Callable[[], Fraction]] = {
    "hbm3_h100": lambda: bandwidth_gbps("h100"),
    "gddr7_rtx5090": lambda: bandwidth_gbps("rtx5090"),
    "lpddr5x_m4_max": lambda: bandwidth_gbps("m4_max"),
    "lpddr5x_dgx_spark": lambda: bandwidth_gbps("dgx_spark"),
    "pcie_gen5_x16": lambda: link("pcie_gen5_x16_per_direction"),
    "pcie_gen3_x16": lambda: link("pcie_gen3_x16"),
    "nvme_gen4": lambda: nvme_gbps(4),
    "ethernet_10gbe": ethernet_10gbe_gbps,
}


def sm_figure(capability: str, field: str) -> Fraction:
    return exact(vendor("cuda_sm.toml", f"{capability}.{field}"))


def compute_capability(machine: str) -> str:
    return str(vendor(f"hardware/{machine}.toml", "compute_capability"))


@claim("hierarchy.registers.per_sm_k", kind="quoted", citation="CUDA C++ Programming Guide, compute capability 12.x")
def registers_k() -> Fraction:
    """32-bit registers per SM at compute capability 12.x, in units of 1,024 ('64 K')."""
    return sm_figure("cc_12_x", "registers_per_sm") / KIB


@claim("hierarchy.registers.per_sm_kb", kind="exact")
def registers_kb() -> Fraction:
    """The register file per SM at 12.x in KB: registers × 32 bits ÷ 8 ÷ 1,024."""
    bits = exact(vendor("cuda_sm.toml", "register_bits"))
    return sm_figure("cc_12_x", "registers_per_sm") * bits / BITS_PER_BYTE / KIB


@claim(
    "hierarchy.shared_memory.{capability}",
    kind="quoted",
    over={"capability": CAPABILITIES},
    citation="CUDA C++ Programming Guide, Technical Specifications per Compute Capability",
)
def shared_memory(capability: str) -> Fraction:
    """Shared memory per SM in KB at a compute capability.

    The 12.x row is the book's for the RTX 50 series and the DGX Spark's GB10: their
    hardware profiles must give a 12.x capability.
    """
    if capability == "cc_12_x":
        for machine in ("rtx5090", "dgx_spark"):
            found = compute_capability(machine)
            if not found.startswith("12."):
                raise InvariantFailed(f"hardware/{machine}.toml gives compute capability {found}, not 12.x")
    return sm_figure(capability, "shared_memory_per_sm")


@claim("hierarchy.capacity.rtx5090", kind="quoted", citation="NVIDIA GeForce RTX 5090 product page")
def rtx5090_capacity() -> Fraction:
    """The RTX 5090's GDDR7 in GB."""
    return exact(vendor("hardware/rtx5090.toml", "memory_capacity"))


@claim(
    "hierarchy.capacity.unified",
    kind="quoted",
    citation="NVIDIA DGX Spark datasheet; AMD Ryzen AI Max+ 395 product page; "
    "Apple Mac Studio (2025) technical specifications",
)
def unified_capacity() -> Fraction:
    """The largest unified pool of the Spark, the Ryzen AI Max+ 395 and the M4 Max, in GB: one figure for all three."""
    sizes = {m: exact(vendor(f"hardware/{m}.toml", "memory_capacity")) for m in ("dgx_spark", "ryzen_ai_max", "m4_max")}
    if len(set(sizes.values())) != 1:
        raise InvariantFailed(f"the unified-memory profiles differ in capacity: {sizes}; the table prints one figure")
    return next(iter(sizes.values()))


@claim("hierarchy.pcie.gen3_x16", kind="quoted", citation="CUDA C++ Best Practices Guide")
def pcie_gen3() -> Fraction:
    """An x16 Gen3 link in GB/s."""
    return link("pcie_gen3_x16")


@claim(
    "hierarchy.pcie.gen{generation}_per_direction",
    kind="quoted",
    over={"generation": (4, 5)},
    citation="NVIDIA Hopper architecture in-depth post",
)
def pcie_per_direction(generation: int) -> Fraction:
    """An x16 link's rate in each direction, GB/s."""
    return link(f"pcie_gen{generation}_x16_per_direction")


@claim("hierarchy.pcie.h100_total", kind="quoted", citation="NVIDIA H100 page, specifications")
def pcie_h100() -> Fraction:
    """The H100 page's PCIe Gen5 figure, GB/s: it must be the two directions of an x16 link summed."""
    quoted = exact(vendor("hardware/h100.toml", "pcie_bandwidth"))
    both = 2 * link("pcie_gen5_x16_per_direction")
    if quoted != both:
        raise InvariantFailed(f"the H100 page's {quoted} GB/s is not two directions of {both / 2} GB/s")
    return quoted


@claim(
    "hierarchy.ddr5.{part}", kind="exact", over={"part": ("channels", "transfer_rate", "bytes_per_transfer", "gbps")}
)
def ddr5(part: str) -> Fraction:
    """Two channels of DDR5-5600 and their ceiling, 2 × 5,600 million transfers × 8 bytes, in GB/s."""
    keys = {
        "channels": "desktop_memory_channels",
        "transfer_rate": "ddr5_5600_transfer_rate",
        "bytes_per_transfer": "ddr5_channel_bytes",
    }
    return ddr5_gbps() if part == "gbps" else link(keys[part])


@claim(
    "hierarchy.lanes.{which}",
    kind="quoted",
    over={"which": ("nvme", "x16")},
    citation="PCI-SIG: PCI Express Base Specification (x16 link width); "
    "PCI-SIG M.2 Specification (an M-key SSD on PCIe x4)",
)
def lanes(which: str) -> Fraction:
    """PCIe lanes of an NVMe drive (four) and of an x16 slot (sixteen)."""
    return link("nvme_lanes" if which == "nvme" else "pcie_lanes_x16")


@claim("hierarchy.nvme.lane_share", kind="exact")
def nvme_lane_share() -> Fraction:
    """An NVMe drive's lanes as a share of an x16 link's: a quarter."""
    return 1 / nvme_lane_ratio()


@claim("hierarchy.nvme.lane_ratio", kind="exact")
def nvme_lane_ratio() -> Fraction:
    """Sixteen lanes of an x16 link against an NVMe drive's four."""
    return link("pcie_lanes_x16") / link("nvme_lanes")


@claim("hierarchy.nvme.gen{generation}", kind="exact", over={"generation": (4, 5)})
def nvme(generation: int) -> Fraction:
    """A four-lane NVMe link's ceiling in GB/s: the per-direction x16 figure over the lane ratio."""
    return nvme_gbps(generation)


@claim(
    "hierarchy.network.{port}.{unit}",
    kind="exact",
    over={"port": ("ethernet_10gbe", "spark"), "unit": ("gbit", "gbyte")},
)
def network(port: str, unit: str) -> Fraction:
    """A network port's line rate in Gb/s, and in GB/s (bits ÷ 8)."""
    gbit = link("ethernet_10gbe") if port == "ethernet_10gbe" else exact(vendor("hardware/dgx_spark.toml", "network"))
    return gbit if unit == "gbit" else gbit / BITS_PER_BYTE


@claim(
    "hierarchy.read.{level}.{field}",
    kind="exact",
    over={"level": tuple(LEVELS), "field": ("bandwidth", "ms", "ceiling")},
)
def read_once(level: str, field: str) -> Fraction:
    """Reading Qwen3-8B's 16.4 GB once from a level: its bandwidth, the milliseconds, the tokens/s ceiling."""
    bandwidth = LEVELS[level]()
    size = checkpoint_gb()
    return {"bandwidth": bandwidth, "ms": size / bandwidth * MS_PER_S, "ceiling": bandwidth / size}[field]


excuse(read_once, {WHOLE_FILE_READ: SAME_FACTOR})


# The source's levels, fastest first (tensors-gpus-and-precision.txt:217-222), and the bandwidth each
# has on the path the chapter's examples take: an RTX 5090 on a Gen5 x16 link, in a desktop with two
# channels of DDR5-5600 and a Gen4 NVMe drive (the read table's storage row). The guide publishes no
# bandwidth for the top two levels, so a step that touches them cannot be computed: None.
SOURCE_LEVELS: dict[str, Callable[[], Fraction] | None] = {
    "registers_shared_l1": None,
    "l2_cache": None,
    "accelerator_memory": lambda: bandwidth_gbps("rtx5090"),
    "pcie_link": lambda: link("pcie_gen5_x16_per_direction"),
    "system_memory": ddr5_gbps,
    "storage_and_network": lambda: nvme_gbps(4),
}
# Each consecutive pair of the source's levels whose bandwidths are known, by the name of its claim.
STEPS = {
    "vram_to_pcie": ("accelerator_memory", "pcie_link"),
    "pcie_to_ddr5": ("pcie_link", "system_memory"),
    "ddr5_to_nvme": ("system_memory", "storage_and_network"),
}
X16_LINKS: tuple[Callable[[], Fraction], ...] = (
    lambda: link("pcie_gen3_x16"),
    lambda: link("pcie_gen4_x16_per_direction"),
    lambda: link("pcie_gen5_x16_per_direction"),
)
# Every part the chapter gives for a level, for the span of a step across them: the three x16 links,
# DDR5, and NVMe drives on Gen4 and Gen5. The card level is every catalogued Track N card, each on its
# own host link (`card_links`), not on every link: an x8 card in an x16 slot still moves eight lanes.
LEVEL_PARTS: dict[str, tuple[Callable[[], Fraction], ...]] = {
    "pcie_link": X16_LINKS,
    "system_memory": (ddr5_gbps,),
    "storage_and_network": (lambda: nvme_gbps(4), lambda: nvme_gbps(5)),
}
#: the class of catalogued devices Track N's cards are (claims/data/devices.toml)
TRACK_N_CARDS = "geforce"
X16_BY_GENERATION = {3: "pcie_gen3_x16", 4: "pcie_gen4_x16_per_direction", 5: "pcie_gen5_x16_per_direction"}
LANES = {8: "pcie_lanes_x8", 16: "pcie_lanes_x16"}


def card_links(host_link: str) -> list[Fraction]:
    """A card's host-link bandwidths, one direction, in GB/s: at its own generation and in each older
    slot it fits (Gen3 up), at its own lane count; a faster slot runs it no faster than its own link."""
    found = re.fullmatch(r"pcie_gen(\d)_x(\d+)", host_link)
    if found is None or int(found[1]) not in X16_BY_GENERATION or int(found[2]) not in LANES:
        raise InvariantFailed(f"host_link {host_link!r} is not pcie_gen<3-5>_x<8|16> (claims/data/devices.toml)")
    generation, lanes = int(found[1]), int(found[2])
    width = link(LANES[lanes]) / link("pcie_lanes_x16")
    return [link(X16_BY_GENERATION[g]) * width for g in range(3, generation + 1)]


def card_steps() -> list[tuple[str, Fraction]]:
    """The first step down the list for every catalogued Track N card on every link it can run at."""
    host_links = {
        key: entry.get("host_link") for key, entry in table("devices.toml").items() if isinstance(entry, dict)
    }
    out = []
    for card in devices(TRACK_N_CARDS):
        if card.bandwidth is None or not host_links.get(card.key):
            raise InvariantFailed(f"{card.name} needs a bandwidth and a host_link (claims/data/devices.toml)")
        out += [(card.name, card.bandwidth / bandwidth) for bandwidth in card_links(str(host_links[card.key]))]
    return out


def consecutive_steps() -> dict[str, Fraction]:
    """How many times slower each level of the source's list is than the one above it, on the
    chapter's path, for every consecutive pair whose two bandwidths are known; below one, the
    lower level is the faster."""
    levels = list(SOURCE_LEVELS)
    steps: dict[str, Fraction] = {}
    for upper, lower in zip(levels, levels[1:]):
        above, below = SOURCE_LEVELS[upper], SOURCE_LEVELS[lower]
        if above is None or below is None:
            continue
        name = next((n for n, pair in STEPS.items() if pair == (upper, lower)), None)
        if name is None:
            raise InvariantFailed(f"the step from {upper} to {lower} has no claim in STEPS")
        steps[name] = above() / below()
    if list(steps) != list(STEPS):
        raise InvariantFailed(f"the steps computed, {list(steps)}, are not the steps the book prints, {list(STEPS)}")
    return steps


@claim("hierarchy.step.{step}", kind="exact", over={"step": tuple(STEPS)})
def step(step: str) -> Fraction:
    """One step down the source's list on the chapter's path: the upper level's bandwidth over the lower's."""
    return consecutive_steps()[step]


@claim("hierarchy.step_span.{step}.{end}", kind="exact", over={"step": tuple(STEPS), "end": ("low", "high")})
def step_span(step: str, end: str) -> Fraction:
    """The smallest or largest a step can be across every part the chapter gives its two levels."""
    upper, lower = STEPS[step]
    if upper == "accelerator_memory":
        ratios = [ratio for _, ratio in card_steps()]
    else:
        ratios = [above() / below() for above in LEVEL_PARTS[upper] for below in LEVEL_PARTS[lower]]
    return min(ratios) if end == "low" else max(ratios)


@claim(
    "hierarchy.step.range",
    kind="exact",
    quote="Each level is larger and slower than the one above by a factor of four to ten.",
    quote_at="tensors-gpus-and-precision.txt:224",
)
def step_range() -> tuple[Fraction, ...]:
    """Every step between consecutive levels of the source's list on the chapter's path, in the list's order.

    The source's sentence holds if each one lies within four to ten, which the book binds as
    7 ± 3 for each step; a step inside one level (NVMe to Ethernet) is not a step between levels.
    """
    return tuple(consecutive_steps().values())


def split_parts() -> dict[str, tuple[Fraction, Fraction]]:
    """The split example: (GB, GB/s) in the RTX 5090's VRAM and in system memory over PCIe Gen5."""
    total, on_card = checkpoint_gb(), split_vram_gb()
    return {
        "vram": (on_card, bandwidth_gbps("rtx5090")),
        "system": (total - on_card, link("pcie_gen5_x16_per_direction")),
    }


def split_vram_gb() -> Fraction:
    """The split example's choice: what sits on the card, the rest in system memory."""
    return exact(given("hierarchy.split_vram_gb"))


@claim("hierarchy.split.vram.gb", kind="given")
def split_vram() -> Fraction:
    """The split example's GB on the card."""
    return split_vram_gb()


@claim("hierarchy.split.{part}.{field}", kind="exact", over={"part": ("vram", "system"), "field": ("ms",)})
@claim("hierarchy.split.{part}.{field}", kind="exact", over={"part": ("system",), "field": ("gb",)})
def split_part(part: str, field: str) -> Fraction:
    """One part of the split model: its GB, and the milliseconds it takes to read per token."""
    gigabytes, bandwidth = split_parts()[part]
    return gigabytes if field == "gb" else gigabytes / bandwidth * MS_PER_S


excuse(split_part, {WHOLE_FILE_READ: BYTES_NOT_TENSORS})


@claim("hierarchy.split.{field}", kind="exact", over={"field": ("ms", "ceiling", "byte_share", "time_share")})
def split_total(field: str) -> Fraction:
    """The split model as a whole: ms per token, the ceiling, and the slow part's share of bytes and of time."""
    parts = split_parts()
    times = {name: gb / bw for name, (gb, bw) in parts.items()}
    seconds = sum(times.values())
    gigabytes = sum(gb for gb, _ in parts.values())
    return {
        "ms": seconds * MS_PER_S,
        "ceiling": 1 / seconds,
        "byte_share": parts["system"][0] / gigabytes,
        "time_share": times["system"] / seconds,
    }[field]


excuse(split_total, {WHOLE_FILE_READ: BYTES_NOT_TENSORS})


# The tracks table's figures. A range's end over a class of real devices is that class's end in the
# catalogue (claims/data/devices.toml), computed over every device of it; a named device's figure is
# read there or in its hardware profile.
TRACK_FIGURES: dict[str, Callable[[], Fraction]] = {
    "n_vram_min": lambda: span(TRACK_N_CARDS, "memory")[0],
    "n_vram_max": lambda: span(TRACK_N_CARDS, "memory")[1],
    "n_rtx_pro_6000": lambda: max(device("rtx_pro_6000").memory),
    "n_bandwidth_min": lambda: span(TRACK_N_CARDS, "bandwidth")[0],
    "n_bandwidth_max": lambda: span(TRACK_N_CARDS, "bandwidth")[1],
    "s_memory": lambda: exact(vendor("hardware/dgx_spark.toml", "memory_capacity")),
    "s_bandwidth": lambda: bandwidth_gbps("dgx_spark"),
    "x_memory_min": lambda: exact(vendor("tracks.toml", "track_x.smallest_memory")),
    "x_memory_max": lambda: exact(vendor("hardware/ryzen_ai_max.toml", "memory_capacity")),
    "x_bandwidth": lambda: bandwidth_gbps("ryzen_ai_max"),
    "m_memory_min": lambda: exact(vendor("tracks.toml", "track_m.smallest_memory")),
    "m_memory_max": lambda: max(device("m3_ultra").memory),
    "m_bandwidth_min": lambda: _bandwidth_of("m4"),
    "m_bandwidth_max": lambda: _bandwidth_of("m5_ultra"),
}
# Each range the table prints, held to the catalogued class it speaks of: (low, high, class, field).
# Track M's memory floor is the course's own (machines from 24 GB), not a claim about every Apple chip:
# an M4 is sold with 16 GB, so that range is not held to the class (the tracks.toml entry says so).
TRACK_RANGES = {
    "n_vram": ("n_vram_min", "n_vram_max", TRACK_N_CARDS, "memory"),
    "n_bandwidth": ("n_bandwidth_min", "n_bandwidth_max", TRACK_N_CARDS, "bandwidth"),
    "m_bandwidth": ("m_bandwidth_min", "m_bandwidth_max", "apple", "bandwidth"),
}


def _bandwidth_of(key: str) -> Fraction:
    bandwidth = device(key).bandwidth
    if bandwidth is None:
        raise InvariantFailed(f"claims/data/devices.toml: {key} has no bandwidth")
    return bandwidth


# The tracks table's figures that only the course itself gives (its own definition of a track's
# range, with no vendor page behind that end): the book's own values, kind given. The M5 Ultra's
# 1,200 GB/s is the source's, with no Apple page in hand: unsourced in the catalogue, never cited.
TRACK_CHOICES = ("x_memory_min", "m_memory_min")
TRACK_UNSOURCED = ("m_bandwidth_max",)
# The ends computed over a class of the catalogue: a minimum or maximum over its devices, held by one
# device each. Track N's 8 GB floor is two cards' (the RTX 4060's and the RTX 5060's, and the small
# RTX 4060 Ti and RTX 5060 Ti): no one card's figure moves it, so it is the vendors' figure, quoted,
# and its range is still held to every card of the class.
TRACK_SPANS = ("n_vram_max", "n_bandwidth_max")
TRACK_QUOTED = tuple(
    f for f in TRACK_FIGURES if f not in TRACK_CHOICES + TRACK_UNSOURCED + TRACK_SPANS + ("n_bandwidth_min",)
)


def _held(figure: str) -> Fraction:
    """A figure of the tracks table, after every range it ends is held to its catalogued class."""
    value = TRACK_FIGURES[figure]()
    for low_key, high_key, cls, field in TRACK_RANGES.values():
        if figure in (low_key, high_key) and figure != "n_bandwidth_min":
            check_range(cls, field, TRACK_FIGURES[low_key](), TRACK_FIGURES[high_key]())
    return value


@claim(
    "hierarchy.tracks.{figure}",
    kind="quoted",
    over={"figure": TRACK_QUOTED},
    citation="vendor pages: GeForce RTX 4060 and RTX 5060, RTX 5090, RTX PRO 6000, DGX Spark datasheet, "
    "AMD Ryzen AI Max+ 395, Apple M4 announcement, Apple Mac Studio (2025); each named in "
    "claims/data/devices.toml or its hardware profile",
)
@claim(
    "hierarchy.tracks.{figure}",
    kind="exact",
    over={"figure": TRACK_SPANS},
    citation="the smallest or largest figure over every catalogued Track N card (claims/data/devices.toml)",
)
@claim(
    "hierarchy.tracks.{figure}",
    kind="given",
    over={"figure": TRACK_CHOICES},
    citation="the book's own choice: the course's definition of its tracks, which no vendor states",
)
@claim(
    "hierarchy.tracks.{figure}",
    kind="given",
    over={"figure": TRACK_UNSOURCED},
    citation="unsourced: the source chapter's M5 Ultra figure; no Apple page in hand states it "
    "(claims/data/devices.toml, m5_ultra)",
)
def track_figure(figure: str) -> Fraction:
    """A figure of the tracks table; a range's ends must hold every catalogued device of its class."""
    return _held(figure)


@claim(
    "hierarchy.tracks.n_bandwidth_min",
    kind="exact",
    quote="936 to 1,792 by card",
    quote_at="tensors-gpus-and-precision.txt:254",
    citation="the slowest catalogued Track N card (claims/data/devices.toml); the source's 936 GB/s is an RTX 3090's",
)
def track_n_bandwidth_floor() -> Fraction:
    """The slowest Track N card's bandwidth over the catalogue: the source's 936 GB/s floor is the RTX 3090's,
    a card of the generation before, and every catalogued card from the RTX 4060 (272) to the RTX 5070 Ti
    (896) lies below it."""
    return TRACK_FIGURES["n_bandwidth_min"]()


@claim(
    "hierarchy.catalogue.{card}.{field}",
    kind="quoted",
    citation="the card's vendor page, named in claims/data/devices.toml",
    over={"card": ("rtx_3090", "rtx_5060", "rtx_5070", "rtx_5070_ti"), "field": ("bandwidth",)},
)
def catalogued(card: str, field: str) -> Fraction:
    """A catalogued card's figure the book names beside the range it corrects: the RTX 3090 the source's
    floor is, and the cards below that floor."""
    values = device(card).values("bandwidth" if field == "bandwidth" else "memory")
    if len(values) != 1:
        raise InvariantFailed(f"claims/data/devices.toml: {card} has {len(values)} {field} figures, not one")
    return values[0]


def _capability_row(major: int, minor: int) -> str:
    rows = table("cuda_sm.toml")
    for key in (f"cc_{major}_{minor}", f"cc_{major}_x"):
        if key in rows:
            return key
    raise NotOnBackend(f"claims/data/cuda_sm.toml has no row for compute capability {major}.{minor}")


DEVICE_FIELDS = {
    "shared_memory_per_sm": ("shared_memory_per_multiprocessor", KIB),
    "shared_memory_per_block_optin": ("shared_memory_per_block_optin", KIB),
    "registers_per_sm": ("regs_per_multiprocessor", 1),
}


@claim("hierarchy.cuda_device.{field}", kind="measured", backends=("torch:cuda",), over={"field": tuple(DEVICE_FIELDS)})
def cuda_device(backend: Backend, field: str) -> Fraction:
    """What this machine's CUDA driver reports per SM, which must equal the guide's row for its compute capability.

    Shared memory comes back in KB (1,024 bytes), registers as a count.
    """
    import torch

    if torch.version.hip:
        raise NotOnBackend("a ROCm device has no CUDA compute capability to look up")
    props = torch.cuda.get_device_properties(torch.device(backend.device))
    attribute, unit = DEVICE_FIELDS[field]
    raw = getattr(props, attribute, None)
    if raw is None:
        raise NotOnBackend(f"torch {torch.__version__} does not expose {attribute} in its device properties")
    row = _capability_row(int(props.major), int(props.minor))
    found = Fraction(int(raw), unit)
    guide = sm_figure(row, field)
    if found != guide:
        raise InvariantFailed(
            f"{props.name} (compute capability {props.major}.{props.minor}) reports {attribute} = "
            f"{int(raw):,}, which is {found} in the guide's unit; claims/data/cuda_sm.toml [{row}] "
            f"gives {guide}"
        )
    return found
