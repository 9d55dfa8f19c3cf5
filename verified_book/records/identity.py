"""A machine's identity: made once, kept outside any clone, so that two machines never share a results file.

The fingerprint's slug (`cpu-x86_64-2c`) names a kind of machine, and every 2-core x86 box
without a GPU has it. The identity names one machine: a name the reader may change (by default
the slug and a short unique suffix, `cpu-x86_64-2c-3f9a`), a random id, and the hardware it was
made on. It lives in `~/.config/verified-book/machine.json` (under `$XDG_CONFIG_HOME` where that
is set; `VERIFIED_BOOK_MACHINE_FILE` names another file), as asv keeps its `machine.json`, so a
fresh clone on the same machine writes the same results file. When the hardware changes (a new
GPU in the same box) the machine gets a new identity, and the run says so: its old records
describe other hardware. Hardware it had before gives it back the identity it had then, and a run
that only lacks the GPU (a driver that did not load) keeps the identity it has.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from verified_book.errors import BookError

#: what identifies the hardware: a change in any of these is another machine (versions and the OS are not)
HARDWARE = ("cpu", "arch", "cores", "gpu", "gpu_memory_gb", "compute_capability", "gfx")
FILE_VARIABLE = "VERIFIED_BOOK_MACHINE_FILE"
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{3,63}$")
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,80}$")
SCHEMA = 1


class IdentityError(BookError):
    """An identity file that cannot be read or written, said with its path."""


def hardware_of(info: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a fingerprint that says which hardware it is."""
    return {key: info.get(key) for key in HARDWARE if info.get(key) is not None}


def differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """How two machines' hardware differs, a phrase per field ("gpu None → NVIDIA GeForce RTX 5080")."""
    return [f"{key} {old.get(key)} → {new.get(key)}" for key in HARDWARE if old.get(key) != new.get(key)]


#: the fields of a GPU: where a run finds none of them, the GPU may be only absent (its driver did not load)
GPU = ("gpu", "gpu_memory_gb", "compute_capability", "gfx")


