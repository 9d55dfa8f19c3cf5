"""What a record was computed from, and whether the book still says the same.

A record carries a fingerprint of its claim's code and every input it read (file, key,
value). Reading a results file, the site compares them with the claim and the data as
they are now, without running anything: a record whose claim or inputs changed since
its run is *outdated*, with the old and the new value, until that machine runs again.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import sys
import types
import weakref
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, NamedTuple, TypeVar, cast

from verified_book.authoring import inputs
from verified_book.authoring.lazy import LazyModule
from verified_book.authoring.registry import Claim
from verified_book.authoring.state import NoBookOpen, current
from verified_book.engine.kept_fingerprints import KeptFingerprints
from verified_book.engine.source import definitions, source_of
from verified_book.engine.verdicts import once
from verified_book.records.record import ClaimMeta, DataInput, InputEntry, Record, SettingInput, SnippetInput
from verified_book.records.results import ResultsFile
from verified_book.vocabulary import fingerprint

T = TypeVar("T")

#: fingerprints by claim function, then by its parameters and declaration: a function that is gone
#: takes its entries with it, so no later object can be handed a dead one's fingerprint
_CODE_CACHE: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()


def _package(obj: Any) -> str:
    return (getattr(obj, "__module__", None) or "").split(".")[0]


class Constant(NamedTuple):
    """A module-level name a claim's code reads that is no function or class: a table, a format, a factor."""

    module: str
    name: str


class CodeReading(NamedTuple):
    """What one function or class is, as the fingerprint reads it."""

    source: str
    named: tuple[Any, ...]  # the functions and classes its own code names
    reached: tuple[Any, ...]  # the rest it reaches: its methods' helpers, its bases, book modules' members, constants
    modules: frozenset[str]  # the top-level modules its code names or imports, the book's own included


def _own_sources(fn: Any, package: str, seen: set[object], wide: bool = True) -> list[str]:
    """The source of `fn` and of every function or class of the book's `package` it names, transitively;
    `wide`, also of what it reaches otherwise (`CodeReading.reached`), constants by the lines that assign them.

    A helper the claim calls changes the claim as much as its own body does; so does a method of a
    class whose instance it is handed, a helper that method calls, and a table the code reads. What
    lives outside the claim's own package (the engine, libraries) is not the claim's: a record names
    the versions it ran with, and the engine's own tests pin its behaviour. Where the book lies on
    disk does not enter: the same code gives the same fingerprint in every checkout and process.
    """
    if id(fn) in seen or _package(fn) != package:
        return []
    seen.add(id(fn))
    read = _read(fn)
    if read is None:
        return []
    _read_from(fn.__module__)
    out = [read.source]
    for target in read.named + (read.reached if wide else ()):
        out += (
            _constant(target, package, seen)
            if isinstance(target, Constant)
            else _own_sources(target, package, seen, wide)
        )
    return out


def _constant(constant: Constant, package: str, seen: set[object], depth: int = 0) -> list[str]:
    """The lines that give a module-level name its value, followed through `from ... import` within the book's
    package, and what those lines name in turn. Its source, not its value: a value may hold an address, follow
    string hashing in its order, or be a cache the claims fill as they run, none of which is the claim's code."""
    if constant in seen or depth > _DEPTH:
        return []
    seen.add(constant)
    module = sys.modules.get(constant.module)
    file = getattr(module, "__file__", None)
    if module is None or file is None or not os.path.isfile(file):
        return []
    _read_from(constant.module)
    stat = os.stat(file)
    found = definitions(file, stat.st_mtime_ns, stat.st_size)
    if constant.name in found.imported:
        origin, attr, level = found.imported[constant.name]
        if level:
            base = (module.__package__ or "").split(".")
            origin = ".".join([*base[: len(base) - level + 1], *([origin] if origin else [])])
        if origin.split(".")[0] != package:
            return []
        target = vars(sys.modules[origin]).get(attr) if origin in sys.modules else None
        if target is not None and _is_code(target):
            return _own_sources(target, package, seen)
        return _constant(Constant(origin, attr), package, seen, depth + 1)
    out: list[str] = []
    namespace = vars(module)
    for first, last, names in found.assigned.get(constant.name, []):
        out.append(f"{constant.module}.{constant.name}: " + "".join(found.lines[first - 1 : last]))
        for name in sorted(names):
            target = namespace.get(name, _MISSING)
            if target is _MISSING or isinstance(target, (types.ModuleType, LazyModule)):
                continue
            out += (
                _own_sources(target, package, seen)
                if _is_code(target)
                else _constant(Constant(constant.module, name), package, seen, depth + 1)
            )
    return out


