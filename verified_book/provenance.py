"""What a record was computed from, and whether the book still says the same.

A record carries a fingerprint of its claim's code and every input it read (file, key,
value). Reading a results file, the site compares them with the claim and the data as
they are now, without running anything: a record whose claim or inputs changed since
its run is *outdated*, with the old and the new value, until that machine runs again.
"""
from __future__ import annotations

import hashlib
import inspect
import subprocess
import types
import weakref
from pathlib import Path
from typing import Any, Mapping

from verified_book import inputs
from verified_book.registry import Claim

#: fingerprints by claim function, then by its parameters and declaration: a function that is gone
#: takes its entries with it, so no later object can be handed a dead one's fingerprint
_CODE_CACHE: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()


def _package(obj: Any) -> str:
    return (getattr(obj, "__module__", None) or "").split(".")[0]


def _own_sources(fn: Any, package: str, seen: set[int]) -> list[str]:
    """The source of `fn` and of every function or class of the book's `package` it names, transitively.

    A helper the claim calls changes the claim as much as its own body does. What lives outside
    the claim's own package (the engine, libraries) is not the claim's: a record names the
    versions it ran with, and the engine's own tests pin its behaviour. Where the book lies on
    disk does not enter: the same code gives the same fingerprint in every checkout and process.
    """
    if id(fn) in seen or _package(fn) != package:
        return []
    seen.add(id(fn))
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return []
    out = [source]
    code = getattr(fn, "__code__", None)
    names: set[str] = set()
    stack = [code] if code is not None else []
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    namespace = getattr(fn, "__globals__", None) or vars(inspect.getmodule(fn) or types.ModuleType("_"))
    for name in sorted(names):
        target = namespace.get(name)
        if inspect.isfunction(target) or inspect.isclass(target):
            out += _own_sources(target, package, seen)
    return out


def code_fingerprint(claim: Claim) -> str:
    """A short hash of what decides a claim's value: its code (and its helpers' in the book's
    package), its parameters and its declaration."""
    declared = repr((sorted((k, repr(v)) for k, v in claim.params.items()),
                     claim.kind.value, claim.backends, claim.hardware, claim.printed_on, claim.tolerance))
    known = _CODE_CACHE.setdefault(claim.compute, {})
    if declared not in known:
        parts = [*_own_sources(claim.compute, _package(claim.compute), set()), declared]
        known[declared] = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return known[declared]


def input_entry(item: inputs.Input | inputs.Setting) -> dict[str, Any]:
    """One input as a record keeps it: a data file's enough to look it up again and compare; a
    machine's setting (an environment variable, a library's mode) as it was during the run."""
    from verified_book.results import to_json

    if isinstance(item, inputs.Setting):
        return {"setting": item.name, "value": to_json(item.value), "where": item.where}
    return {"file": item.file, "key": item.key, "value": to_json(item.value), "line": item.line}


def changed_inputs(entries: Any) -> list[str]:
    """Each recorded input whose value the data no longer holds, as 'file:line key = old; now new'."""
    from verified_book.results import to_json

    out = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("file"), str) or not isinstance(entry.get("key"), str):
            continue
        try:
            now = to_json(inputs.current(entry["file"], entry["key"]))
        except inputs.InputError as e:
            out.append(f"computed from {entry['key']} = {entry.get('value')!r} ({entry['file']}); now {e}")
            continue
        if now != entry.get("value"):
            out.append(f"computed from {entry['key']} = {entry.get('value')!r}; the book now says {now!r} "
                       f"({inputs.SHOWN_AS}/{entry['file']})")
    return out


def outdated_reason(claim: Claim | None, meta: Mapping[str, Any] | None, record: Mapping[str, Any]) -> str | None:
    """Why a record no longer speaks for the book as it is now; None while it still does."""
    if claim is None:
        return None
    recorded = (meta or {}).get("code")
    if not isinstance(recorded, str):
        return "recorded before records carried their provenance; run the suite on that machine again"
    if recorded != code_fingerprint(claim):
        return f"the claim's code changed since this record was made ({claim.source_file}:{claim.source_line})"
    changes = changed_inputs(record.get("inputs"))
    return "; ".join(changes) if changes else None


def commit_of(root: Path, own: tuple[Path, ...] = ()) -> tuple[str | None, bool | None]:
    """The checkout's commit and whether its tree has changes other than in `own` (the results
    folders a run writes to, whose changes are its output, not its input); (None, None) outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None, None
        outside = [f":(exclude){Path(p).resolve().relative_to(root.resolve())}" for p in own
                   if Path(p).resolve().is_relative_to(root.resolve())]
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *outside],
                                cwd=root, capture_output=True, text=True, timeout=30)
        return head.stdout.strip(), bool(status.stdout.strip()) if status.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None, None
