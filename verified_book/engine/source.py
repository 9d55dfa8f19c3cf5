"""Where a function's or class's source lies in its file, read from one parse of the file.

The code fingerprint (`verified_book.engine.provenance`) reads the source of every definition a book's
claims reach, hundreds of them, and the lines that give a module-level name its value; inspect would
tokenise a file anew for each. Here each file is parsed once, cached by its modification time and size.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import os
from typing import Any, NamedTuple


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
    lines, by_line, by_name, _, _ = definitions(file, stat.st_mtime_ns, stat.st_size)
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


class Definitions(NamedTuple):
    """What one source file defines at its top level and where, as the fingerprint reads it."""

    lines: list[str]
    by_line: dict[int, tuple[int, int]]  # a function's lines (first, last), by the line its code starts on
    by_name: dict[str, tuple[int, int]]  # a class's lines, by its qualified name
    assigned: dict[str, list[tuple[int, int, frozenset[str]]]]  # a module-level name's assignments: lines, names used
    imported: dict[str, tuple[str, str, int]]  # a name `from M import a as name` binds: (M, a, level of dots)


@functools.lru_cache(maxsize=256)
def definitions(file: str, mtime_ns: int, size: int) -> Definitions:
    """A source file's lines; the lines (first, last) of every function and class it defines, by the line a
    function's code starts on (its first decorator) and by a class's qualified name; each top-level
    assignment to a name and each name a `from ... import` binds. Cached by the file's modification time
    and size, so a file rewritten in place is read again."""
    linecache.checkcache(file)
    lines = linecache.getlines(file)
    found = Definitions(lines, {}, {}, {}, {})
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return found

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.end_lineno:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                span = (first, _block_end(lines, node.end_lineno, node.body[0].col_offset))
                if isinstance(node, ast.ClassDef):
                    found.by_name[prefix + node.name] = span
                else:
                    found.by_line[first] = span
                inner = (
                    f"{prefix}{node.name}.<locals>." if not isinstance(node, ast.ClassDef) else f"{prefix}{node.name}."
                )
                visit(node.body, inner)

    visit(tree.body, "")
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.end_lineno:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            used = frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        found.assigned.setdefault(name.id, []).append((node.lineno, node.end_lineno, used))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                found.imported[alias.asname or alias.name] = (node.module or "", alias.name, node.level)
    return found


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
