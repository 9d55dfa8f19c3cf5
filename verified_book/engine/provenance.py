"""What a record was computed from, and whether the book still says the same.

A record carries a fingerprint of its claim's code and every input it read (file, key,
value). Reading a results file, the site compares them with the claim and the data as
they are now, without running anything: a record whose claim or inputs changed since
its run is *outdated*, with the old and the new value, until that machine runs again.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import functools
import hashlib
import inspect
import linecache
import os
import subprocess
import types
import weakref
from pathlib import Path
from typing import Any, Iterator

from verified_book.authoring import inputs
from verified_book.authoring.registry import Claim
from verified_book.records.record import ClaimMeta, DataInput, InputEntry, Record, SettingInput, SnippetInput

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
    read = _read(fn)
    if read is None:
        return []
    source, named = read
    out = [source]
    for target in named:
        out += _own_sources(target, package, seen)
    return out


#: each function's or class's source and the functions and classes it names, read once per object:
#: a helper many claims call is otherwise read from disk and tokenised again for every one of them
_READ_CACHE: weakref.WeakKeyDictionary[Any, tuple[str, tuple[Any, ...]] | None] = weakref.WeakKeyDictionary()


def _read(fn: Any) -> tuple[str, tuple[Any, ...]] | None:
    try:
        return _READ_CACHE[fn]
    except KeyError:
        pass
    except TypeError:  # not weakly referable: read it each time
        return _read_uncached(fn)
    _READ_CACHE[fn] = read = _read_uncached(fn)
    return read


def _read_uncached(fn: Any) -> tuple[str, tuple[Any, ...]] | None:
    source = source_of(fn)
    if source is None:
        return None
    code = getattr(fn, "__code__", None)
    names: set[str] = set()
    stack = [code] if code is not None else []
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    namespace = getattr(fn, "__globals__", None) or vars(inspect.getmodule(fn) or types.ModuleType("_"))
    targets = (namespace.get(name) for name in sorted(names))
    named = tuple(
        target
        for target in targets
        # a module is neither; asked first, since asking a lazily imported one anything else imports it
        if not isinstance(target, types.ModuleType) and (inspect.isfunction(target) or inspect.isclass(target))
    )
    return source, named


def source_of(obj: Any) -> str | None:
    """`inspect.getsource(obj)` for a function or class, found in one parse of its file.

    inspect tokenises the file anew for each function it is asked about, and a book's claims
    ask about hundreds; here each file is parsed once and every definition's lines looked up.
    What the parse does not place (a lambda, say) is left to inspect. None where there is no source.
    """
    try:
        obj = inspect.unwrap(obj)  # as inspect does: a decorated function's own source
        file = inspect.getsourcefile(obj)
    except (TypeError, ValueError):
        return None
    if file is None:
        return None
    try:
        stat = os.stat(file)
    except OSError:
        return None
    lines, by_line, by_name = _definitions(file, stat.st_mtime_ns, stat.st_size)
    code = getattr(obj, "__code__", None)
    span = by_line.get(code.co_firstlineno) if code is not None else by_name.get(getattr(obj, "__qualname__", ""))
    if span is not None and code is not None and code.co_filename != file:
        span = None
    if span is None:
        try:
            return inspect.getsource(obj)
        except (OSError, TypeError):
            return None
    return "".join(lines[span[0] - 1 : span[1]])


@functools.lru_cache(maxsize=256)
def _definitions(
    file: str, mtime_ns: int, size: int
) -> tuple[list[str], dict[int, tuple[int, int]], dict[str, tuple[int, int]]]:
    """A source file's lines, and the lines (first, last) of every function and class it defines:
    by the line a function's code starts on (its first decorator), and by a class's qualified name.
    Cached by the file's modification time and size, so a file rewritten in place is read again."""
    linecache.checkcache(file)
    lines = linecache.getlines(file)
    by_line: dict[int, tuple[int, int]] = {}
    by_name: dict[str, tuple[int, int]] = {}
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return lines, by_line, by_name

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.end_lineno:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                span = (first, _block_end(lines, node.end_lineno, node.body[0].col_offset))
                if isinstance(node, ast.ClassDef):
                    by_name[prefix + node.name] = span
                else:
                    by_line[first] = span
                inner = (
                    f"{prefix}{node.name}.<locals>." if not isinstance(node, ast.ClassDef) else f"{prefix}{node.name}."
                )
                visit(node.body, inner)

    visit(tree.body, "")
    return lines, by_line, by_name


