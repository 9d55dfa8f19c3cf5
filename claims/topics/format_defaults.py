"""What the libraries do by default: the floating dtype a new tensor gets, and what an FP32 matmul keeps.

Two statements of the source chapter are about defaults, and both are checked against
the library on the machine that runs the suite:

- "BF16 is the default working dtype for both my inference and my training labs": the
  author's choice, true as stated; what the libraries themselves default to is read from
  them (torch.get_default_dtype(), and the dtype a float literal gets);
- "Matmuls silently run in TF32 by default on recent hardware unless you ask for true
  FP32": in the chapter's tool, PyTorch, on a tensor-core GPU. On such a GPU the FP32
  matmul is probed with PyTorch's settings left as they are; elsewhere the same answer is
  read from the two settings that decide it, `torch.get_float32_matmul_precision()` and
  `torch.backends.cuda.matmul.allow_tf32`. On any backend, an FP32 matmul is probed for
  how many mantissa bits of its inputs survive. The probe multiplies matrices filled with
  1 + 2^-k by the identity; the product is exact in FP32 for every k up to 23, while
  TF32 rounds the inputs to 10 mantissa bits and BF16 to 7, so the largest k that
  survives is the number of mantissa bits the matmul really kept.

What decides that answer on a machine is recorded with it (`matmul_settings`): the environment
variables that switch TF32 on or off behind the library's back (NGC containers set
`TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1`, clusters `NVIDIA_TF32_OVERRIDE=0`; MLX reads
`MLX_ENABLE_TF32`, and its CUDA build and newer Apple GPUs use TF32-like matmuls unless it is 0),
the library's own mode, and the device's architecture. Where the environment, not the library,
sets the default, the default's figure is skipped with the variable named.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

from claims.ops import ops
from claims.topics.formats import FORMATS
from verified_book import NAMES, Backend, InvariantFailed, NotOnBackend, claim, names_of, vendor

TORCH = names_of("torch")
ON_THE_CPU = tuple(n for n in NAMES if ":" not in n or n.endswith(":cpu"))  # numpy, and each library's CPU backend
LIBRARIES: dict[str, tuple[str, ...]] = {lib: names_of(lib) for lib in ("numpy", "torch", "mlx")}  # the book's figures
PROBE_SIZE = 256  # large enough that a GPU library takes its tensor-core path


def default_float_bits(backend: Backend) -> int:
    """Bits of the dtype a library gives a float literal, and (torch) of its declared default."""
    return ops(backend).default_float_bits()


def capability(text: str) -> tuple[int, int]:
    """A compute capability written "major.minor", as a tuple that compares correctly (8.9 < 10.0)."""
    major, minor = str(text).split(".")
    return int(major), int(minor)


for _lib, _names in LIBRARIES.items():
    claim(f"formats.default.float_bits.{_lib}", kind="library", backends=_names)(default_float_bits)


def _square(backend: Backend, size: int, value: float | None) -> Any:
    """A size × size FP32 matrix on the backend's device: filled with `value`, or the identity for None."""
    adapter = backend.adapter
    float32 = adapter.dtype("float32")
    return adapter.eye(size, float32) if value is None else adapter.full((size, size), value, float32)


def kept_mantissa_bits(backend: Backend) -> int:
    """Mantissa bits an FP32 matmul keeps: the largest k for which (1 + 2^-k) · I comes back exact."""
    kept = 0
    with backend.adapter.on_device():
        identity = _square(backend, PROBE_SIZE, None)
        for k in range(1, FORMATS["fp32"].mantissa + 1):
            value = 1.0 + 2.0**-k
            product = _square(backend, PROBE_SIZE, value) @ identity
            if not bool((product == value).all().item()):
                break
            kept = k
    return kept


def matmul_settings(backend: Backend) -> dict[str, Any]:
    """Record what decides an FP32 matmul's precision on this backend, and return it by name."""
    return ops(backend).matmul_settings()


def environment_default(backend: Backend) -> str | None:
    """Why an FP32 matmul's default precision on this backend is the environment's, not the
    library's own; None where nothing outside the library sets it. Reads no device."""
    return ops(backend).matmul_environment()


@claim("formats.default.matmul.kept_bits", kind="library", backends=ON_THE_CPU)
def default_matmul_bits(backend: Backend) -> int:
    """Mantissa bits an FP32 matmul keeps on the CPU with the library's settings left as they are: the book's
    figure speaks of the CPU; what a GPU keeps is each library's own figure."""
    overridden = environment_default(backend)
    if overridden:
        raise NotOnBackend(
            f"{overridden}; the figure is the library's own default, so it is checked only where "
            "the environment leaves it alone"
        )
    matmul_settings(backend)
    return kept_mantissa_bits(backend)


def setting_bits(backend: Backend) -> tuple[int, str]:
    """Mantissa bits PyTorch's own settings select for an FP32 matmul (TF32's where TF32 is allowed for
    matmuls, else FP32's), and the settings that say so."""
    allowed, settings = ops(backend).tf32_by_settings()
    return FORMATS["tf32" if allowed else "fp32"].mantissa, settings


