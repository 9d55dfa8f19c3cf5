"""The catalogue of real devices, and the two rules that hold the book's devices to it.

A range the book prints ("8 to 32 GB of GDDR on the card") speaks of every device of a class, so
its ends must hold every catalogued device of that class: `check_range`. A device the book supposes
("a card with 16 GB whose bandwidth is 1,792 GB/s") must be one that exists: `match_device`. Both
fail as a claim fails (`InvariantFailed`), naming the catalogued devices nearest to what the book
said, so the figure's error reads at its file:line with the real devices beside it. `span` gives a
class's real range, for a claim that computes the range instead of checking a printed one.

The catalogue is a TOML data file (`devices.toml` in the book's data folder): one table per device
with `name`, `class`, and `memory` and `bandwidth` tables (`value`, `unit`, `source`), or a `profile`
(a hardware profile whose `memory_capacity` and `memory_bandwidth` are the device's) or a `link` (a
key of `links.toml`, whose value is the device's bandwidth). Every figure is read through `vendor`,
so a claim's record names the catalogue's lines it rests on.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, Sequence

from verified_book.authoring import inputs
from verified_book.authoring.inputs import InputError, exact, table, vendor
from verified_book.authoring.registry import InvariantFailed

CATALOGUE = "devices.toml"
LINKS = "links.toml"
#: what a device is measured by: its memory capacity (GB, as the vendor prints it) and its bandwidth (GB/s)
Field = Literal["memory", "bandwidth"]
UNITS: dict[str, str] = {"memory": "GB", "bandwidth": "GB/s"}
_PROFILE_KEYS = {"memory": "memory_capacity", "bandwidth": "memory_bandwidth"}


@dataclass(frozen=True)
class Device:
    """One catalogued device: its key, name and class, and its figures as read (recorded) from the data."""

    key: str
    name: str
    cls: str
    memory: tuple[Fraction, ...]  # every configuration the vendor sells, in GB; empty where none is catalogued
    bandwidth: Fraction | None
    unsourced: bool = False

    def values(self, field: Field) -> tuple[Fraction, ...]:
        """The device's figures of one field: its memory configurations, or its one bandwidth."""
        if field == "memory":
            return self.memory
        return () if self.bandwidth is None else (self.bandwidth,)

    def describe(self, field: Field | None = None) -> str:
        """The device as a message names it: "GeForce RTX 4060 (8 GB, 272 GB/s)", or one field only."""
        fields: Sequence[Field] = (field,) if field else ("memory", "bandwidth")
        parts = [f"{' or '.join(_show(v) for v in self.values(f))} {UNITS[f]}" for f in fields if self.values(f)]
        note = ", unsourced" if self.unsourced else ""
        return f"{self.name} ({', '.join(parts)}{note})"


def _show(value: Fraction) -> str:
    return f"{int(value):,}" if value.denominator == 1 else f"{float(value):,g}"


def _device(key: str, entry: dict[str, Any], file: str) -> Device:
    def read(field: Field) -> tuple[Fraction, ...]:
        if "profile" in entry:
            value = vendor(entry["profile"], _PROFILE_KEYS[field])
        elif "link" in entry:
            value = vendor(LINKS, entry["link"]) if field == "bandwidth" else None
        elif field in entry:
            value = vendor(file, f"{key}.{field}")
        else:
            value = None
        if value is None:
            return ()
        return tuple(exact(v) for v in (value if isinstance(value, list) else [value]))

    bandwidth = read("bandwidth")
    return Device(
        key=key,
        name=str(entry.get("name", key)),
        cls=str(entry.get("class", "")),
        memory=read("memory"),
        bandwidth=bandwidth[0] if bandwidth else None,
        unsourced=bool(entry.get("unsourced", False)),
    )


def devices(cls: str | None = None, file: str = CATALOGUE) -> list[Device]:
    """Every catalogued device (of one class, given it), in the catalogue's order; each figure read is recorded."""
    entries = {k: v for k, v in table(file).items() if isinstance(v, dict) and "class" in v}
    if cls is not None and not any(v["class"] == cls for v in entries.values()):
        classes = sorted({str(v["class"]) for v in entries.values()})
        raise InputError(f"{file}: no device of class {cls!r} (classes: {', '.join(classes)})")
    return [_device(k, v, file) for k, v in entries.items() if cls is None or v["class"] == cls]


