"""What this book asks of an array library beyond the engine's adapter, with the answers most libraries share.

The engine's adapter (`Backend.adapter`) makes arrays on a backend's device, casts, reads finfo and
synchronises; the book's own operations (a format's bit patterns, an Adam step's bytes, an FP4
quantiser, a timed FP8 matmul, what decides an FP32 matmul's precision) are written here, on that
adapter. A library's module in this package overrides what it does its own way; what a library
lacks raises NotOnBackend in its own words (`lacking`), so the claim is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, ClassVar, Iterator, Sequence

from verified_book import Adapter, Backend, NotOnBackend, setting

UNSET = "unset"  # how an environment variable that is not set is recorded


def environment_setting(name: str) -> str:
    """Record an environment variable the current claim's answer depends on; its value, or UNSET."""
    return setting(name, os.environ.get(name, UNSET), "environment")


class Ops:
    """This book's operations on one backend: one subclass per library (`claims.ops.LIBRARIES`)."""

    library: ClassVar[str] = "this library"
    features: ClassVar[frozenset[str]] = frozenset()  # what the library has, by the names topics ask for
    lacking: ClassVar[dict[str, str]] = {}  # why the library lacks a feature, in its own words
    shape_errors: ClassVar[tuple[type[BaseException], ...]] = (ValueError,)  # what a mismatched matmul raises
    splits_copies: ClassVar[bool] = False  # a bandwidth probe spreads this library's copies over threads itself

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.adapter: Adapter = backend.adapter

    @classmethod
    def lacks(cls, feature: str) -> str | None:
        """Why the library lacks `feature`, or None when it has it."""
        if feature in cls.features:
            return None
        return cls.lacking.get(feature, f"{cls.library} has no {feature}")

    def missing(self, feature: str) -> NotOnBackend:
        return NotOnBackend(self.lacks(feature) or f"{self.backend.name} cannot {feature}")

    def round_trip(self, x: Any, name: str, label: str | None = None) -> Any:
        """FP32 values cast into the format `name` and back to FP32, on the device."""
        return self.adapter.astype(
            self.adapter.astype(x, self.adapter.tensor_dtype(name, label)), self.adapter.dtype("float32")
        )

    def to_bits(self, values: Sequence[float], name: str, label: str) -> list[int]:
        """The 8-bit patterns a cast from FP32 to the format `name` gives."""
        x = self.adapter.astype(
            self.adapter.array(list(values), self.adapter.dtype("float32")), self.adapter.tensor_dtype(name, label)
        )
        return [int(v) for v in self.adapter.bitcast(x, "uint8").tolist()]

    def from_bits(self, codes: Sequence[int], name: str, label: str) -> list[float]:
        """The values 8-bit patterns of the format `name` read as, in FP32."""
        x = self.adapter.bitcast(self.adapter.array(list(codes), self.adapter.dtype("uint8")), name)
        return [float(v) for v in self.adapter.astype(x, self.adapter.dtype("float32")).tolist()]

    def default_float_bits(self) -> int:
        """Bits of the dtype the library gives a float literal."""
        return int(self.adapter.itemsize(self.adapter.array([1.0]))) * 8

    def share(self, mask: Any) -> float:
        """The fraction of a boolean array that is true, averaged in FP32 on the device."""
        return float(self.adapter.astype(mask, self.adapter.dtype("float32")).mean().item())

    def placeholder(self, shape: tuple[int, ...]) -> Any:
        """An FP32 array whose shape is what matters: no data where the library allows it."""
        return self.adapter.zeros(shape, self.adapter.dtype("float32"))

    def strides(self, x: Any) -> tuple[int, ...]:
        """Strides in elements."""
        raise self.missing("strides")

    def element_offset(self, x: Any, i: int, j: int) -> int:
        """Where element (i, j) sits in the flat buffer, in elements from the buffer's start."""
        raise self.missing("strides")

    def allocated(self, parent: Any, result: Any) -> int:
        """Bytes of new storage `result` needed: 0 for a view on `parent`'s buffer, else its size."""
        raise self.missing("strides")

    def broadcast_to(self, x: Any, shape: tuple[int, ...]) -> Any:
        """A view of `x` at a larger shape, without copying."""
        raise self.missing("strides")

    def logsumexp(self, x: Any) -> float:
        return float(self.adapter.module.logsumexp(x).item())

    def cross_entropy(self, logits: Any, target: int) -> float:
        raise self.missing("nn")

    def layer_norm(self, width: int, eps: float | None = None) -> Any:
        """A LayerNorm over `width` on the device: the library's default ε when `eps` is None."""
        raise self.missing("nn")

    def linear(self, x: Any, w: Any) -> Any:
        """The library's linear layer, x @ w.T, where it has one of its own."""
        raise self.missing("nn")

    def gradient(self, fn: Callable[..., Any], args: Sequence[Any]) -> list[Any]:
        """The gradient of the scalar `fn` with respect to each of `args`, by reverse mode."""
        raise self.missing("autodiff")

    def jvp(self, fn: Callable[[Any], Any], primal: Any, tangent: Any) -> Any:
        """The derivative of `fn` at `primal` along `tangent`, by forward mode."""
        raise self.missing("autodiff")

    def adam_bytes(self, widths: tuple[int, ...]) -> dict[str, int]:
        """One Adam step on an FP32 MLP of `widths`: bytes of weights, gradients, moments and per-tensor scalars."""
        raise self.missing("optimizer")

    def e8m0_bits(self) -> int:
        """The width of MX's E8M0 block scale as the library stores it."""
        return self.adapter.itemsize(self.adapter.zeros((1,), self.adapter.dtype("float8_e8m0fnu"))) * 8

    def e2m1_values(self) -> list[float]:
        """The values the sixteen E2M1 codes decode to, in code order."""
        raise self.missing("e2m1")

    def quantize_fp4(self, mode: str, group: int) -> tuple[int, float, float]:
        """(weights per scale, bits per weight, relative round-trip error) of the library's FP4 quantiser."""
        raise self.missing("fp4_quantize")

    @contextlib.contextmanager
    def probe_scope(self) -> Iterator[None]:
        """The device and memory settings a probe runs under."""
        with self.adapter.on_device():
            yield

    def copy_into(self, dst: Any, src: Any) -> Any:
        """Copy `src` into `dst` (or into a new array where the library has no in-place copy); the copy."""
        raise self.missing("copy")

    def matmul_into(self, a: Any, b: Any, out: Any) -> Callable[[], Any]:
        """One call of a @ b, written into `out` where the library can."""
        return lambda: a @ b

    def matmul_unsupported(self, dtype: str) -> str | None:
        """Why the library cannot multiply `dtype` ("fp32", "bf16", "fp16", "fp8") matrices here, or None."""
        return None

    def probe_values(self, shape: tuple[int, int], seed: int, fill: float) -> Any:
        """FP32 operands for a timed product: random normal on an accelerator, the constant `fill` on the CPU."""
        return self.adapter.full(shape, fill, self.adapter.dtype("float32"))

    def fp8_matmul(
        self, rows: int, inner: int, cols: int, seed: int, fill: float
    ) -> tuple[Callable[[], Any], list[Any]]:
        """One call of a scaled FP8 (E4M3) matmul, and its arrays."""
        raise self.missing("fp8_matmul")

    def one_thread(self) -> contextlib.AbstractContextManager[Any]:
        """The library's intra-op threads set to one for the block (`thread_count` feature)."""
        raise self.missing("thread_count")

    def matmul_settings(self) -> dict[str, Any]:
        """Record what decides an FP32 matmul's precision on this backend (the environment variables
        that switch TF32 behind the library's back, the library's own mode, the device's
        architecture) as settings of the current claim, and return them by name."""
        return {}

    def matmul_environment(self) -> str | None:
        """Why an FP32 matmul's default precision here is the environment's, not the library's own;
        None where nothing outside the library sets it. Reads no device."""
        return None

    def tf32_by_settings(self) -> tuple[bool, str]:
        """Whether the library's own settings let an FP32 matmul use TF32, and those settings in words."""
        raise self.missing("tf32_settings")

    def full_precision_fp32(self) -> contextlib.AbstractContextManager[str]:
        """Keep FP32 matmuls in FP32 for the block; yields a note when that could not be done."""
        return contextlib.nullcontext("")
