"""The walk over a results document before its types are checked: every key a string of the record's form, every
number finite and of a plausible size, every nesting within bounds, so a hostile or broken file is refused with
the key path of each problem rather than crashing or exhausting the reader."""

from __future__ import annotations

import math
from typing import Any

from verified_book.records import record
from verified_book.records.errors import show as _show
from verified_book.records.record import MAX_KEY_CHARS, MAX_STRING_CHARS
from verified_book.records.values import MAX_INT_BITS

MAX_DEPTH = 32
MAX_STRING_CHARS_BY_KEY = {"message": record.MAX_MESSAGE_CHARS, "text": record.MAX_TEXT_CHARS}


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and _finite(value)


def _key_problem(key: Any) -> str | None:
    """What is wrong with a mapping key of a results file, or None."""
    if not isinstance(key, str):
        return f"key {_show(key)} is not a string"
    if len(key) > MAX_KEY_CHARS:
        return f"a key of {len(key)} characters (at most {MAX_KEY_CHARS})"
    return None


def _leaf_problem(node: Any, key: str) -> str | None:
    """What is wrong with a value that holds no others (held under `key`), or None."""
    if isinstance(node, str):
        limit = MAX_STRING_CHARS_BY_KEY.get(key, MAX_STRING_CHARS)
        if len(node) > limit:
            return f"a string of {len(node)} characters (at most {limit})"
    elif isinstance(node, float):
        if not math.isfinite(node):
            return f"{node!r} is not a finite number"
    elif _is_int(node):
        if node.bit_length() > MAX_INT_BITS:
            return f"an integer of {node.bit_length()} bits (at most {MAX_INT_BITS})"
    elif node is not None and not isinstance(node, bool):
        return f"a {type(node).__name__}, which JSON does not hold"
    return None


def walk(node: Any, where: str, problems: list[str], places: list[tuple[str | int, ...]] | None = None) -> None:
    """Checks every part of a parsed file must pass: depth, key types, string sizes, finite numbers.

    A problem names its place (`where['records']['a.b'][0]`); the place is spelled out only for a
    problem, as a sound file has a hundred thousand parts. Given `places`, each problem's place is added to it
    as a key path, for `salvage` to set that part aside."""
    path: list[str | int] = []

    def at(key: Any = None) -> str:
        if places is not None:
            places.append((*path, *([] if key is None else [str(key)])))
        return where + "".join(f"[{k!r}]" for k in path)

    def visit(node: Any, depth: int, key: str) -> None:
        if len(problems) > 50 and places is None:
            return
        if depth > MAX_DEPTH:
            problems.append(f"{at()}: nested deeper than {MAX_DEPTH} levels")
            return
        if isinstance(node, dict):
            for k, v in node.items():
                wrong = _key_problem(k)
                if wrong:
                    problems.append(f"{at(k)}: {wrong}")
                    continue
                path.append(k)
                visit(v, depth + 1, k)
                path.pop()
        elif isinstance(node, list):
            for i, v in enumerate(node):
                path.append(i)
                visit(v, depth + 1, key)
                path.pop()
        else:
            wrong = _leaf_problem(node, key)
            if wrong:
                problems.append(f"{at()}: {wrong}")

    visit(node, 1, "")