def device(key: str, file: str = CATALOGUE) -> Device:
    """One catalogued device by its key (`rtx_4060`)."""
    entry = table(file).get(key)
    if not isinstance(entry, dict) or "class" not in entry:
        raise InputError(f"{file}: no device {key!r}")
    return _device(key, entry, file)


def span(cls: str, field: Field, file: str = CATALOGUE) -> tuple[Fraction, Fraction]:
    """The real range of one field over a class: its smallest and largest catalogued figure."""
    values = [v for d in devices(cls, file) for v in d.values(field)]
    if not values:
        raise InputError(f"{file}: no device of class {cls!r} has a {field}")
    return min(values), max(values)


def nearest(cls: str, field: Field, value: Fraction, count: int = 3, file: str = CATALOGUE) -> list[Device]:
    """The catalogued devices of a class whose figure lies nearest `value`, nearest first."""
    known = [d for d in devices(cls, file) if d.values(field)]
    return sorted(known, key=lambda d: min(abs(v - value) for v in d.values(field)))[:count]


class OutsideRange(InvariantFailed):
    """A printed range leaves out catalogued devices of the class it speaks of."""


class NoSuchDevice(InvariantFailed):
    """A device the book supposes is none of the catalogued devices of its class."""


def outside(cls: str, field: Field, low: Any, high: Any, file: str = CATALOGUE) -> list[Device]:
    """The catalogued devices of a class with a figure below `low` or above `high`."""
    lo, hi = exact(low), exact(high)
    return [d for d in devices(cls, file) if any(not lo <= v <= hi for v in d.values(field))]


def check_range(cls: str, field: Field, low: Any, high: Any, file: str = CATALOGUE) -> None:
    """Fail unless every catalogued device of the class lies within `low` to `high`, naming those
    that do not and the real range of the class."""
    excluded = outside(cls, field, low, high, file)
    if excluded:
        real_low, real_high = span(cls, field, file)
        unit = UNITS[field]
        raise OutsideRange(
            f"the range {_show(exact(low))} to {_show(exact(high))} {unit} leaves out catalogued {cls} devices: "
            + "; ".join(d.describe(field) for d in excluded)
            + f"; the class spans {_show(real_low)} to {_show(real_high)} {unit} ({_shown(file)})"
        )


def match_device(cls: str, *, memory: Any = None, bandwidth: Any = None, file: str = CATALOGUE) -> Device:
    """The catalogued device of a class with every figure given (memory in GB, bandwidth in GB/s); fail
    naming the nearest real devices where none has them all."""
    wanted: dict[Field, Fraction] = {}
    if memory is not None:
        wanted["memory"] = exact(memory)
    if bandwidth is not None:
        wanted["bandwidth"] = exact(bandwidth)
    if not wanted:
        raise ValueError("match_device needs a memory or a bandwidth to match")
    candidates = devices(cls, file)
    for candidate in candidates:
        if all(value in candidate.values(field) for field, value in wanted.items()):
            return candidate

    def distance(d: Device) -> Fraction:
        # how far off, relative to each figure asked for, summed: a device missing a figure is furthest
        total = Fraction(0)
        for field, value in wanted.items():
            have = d.values(field)
            total += min(abs(v - value) / value for v in have) if have else Fraction(10**9)
        return total

    near = sorted(candidates, key=distance)[:3]
    asked = ", ".join(f"{_show(v)} {UNITS[f]}" for f, v in wanted.items())
    partial = [
        f"with {_show(value)} {UNITS[field]}: " + "; ".join(d.describe() for d in same)
        for field, value in wanted.items()
        if len(wanted) > 1 and (same := [d for d in candidates if value in d.values(field) and d not in near])
    ]
    raise NoSuchDevice(
        f"no catalogued {cls} device has {asked}; nearest real ones: "
        + "; ".join(d.describe() for d in near)
        + "".join(f"; {p}" for p in partial)
        + f" ({_shown(file)})"
    )


def _shown(file: str) -> str:
    return f"{inputs.shown_as()}/{file}"
