"""Results files of older schemas brought to the current one: one `update_to_<n>` per schema version, as asv names
its migrations, applied in order by `migrate`. A file from a newer schema is refused, never half-read."""

from __future__ import annotations

from typing import Any, Callable

from verified_book.records import identity
from verified_book.records.errors import NewerSchema, ResultsError, show
from verified_book.records.record import SCHEMA_VERSION
from verified_book.vocabulary import NO_BACKEND_NAME


def update_to_1(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 0 (no version field, records as a flat list) to schema 1."""
    records: dict[str, dict[str, Any]] = {}
    for item in data.get("records", []) if isinstance(data.get("records"), list) else []:
        records.setdefault(item["claim"], {})[item.get("backend", NO_BACKEND_NAME)] = {
            k: v for k, v in item.items() if k not in ("claim", "backend")
        }
    if isinstance(data.get("records"), dict):
        records = data["records"]
    return {**data, "schema_version": 1, "records": records, "outputs": data.get("outputs", {})}


CLAIM_FIELDS = ("kind", "source", "citation", "hardware")


def update_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 to 2: the environment becomes the run header, timings leave the records for it,
    each claim's metadata is kept once, and per-record dates go (the run header dates the run).

    A migrated record carries no code fingerprint, so it reads as outdated until its machine
    runs again: nothing says it still matches the book.
    """
    run = dict(data.get("environment") or {})
    run.setdefault("commit", None)
    run.setdefault("dirty", None)
    seconds: dict[str, dict[str, Any]] = {}
    dates: dict[str, dict[str, Any]] = {}
    claims: dict[str, dict[str, Any]] = {}
    records: dict[str, dict[str, Any]] = {}
    given = data.get("records")
    if given is not None and not isinstance(given, dict):  # not records at all: left for the check to refuse
        return {**data, "schema_version": 2}
    for claim_id, per_backend in (given or {}).items():
        if not isinstance(per_backend, dict):
            records[claim_id] = per_backend
            continue
        records.setdefault(claim_id, {})
        for backend, item in per_backend.items():
            if not isinstance(item, dict):
                records.setdefault(claim_id, {})[backend] = item
                continue
            item = dict(item)
            meta = {k: item.pop(k) for k in CLAIM_FIELDS if k in item}
            claims.setdefault(claim_id, meta)
            if item.get("seconds") is not None:
                seconds.setdefault(claim_id, {})[backend] = item["seconds"]
            item.pop("seconds", None)
            if item.get("date") is not None:
                dates.setdefault(claim_id, {})[backend] = item["date"]
            item.pop("date", None)
            records.setdefault(claim_id, {})[backend] = item
    run["seconds"], run["dates"] = seconds, dates
    rest = {k: v for k, v in data.items() if k not in ("environment", "records")}
    return {**rest, "schema_version": 2, "run": run, "claims": claims, "records": records}


def update_to_3(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 2 to 3: the machine gets an identity (verified_book.records.identity). A file written before
    machines had one is given an id made from its slug and hardware, the same every time, so its
    history stays its own; a run of another machine of that name is refused, not merged into it."""
    machine = dict(data.get("machine") or {})
    fingerprint: dict[str, Any] = machine["fingerprint"] if isinstance(machine.get("fingerprint"), dict) else {}
    if identity.hardware_of(fingerprint):  # a file that never said its hardware names no machine to keep apart
        machine.setdefault("id", identity.legacy_id(str(data.get("slug")), fingerprint))
    return {**data, "schema_version": 3, "machine": machine}


def update_to_4(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 3 to 4: where a claim's code is, which schema 3 called `source` beside the claim's `citation`,
    is `defined_at`, so that `source` names one thing nowhere and the record says what it means."""
    claims = data.get("claims")
    if isinstance(claims, dict):
        claims = {
            cid: (
                {("defined_at" if k == "source" else k): v for k, v in meta.items()} if isinstance(meta, dict) else meta
            )
            for cid, meta in claims.items()
        }
        data = {**data, "claims": claims}
    return {**data, "schema_version": 4}


def update_to_5(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 4 to 5: a snippet's output keeps a hash of the source that printed it (`sha256`). An output
    recorded before has none: which version of the snippet printed it is not known, and is not guessed."""
    return {**data, "schema_version": 5}


def update_to_6(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 5 to 6: each output block's check keeps a hash of the block's text as compared (`sha256`). A check
    recorded before has none: `--changed` goes by the page's time for it, as before."""
    return {**data, "schema_version": 6}


def update_to_7(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 6 to 7: a record keeps the versions of the libraries beyond its backend's that its value was
    computed with (`uses`). A record made before has none: `--changed` computes a claim whose code uses such a
    library again once, rather than guess which versions made it."""
    return {**data, "schema_version": 7}


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: update_to_1,
    2: update_to_2,
    3: update_to_3,
    4: update_to_4,
    5: update_to_5,
    6: update_to_6,
    7: update_to_7,
}


def migrate(data: dict[str, Any], where: str) -> dict[str, Any]:
    version = data.get("schema_version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ResultsError(
            f"{where}: schema_version is {show(version)}, expected a whole number from 0 to {SCHEMA_VERSION}"
        )
    if version > SCHEMA_VERSION:
        raise NewerSchema(
            f"{where}: written by schema version {version} (a newer verified-book), this checkout reads up to "
            f"{SCHEMA_VERSION}; update the project (git pull, then `python3 run.py setup`, which reinstalls "
            "verified-book) to read it"
        )
    while version < SCHEMA_VERSION:
        version += 1
        try:
            data = MIGRATIONS[version](data)
        except Exception as e:  # a malformed old file is refused, not half-migrated
            raise ResultsError(
                f"{where}: cannot be migrated to schema version {version}: {type(e).__name__}: {show(str(e))}"
            ) from None
    return data