_DEPTH = 8  # how far one constant's value is followed through others and through containers


def _classes_in(value: Any, package: str, found: dict[str, Any], depth: int = 0) -> None:
    """The book's functions and classes a claim's parameter is or holds, by qualified name: the class of each of
    the book's objects in it, through containers and the objects' fields."""
    if depth > _DEPTH or isinstance(value, (str, bytes, int, float, complex, Fraction, type(None), LazyModule)):
        return
    if isinstance(value, (tuple, list, set, frozenset)):
        for item in value:
            _classes_in(item, package, found, depth + 1)
        return
    if isinstance(value, dict):
        for item in (*value.keys(), *value.values()):
            _classes_in(item, package, found, depth + 1)
        return
    definition = value if _is_definition(value) else type(value)
    if _package(definition) != package:
        return
    key = f"{definition.__module__}.{definition.__qualname__}"
    if key in found:
        return
    found[key] = definition
    if not _is_definition(value) and hasattr(value, "__dict__"):
        for item in vars(value).values():
            _classes_in(item, package, found, depth + 1)


def _handed(claim: Claim, package: str) -> list[Any]:
    """The book's functions and classes among a claim's parameters and what they hold (`_classes_in`), in the order
    of their qualified names."""
    found: dict[str, Any] = {}
    for _, value in sorted(claim.params.items()):
        _classes_in(value, package, found)
    return [definition for _, definition in sorted(found.items())]


#: each function's or class's source and what it names and reaches, read once per object: a helper
#: many claims call is otherwise read from disk and tokenised again for every one of them
_READ_CACHE: weakref.WeakKeyDictionary[Any, CodeReading | None] = weakref.WeakKeyDictionary()


def _read(fn: Any) -> CodeReading | None:
    try:
        return _READ_CACHE[fn]
    except KeyError:
        pass
    except TypeError:  # not weakly referable: read it each time
        return _read_uncached(fn)
    _READ_CACHE[fn] = read = _read_uncached(fn)
    return read


def _names(code: types.CodeType | None) -> set[str]:
    """Every name a code object and the code nested in it use: globals and attributes alike."""
    names: set[str] = set()
    stack = [code] if code is not None else []
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return names


def _methods(cls: type) -> Iterator[Any]:
    """The functions a class defines in its own body: methods, static and class methods, properties' accessors."""
    for attribute in vars(cls).values():
        if isinstance(attribute, (staticmethod, classmethod)):
            attribute = attribute.__func__
        if isinstance(attribute, property):
            yield from (f for f in (attribute.fget, attribute.fset, attribute.fdel) if inspect.isfunction(f))
        elif isinstance(attribute, functools.cached_property):
            yield attribute.func
        elif inspect.isfunction(attribute) and attribute.__qualname__.startswith(cls.__qualname__ + "."):
            yield attribute  # not one the class was made with (a dataclass's __init__, written from a string)


def _is_definition(target: Any) -> bool:
    # a module is neither; asked first, since asking a lazily imported one anything else imports it
    return not isinstance(target, (types.ModuleType, LazyModule)) and (
        inspect.isfunction(target) or inspect.isclass(target)
    )


