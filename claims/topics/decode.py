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

from claims.topics.models import (
    GB,
    MODEL,
    WHOLE_FILE_READ,
    bf16_bytes_per_element,
    bf16_total_bytes,
    checkpoint_gb,
    q4_k_m_gb,
)
from verified_book import (
    Backend,
    InvariantFailed,
    claim,
    disputes_premise,
    exact,
    excuse,
    model_config,
    model_config_all,
    vendor,
)

# why figures that divide by a file's size stand beside the dispute that a token reads all of it
WHOLE_FILE_COLUMN = (
    "Bandwidth over the whole file, as the column's header says and the source divides; the page prints "
    "beside it the BF16 ceilings over the 15.1 GB a token reads, 8% higher, and says the Q4_K_M column errs "
    "the same way (that file holds the embedding too, at a type the book has no data for)."
)
LAST_DIGIT = (
    "Divides by the whole checkpoint's bytes only to show how the column's last digit depends on the size it "
    "divides by; the ceilings over the bytes a token reads are printed beside it."
)
REDERIVED = (
    "Re-derived: the whole checkpoint's bytes less the embedding rows a token does not gather; the correction"
    " itself, not a use of the disputed premise."
)
ERROR_SIZE = "The whole file over the bytes a token reads, less one: the size of the source's error, not a use of it."

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


excuse(decode_ceiling, {WHOLE_FILE_READ: WHOLE_FILE_COLUMN})


@claim("decode.ceiling_derived.{track}.bf16", kind="exact", over={"track": TRACKS})
def decode_ceiling_derived(track: str) -> Fraction:
    """The BF16 ceiling with the bytes derived from config.json instead of the rounded 16.4 GB."""
    return ceiling(bandwidth_gbps(track), bf16_total_bytes() / GB)


excuse(decode_ceiling_derived, {WHOLE_FILE_READ: LAST_DIGIT})


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


disputes_premise(read_per_token_gb, checkpoint_gb, bf16_total_bytes, q4_k_m_gb)


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


excuse(read_per_token_transformers, {WHOLE_FILE_READ: REDERIVED})


@claim("decode.read_per_token.qwen3_8b.embedding_gb", kind="exact")
def embedding_gb() -> Fraction:
    """GB of the input embedding that a token does not read whole."""
    config = model_config(MODEL)
    return config["vocab_size"] * config["hidden_size"] * bf16_bytes_per_element() / GB


@claim("decode.ceiling_read.{track}.bf16", kind="exact", over={"track": TRACKS})
def decode_ceiling_read(track: str) -> Fraction:
    """The BF16 ceiling over the bytes a token really reads."""
    return ceiling(bandwidth_gbps(track), read_per_token_gb())


excuse(decode_ceiling_read, {WHOLE_FILE_READ: REDERIVED})


@claim("decode.ceiling_read.understated", kind="exact")
def understated() -> Fraction:
    """How much the whole-checkpoint ceilings understate the real ones: 16.4 GB over the bytes read, less one."""
    return checkpoint_gb() / read_per_token_gb() - 1


excuse(understated, {WHOLE_FILE_READ: ERROR_SIZE})
