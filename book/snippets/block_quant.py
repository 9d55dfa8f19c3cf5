# %% [markdown]
# # One block, one scale
# Thirty-two consecutive weights share one float16 scale; each weight becomes a small
# signed integer. The same block at 8 and at 4 bits, and the bits each weight costs.

# %%
"""Quantise a block of 32 weights to 8-bit and 4-bit codes with one shared scale, and count the cost."""
import numpy as np

rng = np.random.default_rng(0)
block = (rng.standard_normal(32) * 0.02).astype(np.float32)  # one block of a weight tensor
rms = float(np.sqrt(np.mean(block**2)))


def shown(values: np.ndarray) -> str:
    return "[" + ", ".join(f"{v:.4f}" for v in values[:6]) + "]"


def quantise(x: np.ndarray, bits: int) -> tuple[np.ndarray, np.float16, np.ndarray]:
    """Symmetric grid: codes in [-qmax - 1, qmax], one float16 scale, code x scale to restore."""
    qmax = 2 ** (bits - 1) - 1
    scale = np.float16(np.abs(x).max() / qmax)
    codes = np.clip(np.round(x / np.float32(scale)), -qmax - 1, qmax).astype(np.int8)
    return codes, scale, codes * np.float32(scale)


print("original    :", shown(block), f"  rms of block = {rms:.4f}")

# %%
for bits in (8, 4):
    codes, scale, restored = quantise(block, bits)
    error = float(np.abs(restored - block).mean())
    cost = (block.size * bits + 8 * scale.itemsize) / block.size
    print(f"{bits}-bit codes : {codes[:6].tolist()}   scale = {float(scale):.2e}")
    print(f"   restored : {shown(restored)}")
    print(f"   bits per weight = ({block.size} x {bits} + {8 * scale.itemsize}) / {block.size} = {cost:.2f}   "
          f"mean |error| = {error:.1e} = {error / rms:.1%} of the block's rms   "
          f"codes equal to 0: {int((codes == 0).sum())} of {block.size}")