def _wrapped(target: Any) -> Any | None:
    """The function a decorator wrapped (`functools.cache`, `functools.wraps`), where `target` is such a wrapper
    rather than a function of its own."""
    if isinstance(target, (types.ModuleType, LazyModule)) or inspect.isfunction(target) or inspect.isclass(target):
        return None
    try:
        if not callable(target) or getattr(target, "__wrapped__", None) is None:
            return None
        inner = inspect.unwrap(target)
    except Exception:  # noqa: BLE001 - an object that fails to say what it wraps wraps nothing the book wrote
        return None
    return inner if inspect.isfunction(inner) else None


def _is_code(target: Any) -> bool:
    """Whether the fingerprint reads `target` as code (a function, a class, a cached function), not as a constant."""
    return _is_definition(target) or _wrapped(target) is not None


def _read_uncached(fn: Any) -> CodeReading | None:
    source = source_of(fn)
    if source is None:
        return None
    module = inspect.getmodule(fn)
    namespace = getattr(fn, "__globals__", None) or vars(module or types.ModuleType("_"))
    own = _names(getattr(fn, "__code__", None))
    named = tuple(t for t in (namespace.get(name) for name in sorted(own)) if _is_definition(t))
    wider = set(own)
    inner = _wrapped(fn)
    if inner is not None:  # a cached function: the code is the function it wraps
        wider |= _names(inner.__code__)
    reached: list[Any] = []
    if inspect.isclass(fn):
        for method in _methods(fn):
            wider |= _names(method.__code__)
        # its own attributes and fields, which its methods read through `self`, are not the module's names
        wider -= {name for cls in fn.__mro__ for name in (*vars(cls), *getattr(cls, "__dataclass_fields__", ()))}
        reached += [b for b in fn.__bases__ if b is not object]
    package, here = _package(fn), namespace.get("__name__", "")
    modules = {name.split(".")[0] for name in wider}  # `import gguf` in a body names "gguf"
    for name in sorted(wider - {"__name__"}):
        target = namespace.get(name, _MISSING)
        if target is _MISSING:
            continue
        if isinstance(target, LazyModule):
            modules.add(object.__getattribute__(target, "_name").split(".")[0])
        elif isinstance(target, types.ModuleType):
            modules.add(target.__name__.split(".")[0])
            if target.__name__.split(".")[0] == package:  # one of the book's modules: the members the code names
                members = vars(target)
                reached += [
                    members[attr] if _is_code(members[attr]) else Constant(target.__name__, attr)
                    for attr in sorted(wider)
                    if attr in members and not isinstance(members[attr], (types.ModuleType, LazyModule))
                ]
        elif _is_definition(target):
            reached += [] if name in own else [target]
        elif _wrapped(target) is not None:
            reached.append(target)
        elif not callable(target):
            reached.append(Constant(here, name))
    return CodeReading(source, named, tuple(reached), frozenset(modules))


_MISSING = object()


def code_fingerprint(claim: Claim, wide: bool = True) -> str:
    """A short hash of what decides a claim's value: its code and what it reaches in the book's package
    (`_own_sources`), the classes of the book's objects among its parameters, its parameters and its
    declaration. `wide=False` gives the fingerprint records carried before it took in what the code reaches
    without naming it (a method's helpers, constants, the classes of parameters): see `_outdated_reason`.
    Within `judged_once`, made once per claim, not once per machine whose records are asked about."""
    return once("code_fingerprint", (claim,), lambda: _code_fingerprint(claim, wide), wide)


def _code_fingerprint(claim: Claim, wide: bool) -> str:
    declared = repr(
        (
            sorted((k, repr(v)) for k, v in claim.params.items()),
            claim.kind.value,
            claim.backends,
            claim.hardware,
            claim.printed_on,
            claim.tolerance,
        )
    )
    known = _CODE_CACHE.setdefault(claim.compute, {})
    key = declared if wide else "narrow " + declared
    if key not in known:
        where = ("code", claim.compute.__module__, claim.compute.__qualname__, key)
        known[key] = _kept_or(where, lambda: _read_fingerprint(claim, declared, wide))
    return known[key]


