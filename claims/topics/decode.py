"""The batch-1 decode ceiling: memory bandwidth over the bytes of weights read per token.

Decode at batch 1 reads every weight once per token and does two FLOPs with it, so the
memory clock, not the arithmetic, sets its speed: tokens per second can be no more than
bandwidth / bytes per token. Bandwidths are the vendors' figures in each track's hardware
profile; the bytes are the checkpoint files' sizes (BF16's to a tenth of a GB, Q4_K_M's as the book gives it), or, for
comparison, the bytes
derived from config.json.

"Every weight once" is the source's reading, and not quite what decode does: the input
embedding is a lookup, so a token gathers one row of it (hidden_size elements), not the whole
vocabulary × hidden_size matrix. The bytes decode really reads per token are every parameter
but the embedding, plus that row; transformers' Qwen3ForCausalLM, built from the shipped
config.json on the meta device, must give the same count as the config arithmetic.
"""

from __future__ import annotations

from fractions import Fraction

from claims.topics.models import GB, MODEL, bf16_bytes_per_element, bf16_total_bytes, checkpoint_gb, q4_k_m_gb
from verified_book import Backend, InvariantFailed, claim, exact, model_config, model_config_all, vendor

TRACKS = ("dgx_spark", "ryzen_ai_max", "m4_max", "rtx5090")
FORMATS = ("bf16", "q4_k_m")


def bandwidth_gbps(machine: str) -> Fraction:
    """A machine's vendor memory bandwidth in GB/s, from its hardware profile."""
    return exact(vendor(f"hardware/{machine}.toml", "memory_bandwidth"))


def file_gb(fmt: str) -> Fraction:
    """The quoted size of Qwen3-8B's file in a format, in GB."""
    return checkpoint_gb() if fmt == "bf16" else q4_k_m_gb()


def ceiling(bandwidth: Fraction, gigabytes: Fraction) -> Fraction:
    """Tokens per second if reading the weights once per token were the only cost."""
    return bandwidth / gigabytes


@claim(
    "decode.bandwidth.{track}",
    kind="quoted",
    over={"track": TRACKS},
    citation="NVIDIA DGX Spark datasheet; AMD Ryzen AI Max+ 395 product page; "
    "Apple Mac Studio (2025) technical specifications; NVIDIA GeForce RTX 5090 product page",
)
def track_bandwidth(track: str) -> Fraction:
    """A track's vendor memory bandwidth in GB/s."""
    return bandwidth_gbps(track)


@claim("decode.ceiling.{track}.{fmt}", kind="exact", over={"track": TRACKS, "fmt": FORMATS})
def decode_ceiling(track: str, fmt: str) -> Fraction:
    """Batch-1 decode ceiling in tokens/s: bandwidth over the quoted file size."""
    return ceiling(bandwidth_gbps(track), file_gb(fmt))


@claim("decode.ceiling_derived.{track}.bf16", kind="exact", over={"track": TRACKS})
def decode_ceiling_derived(track: str) -> Fraction:
    """The BF16 ceiling with the bytes derived from config.json instead of the rounded 16.4 GB."""
    return ceiling(bandwidth_gbps(track), bf16_total_bytes() / GB)


def read_per_token_bytes() -> Fraction:
    """Bytes of Qwen3-8B's BF16 weights one decoded token reads: every parameter, with the input
    embedding's vocabulary × hidden_size matrix replaced by the one row the token gathers."""
    config = model_config(MODEL)
    embedding = config["vocab_size"] * config["hidden_size"]
    return bf16_total_bytes() - (embedding - config["hidden_size"]) * bf16_bytes_per_element()


@claim(
    "decode.read_per_token.qwen3_8b.gb",
    kind="exact",
    quote="Qwen3-8B at BF16 is 16.4 GB; decode reads all of it once per token",
    quote_at="tensors-gpus-and-precision.txt:226",
)
def read_per_token_gb() -> Fraction:
    """GB of weights a decoded token reads: the source says all 16.4 GB of the checkpoint."""
    return read_per_token_bytes() / GB


@claim("decode.read_per_token.qwen3_8b.transformers_gb", kind="library", backends=("torch:cpu",))
def read_per_token_transformers(backend: Backend) -> Fraction:
    """The same bytes from transformers' Qwen3ForCausalLM on the meta device, at BF16: every
    parameter's bytes, the input embedding's counted as one row; they must equal the config's count."""
    from claims.topics.memory_lab import build

    model = build(model_config_all(MODEL), "bfloat16")
    embedding = model.get_input_embeddings().weight
    read = sum(p.numel() * p.element_size() for p in model.parameters() if p is not embedding)
    read += embedding[0].numel() * embedding.element_size()
    if read != read_per_token_bytes():
        raise InvariantFailed(
            f"transformers' Qwen3ForCausalLM reads {read:,} bytes per token; the config count of "
            f"claims/data/models/{MODEL}/config.json is {read_per_token_bytes():,}"
        )
    return Fraction(read, GB)


@claim("decode.read_per_token.qwen3_8b.embedding_gb", kind="exact")
def embedding_gb() -> Fraction:
    """GB of the input embedding that a token does not read whole."""
    config = model_config(MODEL)
    return config["vocab_size"] * config["hidden_size"] * bf16_bytes_per_element() / GB


@claim("decode.ceiling_read.{track}.bf16", kind="exact", over={"track": TRACKS})
def decode_ceiling_read(track: str) -> Fraction:
    """The BF16 ceiling over the bytes a token really reads."""
    return ceiling(bandwidth_gbps(track), read_per_token_gb())


@claim("decode.ceiling_read.understated", kind="exact")
def understated() -> Fraction:
    """How much the whole-checkpoint ceilings understate the real ones: 16.4 GB over the bytes read, less one."""
    return checkpoint_gb() / read_per_token_gb() - 1
