"""Backends: where a library claim is computed, detected once per run.

A backend is a library on a device: `numpy`, `torch:cpu`, `torch:cuda`, `torch:mps`,
`torch:rocm`, `mlx:cpu`, `mlx:gpu`, `jax:cpu`, `jax:gpu`. Each library is an adapter (one module of this package,
registered below): it detects its backends and does what the topics ask of an array
library (make an array on the device, cast to a dtype by name, finfo, synchronise, time
a call), so a topic never branches on the library's name. Where a library lacks what a
claim needs, the adapter raises `NotOnBackend` with its own words for what is missing.

Detection never raises: a library that is missing or a device that is absent makes an
unavailable backend whose reason says what was found.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import os
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable, ClassVar, Iterator, Sequence

from verified_book.authoring.inputs import setting
from verified_book.authoring.registry import NotOnBackend
from verified_book.vocabulary import NO_BACKEND_NAME

# The adapter modules of this package, in the order their backends are listed everywhere.
BUILTIN_ADAPTERS = ("numpy", "torch", "mlx", "jax")


@dataclass(frozen=True)
class Backend:
    """A library on a device, and whether this machine has it."""

    name: str
    available: bool
    reason: str
    version: str | None = None
    device_name: str | None = None
    recorded: str | None = None  # known from this machine's records of this date, its library not loaded

    @property
    def library(self) -> str:
        return self.name.split(":")[0]

    @property
    def place(self) -> str:
        """The part of the name after the colon ("cpu", "cuda", "rocm", "gpu"): what the backend's marker follows."""
        return self.name.split(":")[1] if ":" in self.name else "cpu"

    @property
    def device(self) -> str:
        """The device as the library names it: the place, unless the adapter reaches it under another
        name (torch reaches a ROCm GPU as its "cuda" device)."""
        cls = ADAPTERS.get(self.library)
        return cls.device_of(self.name) if cls is not None else self.place

    @property
    def adapter(self) -> Adapter:
        """What this backend's library does, on this backend's device."""
        return _adapter(self)

    @property
    def marker(self) -> str:
        """The pytest marker this backend's tests carry."""
        if self.name == NO_BACKEND.name:
            return "cpu"
        return ADAPTERS[self.library].marker_for(self.place)

    @property
    def module(self) -> ModuleType:
        """The library's array namespace: numpy, torch, mlx.core or jax.numpy."""
        return self.adapter.module

    def tensor(self, values: Any, dtype: Any = None) -> Any:
        """Make an array of this library on this device."""
        return self.adapter.array(values, dtype)

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        """Make this backend's device the default for the block: a claim evaluated inside computes
        there even where it makes arrays without naming a device (MLX picks its default device
        itself, the GPU on a Mac, so an `mlx:cpu` claim must run inside the CPU's stream)."""
        if self.name == NO_BACKEND.name or not self.available:
            yield
            return
        with self.adapter.on_device():
            yield

    def sync(self) -> None:
        """Wait for queued work on the device, before a clock is read."""
        if self.name != NO_BACKEND.name:
            self.adapter.sync()

    def has(self, feature: str) -> bool:
        """Whether this backend's library has a feature the topics ask for by name."""
        return ADAPTERS[self.library].has(feature)

    def need(self, feature: str) -> None:
        """Raise NotOnBackend, in the library's own words, if it lacks `feature`."""
        why = ADAPTERS[self.library].lacks(feature)
        if why is not None:
            raise NotOnBackend(why)

    def __str__(self) -> str:
        return self.name


NO_BACKEND = Backend(NO_BACKEND_NAME, True, "exact and quoted claims are computed once, on no backend")


