# %% [markdown]
# # Shapes, dtypes and bytes
#
# A tensor is a flat buffer plus a shape and a dtype, so its size in bytes is its element
# count times the bytes of one element. Matrix multiplication checks that the inner sizes
# agree and says which sizes differ when they do not.

# %%
import numpy as np

batch, hidden, intermediate = 32, 4096, 12288   # a batch of tokens; Qwen3-8B's widths
tokens = np.zeros((batch, hidden), dtype=np.float32)
# x @ w wants w as (inputs, outputs); a checkpoint stores gate_proj as (outputs, inputs)
weight = np.zeros((hidden, intermediate), dtype=np.float32)


def describe(name: str, array: np.ndarray) -> str:
    return (f"{name}: shape={array.shape}  ndim={array.ndim}  dtype={array.dtype}  "
            f"elements={array.size:,}  bytes={array.nbytes:,}")


print(describe("x", tokens))
print(describe("w", weight))

# %%
product = tokens @ weight
print(f"x @ w: shape={product.shape}   the inner sizes agree: {tokens.shape[-1]} == {weight.shape[0]}")

# %%
try:
    weight @ tokens                              # inner sizes 12288 and 32
except ValueError as error:
    print("w @ x fails:", error)
