"""Autograd: reverse mode is the exact chain rule, it is cheap for many inputs and one output,
and switching it off records nothing.

Exactness: the same functions are written once and evaluated three ways (sympy
differentiates them symbolically; torch and MLX differentiate them in reverse mode in
FP32), and the library gradients must equal sympy's to a few FP32 units in the last
place. Cost: the gradient of a loss of n parameters takes one reverse pass but n
forward-mode passes, counted by how often the loss is evaluated. Memory: the tensors
autograd saves for the backward pass are counted through
`torch.autograd.graph.saved_tensors_hooks`, with grad mode on and under `torch.no_grad()`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable

from claims.ops import lacks, need, ops, supporting
from claims.topics.formats import FORMATS
from verified_book import Backend, InvariantFailed, NotOnBackend, claim, given, lazy_import

if TYPE_CHECKING:
    import sympy
else:
    sympy = lazy_import("sympy")  # loaded by the first claim that computes with it

AUTODIFF = supporting("autodiff")
FP32_EPS = 2.0**-23
ULPS = 8  # FP32 units of the gradient's largest component allowed between a library and sympy


@dataclass(frozen=True)
class Example:
    """A scalar function of several inputs, written once for sympy, torch and MLX alike."""

    id: str
    body: Callable[..., Any]  # body(math_module, *inputs); math_module offers sin, exp, log, tanh

    @property
    def point(self) -> tuple[Fraction, ...]:
        """Where the gradient is taken: the example's chosen point, a given input."""
        return tuple(Fraction(p) for p in given(f"autograd.examples.{self.id}.point"))

    def symbolic_gradient(self) -> tuple[sympy.Expr, ...]:
        symbols = sympy.symbols(f"x0:{len(self.point)}")
        expr = self.body(sympy, *symbols)
        values = dict(zip(symbols, (sympy.Rational(p.numerator, p.denominator) for p in self.point)))
        return tuple(sympy.diff(expr, s).subs(values).evalf(30) for s in symbols)


EXAMPLES: dict[str, Example] = {
    e.id: e
    for e in (
        Example("f", lambda m, x, y: x**2 * y + m.sin(x * y)),
        Example("g", lambda m, x, y, z: m.exp(x) * y / (1 + z**2)),
        Example("h", lambda m, a, b, c, d: m.log(1 + a**2 + b**2) * m.tanh(c) + a * d),
    )
}


def reverse_gradient(backend: Backend, example: Example) -> tuple[float, ...]:
    """The gradient by reverse mode in FP32: torch's .backward(), MLX's mx.grad, JAX's jax.grad."""
    need(backend, "autodiff")
    float32, module = backend.adapter.dtype("float32"), backend.module
    inputs = [backend.tensor(float(p), float32) for p in example.point]
    grads = ops(backend).gradient(lambda *xs: example.body(module, *xs), inputs)
    return tuple(float(g.item()) for g in grads)


@claim("autograd.exact.{example}.sympy", kind="exact", over={"example": tuple(EXAMPLES)})
def symbolic(example: str) -> tuple[sympy.Float, ...]:
    """The gradient at the example's point, from sympy's symbolic derivatives."""
    return EXAMPLES[example].symbolic_gradient()


@claim("autograd.exact.{example}.reverse", kind="library", over={"example": tuple(EXAMPLES)}, backends=AUTODIFF)
def reverse(backend: Backend, example: str) -> tuple[float, ...]:
    """The same gradient by reverse mode; it must equal sympy's to FP32 precision."""
    found = reverse_gradient(backend, EXAMPLES[example])
    exact = [float(g) for g in EXAMPLES[example].symbolic_gradient()]
    scale = max(abs(g) for g in exact)
    worst = max(abs(a - b) for a, b in zip(found, exact))
    if worst > ULPS * FP32_EPS * scale:
        raise InvariantFailed(
            f"{backend.name} gives {found} for {example}; sympy gives {exact}: "
            f"off by {worst:.3g}, more than {ULPS} FP32 units of {scale:.3g}"
        )
    return found


SAMPLES = 8


def parameters() -> int:
    """Weights of the least-squares loss: a given input of the example."""
    return int(given("autograd.regression.parameters"))


def _regression() -> tuple[Any, Any, Any, Any]:
    """Rows, targets and weights of a least-squares loss, and its gradient in closed form (float64)."""
    import numpy as np

    rows = np.array([[((3 * i + 5 * j) % 7 - 3) / 4 for j in range(parameters())] for i in range(SAMPLES)])
    target = np.array([(i % 3) - 1.0 for i in range(SAMPLES)])
    weights = np.array([((j % 5) - 2) / 8 for j in range(parameters())])
    exact = 2 / SAMPLES * rows.T @ (rows @ weights - target)
    return rows, target, weights, exact