class Adapter:
    """What the topics ask of one array library, on one backend's device.

    A subclass per library declares its backend names, its marker and its features, and
    detects its backends; its methods do the library's part of a claim. A method the
    library cannot serve raises NotOnBackend saying what is missing (`self.missing`).
    """

    library: ClassVar[str]
    module_name: ClassVar[str]
    names: ClassVar[tuple[str, ...]]
    markers: ClassVar[dict[str, str]] = {}  # marker name: description, registered with pytest
    devices: ClassVar[
        dict[str, str]
    ] = {}  # backend name: the library's name for its device, where that is not its place
    features: ClassVar[frozenset[str]] = frozenset()  # what the library has, by the names topics ask for
    lacking: ClassVar[dict[str, str]] = {}  # why the library lacks a feature, in its own words
    shape_errors: ClassVar[tuple[type[BaseException], ...]] = (ValueError,)  # what a mismatched matmul raises
    splits_copies: ClassVar[bool] = False  # a bandwidth probe spreads this library's copies over threads itself
    distribution: ClassVar[str | None] = None  # the library's package on PyPI, where it is not `library`
    companions: ClassVar[tuple[str, ...]] = ()  # the other libraries it computes with (machine.VERSIONED)

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    # --- registration and detection -----------------------------------------------------

    @classmethod
    def detect(cls) -> list[Backend]:
        """Every backend of this library, available or not, with the reason."""
        raise NotImplementedError

    @classmethod
    def installed_version(cls) -> str | None:
        """The version of the library installed here, read from its package's metadata without importing
        it; None where it is not installed."""
        try:
            return importlib.metadata.version(cls.distribution or cls.library)
        except importlib.metadata.PackageNotFoundError:
            return None

    @classmethod
    def marker_for(cls, place: str) -> str:
        """The pytest marker of this library's backend at `place` (the part of its name after the colon)."""
        return next(iter(cls.markers)) if cls.markers else "cpu"

    @classmethod
    def device_of(cls, name: str) -> str:
        """The library's name for the device of backend `name`."""
        return cls.devices.get(name) or (name.split(":")[1] if ":" in name else "cpu")

    @classmethod
    def has(cls, feature: str) -> bool:
        return feature in cls.features

    @classmethod
    def lacks(cls, feature: str) -> str | None:
        """Why the library lacks `feature`, or None when it has it."""
        if feature in cls.features:
            return None
        return cls.lacking.get(feature, f"{cls.library} has no {feature}")

    def missing(self, feature: str) -> NotOnBackend:
        return NotOnBackend(self.lacks(feature) or f"{self.backend.name} cannot {feature}")

    # --- arrays and dtypes ----------------------------------------------------------------

    @property
    def module(self) -> ModuleType:
        return importlib.import_module(self.module_name)

    @property
    def version(self) -> str:
        return str(getattr(self.module, "__version__", "?"))

    @property
    def accelerator(self) -> bool:
        """Whether the device is not the host CPU (its work is queued, its memory its own)."""
        return self.backend.device != "cpu"

    def on_device(self) -> contextlib.AbstractContextManager[Any]:
        """Make the backend's device the default for arrays and operations inside the block."""
        return contextlib.nullcontext()

    def array(self, values: Any, dtype: Any = None) -> Any:
        raise NotImplementedError

    def dtype(self, name: str, label: str | None = None) -> Any:
        """The library's dtype object for a numpy-style name ("float32", "bfloat16", "float8_e4m3fn")."""
        found = getattr(self.module, name, None)
        if found is None:
            raise NotOnBackend(self.missing_dtype(name, label or name))
        return found

    def tensor_dtype(self, name: str, label: str | None = None) -> Any:
        """The dtype `name` for arrays on this backend's device: `dtype`, and NotOnBackend where the
        library has the dtype but the device holds no arrays of it."""
        return self.dtype(name, label)

    def missing_dtype(self, name: str, label: str) -> str:
        return f"{self.library} {self.version} has no {label} dtype"

    def astype(self, x: Any, dtype: Any) -> Any:
        return x.astype(dtype)

    def round_trip(self, x: Any, name: str, label: str | None = None) -> Any:
        """FP32 values cast into the format `name` and back to FP32, on the device."""
        return self.astype(self.astype(x, self.tensor_dtype(name, label)), self.dtype("float32"))

    def bitcast(self, x: Any, name: str) -> Any:
        """The same bits read as another dtype of the same width."""
        return x.view(self.dtype(name))

    def to_bits(self, values: Sequence[float], name: str, label: str) -> list[int]:
        """The 8-bit patterns a cast from FP32 to the format `name` gives."""
        x = self.astype(self.array(list(values), self.dtype("float32")), self.tensor_dtype(name, label))
        return [int(v) for v in self.bitcast(x, "uint8").tolist()]

    def from_bits(self, codes: Sequence[int], name: str, label: str) -> list[float]:
        """The values 8-bit patterns of the format `name` read as, in FP32."""
        x = self.bitcast(self.array(list(codes), self.dtype("uint8")), name)
        return [float(v) for v in self.astype(x, self.dtype("float32")).tolist()]

    def finfo(self, dtype: Any) -> Any:
        return self.module.finfo(dtype)

    def iinfo(self, name: str) -> Any:
        dtype = getattr(self.module, name, None)
        if dtype is None:
            raise NotOnBackend(f"{self.library} {self.version} has no {name} dtype")
        return self.module.iinfo(dtype)

    def default_float_bits(self) -> int:
        """Bits of the dtype the library gives a float literal."""
        return int(self.itemsize(self.array([1.0]))) * 8

    def to_numpy(self, x: Any) -> Any:
        import numpy as np

        return np.array(x)

    def from_numpy(self, a: Any) -> Any:
        return self.array(a)

    def numel(self, x: Any) -> int:
        return int(x.size)

    def itemsize(self, x: Any) -> int:
        return int(x.itemsize)

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self.module.zeros(shape, dtype=dtype)

    def full(self, shape: tuple[int, ...], value: float, dtype: Any) -> Any:
        return self.module.full(shape, value, dtype=dtype)

    def eye(self, n: int, dtype: Any) -> Any:
        return self.module.eye(n, dtype=dtype)

    def share(self, mask: Any) -> float:
        """The fraction of a boolean array that is true, averaged in FP32 on the device."""
        return float(self.astype(mask, self.dtype("float32")).mean().item())

    def placeholder(self, shape: tuple[int, ...]) -> Any:
        """An FP32 array whose shape is what matters: no data where the library allows it."""
        return self.zeros(shape, self.dtype("float32"))

    def random_normal(self, shape: tuple[int, ...], seed: int) -> Any:
        """Standard normal FP32 draws from the library's own generator, seeded."""
        raise self.missing("random")

    # --- what arrays share ----------------------------------------------------------------

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

    # --- numerics and layers ----------------------------------------------------------------

    def logsumexp(self, x: Any) -> float:
        return float(self.module.logsumexp(x).item())

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
        return self.itemsize(self.zeros((1,), self.dtype("float8_e8m0fnu"))) * 8

    def e2m1_values(self) -> list[float]:
        """The values the sixteen E2M1 codes decode to, in code order."""
        raise self.missing("e2m1")

    def quantize_fp4(self, mode: str, group: int) -> tuple[int, float, float]:
        """(weights per scale, bits per weight, relative round-trip error) of the library's FP4 quantiser."""
        raise self.missing("fp4_quantize")

    # --- timing and memory -----------------------------------------------------------------

    def sync(self) -> None:
        """Wait for queued work on the device."""

    def evaluate(self, *xs: Any) -> None:
        """Make a lazy library compute `xs` now."""

    @contextlib.contextmanager
    def probe_scope(self) -> Iterator[None]:
        """The device and memory settings a probe runs under."""
        with self.on_device():
            yield

    def seconds_per_call(self, fn: Callable[[], Any], inner: int) -> float:
        """Run `fn` `inner` times, timed as this device needs; seconds per call."""
        self.sync()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        self.sync()
        return (time.perf_counter() - t0) / inner

    def release_memory(self) -> None:
        """Hand the device's cached, unreferenced memory back."""

    @classmethod
    def empty_caches(cls) -> None:
        """Hand every device's cached memory back, where the library is already loaded (after an
        out-of-memory error); never raises, never imports the library."""

    def free_bytes(self) -> int | None:
        """Free memory on the device, or None where that is the system's memory."""
        return None

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
        return self.full(shape, fill, self.dtype("float32"))

    def fp8_matmul(
        self, rows: int, inner: int, cols: int, seed: int, fill: float
    ) -> tuple[Callable[[], Any], list[Any]]:
        """One call of a scaled FP8 (E4M3) matmul, and its arrays."""
        raise self.missing("fp8_matmul")

    def one_thread(self) -> contextlib.AbstractContextManager[Any]:
        """The library's intra-op threads set to one for the block (`thread_count` feature)."""
        raise self.missing("thread_count")

    # --- what decides an FP32 matmul's precision ----------------------------------------------

    def device_words(self) -> str:
        """The device and its architecture, as the library names them."""
        return self.backend.device

    def compute_capability(self) -> tuple[int, int] | None:
        """The CUDA compute capability of the device, or None where it is not a CUDA device."""
        return None

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


