"""Judgements made once within a build: the site asks about the same record at every figure of its claim and
again on the machines page, while neither the book nor the results change."""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Callable, Hashable, Iterator, TypeVar, cast

#: the judgements made within `judged_once`: by their kind and the identities of the objects they were made
#: from, the objects (kept, so no id is reused while the judgement stands) and the judgement
Verdicts = dict[tuple[Hashable, ...], tuple[tuple[object, ...], Any]]
_VERDICTS: contextvars.ContextVar[Verdicts | None] = contextvars.ContextVar("verdicts", default=None)
T = TypeVar("T")


@contextlib.contextmanager
def judged_once(verdicts: Verdicts) -> Iterator[None]:
    """Within, each judgement of the same objects (see `once`) is made once and kept in `verdicts`.

    A site build asks about the same record at every figure of its claim and again on the
    machines page, while neither the book nor the results change: the caller keeps
    `verdicts` for one build and starts the next with an empty one.
    """
    token = _VERDICTS.set(verdicts)
    try:
        yield
    finally:
        _VERDICTS.reset(token)


def once(kind: str, objects: tuple[object, ...], judge: Callable[[], T], *values: Hashable) -> T:
    """`judge()`, made once per `kind`, objects (by identity) and `values` within `judged_once`, and each
    time outside it."""
    verdicts = _VERDICTS.get()
    if verdicts is None:
        return judge()
    key = (kind, *map(id, objects), *values)
    if key not in verdicts:
        verdicts[key] = (objects, judge())
    return cast(T, verdicts[key][1])  # stored by `judge` of this very key
