"""A chart drawn once for the records it shows: kept between builds, drawn again when anything it is
drawn from changes.

Drawing is the slowest step of a site build (a third of a second a chart with matplotlib), and
each machine adds charts of its own, while a committed machine's records change only when it
contributes again. A book's plots function hands each chart's drawing to `remembered`, which
keeps what it returned under a key made of:

- the drawing function's module and name, that module's source, and the source of each module of
  the book or the engine it imports from (`_code_of`);
- matplotlib's version;
- every argument: a machine's results as the whole of its file's content, any other value as
  its canonical JSON (or its repr).

So a record, a date, the drawing code or the library moving draws the chart again; a kept
chart is exactly what the same call would return. Outside `kept_in` (a caller that names no
folder), or where the drawing's source cannot be read, nothing is kept and every chart is drawn.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import importlib.metadata
import json
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, TypeVar, cast

from verified_book.records import kept
from verified_book.records.results import ResultsFile

T = TypeVar("T")

#: where a book keeps its charts, relative to its root (beside `verified-book pages`' own cache)
FOLDER = Path(".cache") / "verified-book" / "plots"
KEEP_AT_MOST = 200  # charts kept; the oldest go first

_FOLDER: contextvars.ContextVar[Path | None] = contextvars.ContextVar("plot_cache", default=None)
_DIGESTS: dict[int, tuple[ResultsFile, str]] = {}  # each results object's content digest, by identity
_CODE: dict[str, str | None] = {}  # each drawing module's code (`_code_of`)


@contextlib.contextmanager
def kept_in(folder: Path) -> Iterator[None]:
    """Within, `remembered` keeps each chart in `folder` and takes it from there while its key holds."""
    token = _FOLDER.set(folder)
    try:
        yield
    finally:
        _FOLDER.reset(token)
        _DIGESTS.clear()
        _CODE.clear()


def remembered(draw: Callable[..., T], *args: Any) -> T:
    """`draw(*args)`, or what the same call returned before (see the module's docstring)."""
    folder = _FOLDER.get()
    code = _code_of(draw.__module__) if folder is not None else None
    if folder is None or code is None:
        return draw(*args)
    path = kept.named(folder, key(draw, args, code))
    found = kept.taken(path)
    if found is not None:
        return cast(T, found)  # kept under the key of this very call of `draw`
    drawn = draw(*args)
    kept.keep(path, drawn, KEEP_AT_MOST)
    return drawn


def key(draw: Callable[..., Any], args: tuple[Any, ...], code: str) -> str:
    """The chart's key: its drawing code, matplotlib's version and its arguments (see the module's docstring)."""
    h = hashlib.sha256()
    for part in (draw.__module__, draw.__qualname__, code, _matplotlib(), *(_digest(a) for a in args)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _code_of(name: str) -> str | None:
    """The source of module `name` and of the modules of its own package or of the engine it imports
    (`kept.code_of`), read once within `kept_in`: a live preview's modules change between its builds."""
    if name not in _CODE:
        _CODE[name] = kept.code_of([name], {name.partition(".")[0], "verified_book"})
    return _CODE[name]


def _matplotlib() -> str:
    try:
        return importlib.metadata.version("matplotlib")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _digest(value: Any) -> str:
    if isinstance(value, ResultsFile):
        known = _DIGESTS.get(id(value))
        if known is None or known[0] is not value:
            text = value.to_document().model_dump_json()
            known = _DIGESTS[id(value)] = (value, hashlib.sha256(text.encode()).hexdigest())
        return known[1]
    if isinstance(value, Mapping):
        return json.dumps({str(k): _digest(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))})
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)