UNSET = "unset"  # how an environment variable that is not set is recorded


def environment_setting(name: str) -> str:
    """Record an environment variable the current claim's answer depends on; its value, or UNSET."""
    return setting(name, os.environ.get(name, UNSET), "environment")


CUDA_WORKER = "gw0"  # under xdist, the one worker that runs the CUDA items (see verified_book.integration.scheduling)


#: the places of backends whose library holds a context in a GPU's memory (CUDA, ROCm, an XLA or MLX GPU)
GPU_PLACES = frozenset({"cuda", "rocm", "gpu"})


def on_gpu(name: str) -> bool:
    """Whether backend `name` computes on a GPU: under xdist, its items share the one worker that may touch it."""
    return ":" in name and name.split(":", 1)[1] in GPU_PLACES


def touches_cuda_here() -> bool:
    """Whether this process may create a CUDA context: not an xdist worker that runs no CUDA item,
    since each context holds hundreds of MB of the card's memory."""
    return os.environ.get("PYTEST_XDIST_WORKER", CUDA_WORKER) == CUDA_WORKER


ADAPTERS: dict[str, type[Adapter]] = {}


def register(cls: type[Adapter]) -> type[Adapter]:
    """Make a library's adapter known: its backends are detected and listed from now on."""
    ADAPTERS[cls.library] = cls
    return cls


