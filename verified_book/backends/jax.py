"""JAX on the CPU: numpy's interface on XLA, with every ml_dtypes format (bfloat16, float8, int4) as a dtype.

Installed by the project's `jax` extra (`pip install -e .[jax]`); where it is absent its
backend is skipped with the reason, like any other.
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Sequence

from verified_book.backends import Adapter, Backend, register, try_import
from verified_book.registry import NotOnBackend


@register
class JaxAdapter(Adapter):
    library = "jax"
    module_name = "jax.numpy"
    names = ("jax:cpu",)
    markers = {"jax": "computed with JAX (jax:cpu)"}
    features = frozenset({"random", "copy", "autodiff", "finfo.resolution"})
    lacking = {
        "strides": ("JAX arrays expose no strides or storage (a jax.Array has shape, size, itemsize and "
                    "nbytes only), so views and copies cannot be told apart"),
        "views": "JAX arrays are immutable: a slice cannot be written in place (x.at[...].set makes a new array)",
        "nn": "jax has no neural-network layers of its own (Flax and Equinox add them)",
        "optimizer": "jax has no optimizer of its own (Optax adds Adam)",
        "grad_mode": ("JAX records no graph while it evaluates: it differentiates a function when asked "
                      "(jax.grad), so there is no grad mode to switch off"),
    }
    shape_errors = (TypeError, ValueError)

    @classmethod
    def detect(cls) -> list[Backend]:
        jax, why = try_import("jax")
        if jax is None:
            return [Backend("jax:cpu", False, why)]
        try:
            jax.devices("cpu")
        except Exception as e:  # a jaxlib that cannot start its CPU client
            return [Backend("jax:cpu", False, f"jax {jax.__version__} has no CPU device ({type(e).__name__}: {e})",
                            jax.__version__)]
        return [Backend("jax:cpu", True, "JAX on the CPU", jax.__version__, "cpu")]

    @property
    def version(self) -> str:
        import jax

        return str(jax.__version__)

    def on_device(self) -> contextlib.AbstractContextManager[Any]:
        import jax

        return jax.default_device(jax.devices("cpu")[0])

    def array(self, values: Any, dtype: Any = None) -> Any:
        import jax.numpy as jnp

        with self.on_device():
            return jnp.asarray(values, dtype=dtype)

    def dtype(self, name: str, label: str | None = None) -> Any:
        import jax.numpy as jnp

        found = getattr(jnp, name, None)
        if found is None:
            raise NotOnBackend(f"jax {self.version} has no dtype for {label or name}")
        return found

    def bitcast(self, x: Any, name: str) -> Any:
        import jax

        return jax.lax.bitcast_convert_type(x, self.dtype(name))

    def iinfo(self, name: str) -> Any:
        import jax.numpy as jnp

        dtype = getattr(jnp, name, None)
        if dtype is None:
            raise NotOnBackend(f"jax {self.version} has no {name} dtype")
        return jnp.iinfo(dtype)

    def random_normal(self, shape: tuple[int, ...], seed: int) -> Any:
        import jax
        import jax.numpy as jnp

        with self.on_device():
            return jax.random.normal(jax.random.key(seed), shape, dtype=jnp.float32)

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
            raise NotOnBackend(f"jax {self.version} has no float4_e2m1fn dtype")
        codes = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn)
        return self.array(codes, jnp.float4_e2m1fn).astype(jnp.float32).tolist()

    def evaluate(self, *xs: Any) -> None:
        import jax

        jax.block_until_ready(xs)

    def seconds_per_call(self, fn: Callable[[], Any], inner: int) -> float:
        import jax

        t0 = time.perf_counter()
        for _ in range(inner):
            jax.block_until_ready(fn())  # JAX dispatches asynchronously: wait for each result
        return (time.perf_counter() - t0) / inner

    def copy_into(self, dst: Any, src: Any) -> Any:
        import jax.numpy as jnp

        return jnp.copy(src)  # JAX arrays are immutable: the copy is a new array

    def matmul_unsupported(self, dtype: str) -> str | None:
        if dtype == "fp8":
            return ("FP8 matmul is measured only with torch on CUDA (torch._scaled_mm); "
                    "JAX's float8 dot on the CPU is not a hardware path")
        return None
