"""Shapes and bytes as the array libraries report them, and the error a shape mismatch raises.

The example is the book's: a batch of token vectors x, (batch, hidden_size), and one MLP
weight as x @ w needs it, (hidden_size, intermediate_size), both FP32. The sizes come from
Qwen3-8B's config.json; the batch of 32 is the example's own choice. Each library must
report the shape the config gives and bytes equal to elements times four, and must refuse
w @ x with a message that names both disagreeing sizes.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from claims.ops import ops
from claims.topics.formats import FORMATS
from verified_book import Backend, InvariantFailed, NotOnBackend, claim, model_config, names_of

BATCH = 32
LIBRARIES = (*names_of("numpy"), *names_of("torch"))  # the libraries the book's snippet is written for


def example_shapes() -> dict[str, tuple[int, int]]:
    """x is (batch, inputs); w is (inputs, outputs), the transpose of the stored gate_proj."""
    config = model_config("qwen3-8b")
    hidden, intermediate = config["hidden_size"], config["intermediate_size"]
    return {"x": (BATCH, hidden), "w": (hidden, intermediate)}


def zeros(backend: Backend, shape: tuple[int, ...]) -> Any:
    """An FP32 array of zeros on this backend, as the snippet makes them."""
    if backend.name not in LIBRARIES:
        raise NotOnBackend(f"the shapes example is written for numpy and torch, not {backend.name}")
    return _zeros(backend, shape)


# The claims only read an array's shape and sizes, and torch writes every zero of w's 200 MB: the
# claims next to each other in a run (same array, the other library) share it instead.
@functools.lru_cache(maxsize=2)
def _zeros(backend: Backend, shape: tuple[int, ...]) -> Any:
    return backend.adapter.zeros(shape, backend.adapter.dtype("float32"))


def report(backend: Backend, array: Any) -> dict[str, Any]:
    """What the library says about an array: shape, ndim, elements, bytes."""
    elements = backend.adapter.numel(array)
    return {
        "shape": tuple(array.shape),
        "ndim": array.ndim,
        "elements": elements,
        "bytes": elements * backend.adapter.itemsize(array),
    }


@claim(
    "shapes.{name}.{field}",
    kind="library",
    backends=LIBRARIES,
    over={"name": ("x", "w"), "field": ("shape", "ndim", "elements", "bytes")},
)
def array_field(backend: Backend, name: str, field: str) -> Any:
    """A library's shape, ndim, element count or byte count for the example's x or w."""
    shape = example_shapes()[name]
    found = report(backend, zeros(backend, shape))
    elements = shape[0] * shape[1]
    expected = {
        "shape": shape,
        "ndim": len(shape),
        "elements": elements,
        "bytes": elements * FORMATS["fp32"].storage_bits // 8,
    }
    if found[field] != expected[field]:
        raise InvariantFailed(
            f"{backend.name} reports {field} = {found[field]} for {name} of shape {shape}; expected {expected[field]}"
        )
    return found[field]


@claim("shapes.{name}.inner", kind="library", backends=LIBRARIES, over={"name": ("x", "w")})
def inner_size(backend: Backend, name: str) -> int:
    """The size x @ w contracts over: x's last dimension, w's first."""
    array = zeros(backend, example_shapes()[name])
    return int(array.shape[-1] if name == "x" else array.shape[0])


@claim("shapes.xw.shape", kind="library", backends=LIBRARIES)
def product_shape(backend: Backend) -> tuple[int, ...]:
    """The shape of x @ w: x's rows by w's columns."""
    shapes = example_shapes()
    x, w = zeros(backend, shapes["x"]), zeros(backend, shapes["w"])
    found = tuple((x @ w).shape)
    expected = (shapes["x"][0], shapes["w"][1])
    if found != expected:
        raise InvariantFailed(f"{backend.name} gives x @ w the shape {found}; expected {expected}")
    return found


def mismatch_message(backend: Backend) -> str:
    """The message of the error w @ x raises; an invariant failure if it raises none."""
    shapes = example_shapes()
    x, w = zeros(backend, shapes["x"]), zeros(backend, shapes["w"])
    errors = ops(backend).shape_errors
    try:
        w @ x
    except errors as e:
        return str(e)
    raise InvariantFailed(f"{backend.name} multiplied w {shapes['w']} by x {shapes['x']} without an error")


def _names(message: str, size: int) -> bool:
    return re.search(rf"(?<!\d){size}(?!\d)", message) is not None


@claim("shapes.mismatch.{which}", kind="library", backends=LIBRARIES, over={"which": ("batch", "outputs")})
def mismatch_names(backend: Backend, which: str) -> int:
    """A size the w @ x error names: x's batch of 32 and w's 12288 outputs must both appear."""
    shapes = example_shapes()
    message = mismatch_message(backend)
    wanted = {"batch": shapes["x"][0], "outputs": shapes["w"][1]}
    missing = [f"{k} {v}" for k, v in wanted.items() if not _names(message, v)]
    if missing:
        raise InvariantFailed(f"{backend.name}'s shape error does not name {', '.join(missing)}: {message!r}")
    return wanted[which]


@claim("shapes.mismatch.numpy_{part}", kind="library", backends=("numpy",), over={"part": ("operand", "dimension")})
def numpy_mismatch_place(backend: Backend, part: str) -> int:
    """Where numpy's matmul says the mismatch is: the operand index and its core dimension.

    The operand must be 1 (x, the second) and the dimension 0 (its rows, the 32 that
    should have been 12288).
    """
    message = mismatch_message(backend)
    pattern = {"operand": r"operand (\d+)", "dimension": r"core dimension (\d+)"}[part]
    found = re.search(pattern, message)
    if found is None:
        raise InvariantFailed(f"numpy's shape error no longer names the {part}: {message!r}")
    value = int(found.group(1))
    if value != {"operand": 1, "dimension": 0}[part]:
        raise InvariantFailed(
            f"numpy's shape error names {part} {value}; x is operand 1 and its rows dimension 0: {message!r}"
        )
    return value
