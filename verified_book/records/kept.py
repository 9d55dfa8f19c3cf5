"""Objects kept between runs in a cache folder, each under a key its caller makes of everything it
depends on: taken back while the key holds, written whole or not at all, the oldest let go.

A kept object is only ever a copy of what the caller would compute again; a file that cannot be
read back, or a folder that cannot be written, costs that computation and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import pickle
from pathlib import Path
from typing import Any

KEEP_AT_MOST = 200  # files a folder keeps; the oldest used go first


def taken(path: Path) -> Any | None:
    """What `keep` wrote at `path`, or None where there is none it can read back."""
    try:
        found = pickle.loads(path.read_bytes())
        os.utime(path)  # in use: the last to be let go
    except Exception:  # noqa: BLE001 - whatever a missing or damaged file raises, the caller computes the value
        return None
    return found


def keep(path: Path, value: Any, at_most: int = KEEP_AT_MOST) -> None:
    """Write `value` at `path` (beside it, then renamed over it), and let go of the folder's oldest files past
    `at_most`."""
    with contextlib.suppress(OSError, pickle.PicklingError):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        partial.write_bytes(pickle.dumps(value))
        os.replace(partial, path)
        files = sorted(path.parent.glob(f"*{path.suffix}"), key=lambda p: p.stat().st_mtime)
        for old in files[:-at_most]:
            old.unlink(missing_ok=True)
