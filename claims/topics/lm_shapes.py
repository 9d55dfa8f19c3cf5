"""Shapes through a language-model operation: token ids, an embedding lookup, a projection.

A batch of two sequences of five token ids is [2, 5]; looking up vectors of width four
gives [2, 5, 4]; a projection from width four to three gives [2, 5, 3]. Each backend
runs the lookup and the projection for real, and the projection must act on each
position alone: changing one position's vector changes only that position's output.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from verified_book import Backend, InvariantFailed, claim, given, lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_import("numpy")  # loaded by the first claim that computes with it

SIZES = ("batch", "positions", "vocab", "width", "outputs")


def size(name: str) -> int:
    """One of the example's chosen sizes, a given input (claims/data/given.toml)."""
    return int(given(f"lm_shapes.{name}"))


@claim("lm_shapes.size.{name}", kind="given", over={"name": ("batch", "positions", "width", "outputs")})
def example_size(name: str) -> int:
    """The example's batch, positions per sequence, embedding width and projected width."""
    return size(name)


def _run(backend: Backend) -> dict[str, Any]:
    """The run for the example's sizes as they are now read (so a changed input is a new run)."""
    return _run_sized(backend, *(size(name) for name in SIZES))


@functools.cache
def _run_sized(backend: Backend, batch: int, positions: int, vocab: int, width: int, outputs: int) -> dict[str, Any]:
    """Token ids, embedded vectors and projected vectors on the backend, with a perturbed copy."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, vocab, size=(batch, positions))
    table = rng.standard_normal((vocab, width), dtype=np.float32)
    weight = rng.standard_normal((outputs, width), dtype=np.float32)  # stored (outputs, inputs)
    bump = np.zeros((batch, positions, width), dtype=np.float32)
    bump[0, 0] += 1.0  # one position's vector changed
    adapter = backend.adapter
    with adapter.on_device():
        tokens = adapter.from_numpy(ids)
        vectors = adapter.from_numpy(table)[tokens]  # the embedding lookup: one row of the table per id
        project = adapter.from_numpy(weight).T
        out = vectors @ project
        out2 = (vectors + adapter.from_numpy(bump)) @ project
        changed = np.abs(adapter.to_numpy(out2) - adapter.to_numpy(out)).max(axis=-1) > 0
    if changed.sum() != 1 or not changed[0, 0]:
        raise InvariantFailed(
            f"{backend.name}: changing position (0, 0)'s vector changed the outputs at "
            f"{np.argwhere(changed).tolist()}; a projection acts on each position alone"
        )
    return {"tokens": tuple(tokens.shape), "embedded": tuple(vectors.shape), "projected": tuple(out.shape)}


@claim("lm_shapes.{what}", kind="library", over={"what": ("tokens", "embedded", "projected")})
def shape(backend: Backend, what: str) -> tuple[int, ...]:
    """The shape after each step: token ids, their embedding vectors, the projection of each."""
    return _run(backend)[what]
