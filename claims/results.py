"""The results store: one JSON file per machine that has verified the book.

`results/<machine-slug>.json` holds a schema version, the machine's fingerprint, the
environment of its latest run, and one record per (claim, backend). A run merges its
records into the file under a lock and replaces it atomically, so a run of a subset
keeps every other record, and a crash mid-write leaves the previous file whole.
Readers (the site) warn about a bad file and skip it; writers refuse to overwrite
one and set it aside instead.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Mapping

from filelock import FileLock

SCHEMA_VERSION = 1
STATUSES = ("verified", "stale", "failed", "skipped", "disputed")
SLUG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,80}$")
BACKEND_NAMES = ("none", "numpy", "torch:cpu", "torch:cuda", "torch:mps", "mlx:cpu", "mlx:gpu")


class ResultsError(Exception):
    """A results file that cannot be used: corrupt, from a newer schema, or invalid."""


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def to_json(value: Any) -> Any:
    """A claim's value as JSON: exact fractions keep their exact text beside the float."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, Fraction):
        if value.denominator == 1:
            return int(value)
        return {"exact": f"{value.numerator}/{value.denominator}", "float": float(value)}
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return to_json(tolist())
    try:
        import sympy

        if isinstance(value, sympy.Basic):
            return to_json(Fraction(int(value.p), int(value.q))) if value.is_Rational else float(value)
    except ImportError:
        pass
    return str(value)


@dataclass
class ResultsFile:
    """One machine's results, as read from or written to `results/<slug>.json`."""

    slug: str
    machine: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    records: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "slug": self.slug,
            "machine": self.machine,
            "environment": self.environment,
            "records": self.records,
            "outputs": self.outputs,
        }

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATUSES}
        for per_backend in self.records.values():
            for record in per_backend.values():
                out[record.get("status", "failed")] = out.get(record.get("status", "failed"), 0) + 1
        return out

    def merge(self, other: "ResultsFile") -> None:
        """Take every record of `other`, keeping ours where it has none."""
        self.machine = other.machine or self.machine
        self.environment = other.environment or self.environment
        for claim_id, per_backend in other.records.items():
            self.records.setdefault(claim_id, {}).update(per_backend)
        self.outputs.update(other.outputs)


def update_to_1(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 0 (no version field, records as a flat list) to schema 1."""
    records: dict[str, dict[str, Any]] = {}
    for item in data.get("records", []) if isinstance(data.get("records"), list) else []:
        records.setdefault(item["claim"], {})[item.get("backend", "none")] = {k: v for k, v in item.items() if k not in ("claim", "backend")}
    if isinstance(data.get("records"), dict):
        records = data["records"]
    return {**data, "schema_version": 1, "records": records, "outputs": data.get("outputs", {})}


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: update_to_1}


def migrate(data: dict[str, Any], where: str) -> dict[str, Any]:
    version = data.get("schema_version", 0)
    if not isinstance(version, int):
        raise ResultsError(f"{where}: schema_version is {version!r}, expected an integer")
    if version > SCHEMA_VERSION:
        raise ResultsError(
            f"{where}: written by schema version {version}, this checkout reads up to {SCHEMA_VERSION}; "
            "update the project (git pull, then reinstall) to read it"
        )
    while version < SCHEMA_VERSION:
        version += 1
        data = MIGRATIONS[version](data)
    return data


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


def validate(data: Any, where: str, known_claims: set[str] | None = None) -> list[str]:
    """Every problem with a parsed results file, as 'where: what' lines; empty when sound."""
    problems: list[str] = []
    if not isinstance(data, dict):
        return [f"{where}: expected a JSON object at the top, found {type(data).__name__}"]
    slug = data.get("slug")
    if not isinstance(slug, str) or not SLUG_PATTERN.match(slug):
        problems.append(f"{where}: slug {slug!r} is not a safe machine name (lower-case letters, digits, '-', '_')")
    for key in ("machine", "environment", "records", "outputs"):
        if not isinstance(data.get(key, {}), dict):
            problems.append(f"{where}: {key!r} must be an object")
    records = data.get("records", {})
    if isinstance(records, dict):
        for claim_id, per_backend in records.items():
            if not isinstance(per_backend, dict):
                problems.append(f"{where}: records[{claim_id!r}] must be an object of backends")
                continue
            if known_claims is not None and claim_id not in known_claims:
                problems.append(f"{where}: records[{claim_id!r}] names no claim of this book")
            for backend, record in per_backend.items():
                at = f"{where}: records[{claim_id!r}][{backend!r}]"
                if backend not in BACKEND_NAMES:
                    problems.append(f"{at}: unknown backend (expected one of {', '.join(BACKEND_NAMES)})")
                if not isinstance(record, dict):
                    problems.append(f"{at}: must be an object")
                    continue
                if record.get("status") not in STATUSES:
                    problems.append(f"{at}: status {record.get('status')!r} is not one of {', '.join(STATUSES)}")
                if not _finite(record.get("value")):
                    problems.append(f"{at}: value is not finite")
                for fig in record.get("figures", []) or []:
                    if not isinstance(fig, dict) or not isinstance(fig.get("line", 0), int):
                        problems.append(f"{at}: figures must be objects with file, line, printed")
                        break
    return problems


def read(path: Path, known_claims: set[str] | None = None) -> ResultsFile:
    """Read and check one results file; raise ResultsError saying what is wrong and where."""
    where = str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ResultsError(f"{where}:{e.lineno}: not valid JSON ({e.msg})") from None
    except UnicodeDecodeError as e:
        raise ResultsError(f"{where}: not UTF-8 text ({e.reason})") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{where}: expected a JSON object at the top, found {type(data).__name__}")
    data = migrate(data, where)
    problems = validate(data, where, known_claims)
    if problems:
        raise ResultsError("\n".join(problems))
    return ResultsFile(data["slug"], data.get("machine", {}), data.get("environment", {}), data.get("records", {}), data.get("outputs", {}))


def read_all(results_dir: Path, warn: Callable[[str], None], known_claims: set[str] | None = None) -> dict[str, ResultsFile]:
    """Every readable results file by slug; a bad file is reported through `warn` and skipped."""
    out: dict[str, ResultsFile] = {}
    for path in sorted(results_dir.glob("*.json")):
        try:
            out[path.stem] = read(path, known_claims)
        except ResultsError as e:
            warn(str(e))
    return out


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dumps(results: ResultsFile) -> str:
    return json.dumps(results.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def merge_into(path: Path, update: ResultsFile, warn: Callable[[str], None] = lambda _: None) -> ResultsFile:
    """Merge `update` into the file at `path` under a lock, atomically; return what was written.

    A corrupt existing file is moved aside to `<name>.corrupt-<time>` and reported, never
    silently replaced; a file from a newer schema is left alone and the merge refused.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock", timeout=120):
        current = ResultsFile(update.slug)
        if path.exists():
            try:
                current = read(path)
            except ResultsError as e:
                if "schema version" in str(e) and "reads up to" in str(e):
                    raise
                aside = path.with_name(f"{path.name}.corrupt-{_dt.datetime.now().strftime('%Y%m%dT%H%M%S%f')}")
                os.replace(path, aside)
                warn(f"{e}\n{path}: kept aside as {aside.name}; a new file holds this run's records")
                current = ResultsFile(update.slug)
        current.merge(update)
        _atomic_write(path, dumps(current))
        return current