def _count_passes(backend: Backend, mode: str) -> int:
    """Evaluations of the loss needed for its whole gradient, in reverse or forward mode."""
    need(backend, "autodiff")
    import numpy as np

    rows, target, weights, exact = _regression()
    adapter = backend.adapter
    float32 = adapter.dtype("float32")
    x, y = backend.tensor(rows.tolist(), float32), backend.tensor(target.tolist(), float32)
    calls = 0

    def loss(w: Any) -> Any:
        nonlocal calls
        calls += 1
        residual = x @ w - y
        return (residual * residual).mean()

    basis = np.eye(parameters()).tolist()
    w = backend.tensor(weights.tolist(), float32)
    if mode == "reverse":
        grad = ops(backend).gradient(loss, [w])[0].tolist()
    else:
        grad = [ops(backend).jvp(loss, w, backend.tensor(e, float32)).item() for e in basis]
    if not np.allclose(grad, exact, rtol=1e-5, atol=1e-6):
        raise InvariantFailed(
            f"{mode} mode gives the gradient {grad}; the closed form 2/m·Xᵀ(Xw − y) gives {exact.tolist()}"
        )
    return calls


@claim("autograd.passes.inputs", kind="exact")
def passes_inputs() -> int:
    """Parameters of the least-squares loss whose gradient is counted."""
    return len(_regression()[2])


@claim("autograd.passes.{mode}", kind="library", over={"mode": ("reverse", "forward")}, backends=AUTODIFF)
def passes(backend: Backend, mode: str) -> int:
    """Loss evaluations one full gradient costs: one in reverse mode, one per input in forward mode."""
    return _count_passes(backend, mode)


def mlp_size() -> tuple[int, int]:
    """(batch, width) of the recorded-activations example: given inputs."""
    return int(given("autograd.mlp.batch")), int(given("autograd.mlp.width"))


@dataclass(frozen=True)
class Recording:
    """What autograd kept from one forward pass: saved activations and graph nodes."""

    saved_tensors: int
    saved_bytes: int
    graph_nodes: int


# Backward nodes of layout views: they move no value, and whether a device records one depends on how
# it decomposes an op (CPU and CUDA run nn.Linear as addmm of a transposed weight, a TBackward node;
# MPS records one LinearBackward node), so they are not counted.
LAYOUT_NODES = frozenset(
    {
        "TBackward0",
        "TransposeBackward0",
        "PermuteBackward0",
        "ViewBackward0",
        "UnsafeViewBackward0",
        "ReshapeAliasBackward0",
        "ExpandBackward0",
        "SqueezeBackward0",
        "UnsqueezeBackward0",
        "AliasBackward0",
    }
)


def _graph_nodes(root: Any) -> int:
    """Nodes of the backward graph reachable from `root`: operations and parameter accumulators,
    layout views left out (`LAYOUT_NODES`), so the count does not depend on the device."""
    seen: set[int] = set()
    counted = 0
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        counted += node.name() not in LAYOUT_NODES
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return counted


def record(backend: Backend, mode: str) -> Recording:
    """Run a two-layer MLP forward with grad mode on or under torch.no_grad(); count what is saved.

    Saved parameters are not counted: the model holds them anyway.
    """
    why = lacks(backend, "autodiff")
    if why is not None:
        raise NotOnBackend(f"{why}, so it records nothing to switch off")
    need(backend, "grad_mode")  # what follows is torch's recorded graph, the one library that keeps one
    import torch

    generator = torch.Generator().manual_seed(0)
    BATCH, WIDTH = mlp_size()
    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU(), torch.nn.Linear(WIDTH, WIDTH)).to(
        backend.device
    )
    x = torch.randn(BATCH, WIDTH, generator=generator).to(backend.device)
    parameters = {p.data_ptr() for p in model.parameters()}
    saved: list[int] = []

    def pack(t: Any) -> Any:
        if t.data_ptr() not in parameters:
            saved.append(t.numel() * t.element_size())
        return t

    context = torch.no_grad() if mode == "no_grad" else contextlib.nullcontext()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), context:
        loss = model(x).pow(2).mean()
    if mode == "no_grad" and loss.grad_fn is not None:
        raise InvariantFailed(f"the loss computed under torch.no_grad() has grad_fn {loss.grad_fn}")
    return Recording(len(saved), sum(saved), _graph_nodes(loss.grad_fn))


MODES = ("grad", "no_grad")


@claim("autograd.recorded.{mode}.saved_tensors", kind="library", over={"mode": MODES})
def saved_tensors(backend: Backend, mode: str) -> int:
    """Activations autograd saves for the backward pass of the MLP's loss."""
    return record(backend, mode).saved_tensors


@claim("autograd.recorded.{mode}.saved_bytes", kind="library", over={"mode": MODES})
def saved_bytes(backend: Backend, mode: str) -> int:
    """Bytes of those saved activations: memory held until .backward() frees it."""
    return record(backend, mode).saved_bytes


@claim("autograd.recorded.{mode}.graph_nodes", kind="library", over={"mode": MODES}, stated_for={"torch": ">=2.13"})
def graph_nodes(backend: Backend, mode: str) -> int:
    """Nodes of the backward graph reachable from the loss's grad_fn (none without one), views aside."""
    return record(backend, mode).graph_nodes


@claim("autograd.recorded.activation_bytes", kind="exact")
def activation_bytes() -> int:
    """Bytes of one FP32 activation of the MLP: batch × width × 4."""
    batch, width = mlp_size()
    return batch * width * FORMATS["fp32"].storage_bits // 8
