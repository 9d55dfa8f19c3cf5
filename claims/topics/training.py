"""Training memory and mixed precision, measured on the libraries themselves.

- Adam's state: after one real optimizer step on a small FP32 model, the bytes of the
  weights, their gradients and the optimizer's per-parameter state, over the parameter
  count. Per-tensor scalars (torch's step counter) are counted apart: they do not grow
  with the parameters.
- Autocast: under torch.autocast the matmuls compute in BF16 while the weights (and so
  their gradients) stay FP32, the primary copy.
- Loss scaling: a gradient of 2^-26 reaching an FP16 matmul's backward underflows to
  zero; multiplied by GradScaler's scale first, it survives and is divided back out
  exactly. Under BF16 it survives without any scaling.
- Gradient accumulation: micro-batch gradients of a loss scaled by 1/k, summed, equal the
  large batch's gradient.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Iterator

from claims.ops import has, need, ops, supporting
from verified_book import Backend, InvariantFailed, NotOnBackend, claim, names_of

TORCH = names_of("torch")  # autocast and GradScaler are torch's
AUTODIFF = supporting("autodiff")
OPTIMIZERS = supporting("optimizer")
WIDTHS = (32, 64, 16)  # a small MLP: 32 -> 64 -> 16


@dataclass(frozen=True)
class AdamState:
    """Bytes Adam training holds after one step, by role."""

    params: int
    tensors: int
    weights: int
    grads: int
    moments: int
    per_tensor_scalars: int

    @property
    def per_param(self) -> Fraction:
        return Fraction(self.weights + self.grads + self.moments, self.params)


def adam_state(backend: Backend) -> AdamState:
    """Adam's bytes after one step of a small FP32 MLP, with the library's own optimizer."""
    return AdamState(**ops(backend).adam_bytes(WIDTHS))


@claim("training.adam.bytes_per_param", kind="library", backends=OPTIMIZERS)
def adam_bytes_per_param(backend: Backend) -> Fraction:
    """Bytes per parameter of FP32 Adam training: weights, gradients and both moments, measured."""
    return adam_state(backend).per_param


@claim(
    "training.adam.{part}_bytes_per_param",
    kind="library",
    over={"part": ("weights", "grads", "moments")},
    backends=OPTIMIZERS,
)
def adam_part(backend: Backend, part: str) -> Fraction:
    """One role's bytes per parameter: 4 for weights, 4 for gradients, 8 for the two moments."""
    state = adam_state(backend)
    return Fraction(getattr(state, part), state.params)


@claim("training.adam.step_counter_bytes", kind="library", backends=TORCH)
def adam_step_bytes(backend: Backend) -> Fraction:
    """Bytes of torch Adam's step counter, one per parameter tensor whatever its size."""
    state = adam_state(backend)
    return Fraction(state.per_tensor_scalars, state.tensors)


@contextlib.contextmanager
def _autocast(backend: Backend, dtype_name: str) -> Iterator[None]:
    import torch

    try:
        context = torch.autocast(backend.device, dtype=getattr(torch, dtype_name))
    except RuntimeError as e:
        raise NotOnBackend(f"torch.autocast has no {dtype_name} on {backend.device}: {e}") from None
    with context:
        yield


def _autocast_linear(backend: Backend) -> tuple[Any, Any]:
    import torch

    if not has(backend, "autocast"):
        raise NotOnBackend(f"{backend.library} has no autocast: its dtypes change only when asked")
    torch.manual_seed(0)
    layer = torch.nn.Linear(WIDTHS[0], WIDTHS[1]).to(backend.device)
    with _autocast(backend, "bfloat16"):
        out = layer(torch.randn(4, WIDTHS[0], device=backend.device))
    out.float().sum().backward()
    return layer, out


@claim("training.autocast.compute_bits", kind="library")
def autocast_compute_bits(backend: Backend) -> int:
    """Bits of a Linear's output under torch.autocast(dtype=torch.bfloat16): the matmul ran in BF16."""
    return _autocast_linear(backend)[1].dtype.itemsize * 8


@claim("training.autocast.primary_bits", kind="library")
def autocast_primary_bits(backend: Backend) -> int:
    """Bits of the same Linear's weight and of its gradient: the primary copy stays FP32."""
    layer, _ = _autocast_linear(backend)
    widths = {layer.weight.dtype.itemsize * 8, layer.weight.grad.dtype.itemsize * 8}
    if len(widths) != 1:
        raise InvariantFailed(f"the weight and its gradient differ in width: {widths}")
    return widths.pop()


