"""Objects kept between runs in a cache folder, each under a key its caller makes of everything it
depends on: taken back while the key holds, written whole or not at all, the oldest let go.

A kept object is only ever a copy of what the caller would compute again; a file that cannot be
read back, or a folder that cannot be written, costs that computation and nothing else.

A key names the code that computed the value by its source (`code_of`). A source file changed
after this process started may no longer be the code running in it (a live preview imported the
module before the edit): then there is no key, and nothing is kept or taken back.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import os
import pickle
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Collection, Iterable

KEEP_AT_MOST = 200  # files a folder keeps; the oldest used go first
#: about when this process loaded its modules (the engine's first ones import this one)
_LOADED_AT = time.time()


def named(folder: Path, digest: str) -> Path:
    """Where the value kept under `digest` (a hash, in hex, of everything the value depends on) lies in `folder`."""
    return folder / f"{digest[:32]}.pickle"


def taken(path: Path) -> Any | None:
    """What `keep` wrote at `path`, or None where there is none it can read back."""
    try:
        found = pickle.loads(path.read_bytes())
        os.utime(path)  # in use: the last to be let go
    except Exception:  # noqa: BLE001 - whatever a missing or damaged file raises, the caller computes the value
        return None
    return found


def keep(path: Path, value: Any, at_most: int | None = KEEP_AT_MOST) -> None:
    """Write `value` at `path` (beside it, then renamed over it), and let go of the folder's oldest files past
    `at_most` (None: its caller lets go of them, once for many values)."""
    with contextlib.suppress(OSError, pickle.PicklingError):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        partial.write_bytes(pickle.dumps(value))
        os.replace(partial, path)
        if at_most is not None:
            let_go_oldest(path.parent, at_most, path.suffix)


def let_go_oldest(folder: Path, at_most: int, suffix: str | None = None) -> None:
    """Let go of the oldest used entries of `folder` past `at_most`: its files ending in `suffix`, or, without
    one, every entry, a folder with all it holds."""
    with contextlib.suppress(OSError):
        entries = [p for p in folder.iterdir() if suffix is None or (p.name.endswith(suffix) and p.is_file())]
        for old in sorted(entries, key=lambda p: p.stat().st_mtime)[:-at_most]:
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)


def code_of(names: Iterable[str], homes: Collection[str]) -> str | None:
    """The source of each module named, and of each module of a package in `homes` that one of them imports
    (anywhere in it, `import` or `from ... import`): the code a kept value was computed by, for its key. None
    where a source cannot be read, or changed since this process started (then nothing should be kept)."""
    sources: dict[str, str] = {}
    for name in names:
        source = _source(name)
        if source is None:
            return None
        sources[name] = source
        for imported in _imports(source):
            if imported.partition(".")[0] in homes and imported not in sources:
                found = _source(imported)
                if found is None:
                    return None
                sources[imported] = found
    return "\n".join(f"{name}\n{sources[name]}" for name in sorted(sources))


def newer_than_this_process(path: Path) -> bool:
    """Whether the file at `path` changed after this process loaded its modules: what it holds may not be the
    code running here (a module imported before the save)."""
    return os.stat(path).st_mtime > _LOADED_AT


def _source(name: str) -> str | None:
    """A loaded module's source, where its file has not changed since this process started."""
    try:
        module = sys.modules[name]
        if newer_than_this_process(Path(inspect.getfile(module))):
            return None
        return inspect.getsource(module)
    except (KeyError, OSError, TypeError):
        return None


def _imports(source: str) -> set[str]:
    """The modules a source imports, and for `from package import name` the submodule `package.name` where
    that is one."""
    found: set[str] = set()
    for module, names in _import_statements(source):
        found.add(module)
        found.update(f"{module}.{name}" for name in names if f"{module}.{name}" in sys.modules)
    return found


@functools.lru_cache(maxsize=256)  # several keys name the same modules: each source is parsed once
def _import_statements(source: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each absolute import of a source: the module, and the names a `from` import takes from it."""
    found: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.module, tuple(a.name for a in node.names)))
    return tuple(found)