def _read_fingerprint(claim: Claim, declared: str, wide: bool) -> str:
    package = _package(claim.compute)
    seen: set[object] = set()
    parts = [*_own_sources(claim.compute, package, seen, wide), declared]
    if wide:
        parts += [s for d in _handed(claim, package) for s in _own_sources(d, package, seen)]
    return fingerprint("\n".join(parts))


#: where the fingerprint being read notes the module of each source it reads (`code_modules`)
_MODULES_READ: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("modules read", default=None)


def code_modules(claim: Claim) -> frozenset[str]:
    """The modules whose files a claim's fingerprint (wide) reads: its own, and every book module whose code or
    constants its code reaches; an edit to any other file cannot move it (`verified_book.engine.footprints`)."""

    def read() -> frozenset[str]:
        modules = {claim.compute.__module__}
        token = _MODULES_READ.set(modules)
        try:
            _read_fingerprint(claim, "", wide=True)
        finally:
            _MODULES_READ.reset(token)
        return frozenset(modules)

    return _kept_or(("modules", claim.compute.__module__, claim.compute.__qualname__, _params_key(claim)), read)


def _params_key(claim: Claim) -> str:
    """A claim's parameters as the key of what is kept of its code, beside its function's name."""
    return repr(sorted((k, repr(v)) for k, v in claim.params.items()))


def _read_from(module: str) -> None:
    modules = _MODULES_READ.get()
    if modules is not None:
        modules.add(module)


def _kept_or(where: tuple[str, ...], read: Callable[[], T]) -> T:
    """What the open book keeps at `where` (`engine.kept_fingerprints`), else `read()`, kept there for the next
    process; with no book open, `read()`."""
    try:
        book = getattr(current(), "fingerprints", None)
    except NoBookOpen:
        book = None
    if not isinstance(book, KeptFingerprints):
        return read()
    found = book.get(where)
    if found is None:
        found = read()
        book.put(where, found)
    return cast(T, found)


def libraries_of(claim: Claim) -> frozenset[str]:
    """The versioned libraries (`machine.VERSIONED`) the book's code of a claim names or imports: its body,
    what that reaches (as the fingerprint reads it), and its parameters' classes. A library used only
    through the engine is its backend's own or one of its companions (`uses_of`)."""
    known = _LIBRARIES_CACHE.setdefault(claim.compute, {})
    key = _params_key(claim)
    if key not in known:
        where = ("libraries", claim.compute.__module__, claim.compute.__qualname__, key)
        known[key] = _kept_or(where, lambda: _libraries_of(claim))
    return known[key]


#: the libraries a claim's code names, by claim function, then by its parameters: asked of every value
#: held at every edit (`outdated_reason`), read once per function
_LIBRARIES_CACHE: weakref.WeakKeyDictionary[Any, dict[str, frozenset[str]]] = weakref.WeakKeyDictionary()


def _libraries_of(claim: Claim) -> frozenset[str]:
    from verified_book.engine.machine import VERSIONED

    found: set[str] = set()
    for _, read in _walk(claim):
        found |= read.modules
    return frozenset(found) & frozenset(VERSIONED)


def _walk(claim: Claim) -> Iterator[tuple[Any, CodeReading]]:
    """Each function and class of the book's package a claim's code reaches, with how the fingerprint reads it:
    its body, what that names and reaches, transitively, and its parameters' classes."""
    package = _package(claim.compute)
    stack: list[Any] = [claim.compute, *_handed(claim, package)]
    seen: set[int] = set()
    while stack:
        fn = stack.pop()
        if id(fn) in seen or _package(fn) != package:
            continue
        seen.add(id(fn))
        read = _read(fn)
        if read is not None:
            yield fn, read
            stack += [t for t in read.named + read.reached if not isinstance(t, Constant)]


