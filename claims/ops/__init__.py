"""This book's operations on each array library, beside the topics that use them.

The engine's adapters (`Backend.adapter`) make arrays, cast, convert and synchronise, and know no
book. What this book computes beyond that (a format's bit patterns, an Adam step's bytes, an FP4
quantiser, a timed FP8 matmul, what decides an FP32 matmul's precision) is one module per library
here, found by the backend's library name in `LIBRARIES`, so a topic asks `ops(backend)` and never
which library it holds. A library's module imports its library only when an operation runs, so
importing a topic imports no array library.

As the adapters' code was, this code is not part of a claim's code fingerprint (`LIBRARIES` names
the classes by string, which the fingerprint does not follow): a change here is checked by running
the claims again, and a record names the library versions it was computed with.
"""

from __future__ import annotations

import functools
import importlib

from claims.ops.base import Ops
from verified_book import NAMES, Backend, NotOnBackend

#: each library's operations, by module and class: imported when first asked for, so a topic that asks for
#: none of one library's operations does not load them
LIBRARIES = {
    "numpy": ("claims.ops.numpy", "NumpyOps"),
    "torch": ("claims.ops.torch", "TorchOps"),
    "mlx": ("claims.ops.mlx", "MlxOps"),
    "jax": ("claims.ops.jax", "JaxOps"),
}


@functools.cache
def ops_of(library: str) -> type[Ops]:
    """The operations class of `library`; Ops itself, which has none of the features, for a library the book
    has none for."""
    if library not in LIBRARIES:
        return Ops
    module, name = LIBRARIES[library]
    found: type[Ops] = getattr(importlib.import_module(module), name)
    return found


@functools.cache
def ops(backend: Backend) -> Ops:
    """This book's operations on `backend`'s library and device."""
    return ops_of(backend.library)(backend)


def has(backend: Backend, feature: str) -> bool:
    """Whether `backend`'s library has a feature the topics ask for by name."""
    return feature in ops_of(backend.library).features


def lacks(backend: Backend, feature: str) -> str | None:
    """Why `backend`'s library lacks `feature`, in its own words; None when it has it."""
    return ops_of(backend.library).lacks(feature)


def need(backend: Backend, feature: str) -> None:
    """Raise NotOnBackend, in the library's own words, if `backend`'s library lacks `feature`."""
    why = lacks(backend, feature)
    if why is not None:
        raise NotOnBackend(why)


def supporting(feature: str) -> tuple[str, ...]:
    """The backend names whose library has `feature`, in the order of NAMES."""
    return tuple(n for n in NAMES if feature in ops_of(n.split(":")[0]).features)
