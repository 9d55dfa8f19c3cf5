"""The parts of a results document that can be set aside one by one, so that one bad record costs that record.

A results file holds hundreds of records; one misspelt status must not cost the others. A problem found
at a key path inside one record (or one claim's metadata, one timing, one snippet's output) sets aside
that part alone, with the parts that belong to it: a measured record's volatile values in the run
header go with the record. A problem anywhere else (the machine, the slug, the schema version, the run
header's own fields) names no part that can go alone: then the file is set aside whole, as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

Place = tuple[str | int, ...]


@dataclass(frozen=True)
class SetAside:
    """One part taken out of a results file: where it was, why, and the part itself (for the side file)."""

    at: Place
    why: str
    value: Any

    def where(self) -> str:
        return "".join(f"[{k!r}]" for k in self.at)

    def to_json(self) -> dict[str, Any]:
        return {"at": self.where(), "why": self.why, "value": self.value}


def unit(loc: Place) -> Place | None:
    """The part a problem at `loc` lies in, which can be set aside alone; None where there is none."""
    if len(loc) >= 3 and loc[0] == "records":
        return loc[:3]
    if len(loc) >= 4 and loc[:2] == ("run", "measured"):
        return ("records", *loc[2:4])
    if len(loc) >= 4 and loc[0] == "run" and loc[1] in ("seconds", "dates"):
        return loc[:4]
    if len(loc) >= 3 and loc[:2] == ("run", "outputs"):
        return loc[:3]
    if len(loc) >= 2 and loc[0] in ("records", "claims", "outputs"):
        return loc[:2]
    if len(loc) >= 3 and loc[:2] == ("run", "measured"):
        return ("records", loc[2])
    return None


def _take(data: Any, at: Place) -> tuple[bool, Any]:
    """Remove the part at `at` from `data`; whether it was there, and what it was."""
    node = data
    for key in at[:-1]:
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    if not isinstance(node, dict) or at[-1] not in node:
        return False, None
    return True, node.pop(at[-1])


def set_aside(data: dict[str, Any], problems: dict[Place, list[str]]) -> list[SetAside]:
    """Take each part named in `problems` (a part's place and what is wrong with it) out of `data`, with the
    measured values that belong to a record; what was taken, in order."""
    out: list[SetAside] = []
    for at in sorted(problems, key=lambda p: json.dumps([str(k) for k in p])):
        found, value = _take(data, at)
        if at[0] == "records":
            _take(data, ("run", "measured", *at[1:]))
            measured = data.get("run", {}).get("measured") if isinstance(data.get("run"), dict) else None
            if len(at) == 3 and isinstance(measured, dict) and measured.get(at[1]) == {}:
                del measured[at[1]]
            if len(at) == 3 and isinstance(data.get("records", {}).get(at[1]), dict) and not data["records"][at[1]]:
                del data["records"][at[1]]
        if found:
            out.append(SetAside(at, "; ".join(problems[at]), value))
    return out


def records_in(data: dict[str, Any]) -> int:
    """How many records a (current) document holds: one per claim and backend."""
    records = data.get("records")
    if not isinstance(records, dict):
        return 0
    return sum(len(per) for per in records.values() if isinstance(per, dict))


def records_among(parts: list[SetAside]) -> int:
    """How many records a list of set-aside parts holds."""
    return sum(
        1 if len(p.at) == 3 else (len(p.value) if isinstance(p.value, dict) else 1)
        for p in parts
        if p.at[0] == "records"
    )
