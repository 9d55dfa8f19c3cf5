"""This book's operations with JAX on the CPU and on a GPU."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator, Sequence

from claims.ops.base import Ops, environment_setting
from verified_book import NotOnBackend, setting


class JaxOps(Ops):
    library = "jax"
    features = frozenset({"random", "copy", "autodiff", "finfo.resolution"})
    lacking = {
        "strides": (
            "JAX arrays expose no strides or storage (a jax.Array has shape, size, itemsize and "
            "nbytes only), so views and copies cannot be told apart"
        ),
        "views": "JAX arrays are immutable: a slice cannot be written in place (x.at[...].set makes a new array)",
        "nn": "jax has no neural-network layers of its own (Flax and Equinox add them)",
        "optimizer": "jax has no optimizer of its own (Optax adds Adam)",
        "grad_mode": (
            "JAX records no graph while it evaluates: it differentiates a function when asked "
            "(jax.grad), so there is no grad mode to switch off"
        ),
    }
    shape_errors = (TypeError, ValueError)

    def logsumexp(self, x: Any) -> float:
        import jax

        return float(jax.nn.logsumexp(x).item())

    def gradient(self, fn: Callable[..., Any], args: Sequence[Any]) -> list[Any]:
        import jax

        return list(jax.grad(fn, argnums=tuple(range(len(args))))(*args))

    def jvp(self, fn: Callable[[Any], Any], primal: Any, tangent: Any) -> Any:
        import jax

        return jax.jvp(fn, (primal,), (tangent,))[1]

    def e2m1_values(self) -> list[float]:
        import jax.numpy as jnp
        import ml_dtypes
        import numpy as np

        if not hasattr(jnp, "float4_e2m1fn"):
            raise NotOnBackend(f"jax {self.adapter.version} has no float4_e2m1fn dtype")
        codes = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn)
        return self.adapter.array(codes, jnp.float4_e2m1fn).astype(jnp.float32).tolist()

    def copy_into(self, dst: Any, src: Any) -> Any:
        import jax.numpy as jnp

        return jnp.copy(src)  # JAX arrays are immutable: the copy is a new array

    @contextlib.contextmanager
    def full_precision_fp32(self) -> Iterator[str]:
        """On a GPU, XLA runs an FP32 dot in TF32 at JAX's default precision: "highest" keeps it in FP32."""
        if self.backend.device == "cpu":
            yield ""
            return
        import jax

        with jax.default_matmul_precision("highest"):
            yield ""

    def matmul_settings(self) -> dict[str, Any]:
        """JAX's own switch for a matmul's precision (its config, or JAX_DEFAULT_MATMUL_PRECISION), and on a GPU the
        device, whose XLA picks TF32 for an FP32 dot at the default precision where the GPU has it."""
        import jax

        if self.backend.device == "cpu":
            return {}
        return {
            "JAX_DEFAULT_MATMUL_PRECISION": environment_setting("JAX_DEFAULT_MATMUL_PRECISION"),
            "precision": setting(
                "jax.config.jax_default_matmul_precision",
                str(jax.config.jax_default_matmul_precision),
                self.backend.name,
            ),
            "device": setting("device", self.adapter.device_words(), self.backend.name),
        }

    def matmul_environment(self) -> str | None:
        if os.environ.get("JAX_DEFAULT_MATMUL_PRECISION") is not None:
            value = os.environ["JAX_DEFAULT_MATMUL_PRECISION"]
            return f"JAX_DEFAULT_MATMUL_PRECISION={value} sets JAX's FP32 matmul precision here"
        return None

    def matmul_unsupported(self, dtype: str) -> str | None:
        if dtype == "fp8":
            where = (
                "on the CPU is not a hardware path"
                if self.backend.device == "cpu"
                else "is not what the probe measures"
            )
            return f"FP8 matmul is measured only with torch on CUDA (torch._scaled_mm); JAX's float8 dot {where}"
        return None
