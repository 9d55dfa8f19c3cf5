"""The marks of the book's items and the one reading of a `-m` expression: the backend, kind and machine
marks of a (claim, backend), each from its one definition. pytest has no public API for parsing or evaluating
a mark expression; `expression_of` and `pair_selected` are the one place that reaches into it."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from verified_book import backends as backends_mod
from verified_book.authoring.registry import Claim
from verified_book.engine import machine as machine_mod
from verified_book.engine.session import Session
from verified_book.vocabulary import Kind

BACKEND_MARKERS = {
    "cpu": "runs on the CPU (numpy, torch:cpu, mlx:cpu, jax:cpu, or no backend at all)",
    **backends_mod.markers(),  # each registered adapter's: cuda, mps, mlx, jax
}

RUN_MARKERS = {
    "slow": "starts other processes or takes long (a snippet run as a script)",
}


def marks(run: Session, claim: Claim, backend: str) -> list[pytest.MarkDecorator]:
    """The pytest marks of one (claim, backend): its kind, its backend's, the machines it applies on."""
    return [mark_of(n) for n in sorted(run.mark_names(claim, backend))]


@functools.cache
def mark_of(name: str) -> pytest.MarkDecorator:
    """One decorator a name, shared by every item: `pytest.mark.<name>` (and `add_marker` given a name) checks the
    name and builds a decorator on each access, and a book's collection asks some fifty thousand times. A
    decorator is immutable, and every name here is one this plugin registers at configure."""
    decorator: pytest.MarkDecorator = getattr(pytest.mark, name)
    return decorator


def expression_of(text: str) -> Any:
    """A `-m` or `-k` expression as pytest parses it; raises SyntaxError where it does not parse."""
    from _pytest.mark.expression import Expression

    return Expression.compile(text)


def pair_selected(expression: Any, run: Session, claim: Claim, backend: str, item: pytest.Item | None = None) -> bool:
    """Whether `-m`'s expression selects a claim's check on one backend: the backend, kind and hardware marks
    of that (claim, backend), with a figure item's own other marks (not those of all its backends)."""
    from _pytest.mark import MarkMatcher

    family = {*BACKEND_MARKERS, *machine_mod.profiles(), *(k.value for k in Kind), "measured"}
    others = [m for m in item.iter_markers() if m.name not in family] if item is not None else []
    found = [m.mark for m in marks(run, claim, backend)] + others
    return bool(expression.evaluate(MarkMatcher.from_markers(found)))
