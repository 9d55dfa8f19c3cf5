"""The batch-1 decode ceiling: memory bandwidth over the bytes of weights read per token.

Decode at batch 1 reads every weight once per token and does two FLOPs with it, so the
memory clock, not the arithmetic, sets its speed: tokens per second can be no more than
bandwidth / bytes per token. Bandwidths are the vendors' figures in each track's hardware
profile; the bytes are the model reference's file sizes, or, for comparison, the bytes
derived from config.json.
"""
from __future__ import annotations

from fractions import Fraction

from verified_book.inputs import exact, vendor
from verified_book.registry import claim
from claims.topics.models import GB, bf16_total_bytes, checkpoint_gb, q4_k_m_gb

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


@claim("decode.bandwidth.{track}", kind="quoted", over={"track": TRACKS}, source="hardware profiles in claims/data/hardware/")
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
