# %% [markdown]
# # What each format keeps
# The limits torch reports for five formats, three casts that each lose something,
# an update that vanishes, and a million weights rounded into each format.

# %%
"""Ask torch what each floating-point format can hold, then watch values round into it."""
import torch

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2]


def short(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


print(f"{'dtype':<14}{'bits':>5}{'eps':>11}{'max':>12}{'smallest normal':>17}")
for dtype in FLOATS:
    info = torch.finfo(dtype)
    print(f"{short(dtype):<14}{info.bits:>5}{info.eps:>11.2e}{info.max:>12.5g}{info.smallest_normal:>17.2e}")

# %% [markdown]
# Three values, each cast from FP32 into a narrower format and read back.

# %%
def through(value: float, dtype: torch.dtype) -> float:
    """Store `value` in `dtype` and read it back as a Python float."""
    return torch.tensor(value).to(dtype).to(torch.float32).item()


print()
for label, value in [("1.001", 1.001), ("1e-8, a small gradient", 1e-8), ("70000, a large activation", 70000.0)]:
    row = "  ".join(f"{short(d)}={through(value, d):<10.7g}" for d in FLOATS[:3])
    print(f"{label:<27} {row}")

# %% [markdown]
# A small update to a weight, kept in BF16 and in FP32.

# %%
half_bf16 = torch.tensor(0.5, dtype=torch.bfloat16)
half_fp32 = torch.tensor(0.5, dtype=torch.float32)
print()
print(f"bf16: 0.5 + 0.0001 = {(half_bf16 + 0.0001).item()}    fp32: 0.5 + 0.0001 = {(half_fp32 + 0.0001).item()}")

# %% [markdown]
# A million weights with the spread `initializer_range = 0.02` gives them, rounded into
# each format and back: the mean relative error, and how many became exactly zero.

# %%
generator = torch.Generator().manual_seed(0)
weights = torch.randn(1_000_000, generator=generator) * 0.02


def damage(label: str, restored: torch.Tensor) -> None:
    relative = ((restored - weights).abs() / weights.abs()).mean().item()
    zeros = int((restored == 0).sum())
    print(f"{label:<28} mean relative rounding error {relative:.4f}   values that became 0: {zeros}")


print()
for dtype in FLOATS[1:]:
    damage(short(dtype), weights.to(dtype).to(torch.float32))
lift = 64.0  # one scale for the whole tensor, moving 0.02-sized values up into E4M3's normal range
damage("float8_e4m3fn, scaled x64", (weights * lift).to(torch.float8_e4m3fn).to(torch.float32) / lift)
