"""Tensors: typed memory plus a shape, and what the stride model makes free or costly.

The chapter's running example is a 2×3 FP32 matrix holding 0..5 in reading order.
Each claim asks a library about it: numpy (whose strides are in bytes, converted to
elements here), torch on every device present, and MLX where it has the notion. MLX
exposes no strides or storage, and its arrays are values (a write into a slice does
not reach the parent), so the stride and aliasing claims are not computed there.

"Allocated" below means the bytes of new storage an operation made: zero when the
result is a view on the parent's buffer, the result's own size when it is a copy.
"""

from __future__ import annotations

from typing import Any, Callable

from claims.ops import lacks, need, ops
from verified_book import Backend, InvariantFailed, NotOnBackend, claim, names_of

ROWS, COLS = 2, 3
MLX = names_of("mlx")


def float32(backend: Backend) -> Any:
    """The backend's FP32 dtype object."""
    return backend.adapter.dtype("float32")


def matrix(backend: Backend) -> Any:
    """The chapter's 2×3 FP32 matrix, 0..5 in reading order, on the backend's device."""
    values = [[float(COLS * i + j) for j in range(COLS)] for i in range(ROWS)]
    return backend.tensor(values, float32(backend))


def strides(backend: Backend, array: Any) -> tuple[int, ...]:
    """Strides in elements (numpy counts bytes; its operations divide by the item size)."""
    return ops(backend).strides(array)


def element_offset(backend: Backend, array: Any, i: int, j: int) -> int:
    """Where element (i, j) sits in the flat buffer, in elements from the buffer's start."""
    return ops(backend).element_offset(array, i, j)


def allocated(backend: Backend, parent: Any, result: Any) -> int:
    """Bytes of new storage `result` needed: 0 for a view on `parent`'s buffer, else its size."""
    return ops(backend).allocated(parent, result)


def footprint(array: Any) -> int:
    """numel × element size, the atom of every memory budget; checked against the library's own count."""
    numel = array.numel() if hasattr(array, "numel") else array.size
    size = array.element_size() if hasattr(array, "element_size") else array.itemsize
    reported = array.untyped_storage().nbytes() if hasattr(array, "untyped_storage") else array.nbytes
    if numel * size != reported:
        raise InvariantFailed(
            f"numel {numel} × element size {size} = {numel * size}, but the library reports {reported} bytes"
        )
    return int(numel * size)


@claim("tensors.matrix.numel", kind="library")
def matrix_numel(backend: Backend) -> int:
    """Elements in the 2×3 matrix."""
    x = matrix(backend)
    return backend.adapter.numel(x)


@claim("tensors.matrix.bytes", kind="library")
def matrix_bytes(backend: Backend) -> int:
    """Bytes of the 2×3 FP32 matrix: numel × element size, as the library also reports it."""
    return footprint(matrix(backend))


@claim("tensors.matrix.element_bytes", kind="library")
def matrix_element_bytes(backend: Backend) -> int:
    """Bytes per FP32 element, as the library reports them."""
    x = matrix(backend)
    return backend.adapter.itemsize(x)


@claim("tensors.matrix.shape", kind="library")
def matrix_shape(backend: Backend) -> tuple[int, ...]:
    """The matrix's shape."""
    return tuple(matrix(backend).shape)


@claim("tensors.matrix.strides", kind="library")
def matrix_strides(backend: Backend) -> tuple[int, ...]:
    """Row-major strides in elements: a row down is COLS elements, a column across is one."""
    return strides(backend, matrix(backend))


@claim("tensors.matrix.row_stride", kind="library")
def matrix_row_stride(backend: Backend) -> int:
    """How many elements further on one row down lies: the first of the row-major strides."""
    return strides(backend, matrix(backend))[0]


@claim("tensors.matrix.last_offset", kind="library")
def matrix_last_offset(backend: Backend) -> int:
    """Offset of the last element (1, 2); every element must sit at 3i + j (equation 1.1)."""
    x = matrix(backend)
    s0, s1 = strides(backend, x)
    for i in range(ROWS):
        for j in range(COLS):
            found = element_offset(backend, x, i, j)
            if found != i * s0 + j * s1 or found != COLS * i + j:
                raise InvariantFailed(f"element ({i}, {j}) sits at offset {found}; i·s0 + j·s1 = {i * s0 + j * s1}")
    return element_offset(backend, x, ROWS - 1, COLS - 1)


@claim("tensors.matrix.last_byte", kind="library")
def matrix_last_byte(backend: Backend) -> int:
    """Byte where the last element starts: element size × its offset."""
    return matrix_element_bytes(backend) * matrix_last_offset(backend)


@claim("tensors.transpose.shape", kind="library")
def transpose_shape(backend: Backend) -> tuple[int, ...]:
    """The transpose's shape: the two axes swapped."""
    return tuple(matrix(backend).T.shape)


