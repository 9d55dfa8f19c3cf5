# %% [markdown]
# # Where a model's bytes go
# Walk Qwen3-0.6B parameter by parameter, in FP32, BF16 and FP16: shape, dtype, element
# size and bytes of every tensor, written to `artifacts/param_footprint.csv`. The
# totals are checked against parameters × bytes per element. On a CUDA machine the BF16
# copy is then placed on the GPU and the allocator's count is set beside the sum.
#
# The model is built from its shipped `config.json` on the meta device: true shapes and
# dtypes, no weights, nothing downloaded. To walk real weights instead, pass a local
# checkpoint folder: `python inspect_dtypes.py --weights /path/to/Qwen3-0.6B`.

# %%
"""Layer-by-layer dtype and memory inspector for Qwen3-0.6B."""
import argparse
import csv
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, Qwen3Config, Qwen3ForCausalLM

# The model's config.json as the book ships it (claims/data/), found from this file's place.
CONFIG = Path(__file__).resolve().parents[2] / "claims" / "data" / "models" / "qwen3-0.6b" / "config.json"
FORMATS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
CSV_PATH = Path("artifacts") / "param_footprint.csv"
FIELDS = ["format", "param", "shape", "dtype", "elem_bytes", "numel", "bytes"]

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--weights", type=Path, help="a local checkpoint folder to load instead of the meta model")
args, _ = parser.parse_known_args()


def load() -> torch.nn.Module:
    """The FP32 model: real weights from a local folder, or the bare architecture on the meta device."""
    if args.weights:
        return AutoModelForCausalLM.from_pretrained(args.weights, dtype=torch.float32, local_files_only=True)
    with torch.device("meta"):
        return Qwen3ForCausalLM(Qwen3Config.from_json_file(CONFIG)).to(torch.float32)


def gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.2f} GiB"


def gb(nbytes: int) -> str:
    return f"{nbytes / 1e9:.2f} GB"


# %% [markdown]
# One row per parameter per format. `named_parameters()` yields a shared tensor once,
# so the output embedding, tied to the input one, is not counted twice.

# %%
model = load()
n_params = sum(p.numel() for p in model.parameters())
totals: dict[str, int] = {}
CSV_PATH.parent.mkdir(exist_ok=True)
with CSV_PATH.open("w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=FIELDS)
    writer.writeheader()
    for label, dtype in FORMATS.items():
        model = model.to(dtype)
        totals[label] = 0
        for name, p in model.named_parameters():
            nbytes = p.numel() * p.element_size()
            totals[label] += nbytes
            writer.writerow({"format": label, "param": name, "shape": "x".join(map(str, p.shape)), "dtype": str(p.dtype),
                             "elem_bytes": p.element_size(), "numel": p.numel(), "bytes": nbytes})
        assert totals[label] == n_params * dtype.itemsize, f"{label}: the sum differs from parameters x {dtype.itemsize} bytes"
rows = len(FORMATS) * len(list(model.named_parameters()))

# %% [markdown]
# The summary: parameters, each format's total in binary and decimal units, the fattest
# tensors.

# %%
print(f"model: Qwen3-0.6B ({'weights from ' + str(args.weights) if args.weights else 'config.json on the meta device, no weights'})")
print(f"parameters: {n_params:,}")
for label, total in totals.items():
    print(f"  {label}: {total:>13,} bytes = {gib(total)} = {gb(total)}   (parameters x {FORMATS[label].itemsize} bytes)")
print("fattest tensors in bf16:")
fattest = sorted(model.to(torch.bfloat16).named_parameters(), key=lambda item: item[1].numel(), reverse=True)
for name, p in fattest[:4]:
    print(f"  {name:<38} {'x'.join(map(str, p.shape)):>12} {p.numel() * p.element_size():>13,} bytes")

# %% [markdown]
# On a CUDA machine, the BF16 copy goes to the GPU for real (a meta model gets
# uninitialised storage: the allocator does not care about the values), and the
# allocator's count is compared with the sum above.

# %%
if torch.cuda.is_available():
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    model = model.to(torch.bfloat16)
    if args.weights:
        model = model.to("cuda")
    else:
        model = model.to_empty(device="cuda")
        model.tie_weights()
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated() - before
    print(torch.cuda.memory_summary(abbreviated=True))
    print(f"CUDA allocated for the bf16 weights: {gib(allocated)} ({allocated / totals['bf16']:.4f} x the summed bytes)")
else:
    print("no CUDA device: the allocation check runs on a GPU machine")
print(f"artifact: {CSV_PATH} ({rows} rows)")
