"""JAX on the CPU and on a GPU: numpy's interface on XLA, with every ml_dtypes format (bfloat16,
float8, int4) as a dtype.

Installed by the project's `jax` extra (`pip install -e .[jax]`, the CPU build); `jax:gpu` is there
where one of jaxlib's GPU plugins is installed beside it (`jax[cuda13]` brings `jax-cuda13-plugin`,
which scripts/verify-cuda installs; `jax[rocm7-local]` brings `jax-rocm7-plugin` on a machine with
ROCm 7) and one tiny kernel runs on the device. Where either is absent its backend is skipped with
the reason, like any other.

JAX takes three quarters of a GPU's memory when it first starts its GPU client, which would leave
torch and MLX in the same process nothing; detection sets XLA_PYTHON_CLIENT_PREALLOCATE=false
(JAX's own switch, left alone where already set) before JAX loads, so it allocates as it goes.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import time
from typing import Any, Callable

from verified_book.authoring.registry import NotOnBackend
from verified_book.backends import Adapter, Backend, register, touches_cuda_here, try_import

GPU_PLUGINS = ("jax-cuda13-plugin", "jax-cuda12-plugin", "jax-rocm7-plugin")  # jaxlib's GPU plugins on PyPI
PREALLOCATE = "XLA_PYTHON_CLIENT_PREALLOCATE"


def plugin_versions() -> dict[str, str]:
    """The GPU plugins of jaxlib installed here, with their versions."""
    return {name: version for name in GPU_PLUGINS if (version := _dist_version(name)) is not None}


def gpu_words(device: Any) -> str:
    """A JAX GPU device in its own terms: its kind and the platform its client runs ("cuda 13000", "rocm 7.1")."""
    version = getattr(getattr(device, "client", None), "platform_version", None)
    return f"{device.device_kind}" + (f" ({version})" if version else "")


def gpu_backend(jax: Any) -> Backend:
    """jax:gpu, available where a GPU plugin matching jaxlib is installed, finds a GPU and runs one tiny kernel on
    it."""
    version = jax.__version__
    plugins = plugin_versions()
    if not plugins:
        return Backend(
            "jax:gpu",
            False,
            f"jax {version} has no GPU plugin installed ({', '.join(GPU_PLUGINS)}; "
            f"pip install jax[cuda13]=={version} brings the CUDA one, scripts/verify-cuda installs it)",
            version,
        )
    jaxlib = getattr(getattr(jax, "lib", None), "__version__", None) or _dist_version("jaxlib")
    plugin, plugin_version = next(iter(plugins.items()))
    if jaxlib and plugin_version.split("+")[0] != jaxlib.split("+")[0]:
        return Backend(
            "jax:gpu",
            False,
            f"{plugin} {plugin_version} does not match jaxlib {jaxlib}, so JAX does not load it: "
            f"pip install {plugin}=={jaxlib}",
            version,
        )
    try:
        devices = jax.devices("gpu")
    except Exception as e:  # the plugin loads but finds no device (no driver, a driver too old)
        return Backend(
            "jax:gpu",
            False,
            f"jax {version} with {plugin} {plugin_version} finds no GPU ({type(e).__name__}: {e})",
            version,
        )
    device = devices[0]
    words = gpu_words(device)
    if touches_cuda_here():
        try:
            with jax.default_device(device):
                value = float((jax.numpy.ones(4) * 2).sum())
        except (
            Exception
        ) as e:  # the kernel's own error says what is wrong (no binary for the GPU, an out-of-date driver)
            return Backend(
                "jax:gpu",
                False,
                f"a tiny kernel fails on {words}: {type(e).__name__}: {e}; jax {version} with "
                f"{plugin} {plugin_version}",
                version,
                device.device_kind,
            )
        if value != 8:
            return Backend(
                "jax:gpu",
                False,
                f"a tiny kernel on {words} computed {value} for 8; jax {version} with {plugin} {plugin_version}",
                version,
                device.device_kind,
            )
    return Backend(
        "jax:gpu", True, f"JAX on the GPU, {words}, through {plugin} {plugin_version}", version, device.device_kind
    )


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@register
class JaxAdapter(Adapter):
    library = "jax"
    module_name = "jax.numpy"
    companions = ("ml_dtypes",)  # its bfloat16, float8 and int4 types
    names = ("jax:cpu", "jax:gpu")
    markers = {"jax": "computed with JAX (jax:cpu, or jax:gpu where a GPU plugin is installed)"}

    @classmethod
    def detect(cls) -> list[Backend]:
        os.environ.setdefault(PREALLOCATE, "false")
        jax, why = try_import("jax")
        if jax is None:
            return [Backend(n, False, why) for n in cls.names]
        try:
            jax.devices("cpu")
        except Exception as e:  # a jaxlib that cannot start its CPU client
            cpu = Backend(
                "jax:cpu", False, f"jax {jax.__version__} has no CPU device ({type(e).__name__}: {e})", jax.__version__
            )
        else:
            cpu = Backend("jax:cpu", True, "JAX on the CPU", jax.__version__, "cpu")
        return [cpu, gpu_backend(jax)]

    @property
    def version(self) -> str:
        import jax

        return str(jax.__version__)

    def on_device(self) -> contextlib.AbstractContextManager[Any]:
        import jax

        device: contextlib.AbstractContextManager[Any] = jax.default_device(jax.devices(self.backend.device)[0])
        return device

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

    def evaluate(self, *xs: Any) -> None:
        import jax

        jax.block_until_ready(xs)

    def seconds_per_call(self, fn: Callable[[], Any], inner: int) -> float:
        import jax

        t0 = time.perf_counter()
        for _ in range(inner):
            jax.block_until_ready(fn())  # JAX dispatches asynchronously: wait for each result
        return (time.perf_counter() - t0) / inner

    def free_bytes(self) -> int | None:
        import jax

        if self.backend.device == "cpu":
            return None
        stats = jax.devices(self.backend.device)[0].memory_stats() or {}
        if "bytes_limit" not in stats:
            return None
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))

    def device_words(self) -> str:
        import jax

        if self.backend.device == "cpu":
            return "cpu"
        return gpu_words(jax.devices(self.backend.device)[0])

    def compute_capability(self) -> tuple[int, int] | None:
        import jax

        if self.backend.device == "cpu":
            return None
        found = getattr(jax.devices(self.backend.device)[0], "compute_capability", None)  # "9.0" on a CUDA device
        try:
            major, minor = str(found).split(".")
            return int(major), int(minor)
        except ValueError:  # None, or a ROCm device's gfx name
            return None
