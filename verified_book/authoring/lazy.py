"""A library a topic computes with, imported when a claim first uses it.

Loading the book imports every topic module, so that each claim is declared. A module-level
`import sympy` would make every run pay for sympy, a page of finfo figures as much as the chapter
that needs it; `sympy = lazy_import("sympy")` binds the name now and imports the library the first
time an attribute is read through it.

Only the topic's own name is lazy. `sys.modules` is left alone, so every other importer of the
library (torch imports sympy, transformers and JAX import numpy) gets the real module, imported the
usual way; a lazy entry there would be seen half-loaded by whichever library touched it first.
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for a module until an attribute is read through it; then imports it and keeps each attribute
    read, so that a claim's later `np.float16` is an ordinary lookup."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr: str) -> Any:
        value = getattr(importlib.import_module(self._name), attr)
        object.__setattr__(self, attr, value)
        return value

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported at its first use>"


def lazy_import(name: str) -> Any:
    """The module `name`, imported the first time an attribute is read through the name this returns."""
    return LazyModule(name)
