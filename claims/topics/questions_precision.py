"""The figures of the precision chapter's questions 2, 3 and 6, each computed, none stored.

Question 2: a BF16 weight of 0.5 does not move under an update of 1e-4, because BF16's
step near 0.5 is 2^-8. Question 3: with a weight stored as (outputs, inputs), a transpose
gives the right product and a reshape to the same shape gives wrong numbers without an
error. Question 6: why small formats carry a scale, in the figures of the rounding table.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from claims.ops import has, ops
from claims.topics import rounding
from claims.topics.casts import spacing_at
from claims.topics.formats import FORMATS, dtype_of, finfo_field
from claims.topics.models import MODEL, matrix_shapes
from verified_book import Backend, InvariantFailed, NotOnBackend, claim, lazy_import, model_config

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_import("numpy")  # loaded by the first claim that computes with it

WEIGHT, LEARNING_RATE, GRADIENT = 0.5, 1e-4, 1.0
BATCH = 32  # token vectors in Question 3's x
SHRINK = 16  # Question 3's numerical check runs at a sixteenth of each weight dimension


def _bf16_next_above(backend: Backend, value: float) -> float:
    """The BF16 value one code above `value`, found by incrementing its bit pattern on the backend."""
    adapter = backend.adapter
    dtype = dtype_of(backend, FORMATS["bf16"])
    with adapter.on_device():
        bits = adapter.bitcast(backend.tensor([value], dtype), "int16")
        one = backend.tensor([1], adapter.dtype("int16"))
        above = adapter.bitcast(bits + one, FORMATS["bf16"].dtype or "bfloat16")
        return float(adapter.astype(above, adapter.dtype("float32")).item())


@claim("questions.q2.step_near_half", kind="library")
def q2_step(backend: Backend) -> float:
    """BF16's step at 0.5: the next BF16 value above 0.5, less 0.5; 2^-8."""
    step = _bf16_next_above(backend, WEIGHT) - WEIGHT
    want = spacing_at(WEIGHT, FORMATS["bf16"])
    if Fraction(step) != want:
        raise InvariantFailed(
            f"{backend.name}: BF16's next value above {WEIGHT} is {WEIGHT + step!r}, a step of {step!r}; "
            f"7 mantissa bits in the binade [0.5, 1) give {want} = {float(want)!r}"
        )
    return step


@claim("questions.q2.updated_weight", kind="library")
def q2_updated(backend: Backend) -> float:
    """A BF16 weight of 0.5 after `w -= 1e-4 * grad` with a gradient of 1: still 0.5."""
    adapter = backend.adapter
    dtype, float32 = dtype_of(backend, FORMATS["bf16"]), adapter.dtype("float32")
    with adapter.on_device():
        w = backend.tensor([WEIGHT], dtype)
        w = adapter.astype(
            w - backend.tensor([GRADIENT], float32) * LEARNING_RATE, dtype
        )  # stored back in the weight's format
        out = float(adapter.astype(w, float32).item())
    half_step = float(spacing_at(WEIGHT, FORMATS["bf16"])) / 2
    if LEARNING_RATE * GRADIENT < half_step and out != WEIGHT:
        raise InvariantFailed(
            f"{backend.name}: an update of {LEARNING_RATE * GRADIENT:g}, below half BF16's step at "
            f"{WEIGHT} ({half_step:g}), moved the weight to {out!r}"
        )
    return out


# --- Question 3: transpose against reshape -----------------------------------------------------


def _q3_shapes() -> tuple[tuple[int, int], tuple[int, int]]:
    """x as (batch, hidden) and gate_proj's weight as stored, (intermediate, hidden), from config.json."""
    weight = matrix_shapes(model_config(MODEL))["gate_proj"]
    return (BATCH, weight[1]), weight


@functools.cache
def _q3_shapes_on(backend: Backend, x_shape: tuple[int, int], w_shape: tuple[int, int]) -> dict[str, tuple[int, ...]]:
    """The shapes the backend gives each candidate fix, without computing a product where it can avoid it.

    Keyed by the shapes, which each claim reads from config.json first, so the read is
    recorded every time and a changed config is never answered from the cache.
    """
    (b, h), (o, i) = x_shape, w_shape
    adapter = backend.adapter
    with adapter.on_device():
        x, w = ops(backend).placeholder((b, h)), ops(backend).placeholder((o, i))  # no data where the library allows it
        transposed, reshaped = w.T, w.reshape(i, o)
        try:
            x @ w
        except ops(backend).shape_errors:
            pass
        else:
            raise InvariantFailed(
                f"{backend.name}: x {x.shape} @ w {w.shape} ran; the inner sizes differ and it must raise"
            )
        return {
            "x": tuple(x.shape),
            "w": tuple(w.shape),
            "transpose": tuple((x @ transposed).shape),
            "reshape": tuple((x @ reshaped).shape),
        }


