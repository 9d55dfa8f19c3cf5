"""The memory lab: the footprint of Qwen3-0.6B, tensor by tensor, in FP32, BF16 and FP16.

The model is the real architecture: `Qwen3ForCausalLM` built by transformers from the
shipped config.json on the meta device, so every parameter has its true shape and
dtype and no byte of weights exists. A tensor's footprint is numel × element size,
read from the meta tensors after a cast. The output embedding is tied to the input
one: the model holds that matrix once, and counting it twice is the classic slip.

Only the CUDA claims allocate: they move the BF16 model to the GPU for real (uninitialised
storage, since the values do not matter to the allocator) and compare
`torch.cuda.memory_allocated()` with the summed bytes, a measurement recorded per machine.
"""

from __future__ import annotations

import functools
import gc
import json
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from claims.topics.models import matrix_elements, norm_elements
from verified_book import Backend, InvariantFailed, claim, given, model_config, model_config_all

MODEL = "qwen3-0.6b"
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
META = ("torch:cpu",)  # the model lives on the meta device, whichever devices are present


def gib() -> int:
    """Bytes in a GiB (2^30), a given of the IEC standard."""
    return int(given("units.gib"))


def gb() -> int:
    """Bytes in a GB (10^9), a given of SI."""
    return int(given("units.gb"))


@dataclass(frozen=True)
class Row:
    """One parameter tensor as the lab's CSV lists it."""

    name: str
    shape: tuple[int, ...]
    numel: int
    element_size: int

    @property
    def bytes(self) -> int:
        return self.numel * self.element_size


def build(config: dict[str, Any], dtype_name: str = "float32") -> Any:
    """Qwen3ForCausalLM from a config, on the meta device, cast to a dtype."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    with torch.device("meta"):
        model = Qwen3ForCausalLM(Qwen3Config(**config))
    return model.to(getattr(torch, dtype_name))


@functools.cache
def _rows(config_json: str, dtype_name: str) -> tuple[Row, ...]:
    model = build(json.loads(config_json), dtype_name)
    return tuple(Row(n, tuple(p.shape), p.numel(), p.element_size()) for n, p in model.named_parameters())


def rows(fmt: str = "fp32") -> tuple[Row, ...]:
    """Every parameter of the model, each shared tensor once, as the given format stores it.

    The config is read (and recorded) on every call; the model is built once per config.
    """
    config = model_config_all(MODEL)
    return _rows(json.dumps(config, sort_keys=True), DTYPES[fmt])


def analytic_params() -> int:
    """The parameter count from config.json by hand: every matrix (the tied one once) and every norm."""
    config = model_config(MODEL)
    return matrix_elements(config) + norm_elements(config)


@claim("memory_lab.qwen3_0_6b.params", kind="library", backends=META)
def params(backend: Backend) -> int:
    """Parameters of Qwen3-0.6B as transformers builds it, the tied embedding counted once."""
    counted = sum(r.numel for r in rows())
    if counted != analytic_params():
        raise InvariantFailed(
            f"transformers builds {counted:,} parameters; config.json gives {analytic_params():,} by hand"
        )
    return counted


@claim("memory_lab.qwen3_0_6b.params_counted_twice", kind="library", backends=META)
def params_untied(backend: Backend) -> int:
    """What a count that visits lm_head and embed_tokens separately gets: the tied matrix twice."""
    model = build(model_config_all(MODEL))
    if model.lm_head.weight is not model.model.embed_tokens.weight:
        raise InvariantFailed(
            "lm_head.weight is not embed_tokens.weight: the config's tie_word_embeddings did not tie them"
        )
    return sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))


@claim("memory_lab.qwen3_0_6b.tensors", kind="library", backends=META)
def tensor_count(backend: Backend) -> int:
    """Parameter tensors, one CSV row each per dtype."""
    return len(rows())


@claim("memory_lab.qwen3_0_6b.bytes.{fmt}", kind="library", over={"fmt": tuple(DTYPES)}, backends=META)
def total_bytes(backend: Backend, fmt: str) -> int:
    """Summed numel × element size; it must equal parameters × the format's bytes."""
    table = rows(fmt)
    summed = sum(r.bytes for r in table)
    if summed != sum(r.numel for r in table) * table[0].element_size:
        raise InvariantFailed(f"{fmt}: tensors of mixed element sizes, summed {summed:,} bytes")
    return summed


@claim("memory_lab.qwen3_0_6b.gib.{fmt}", kind="library", over={"fmt": tuple(DTYPES)}, backends=META)
def total_gib(backend: Backend, fmt: str) -> Fraction:
    """The same bytes in GiB (2^30), the unit the lab prints."""
    return Fraction(total_bytes(backend, fmt), gib())


@claim("memory_lab.qwen3_0_6b.gb.{fmt}", kind="library", over={"fmt": tuple(DTYPES)}, backends=META)
def total_gb(backend: Backend, fmt: str) -> Fraction:
    """The same bytes in decimal GB (10^9)."""
    return Fraction(total_bytes(backend, fmt), gb())


@claim("memory_lab.qwen3_0_6b.embedding.params", kind="library", backends=META)
def embedding_params(backend: Backend) -> int:
    """Elements of the (tied) embedding matrix, the largest tensor."""
    largest = max(rows(), key=lambda r: r.numel)
    if "embed_tokens" not in largest.name:
        raise InvariantFailed(f"the largest tensor is {largest.name}, not the embedding")
    return largest.numel