def _block_end(lines: list[str], last: int, body_column: int) -> int:
    """The last line of a definition as inspect's block reader ends it: past the last statement,
    over comment lines indented as deep as the body (blank lines between them too)."""
    end, i = last, last
    while i < len(lines):
        text = lines[i]
        stripped = text.strip()
        i += 1
        if not stripped:
            continue
        if not stripped.startswith("#") or len(text) - len(text.lstrip()) < body_column:
            break
        end = i
    return end


def code_fingerprint(claim: Claim) -> str:
    """A short hash of what decides a claim's value: its code (and its helpers' in the book's
    package), its parameters and its declaration."""
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
    if declared not in known:
        parts = [*_own_sources(claim.compute, _package(claim.compute), set()), declared]
        known[declared] = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return known[declared]


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
    from verified_book.authoring import registry
    from verified_book.engine.snippet_figures import source_hash

    path = registry.ROOT / entry.snippet
    if not path.is_file():
        return f"computed from what {entry.snippet} printed; the book has no such snippet now"
    if source_hash(path) != entry.sha256:
        return f"computed from what {entry.snippet} printed ({entry.value!r}); the snippet has changed since"
    return None


def changed_inputs(entries: list[InputEntry] | None) -> list[str]:
    """Each recorded input whose value the data no longer holds, as 'file:line key = old; now new'."""
    from verified_book.records.results import to_json

    out = []
    for entry in entries or []:
        if isinstance(entry, SnippetInput):
            change = changed_snippet(entry)
            out += [change] if change else []
            continue
        if not isinstance(entry, DataInput):
            continue
        try:
            now = to_json(inputs.current(entry.file, entry.key))
        except inputs.InputError as e:
            out.append(f"computed from {entry.key} = {entry.value!r} ({entry.file}); now {e}")
            continue
        if now != entry.value and entry.whole:
            out.append(
                f"{entry.whole} reads all of {Path(entry.file).name}; {entry.key} changed "
                f"({entry.value!r}, now {now!r}: {inputs.SHOWN_AS}/{entry.file})"
            )
        elif now != entry.value:
            out.append(
                f"computed from {entry.key} = {entry.value!r}; the book now says {now!r} "
                f"({inputs.SHOWN_AS}/{entry.file})"
            )
    return out


#: the verdicts `outdated_reason` gave within `judged_once`, by the objects it was handed
Verdicts = dict[tuple[int, int, int], tuple[Any, Any, Any, str | None]]
_VERDICTS: contextvars.ContextVar[Verdicts | None] = contextvars.ContextVar("verdicts", default=None)


@contextlib.contextmanager
def judged_once(verdicts: Verdicts) -> Iterator[None]:
    """Within, each (claim, record) is judged once and its verdict kept in `verdicts`.

    A site build asks about the same record at every figure of its claim and again on the
    machines page, while neither the book nor the results change: the caller keeps
    `verdicts` for one build and starts the next with an empty one.
    """
    token = _VERDICTS.set(verdicts)
    try:
        yield
    finally:
        _VERDICTS.reset(token)


def outdated_reason(claim: Claim | None, meta: ClaimMeta | None, record: Record) -> str | None:
    """Why a record no longer speaks for the book as it is now; None while it still does."""
    verdicts = _VERDICTS.get()
    if verdicts is None:
        return _outdated_reason(claim, meta, record)
    key = (id(claim), id(meta), id(record))
    if key not in verdicts:  # the objects are kept with the verdict, so no id is reused while it stands
        verdicts[key] = (claim, meta, record, _outdated_reason(claim, meta, record))
    return verdicts[key][3]


def _outdated_reason(claim: Claim | None, meta: ClaimMeta | None, record: Record) -> str | None:
    if claim is None:
        return None
    recorded = meta.code if meta is not None else None
    if recorded is None:
        return "recorded before records carried their provenance; run the suite on that machine again"
    if recorded != code_fingerprint(claim):
        return f"the claim's code changed since this record was made ({claim.defined_at})"
    changes = changed_inputs(record.inputs)
    return "; ".join(changes) if changes else None


def commit_of(root: Path, own: tuple[Path, ...] = ()) -> tuple[str | None, bool | None]:
    """The checkout's commit and whether its tree has changes other than in `own` (the results
    folders a run writes to, whose changes are its output, not its input); (None, None) outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None, None
        outside = [
            f":(exclude){Path(p).resolve().relative_to(root.resolve())}"
            for p in own
            if Path(p).resolve().is_relative_to(root.resolve())
        ]
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *outside],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return head.stdout.strip(), bool(status.stdout.strip()) if status.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None, None