@claim(
    "formats.default.matmul.torch_setting_bits",
    kind="library",
    backends=TORCH,
    quote="Matmuls silently run in TF32 by default on recent hardware unless you ask for true FP32.",
    quote_at="tensors-autograd-and-number-formats.txt:33",
)
def torch_setting_bits(backend: Backend) -> int:
    """Mantissa bits PyTorch's default settings select for an FP32 matmul: torch's own setting, read here.

    A fact about the library, the same on every device it runs on: `get_float32_matmul_precision()` and
    `backends.cuda.matmul.allow_tf32` as torch starts. What a GPU's tensor cores then keep is
    `formats.default.matmul.torch_tensor_core_bits`, measured only on such a GPU.

    The dispute is PyTorch's alone, the chapter's tool and the one read here. Other stacks do
    default to TF32, by their own documentation, and the book says so without disputing them:
    TensorFlow (`tf.config.experimental.enable_tensor_float_32_execution`: "TensorFloat-32 is
    enabled by default"), JAX (docs, "Matmul precision": float32 dot products default to "TF32 on
    recent GPUs"), NVIDIA's NGC PyTorch containers (`TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1`, per
    MONAI's "Precision and Accelerating" guide) and MLX ("Numerical Precision": reduced precision
    on matrix units unless `MLX_ENABLE_TF32=0`).
    """
    overridden = environment_default(backend)
    if overridden:
        raise NotOnBackend(
            f"{overridden}; the figure is torch's own default, so it is read only where the environment leaves it alone"
        )
    return setting_bits(backend)[0]


@claim("formats.default.matmul.torch_tensor_core_bits", kind="library", backends=("torch:cuda",))
def torch_tensor_core_bits(backend: Backend) -> int:
    """Mantissa bits PyTorch's FP32 matmul keeps by default on a GPU with TF32 tensor cores, measured there.

    A statement about that hardware: computed only on such a GPU, where the probe measures the matmul
    with PyTorch's settings left as they are, and must agree with what the settings select. On any
    other device it is not computed, so it never shows as verified by a machine without the GPU.
    """
    overridden = environment_default(backend)
    if overridden:
        raise NotOnBackend(
            f"{overridden}; the figure is torch's own default, measured only where the environment leaves it alone"
        )
    found = backend.adapter.compute_capability()
    needed = capability(vendor("cuda_formats.toml", "tf32"))
    if found is None or found < needed:
        shown = "none" if found is None else f"{found[0]}.{found[1]}"
        raise NotOnBackend(
            f"TF32 tensor cores start at compute capability {needed[0]}.{needed[1]}; this device's is "
            f"{shown}, so the figure about them is not measured here"
        )
    by_settings, settings = setting_bits(backend)
    matmul_settings(backend)
    measured = kept_mantissa_bits(backend)
    if measured != by_settings:
        raise InvariantFailed(f"the default FP32 matmul kept {measured} bits; {settings} select {by_settings}")
    return measured


@contextlib.contextmanager
def _float32_matmul_precision(setting: str) -> Iterator[None]:
    import torch

    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(setting)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


@claim("formats.default.matmul.jax_gpu_kept_bits", kind="library", backends=("jax:gpu",))
def jax_gpu_matmul_bits(backend: Backend) -> int:
    """Mantissa bits an FP32 dot keeps on a GPU at JAX's default precision, where XLA may pick TF32: checked
    only on a GPU with TF32 tensor cores, since an older one has no TF32 to pick."""
    overridden = environment_default(backend)
    if overridden:
        raise NotOnBackend(
            f"{overridden}; the figure is JAX's own default, so it is checked only where the environment leaves it "
            "alone"
        )
    matmul_settings(backend)
    found = backend.adapter.compute_capability()
    needed = capability(vendor("cuda_formats.toml", "tf32"))
    if found is None or found < needed:
        where = "this GPU is not a CUDA device" if found is None else f"this device is {found[0]}.{found[1]}"
        raise NotOnBackend(f"TF32 tensor cores start at compute capability {needed[0]}.{needed[1]}; {where}")
    return kept_mantissa_bits(backend)


@claim("formats.default.matmul.jax_gpu_highest_bits", kind="library", backends=("jax:gpu",))
def jax_gpu_highest_bits(backend: Backend) -> int:
    """Mantissa bits the same FP32 dot keeps on a JAX GPU under `jax.default_matmul_precision("highest")`, the
    setting the throughput probe uses to time FP32 itself rather than TF32."""
    matmul_settings(backend)
    with ops(backend).full_precision_fp32():
        return kept_mantissa_bits(backend)


@claim("formats.default.matmul.tf32_kept_bits", kind="library", backends=("torch:cuda",))
def tf32_matmul_bits(backend: Backend) -> int:
    """Mantissa bits an FP32 matmul keeps once TF32 is asked for with set_float32_matmul_precision("high")."""
    forced = os.environ.get("NVIDIA_TF32_OVERRIDE")
    if forced == "0":
        raise NotOnBackend(
            "NVIDIA_TF32_OVERRIDE=0 turns TF32 off in cuBLAS on this machine, so asking for it keeps "
            "FP32's 23 bits; the figure is what TF32 keeps where it is allowed"
        )
    matmul_settings(backend)
    found = backend.adapter.compute_capability() or (0, 0)
    needed = capability(vendor("cuda_formats.toml", "tf32"))
    if found < needed:
        raise NotOnBackend(
            f"TF32 tensor cores start at compute capability {needed[0]}.{needed[1]}; this device is "
            f"{found[0]}.{found[1]}"
        )
    with _float32_matmul_precision("high"):
        return kept_mantissa_bits(backend)