@claim(
    "memory_lab.qwen3_0_6b.{tensor}.bf16_bytes", kind="library", over={"tensor": ("embedding", "mlp")}, backends=META
)
def bf16_bytes_of(backend: Backend, tensor: str) -> int:
    """Bytes of the embedding, or of one MLP projection, in BF16: the lab's fattest rows."""
    elements = embedding_params(backend) if tensor == "embedding" else mlp_params(backend)
    return elements * rows("bf16")[0].element_size


@claim("memory_lab.qwen3_0_6b.csv_rows", kind="library", backends=META)
def csv_rows(backend: Backend) -> int:
    """Rows of the lab's CSV: one per parameter tensor per format."""
    return len(rows()) * len(DTYPES)


@claim("memory_lab.qwen3_0_6b.embedding.share", kind="library", backends=META)
def embedding_share(backend: Backend) -> Fraction:
    """The embedding's share of all parameters."""
    return Fraction(embedding_params(backend), params(backend))


def _is_mlp(row: Row) -> bool:
    return ".mlp." in row.name


@claim("memory_lab.qwen3_0_6b.mlp.params", kind="library", backends=META)
def mlp_params(backend: Backend) -> int:
    """Elements of one MLP projection (gate, up and down are the same size)."""
    sizes = {r.numel for r in rows() if _is_mlp(r)}
    if len(sizes) != 1:
        raise InvariantFailed(f"the MLP projections differ in size: {sorted(sizes)}")
    return sizes.pop()


@claim("memory_lab.qwen3_0_6b.mlp.count", kind="library", backends=META)
def mlp_count(backend: Backend) -> int:
    """MLP projections in the model: three per layer."""
    return sum(1 for r in rows() if _is_mlp(r))


@claim("memory_lab.qwen3_0_6b.mlp.share", kind="library", backends=META)
def mlp_share(backend: Backend) -> Fraction:
    """The MLP projections' share of all parameters."""
    return Fraction(sum(r.numel for r in rows() if _is_mlp(r)), params(backend))


@claim("memory_lab.qwen3_0_6b.fattest_rows", kind="library", backends=META)
def fattest_rows(backend: Backend) -> int:
    """How many of the largest tensors, sorted by bytes, are the embedding or an MLP projection before anything else."""
    ordered = sorted(rows(), key=lambda r: r.bytes, reverse=True)
    leading = 0
    for row in ordered:
        if not (_is_mlp(row) or "embed_tokens" in row.name):
            break
        leading += 1
    return leading


@dataclass(frozen=True)
class Allocation:
    """What CUDA's allocator holds for the BF16 model, against the tensors' summed bytes."""

    allocated: int
    summed: int


def cuda_allocation() -> Allocation:
    """Move the BF16 model onto the GPU for real and read torch.cuda.memory_allocated()."""
    import torch

    model = build(model_config_all(MODEL), "bfloat16")
    gc.collect()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    try:
        model = model.to_empty(device="cuda")
        model.tie_weights()  # to_empty gives lm_head storage of its own; re-tying frees it
        if model.lm_head.weight is not model.model.embed_tokens.weight:
            raise InvariantFailed("after to_empty and tie_weights, lm_head.weight is not embed_tokens.weight")
        gc.collect()
        torch.cuda.synchronize()
        allocated = torch.cuda.memory_allocated() - before
        tensors = {t.data_ptr(): t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers())}
        summed = sum(p.numel() * p.element_size() for p in model.parameters())
    finally:
        del model
        gc.collect()
        torch.cuda.empty_cache()
    if allocated < sum(tensors.values()):
        raise InvariantFailed(
            f"CUDA reports {allocated:,} bytes allocated for tensors that sum to {sum(tensors.values()):,}"
        )
    return Allocation(allocated, summed)


@claim("memory_lab.qwen3_0_6b.cuda.allocated_gib", kind="measured", backends=("torch:cuda",))
def cuda_allocated_gib(backend: Backend) -> Fraction:
    """torch.cuda.memory_allocated() for the BF16 weights on the GPU, in GiB."""
    return Fraction(cuda_allocation().allocated, gib())


@claim("memory_lab.qwen3_0_6b.cuda.allocated_over_summed", kind="measured", backends=("torch:cuda",))
def cuda_allocated_ratio(backend: Backend) -> Fraction:
    """Allocated bytes over the parameters' summed bytes: above 1 by the allocator's rounding and the buffers."""
    found = cuda_allocation()
    return Fraction(found.allocated, found.summed)


@claim("memory_lab.gib_over_gb", kind="exact")
def gib_over_gb() -> Fraction:
    """How much larger a GiB is than a GB: 2^30 / 10^9 - 1, the error of mixing the units."""
    return Fraction(gib(), gb()) - 1


@claim("memory_lab.qwen3_0_6b.billions", kind="exact")
def billions() -> Fraction:
    """Qwen3-0.6B's parameter count from its config.json, in billions: the '0.6' of its name."""
    return Fraction(analytic_params(), gb())


@claim("models.qwen3_8b.layer.matrices", kind="library", backends=META)
def qwen3_8b_layer_matrices(backend: Backend) -> int:
    """The weight matrices of one Qwen3-8B decoder layer: the linear projections of the layer transformers
    builds from the shipped config.json (on the meta device, one layer deep, since every layer is alike)."""
    import torch

    config = dict(model_config_all("qwen3-8b"), num_hidden_layers=1)
    layer = build(config, "bfloat16").model.layers[0]
    return sum(1 for module in layer.modules() if isinstance(module, torch.nn.Linear))