def code_reached(claim: Claim) -> dict[str, str]:
    """The book's functions and classes a claim's code reaches (`_walk`), by qualified name (`module.name`), each
    with its source: what a premise naming a helper is looked up in (`verified_book.engine.premises`)."""
    out: dict[str, str] = {}
    for fn, read in _walk(claim):
        out[f"{fn.__module__}.{fn.__qualname__}"] = read.source
    return out


def uses_of(claim: Claim, backend: str) -> tuple[str, ...]:
    """The libraries a record of `claim` on `backend` keeps the versions of (`Record.uses`): those its code
    uses and its backend's companions, but not the backend's own library, whose version the record keeps as
    `version`. Within `judged_once`, made once per claim and backend."""
    return once("uses_of", (claim,), lambda: _uses_of(claim, backend), backend)


def _uses_of(claim: Claim, backend: str) -> tuple[str, ...]:
    from verified_book.backends import ADAPTERS

    library = backend.split(":")[0]
    adapter = ADAPTERS.get(library)
    companions = set(adapter.companions) if adapter is not None and claim.needs_backend else set()
    return tuple(sorted((libraries_of(claim) | companions) - {library}))


def input_entry(item: inputs.Read) -> InputEntry:
    """One input as a record keeps it: a data file's enough to look it up again and compare; a
    machine's setting (an environment variable, a library's mode) as it was during the run; a
    snippet's printed figure with a hash of the snippet's source, to tell when it changed."""
    from verified_book.records.results import to_json

    if isinstance(item, inputs.Setting):
        return SettingInput(setting=item.name, value=to_json(item.value), where=item.where)
    if isinstance(item, inputs.SnippetFigure):
        return SnippetInput(snippet=item.snippet, sha256=item.sha256, where=item.where, value=item.value)
    if item.whole:
        return DataInput(file=item.file, key=item.key, value=to_json(item.value), line=item.line, whole=item.whole)
    return DataInput(file=item.file, key=item.key, value=to_json(item.value), line=item.line)


def changed_snippet(entry: SnippetInput) -> str | None:
    """How a snippet a record read its figure from differs from the book's now, or None."""
    from verified_book.authoring.state import current
    from verified_book.engine.snippet_figures import source_hash

    path = current().root / entry.snippet
    if not path.is_file():
        return f"computed from what {entry.snippet} printed; the book has no such snippet now"
    if source_hash(path) != entry.sha256:
        return f"computed from what {entry.snippet} printed ({entry.value!r}); the snippet has changed since"
    return None


def _now(file: str, key: str) -> Any:
    """What the data says now for an input, as records keep it; the error where it cannot be read."""
    from verified_book.records.results import to_json

    try:
        return to_json(inputs.current(file, key))
    except inputs.InputError as e:
        return e


def changed_inputs(entries: list[InputEntry] | None) -> list[str]:
    """Each recorded input whose value the data no longer holds, as 'file:line key = old; now new'. Within
    `judged_once`, the data's value of each input is read once, not once per record that names it."""
    out = []
    for entry in entries or []:
        if isinstance(entry, SnippetInput):
            change = changed_snippet(entry)
            out += [change] if change else []
            continue
        if not isinstance(entry, DataInput):
            continue
        now = once("input now", (), functools.partial(_now, entry.file, entry.key), entry.file, entry.key)
        if isinstance(now, inputs.InputError):
            out.append(f"computed from {entry.key} = {entry.value!r} ({entry.file}); now {now}")
            continue
        if now != entry.value and entry.whole:
            out.append(
                f"{entry.whole} reads all of {Path(entry.file).name}; {entry.key} changed "
                f"({entry.value!r}, now {now!r}: {inputs.shown_as()}/{entry.file})"
            )
        elif now != entry.value:
            out.append(
                f"computed from {entry.key} = {entry.value!r}; the book now says {now!r} "
                f"({inputs.shown_as()}/{entry.file})"
            )
    return out


