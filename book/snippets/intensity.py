# %% [markdown]
# # Arithmetic intensity on one weight matrix
#
# Each call reads the same FP32 weight once. At batch 1 every weight fetched serves one
# multiply-add, so the call waits on memory; at batch 256 the same bytes serve 256, and the
# arithmetic sets the pace.

# %%
import time
from typing import Callable

import torch

torch.manual_seed(0)
inputs, outputs = 4096, 12288                    # Qwen3-8B's gate_proj, as x @ w needs it
w = torch.randn(inputs, outputs, dtype=torch.float32)
weight_bytes = w.numel() * w.element_size()


def best_of(call: Callable[[], object], repeats: int) -> float:
    """Seconds of the fastest of a few calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


print(f"weights: {weight_bytes / 1e6:.0f} MB, read once per call; {torch.get_num_threads()} CPU threads")
print(f"{'batch':>6} {'ms per call':>12} {'GFLOP/s':>9} {'weight GB/s':>12} {'FLOP per byte':>14}")

# %%
for batch in (1, 8, 64, 256):
    x = torch.randn(batch, inputs, dtype=torch.float32)
    seconds = best_of(lambda: x @ w, repeats=2)
    work = 2 * batch * inputs * outputs
    print(f"{batch:>6} {seconds * 1e3:>12.2f} {work / seconds / 1e9:>9.1f} "
          f"{weight_bytes / seconds / 1e9:>12.1f} {work / weight_bytes:>14.1f}")
