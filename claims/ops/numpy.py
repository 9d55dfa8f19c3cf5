"""This book's operations with numpy on the CPU (ml_dtypes for the formats numpy lacks)."""

from __future__ import annotations

from typing import Any, Callable

from claims.ops.base import Ops
from verified_book import InvariantFailed


class NumpyOps(Ops):
    library = "numpy"
    features = frozenset({"strides", "views", "finfo.resolution", "random", "copy"})
    lacking = {
        "autodiff": "numpy has no automatic differentiation",
        "optimizer": "numpy has no optimizer",
        "nn": "numpy has no neural-network layers",
        "grad_mode": "numpy has no automatic differentiation",
    }
    splits_copies = True  # numpy copies on one thread

    def to_bits(self, values: Any, name: str, label: str) -> list[int]:
        import numpy as np

        with np.errstate(over="ignore", invalid="ignore"):
            return np.array(list(values), np.float32).astype(self.adapter.dtype(name, label)).view(np.uint8).tolist()

    def share(self, mask: Any) -> float:
        return float(mask.mean())  # numpy averages booleans in float64

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
        info = self.adapter.finfo(self.adapter.dtype("float8_e8m0fnu"))  # ml_dtypes' finfo
        if (info.nexp, info.nmant) != (8, 0):
            raise InvariantFailed(
                f"ml_dtypes' float8_e8m0fnu has {info.nexp} exponent and {info.nmant} mantissa bits; E8M0 has 8 and 0"
            )
        return int(info.bits)

    def e2m1_values(self) -> list[float]:
        import numpy as np

        e2m1 = self.adapter.dtype("float4_e2m1fn")  # ml_dtypes' type, named in its words where it lacks it
        return np.arange(16, dtype=np.uint8).view(e2m1).astype(np.float32).tolist()

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
