"""numpy on the CPU, with ml_dtypes for the formats numpy lacks (bfloat16, float8, int4)."""

from __future__ import annotations

from typing import Any, Callable

from verified_book.authoring.registry import NotOnBackend
from verified_book.backends import Adapter, Backend, register, try_import

NATIVE = ("float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")


def _ml_dtypes(label: str) -> Any:
    """ml_dtypes, asked for only by the formats numpy lacks: where it is not installed, the claim that
    needs it is skipped on numpy with the package named, and every format numpy has still computes."""
    try:
        import ml_dtypes
    except ImportError as e:
        raise NotOnBackend(
            f"numpy needs ml_dtypes for {label}, and ml_dtypes does not import ({e}); pip install ml_dtypes"
        ) from None
    return ml_dtypes


@register
class NumpyAdapter(Adapter):
    library = "numpy"
    module_name = "numpy"
    names = ("numpy",)
    features = frozenset({"strides", "views", "finfo.resolution", "random", "copy"})
    lacking = {
        "autodiff": "numpy has no automatic differentiation",
        "optimizer": "numpy has no optimizer",
        "nn": "numpy has no neural-network layers",
        "grad_mode": "numpy has no automatic differentiation",
    }
    splits_copies = True  # numpy copies on one thread
    companions = ("ml_dtypes",)  # its bfloat16, float8 and int4 types

    @classmethod
    def detect(cls) -> list[Backend]:
        np, why = try_import("numpy")
        if np is None:
            return [Backend("numpy", False, why)]
        return [Backend("numpy", True, "numpy on the CPU", np.__version__, "cpu")]

    def array(self, values: Any, dtype: Any = None) -> Any:
        import numpy as np

        return np.asarray(values, dtype=dtype)

    def dtype(self, name: str, label: str | None = None) -> Any:
        import numpy as np

        if name in NATIVE:
            return getattr(np, name)
        ml_dtypes = _ml_dtypes(label or name)
        if hasattr(ml_dtypes, name):
            return getattr(ml_dtypes, name)
        raise NotOnBackend(f"numpy with ml_dtypes {ml_dtypes.__version__} has no dtype for {label or name}")

    def astype(self, x: Any, dtype: Any) -> Any:
        import numpy as np

        with np.errstate(over="ignore", invalid="ignore"):  # a cast past a format's range is the point of a cast
            return x.astype(dtype)

    def to_bits(self, values: Any, name: str, label: str) -> list[int]:
        import numpy as np

        with np.errstate(over="ignore", invalid="ignore"):
            return np.array(list(values), np.float32).astype(self.dtype(name, label)).view(np.uint8).tolist()

    def finfo(self, dtype: Any) -> Any:
        import numpy as np

        if dtype in (np.float32, np.float16, np.float64):
            return np.finfo(dtype)
        return _ml_dtypes(f"finfo of {getattr(dtype, '__name__', dtype)}").finfo(dtype)

    def iinfo(self, name: str) -> Any:
        import numpy as np

        if hasattr(np, name):
            return np.iinfo(getattr(np, name))
        ml_dtypes = _ml_dtypes(name)
        if not hasattr(ml_dtypes, name):
            raise NotOnBackend(f"ml_dtypes {ml_dtypes.__version__} has no {name}")
        return ml_dtypes.iinfo(getattr(ml_dtypes, name))

    def to_numpy(self, x: Any) -> Any:
        import numpy as np

        return np.asarray(x)

    def from_numpy(self, a: Any) -> Any:
        return a

    def share(self, mask: Any) -> float:
        return float(mask.mean())  # numpy averages booleans in float64

    def random_normal(self, shape: tuple[int, ...], seed: int) -> Any:
        import numpy as np

        return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)

    def logsumexp(self, x: Any) -> float:
        import numpy as np

        return float(np.logaddexp.reduce(x))

    def strides(self, x: Any) -> tuple[int, ...]:
        return tuple(s // x.itemsize for s in x.strides)

    def element_offset(self, x: Any, i: int, j: int) -> int:
        base = x.__array_interface__["data"][0]
        return int((x[i : i + 1, j : j + 1].__array_interface__["data"][0] - base) // x.itemsize)

    def allocated(self, parent: Any, result: Any) -> int:
        import numpy as np

        return 0 if np.shares_memory(parent, result) else int(result.nbytes)

    def broadcast_to(self, x: Any, shape: tuple[int, ...]) -> Any:
        import numpy as np

        return np.broadcast_to(x, shape)

    def e8m0_bits(self) -> int:
        from verified_book.authoring.registry import InvariantFailed

        ml_dtypes = _ml_dtypes("float8_e8m0fnu")
        info = ml_dtypes.finfo(ml_dtypes.float8_e8m0fnu)
        if (info.nexp, info.nmant) != (8, 0):
            raise InvariantFailed(
                f"ml_dtypes' float8_e8m0fnu has {info.nexp} exponent and {info.nmant} mantissa bits; E8M0 has 8 and 0"
            )
        return int(info.bits)

    def e2m1_values(self) -> list[float]:
        import numpy as np

        ml_dtypes = _ml_dtypes("float4_e2m1fn")
        if not hasattr(ml_dtypes, "float4_e2m1fn"):
            raise NotOnBackend(f"ml_dtypes {ml_dtypes.__version__} has no float4_e2m1fn")
        return np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32).tolist()

    def copy_into(self, dst: Any, src: Any) -> Any:
        import numpy as np

        np.copyto(dst, src)
        return dst

    def matmul_into(self, a: Any, b: Any, out: Any) -> Callable[[], Any]:
        import numpy as np

        return lambda: np.matmul(a, b, out=out)

    def matmul_unsupported(self, dtype: str) -> str | None:
        if dtype == "fp8":
            return (
                "FP8 matmul is measured only with torch on CUDA (torch._scaled_mm); numpy and MLX have no float8 matmul"
            )
        if dtype == "bf16":
            return "numpy has no bfloat16 of its own (ml_dtypes adds the dtype, not a matrix-multiply kernel for it)"
        return None