@functools.cache
def _adapter(backend: Backend) -> Adapter:
    return ADAPTERS[backend.library](backend)


def try_import(name: str) -> tuple[ModuleType | None, str]:
    """The module, or None and why it does not import."""
    try:
        return importlib.import_module(name), ""
    except Exception as e:  # an install that imports wrongly is reported, not raised
        return None, f"{name} does not import ({type(e).__name__}: {e})"


for _name in BUILTIN_ADAPTERS:
    importlib.import_module(f"{__name__}.{_name}")

NAMES: tuple[str, ...] = tuple(n for cls in ADAPTERS.values() for n in cls.names)


def names_of(library: str) -> tuple[str, ...]:
    """The backend names of one library."""
    return ADAPTERS[library].names


def supporting(feature: str) -> tuple[str, ...]:
    """The backend names whose library has `feature`, in the order of NAMES."""
    return tuple(n for cls in ADAPTERS.values() if cls.has(feature) for n in cls.names)


def markers() -> dict[str, str]:
    """Every backend marker with its description, for pytest's marker list."""
    out: dict[str, str] = {}
    for cls in ADAPTERS.values():
        out.update(cls.markers)
    return out


@functools.cache
def declared(names: Sequence[str] = ()) -> tuple[str, ...]:
    """The backends a book declares (book.toml's `backends`: libraries such as "numpy", or backends such
    as "torch:cpu"), in the order of NAMES; every backend where it declares none."""
    unknown = [n for n in names if n not in NAMES and n not in ADAPTERS]
    if unknown:
        raise ValueError(
            f"unknown backend(s) {', '.join(map(repr, unknown))}; expected libraries "
            f"({', '.join(ADAPTERS)}) or backends ({', '.join(NAMES)})"
        )
    return tuple(n for n in NAMES if not names or n in names or n.split(":")[0] in names)


def detect(only: Sequence[str] = ()) -> dict[str, Backend]:
    """Every backend name with its availability on this machine, in the order of NAMES; with `only`
    (as `declared` reads it), those alone, and no other library is imported to find them."""
    names = declared(only)
    found = {b.name: b for cls in ADAPTERS.values() if set(cls.names) & set(names) for b in cls.detect()}
    return {name: found[name] for name in names}


def empty_caches() -> None:
    """After an out-of-memory error: every loaded library gives its devices' cached memory back."""
    for cls in ADAPTERS.values():
        cls.empty_caches()


def available() -> list[Backend]:
    return [b for b in detect().values() if b.available]


def summary() -> str:
    """One line for the run header: what this machine has."""
    return ", ".join(b.name for b in available()) or "no backend"