def _grad_scaler(backend: Backend) -> Any:
    import torch

    try:
        return torch.amp.GradScaler(backend.device)
    except (RuntimeError, ValueError, AssertionError) as e:
        raise NotOnBackend(f"torch.amp.GradScaler does not run on {backend.device}: {e}") from None


TINY_GRADIENT = 2.0**-26  # below half of FP16's smallest subnormal, 2^-24


def loss_scaled_gradient(backend: Backend, dtype_name: str | None, scaled: bool) -> float:
    """The weight gradient of `TINY_GRADIENT · sum(W x)` with x = 1, through a matmul in `dtype_name`.

    dtype_name None runs the matmul in FP32 (the true gradient); "float16" and
    "bfloat16" run it under autocast; `scaled` goes through torch.amp.GradScaler.
    """
    if not has(backend, "autocast"):
        raise NotOnBackend(f"{backend.library} has no autocast or GradScaler")
    import torch

    layer = torch.nn.Linear(4, 4, bias=False).to(backend.device)
    torch.nn.init.ones_(layer.weight)
    x = torch.ones(1, 4, device=backend.device)
    context = _autocast(backend, dtype_name) if dtype_name else contextlib.nullcontext()
    with context:
        out = layer(x)
    loss = out.float().sum() * TINY_GRADIENT
    if scaled:
        scaler = _grad_scaler(backend)
        scaler.scale(loss).backward()
        scaler.unscale_(torch.optim.SGD(layer.parameters(), lr=0.0))
    else:
        loss.backward()
    grads = layer.weight.grad.flatten().tolist()
    if len(set(grads)) != 1:
        raise InvariantFailed(f"the weight's gradient entries differ: {grads}")
    return grads[0]


CASES = {
    "fp32": (None, False),
    "fp16": ("float16", False),
    "fp16_scaled": ("float16", True),
    "bf16": ("bfloat16", False),
}


@claim("training.loss_scaling.{case}", kind="library", over={"case": tuple(CASES)})
def loss_scaling(backend: Backend, case: str) -> float:
    """A tiny weight gradient computed in FP32, in FP16 without and with GradScaler, and in BF16."""
    return loss_scaled_gradient(backend, *CASES[case])


@claim("training.loss_scaling.scale", kind="library", backends=TORCH)
def grad_scaler_scale(backend: Backend) -> float:
    """The factor torch.amp.GradScaler multiplies the loss by before its first step."""
    return float(_grad_scaler(backend).get_scale())


BATCH, MICRO = 8, 2


def _accumulated(backend: Backend) -> tuple[list[float], list[float]]:
    """A linear model's gradient over a batch of BATCH, and accumulated over micro-batches of MICRO."""
    need(backend, "autodiff")
    import numpy as np

    steps = BATCH // MICRO
    rows = np.array([[((5 * i + 3 * j) % 9 - 4) / 4 for j in range(6)] for i in range(BATCH)], dtype=np.float32)
    target = np.array([((i % 4) - 1.5) / 2 for i in range(BATCH)], dtype=np.float32)
    start = np.array([0.1 * (j - 2) for j in range(6)], dtype=np.float32)
    adapter = backend.adapter

    def grad_of(x: Any, y: Any, scale: float) -> list[float]:
        rows_, target_ = adapter.from_numpy(x), adapter.from_numpy(y)
        loss = lambda w: ((rows_ @ w - target_) ** 2).mean() * scale  # noqa: E731
        return ops(backend).gradient(loss, [adapter.from_numpy(start)])[0].tolist()

    full = grad_of(rows, target, 1.0)
    accumulated = [0.0] * len(start)
    for k in range(steps):
        part = grad_of(rows[k * MICRO : (k + 1) * MICRO], target[k * MICRO : (k + 1) * MICRO], 1.0 / steps)
        accumulated = [a + p for a, p in zip(accumulated, part)]
    if not np.allclose(accumulated, full, rtol=1e-5, atol=1e-6):
        raise InvariantFailed(f"{steps} micro-batches of {MICRO} give {accumulated}; the batch of {BATCH} gives {full}")
    return full, accumulated


@claim(
    "training.accumulation.{what}", kind="library", over={"what": ("batch", "micro_batch", "steps")}, backends=AUTODIFF
)
def accumulation(backend: Backend, what: str) -> int:
    """The batch, the micro-batch and the number of accumulated steps whose gradients agree."""
    _accumulated(backend)
    return {"batch": BATCH, "micro_batch": MICRO, "steps": BATCH // MICRO}[what]
