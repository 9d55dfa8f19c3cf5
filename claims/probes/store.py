"""One measurement per backend per quantity in a run: the claims built on a probe reuse it.

A probe is slow and noisy; measuring it again for every claim that needs it would cost
time and give claims that disagree with each other. So each (backend, quantity) is
measured once per process and kept here; a failure to measure (a `NotOnBackend`, say) is
kept too, so every claim that needs it skips with the same reason.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Hashable, TypeVar

T = TypeVar("T")

_values: dict[Hashable, Any] = {}
_errors: dict[Hashable, BaseException] = {}
_lock = threading.RLock()


def once(key: Hashable, measure: Callable[[], T]) -> T:
    """The value of `measure()` for `key`, measured on first use and reused after."""
    with _lock:
        if key in _values:
            return _values[key]
        if key in _errors:
            raise _errors[key]
        try:
            value = measure()
        except Exception as e:
            _errors[key] = e
            raise
        _values[key] = value
        return value


def peek(key: Hashable) -> Any | None:
    """The value kept for `key`, or None when it has not been measured (never measures)."""
    with _lock:
        return _values.get(key)


def clear() -> None:
    """Forget every measurement (tests use this)."""
    with _lock:
        _values.clear()
        _errors.clear()
