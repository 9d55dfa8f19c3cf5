"""Backends: where a library claim is computed, detected once per run.

A backend is a library on a device: `numpy`, `torch:cpu`, `torch:cuda`, `torch:mps`,
`torch:rocm`, `mlx:cpu`, `mlx:gpu`, `jax:cpu`, `jax:gpu`. Each library is an adapter (one module of this package,
registered below): it detects its backends and does what any claim asks of an array library
(make an array on the device, cast to a dtype by name, finfo, convert to numpy, synchronise,
time a call). It knows no book: what a book computes beyond that is the book's own code,
written on this interface. Where a library lacks a dtype, the adapter raises `NotOnBackend`
with its own words for what is missing.

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

    def __str__(self) -> str:
        return self.name


NO_BACKEND = Backend(NO_BACKEND_NAME, True, "exact and quoted claims are computed once, on no backend")


class Adapter:
    """What any claim asks of one array library, on one backend's device.

    A subclass per library declares its backend names and its marker, and detects its
    backends; its methods make, cast and convert arrays, time a call and free memory. A
    dtype the library lacks raises NotOnBackend saying so (`missing_dtype`).
    """

    library: ClassVar[str]
    module_name: ClassVar[str]
    names: ClassVar[tuple[str, ...]]
    markers: ClassVar[dict[str, str]] = {}  # marker name: description, registered with pytest
    devices: ClassVar[
        dict[str, str]
    ] = {}  # backend name: the library's name for its device, where that is not its place
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

    def bitcast(self, x: Any, name: str) -> Any:
        """The same bits read as another dtype of the same width."""
        return x.view(self.dtype(name))

    def finfo(self, dtype: Any) -> Any:
        return self.module.finfo(dtype)

    def iinfo(self, name: str) -> Any:
        dtype = getattr(self.module, name, None)
        if dtype is None:
            raise NotOnBackend(f"{self.library} {self.version} has no {name} dtype")
        return self.module.iinfo(dtype)

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

    def random_normal(self, shape: tuple[int, ...], seed: int) -> Any:
        """Standard normal FP32 draws from the library's own generator, seeded."""
        raise NotOnBackend(f"{self.library} has no seeded random generator")

    # --- timing and memory -----------------------------------------------------------------

    def sync(self) -> None:
        """Wait for queued work on the device."""

    def evaluate(self, *xs: Any) -> None:
        """Make a lazy library compute `xs` now."""

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

    # --- the device in the library's words ----------------------------------------------------

    def device_words(self) -> str:
        """The device and its architecture, as the library names them."""
        return self.backend.device

    def compute_capability(self) -> tuple[int, int] | None:
        """The CUDA compute capability of the device, or None where it is not a CUDA device."""
        return None


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