@dataclass(frozen=True)
class VersionsNow:
    """The versions of a machine's libraries where its records are asked about, as far as the one asking
    knows them: a backend's library by the backend's name, as the library reports itself (`2.11.0+cu130`),
    every other library by its own name (`ml_dtypes`). A name left out is not known, and nothing is said of
    it; a name known as None is a library that is not there."""

    known: tuple[tuple[str, str | None], ...] = ()

    @classmethod
    def of(cls, versions: Mapping[str, str | None]) -> VersionsNow:
        return cls(tuple(sorted(versions.items())))

    def get(self, name: str) -> tuple[bool, str | None]:
        """Whether `name`'s version is known here, and that version."""
        for known, version in self.known:
            if known == name:
                return True, version
        return False, None


def versions_of_run(results: ResultsFile) -> VersionsNow:
    """What a machine's libraries were at its latest run, as its results file says (the run header's backends,
    the fingerprint's library versions): what the site, which runs nothing, compares that machine's records
    with. A backend the run did not find is not known, so a record of it made earlier is not called outdated."""

    def read() -> VersionsNow:
        from verified_book.engine.machine import VERSIONED

        fingerprint = results.machine.fingerprint
        found = {name: _text_or_none(fingerprint[name]) for name in VERSIONED if name in fingerprint}
        found |= {name: version for name, version in (results.run.backends or {}).items() if version is not None}
        return VersionsNow.of(found)

    return once("versions_of_run", (results,), read)


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def moved_libraries(claim: Claim, record: Record, backend: str, now: VersionsNow) -> str | None:
    """How the libraries a record was computed with differ from `now`: its backend's library, and the others
    it computes with (`uses_of`); None where every one `now` knows is the version the record names."""
    known, version = now.get(backend)
    if known and record.version != version:
        return f"recorded on {record.version or 'no library'}; this machine has {version or 'none'} now"
    used = [name for name in uses_of(claim, backend) if now.get(name)[0]]
    if not used:
        return None
    if record.uses is None:
        return f"recorded before records kept the versions of the other libraries it computes with ({', '.join(used)})"
    moved = [
        f"{name} {record.uses.get(name) or 'absent'}, this machine has {now.get(name)[1] or 'none'} now"
        for name in used
        if record.uses.get(name) != now.get(name)[1]
    ]
    return "computed with " + "; ".join(moved) if moved else None


def outdated_reason(
    claim: Claim | None,
    meta: ClaimMeta | None,
    record: Record,
    backend: str | None = None,
    now: VersionsNow | None = None,
) -> str | None:
    """Why a record no longer speaks for the book as it is now: its claim's code or an input it read changed
    since it was made, or (given its `backend` and the versions `now`) a library it was computed with is
    another version; None while it still does, and computing it again would give its value back.

    The one rule of what an edit invalidates: `serve` recomputes what it names, `--changed` reruns it and the
    site marks it outdated."""
    return once(
        "outdated_reason",
        (claim, meta, record),
        lambda: _outdated_reason(claim, meta, record, backend, now),
        backend,
        now,
    )


def _outdated_reason(
    claim: Claim | None, meta: ClaimMeta | None, record: Record, backend: str | None, now: VersionsNow | None
) -> str | None:
    if claim is None:
        return None
    recorded = meta.code if meta is not None else None
    if recorded is None:
        return "recorded before records carried their provenance; run the suite on that machine again"
    if recorded != code_fingerprint(claim):
        if recorded == code_fingerprint(claim, wide=False):
            return (
                "recorded before fingerprints took in what a claim's code reaches without naming it (its methods' "
                "helpers, the constants it reads, its parameters' classes), so this record cannot say that code is "
                "unchanged; run the suite on that machine again"
            )
        return f"the claim's code changed since this record was made ({claim.defined_at})"
    changes = changed_inputs(record.inputs)
    if changes:
        return "; ".join(changes)
    return moved_libraries(claim, record, backend, now) if backend is not None and now is not None else None
