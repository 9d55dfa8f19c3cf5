"""The KV cache: what serving holds per token, and how it grows with batch × context × layers × heads.

Per token, every layer keeps one key and one value vector per KV head:
2 × layers × kv_heads × head_dim elements, at BF16's two bytes each. The config.json of
each model gives the sizes; transformers' own cache, filled by a forward pass of the real
architecture on the meta device, must hold exactly that many bytes per token. The
worked figures use the context and batch of claims/data/napkin.toml.
"""

from __future__ import annotations

from fractions import Fraction

from claims.topics.author_machine import card_bytes
from claims.topics.formats import FORMATS
from claims.topics.memory_lab import build
from claims.topics.models import matrix_elements, norm_elements
from verified_book import Backend, InvariantFailed, claim, model_config, model_config_all, vendor

MODELS = ("qwen3-8b", "qwen3-0.6b")
NAPKIN = "napkin.toml"
GB = 10**9


def bf16_bytes() -> Fraction:
    return Fraction(FORMATS["bf16"].storage_bits, 8)


def bytes_per_token(model: str, kv_heads: int | None = None) -> Fraction:
    """2 (key and value) × layers × KV heads × head_dim × bytes per element."""
    c = model_config(model)
    heads = c["num_key_value_heads"] if kv_heads is None else kv_heads
    return 2 * c["num_hidden_layers"] * heads * c["head_dim"] * bf16_bytes()


def context() -> int:
    return int(vendor(NAPKIN, "serving_context"))


def batch() -> int:
    return int(vendor(NAPKIN, "serving_batch"))


def weights_bytes(model: str) -> Fraction:
    """A model's BF16 weights in bytes: every matrix (a tied one once) and every norm, from its config."""
    config = model_config(model)
    return (matrix_elements(config) + norm_elements(config)) * bf16_bytes()


@claim("kvcache.{model}.bytes_per_token", kind="exact", over={"model": MODELS})
def per_token(model: str) -> Fraction:
    """KV-cache bytes per token of context, at BF16."""
    return bytes_per_token(model)


@claim("kvcache.qwen3_8b.cache_bytes_per_token", kind="library", backends=("torch:cpu",))
def transformers_per_token(backend: Backend) -> Fraction:
    """Bytes per token in transformers' own cache after a forward pass of Qwen3-8B on the meta device."""
    import torch

    batch_size, tokens = 2, 5
    model = build(model_config_all("qwen3-8b"), "bfloat16")
    with torch.no_grad():
        out = model.model(input_ids=torch.zeros((batch_size, tokens), dtype=torch.long, device="meta"), use_cache=True)
    cache = out["cache"] if "cache" in out else out["past_key_values"]  # renamed in transformers 5
    held = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    found = Fraction(held, batch_size * tokens)
    if found != bytes_per_token("qwen3-8b"):
        raise InvariantFailed(
            f"transformers' cache holds {float(found):,} bytes per token; the config gives "
            f"{bytes_per_token('qwen3-8b')}"
        )
    return found


@claim("kvcache.qwen3_8b.mha_bytes_per_token", kind="exact")
def mha_per_token() -> Fraction:
    """Bytes per token if every query head kept its own key and value (no grouped-query attention)."""
    return bytes_per_token("qwen3-8b", model_config("qwen3-8b")["num_attention_heads"])


@claim("kvcache.qwen3_8b.gqa_saving", kind="exact")
def gqa_saving() -> Fraction:
    """How many times less cache grouped-query attention keeps: query heads over KV heads."""
    return mha_per_token() / bytes_per_token("qwen3-8b")


@claim(
    "kvcache.serving.{what}", kind="given", over={"what": ("context", "batch")}, citation="the worked example's choice"
)
def serving(what: str) -> int:
    """The worked example's context length and batch."""
    return context() if what == "context" else batch()


@claim("kvcache.{model}.gb.{scope}", kind="exact", over={"model": MODELS, "scope": ("sequence", "batch")})
def cache_gb(model: str, scope: str) -> Fraction:
    """KV cache in GB for one sequence of the example's context, or the example's whole batch."""
    sequences = 1 if scope == "sequence" else batch()
    return bytes_per_token(model) * context() * sequences / GB


@claim("kvcache.{model}.weights_gb", kind="exact", over={"model": MODELS})
def model_weights_gb(model: str) -> Fraction:
    """The model's BF16 weights in GB, for comparison with its cache."""
    return weights_bytes(model) / GB


@claim("kvcache.{model}.cache_over_weights", kind="exact", over={"model": MODELS})
def cache_over_weights(model: str) -> Fraction:
    """The example batch's cache as a multiple of the model's weights."""
    return bytes_per_token(model) * context() * batch() / weights_bytes(model)


@claim("kvcache.qwen3_0_6b.tokens_in_card", kind="exact")
def tokens_in_card() -> int:
    """Tokens of Qwen3-0.6B cache that fit in the author's card beside its BF16 weights.

    The card's "16 GB" are GiB, by the book's rule (author_machine.card_bytes); the driver's own
    share is not subtracted, so the book prints the count to three digits, not to the token.
    """
    return int((card_bytes() - weights_bytes("qwen3-0.6b")) // bytes_per_token("qwen3-0.6b"))


@claim("kvcache.qwen3_0_6b.sequences_in_card", kind="exact")
def sequences_in_card() -> Fraction:
    """The same room counted in sequences of the example's context."""
    return Fraction(tokens_in_card(), context())
