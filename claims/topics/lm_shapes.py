"""Shapes through a language-model operation: token ids, an embedding lookup, a projection.

A batch of two sequences of five token ids is [2, 5]; looking up vectors of width four
gives [2, 5, 4]; a projection from width four to three gives [2, 5, 3]. Each backend
runs the lookup and the projection for real, and the projection must act on each
position alone: changing one position's vector changes only that position's output.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from verified_book.backends import Backend
from verified_book.inputs import given
from verified_book.registry import InvariantFailed, claim

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
    if backend.library == "torch":
        import torch

        dev = backend.device
        embed = torch.nn.Embedding.from_pretrained(torch.from_numpy(table)).to(dev)
        project = torch.nn.Linear(width, outputs, bias=False).to(dev)
        with torch.no_grad():
            project.weight.copy_(torch.from_numpy(weight))
            tokens = torch.from_numpy(ids).to(dev)
            vectors = embed(tokens)
            out = project(vectors)
            nudged = vectors.clone()
            nudged[0, 0] += 1.0
            out2 = project(nudged)
        to_np = lambda t: t.cpu().numpy()  # noqa: E731
    elif backend.library == "mlx":
        import mlx.core as mx

        with mx.stream(mx.cpu if backend.device == "cpu" else mx.gpu):
            tokens = mx.array(ids)
            vectors = mx.array(table)[tokens]
            out = vectors @ mx.array(weight).T
            bump = mx.zeros(vectors.shape).at[0, 0].add(1.0)
            out2 = (vectors + bump) @ mx.array(weight).T
            to_np = np.array
    else:
        tokens = ids
        vectors = table[tokens]
        out = vectors @ weight.T
        nudged = vectors.copy()
        nudged[0, 0] += 1.0
        out2 = nudged @ weight.T
        to_np = np.asarray
    changed = np.abs(to_np(out2) - to_np(out)).max(axis=-1) > 0
    if changed.sum() != 1 or not changed[0, 0]:
        raise InvariantFailed(f"{backend.name}: changing position (0, 0)'s vector changed the outputs at "
                              f"{np.argwhere(changed).tolist()}; a projection acts on each position alone")
    return {"tokens": tuple(tokens.shape), "embedded": tuple(vectors.shape), "projected": tuple(out.shape)}


@claim("lm_shapes.{what}", kind="library", over={"what": ("tokens", "embedded", "projected")})
def shape(backend: Backend, what: str) -> tuple[int, ...]:
    """The shape after each step: token ids, their embedding vectors, the projection of each."""
    return _run(backend)[what]