@claim("tensors.transpose.strides", kind="library")
def transpose_strides(backend: Backend) -> tuple[int, ...]:
    """The transpose's strides: the parent's, swapped."""
    return strides(backend, matrix(backend).T)


def _contiguous(x: Any) -> Any:
    if hasattr(x, "contiguous"):
        return x.contiguous()
    import numpy as np

    return np.ascontiguousarray(x)


def _clone(x: Any) -> Any:
    return x.clone() if hasattr(x, "clone") else x.copy()


OPERATIONS: dict[str, Callable[[Any], Any]] = {
    "transpose": lambda x: x.T,
    "slice": lambda x: x[:, 1],
    "reshape_view": lambda x: x.reshape(COLS, ROWS),
    "reshape_copy": lambda x: x.T.reshape(ROWS * COLS),
    "contiguous": lambda x: _contiguous(x.T),
    "clone": _clone,
}


@claim("tensors.allocated.{op}", kind="library", over={"op": tuple(OPERATIONS)})
def allocated_by(backend: Backend, op: str) -> int:
    """Bytes of new storage each operation makes: views make none, copies make the whole tensor."""
    need(backend, "strides")
    x = matrix(backend)
    return allocated(backend, x, OPERATIONS[op](x))


@claim("tensors.slice.parent_changed", kind="library")
def slice_write_reaches_parent(backend: Backend) -> int:
    """Parent elements that change when the column slice x[:, 1] is overwritten: the slice aliases."""
    why = lacks(backend, "views")
    if why is not None:
        raise NotOnBackend(f"{why} (see tensors.slice.mlx_parent_changed), so there is no aliasing to observe")
    x = matrix(backend)
    before = x.tolist()
    column = x[:, 1]
    column[:] = -1.0
    after = x.tolist()
    return sum(1 for i in range(ROWS) for j in range(COLS) if before[i][j] != after[i][j])


@claim("tensors.slice.mlx_parent_changed", kind="library", backends=MLX)
def mlx_slice_write(backend: Backend) -> int:
    """On MLX the same write leaves the parent untouched: elements of the parent that change."""
    x = matrix(backend)
    before = x.tolist()
    column = x[:, 1]
    column[:] = -1.0
    if column.tolist() != [-1.0] * ROWS:
        raise InvariantFailed(f"the write did not reach the slice itself: found {column.tolist()}")
    after = x.tolist()
    return sum(1 for i in range(ROWS) for j in range(COLS) if before[i][j] != after[i][j])


BATCH, SEQUENCE, WIDTH, OUT = 2, 3, 4, 5


@claim("tensors.broadcast.shape", kind="library")
def broadcast_shape(backend: Backend) -> tuple[int, ...]:
    """Shape of a (B, S, D) activation plus a (D,) bias: the bias applies at every (b, s)."""
    act = backend.tensor([[[float(d) for d in range(WIDTH)]] * SEQUENCE] * BATCH, float32(backend))
    bias = backend.tensor([10.0 * (d + 1) for d in range(WIDTH)], float32(backend))
    out = act + bias
    values = out.tolist()
    for b in range(BATCH):
        for s in range(SEQUENCE):
            if values[b][s] != [d + 10.0 * (d + 1) for d in range(WIDTH)]:
                raise InvariantFailed(
                    f"row ({b}, {s}) of the sum is {values[b][s]}: the bias was not applied per position"
                )
    return tuple(out.shape)


@claim("tensors.broadcast.strides", kind="library")
def broadcast_strides(backend: Backend) -> tuple[int, ...]:
    """Strides of the (D,) bias expanded to (B, S, D): zero on the new axes, so nothing is copied."""
    bias = backend.tensor([1.0] * WIDTH, float32(backend))
    wide = ops(backend).broadcast_to(bias, (BATCH, SEQUENCE, WIDTH))
    if allocated(backend, bias, wide) != 0:
        raise InvariantFailed("the expanded bias has storage of its own; broadcasting should make a view")
    return strides(backend, wide)


@claim("tensors.einsum.shape", kind="library")
def einsum_shape(backend: Backend) -> tuple[int, ...]:
    """einsum('bsd,de->bse') names every axis; its result equals the matmul it spells out."""
    act = backend.tensor(
        [[[float(b + s + d) for d in range(WIDTH)] for s in range(SEQUENCE)] for b in range(BATCH)], float32(backend)
    )
    weight = backend.tensor([[float(d * OUT + e) for e in range(OUT)] for d in range(WIDTH)], float32(backend))
    out = backend.module.einsum("bsd,de->bse", act, weight)
    if out.tolist() != (act @ weight).tolist():
        raise InvariantFailed("einsum('bsd,de->bse') differs from the matmul act @ weight")
    return tuple(out.shape)
