# %% [markdown]
# # What one matrix multiplication costs
#
# (m, k) @ (k, n) is m·n·k multiply-adds, 2·m·n·k FLOPs. Doing them one at a time in the
# interpreter and handing the whole product to numpy give the same answer at very
# different speeds. Both sides use one core.

# %%
import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"        # set before numpy loads its BLAS
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
os.environ["VECLIB_MAXIMUM_THREADS"] = "1"

import time

import numpy as np

m = k = n = 128
rng = np.random.default_rng(0)
a = rng.standard_normal((m, k), dtype=np.float32)
b = rng.standard_normal((k, n), dtype=np.float32)
work = 2 * m * n * k                             # a multiply and an add for each (i, j, p)
print(f"({m} x {k}) @ ({k} x {n}): {m * n * k:,} multiply-adds = {work:,} FLOPs")


# %%
def loops(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Every multiply-add asked of the interpreter, one at a time."""
    columns = np.ascontiguousarray(b.T)
    c = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for i in range(a.shape[0]):
        row = a[i]
        for j in range(b.shape[1]):
            column = columns[j]
            total = np.float32(0)
            for p in range(a.shape[1]):
                total += row[p] * column[p]
            c[i, j] = total
    return c


start = time.perf_counter()
looped = loops(a, b)
loop_seconds = time.perf_counter() - start

calls = []
for _ in range(500):                             # best single call of many
    start = time.perf_counter()
    a @ b
    calls.append(time.perf_counter() - start)
numpy_seconds = min(calls)

print(f"python loops: {loop_seconds:9.4f} s per call   {work / loop_seconds / 1e9:8.3f} GFLOP/s")
print(f"numpy a @ b : {numpy_seconds:9.6f} s per call   {work / numpy_seconds / 1e9:8.3f} GFLOP/s")
print(f"same answer: max |difference| = {np.abs(looped - a @ b).max():.1e}")
