"""A library a topic computes with, imported when a claim first uses it.

Loading the book imports every topic module, so that each claim is declared. A module-level
`import sympy` would make every run pay for sympy, a page of finfo figures as much as the chapter
that needs it; `sympy = lazy_import("sympy")` makes the name, and loads the library the first
time an attribute of it is read (the standard library's `importlib.util.LazyLoader`).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_import(name: str) -> ModuleType:
    """The module `name`, its code run at the first attribute read; the loaded module where it is loaded already."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