def absent(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The GPU fields `old` has and `new` lacks, where that is the whole difference between them (a GPU whose
    driver did not load this run, in a box that is otherwise the same); empty for any other change."""
    changed = [key for key in HARDWARE if old.get(key) != new.get(key)]
    if not changed or new.get("gpu") is not None:
        return []
    return changed if all(key in GPU and new.get(key) is None for key in changed) else []


def describe(hardware: Mapping[str, Any]) -> str:
    """Hardware in words, to name a machine in a message."""
    gpu = hardware.get("gpu")
    return f"{hardware.get('cpu') or 'an unknown CPU'}, {hardware.get('cores') or '?'} cores, " + (gpu or "no GPU")


@dataclass
class Identity:
    """One machine: its name (its results file's), its id, and the hardware it was made on."""

    name: str
    id: str
    hardware: dict[str, Any]
    created: str = ""
    previous: list[dict[str, Any]] = field(
        default_factory=list
    )  # identities this machine had before its hardware changed

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "name": self.name,
            "id": self.id,
            "hardware": self.hardware,
            "created": self.created,
            "previous": self.previous,
        }


def default_path() -> Path:
    """Where this machine's identity is kept: outside every clone, in the user's configuration."""
    named = os.environ.get(FILE_VARIABLE)
    if named:
        return Path(named).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "verified-book" / "machine.json"


def new_identity(slug: str, info: Mapping[str, Any], previous: list[dict[str, Any]] | None = None) -> Identity:
    machine_id = uuid.uuid4().hex[:12]
    return Identity(
        f"{slug}-{machine_id[:4]}",
        machine_id,
        hardware_of(info),
        dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        previous or [],
    )


def read(path: Path) -> Identity:
    """An identity file, checked: a bad one is said with its path, never silently replaced."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise IdentityError(f"{path}: this machine's identity cannot be read ({e}); fix or delete the file") from None
    if not isinstance(data, dict):
        raise IdentityError(f"{path}: expected a JSON object, found {type(data).__name__}")
    name, machine_id, hardware = data.get("name"), data.get("id"), data.get("hardware", {})
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise IdentityError(f"{path}: name {name!r} is not a machine name (lower-case letters, digits, '-', '_')")
    if not isinstance(machine_id, str) or not ID_PATTERN.match(machine_id):
        raise IdentityError(f"{path}: id {machine_id!r} is not a machine id (4 to 64 lower-case letters, digits, '-')")
    if not isinstance(hardware, dict):
        raise IdentityError(f"{path}: hardware must be an object")
    previous = data.get("previous", [])
    return Identity(
        name, machine_id, hardware, str(data.get("created", "")), previous if isinstance(previous, list) else []
    )


def write(path: Path, identity: Identity) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(identity.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        raise IdentityError(
            f"{path}: this machine's identity cannot be written ({e.strerror}); set "
            f"{FILE_VARIABLE} to a file this user may write"
        ) from None


def this_machine(slug: str, info: Mapping[str, Any], path: Path | None = None) -> tuple[Identity, str | None]:
    """This machine's identity, made on its first run; and a sentence for the run header where one was made, the
    hardware changed, or it lacks its GPU this run (None when the machine is as it was).

    A machine is its hardware over time: hardware this identity file had before takes back the identity it had
    then (its name and id, so its results file and its history), and a run that only finds no GPU where the
    identity has one keeps the identity, GPU and all, and says so."""
    path = path or default_path()
    hardware = hardware_of(info)
    if not path.exists():
        made = new_identity(slug, info)
        write(path, made)
        return (
            made,
            f"this machine is named {made.name} from now on (its identity is kept in {path}; edit its name there)",
        )
    kept = read(path)
    if kept.hardware == hardware:
        return kept, None
    changed = "; ".join(differences(kept.hardware, hardware))
    if absent(kept.hardware, hardware):
        return kept, (
            f"no GPU this run, where {kept.name} has {kept.hardware.get('gpu')} ({changed}): it is still "
            f"{kept.name}, and its GPU's records stay as they were; check the driver if the GPU should be there"
        )
    mine = {"name": kept.name, "id": kept.id, "hardware": kept.hardware, "created": kept.created}
    before = next((p for p in reversed(kept.previous) if _restorable(p) and p["hardware"] == hardware), None)
    history = [p for p in kept.previous if p is not before and p.get("id") != kept.id] + [mine]
    if before is not None:
        back = Identity(before["name"], before["id"], hardware, str(before.get("created", "")), history)
        write(path, back)
        return back, (
            f"this machine's hardware is again what {path} named {back.name} ({changed}): it is {back.name} "
            f"again, with that machine's records; {kept.name}'s stay with the hardware that made them"
        )
    made = new_identity(slug, info, history)
    write(path, made)
    return made, (
        f"this machine's hardware changed since {path} named it {kept.name} ({changed}): it is "
        f"{made.name} from now on, and {kept.name}'s records stay with the hardware that made them"
    )


def _restorable(previous: Any) -> bool:
    """Whether an entry of an identity's history is one a machine can take back: a name, an id, its hardware."""
    return (
        isinstance(previous, dict)
        and isinstance(previous.get("name"), str)
        and bool(NAME_PATTERN.match(previous["name"]))
        and isinstance(previous.get("id"), str)
        and bool(ID_PATTERN.match(previous["id"]))
        and isinstance(previous.get("hardware"), dict)
    )


def adopt(path: Path, name: str, machine_id: str, info: Mapping[str, Any]) -> Identity:
    """Take a committed machine's identity as this machine's (it is that machine, its identity file lost)."""
    identity = Identity(
        name, machine_id, hardware_of(info), dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    )
    write(path, identity)
    return identity


def legacy_id(slug: str, fingerprint: Mapping[str, Any]) -> str:
    """The id a results file written before machines had identities is given: its slug and hardware, hashed,
    so the same file always migrates to the same id."""
    text = json.dumps({"slug": slug, "hardware": hardware_of(fingerprint)}, sort_keys=True)
    return "legacy-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