@claim("questions.q3.{what}_shape", kind="library", over={"what": ("x", "w", "transpose", "reshape")})
def q3_shape(backend: Backend, what: str) -> tuple[int, ...]:
    """The shapes of Question 3: x, the stored weight, and the products after a transpose and after a reshape."""
    shapes = _q3_shapes_on(backend, *_q3_shapes())
    if shapes["transpose"] != shapes["reshape"]:
        raise InvariantFailed(
            f"{backend.name}: the transposed product has shape {shapes['transpose']} and the reshaped "
            f"one {shapes['reshape']}; the question rests on their shapes agreeing"
        )
    return shapes[what]


@functools.cache
def _q3_products(backend: Backend, x_shape: tuple[int, int], w_shape: tuple[int, int]) -> dict[str, np.ndarray]:
    """x @ w.T, the library's linear layer or (w @ x.T).T, and x @ w.reshape, on random data at reduced size."""
    (b, h), (o, _) = x_shape, w_shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, h // SHRINK), dtype=np.float32)
    w = rng.standard_normal((o // SHRINK, h // SHRINK), dtype=np.float32)
    adapter = backend.adapter
    with adapter.on_device():
        X, W = adapter.from_numpy(x), adapter.from_numpy(w)
        out = {"transpose": X @ W.T, "swapped": (W @ X.T).T, "reshape": X @ W.reshape(W.shape[1], W.shape[0])}
        if has(backend, "linear"):
            out["linear"] = ops(backend).linear(X, W)
        return {k: adapter.to_numpy(v) for k, v in out.items()}


@claim("questions.q3.reshape_changed", kind="library")
def q3_reshape_changed(backend: Backend) -> float:
    """The share of the product's entries a reshape changes, where a transpose and the linear layer agree."""
    products = _q3_products(backend, *_q3_shapes())
    right = products["transpose"]
    tolerance = 1e-4 * float(np.abs(right).max())
    for name in ("linear", "swapped"):
        if name in products and float(np.abs(products[name] - right).max()) > tolerance:
            raise InvariantFailed(
                f"{backend.name}: {name} differs from x @ w.T by "
                f"{float(np.abs(products[name] - right).max()):.3g}; they compute the same product"
            )
    return float((np.abs(products["reshape"] - right) > tolerance).mean())


# --- Question 6: why small formats carry a scale ----------------------------------------------


@claim("questions.q6.weight_size", kind="exact")
def q6_weight_size() -> Fraction:
    """The typical size of a weight: the model's initializer_range, the standard deviation it is drawn with."""
    return Fraction(str(model_config(MODEL)["initializer_range"]))


@claim("questions.q6.{fmt}_exponent_bits", kind="exact", over={"fmt": [FORMATS["bf16"], FORMATS["e4m3"]]})
def q6_exponent_bits(fmt: Any) -> int:
    """Exponent bits: BF16 keeps FP32's eight, E4M3 has four."""
    if fmt.id == "bf16" and fmt.exponent != FORMATS["fp32"].exponent:
        raise InvariantFailed(
            f"BF16 has {fmt.exponent} exponent bits and FP32 {FORMATS['fp32'].exponent}; BF16 is FP32's top half"
        )
    return fmt.exponent


@claim("questions.q6.e4m3_smallest_normal", kind="library")
def q6_smallest_normal(backend: Backend) -> float:
    """E4M3's smallest normal as the backend reports it, which sits below a typical weight of 0.02."""
    e4m3 = FORMATS["e4m3"]
    try:
        value = finfo_field(backend, e4m3, "smallest_normal")
    except NotOnBackend:
        # no float8 dtype and so no finfo (MLX): decode code 0x08, exponent field 1 and mantissa 0
        value = ops(backend).from_bits([0x08], e4m3.dtype or e4m3.id, e4m3.label)[0]
        derived = float(e4m3.smallest_normal())
        if value != derived:
            raise InvariantFailed(
                f"{backend.name}: the library decodes E4M3 code 0x08 as {value!r}; the layout gives {derived!r}"
            ) from None
    if not value < float(q6_weight_size()):
        raise InvariantFailed(
            f"E4M3's smallest normal {value} is not below the typical weight {float(q6_weight_size())}"
        )
    return value


@claim(
    "questions.q6.{what}",
    kind="library",
    over={"what": ("zeroed", "error_direct", "error_scaled")},
    stated_for=rounding.ROUNDING_STATED_FOR,
)
def q6_rounding(backend: Backend, what: str) -> float:
    """Casting typical weights to E4M3: the share zeroed, the mean error direct and with a x64 scale."""
    if what == "zeroed":
        return rounding.zero_fraction(backend, "e4m3")
    return rounding.rel_error(backend, "e4m3" if what == "error_direct" else "e4m3_x64")
