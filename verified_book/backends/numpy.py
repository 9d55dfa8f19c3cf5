"""numpy on the CPU, with ml_dtypes for the formats numpy lacks (bfloat16, float8, int4)."""

from __future__ import annotations

from typing import Any

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

    def random_normal(self, shape: tuple[int, ...], seed: int) -> Any:
        import numpy as np

        return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
