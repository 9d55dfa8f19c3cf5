"""The numerics map's rules of thumb, derived: bytes per parameter × parameters = memory.

Every rule is arithmetic on stated inputs: the napkin model's parameter count and the
worked examples' choices (claims/data/napkin.toml), the formats' widths
(claims.topics.formats, claims.topics.formats_table), and Qwen3-8B's config.json for the
real-model checks. What Adam's state really holds is measured in claims.topics.training;
the rule here is the sum its parts make.
"""

from __future__ import annotations

from fractions import Fraction

from claims.topics.formats import FORMATS
from claims.topics.formats_table import INT_FORMATS
from claims.topics.models import LAYER_MATRICES, matrix_shapes, total_params
from verified_book import InvariantFailed, claim, given, model_config, vendor

NAPKIN = "napkin.toml"
GB = 10**9


def bytes_per_element(name: str) -> Fraction:
    """Bytes one element of a format occupies: floats from their layout, integers from their width."""
    if name == "fp64":
        return Fraction(sum(given("formats.fp64.layout")), 8)
    if name in INT_FORMATS:
        return Fraction(INT_FORMATS[name].bits, 8)
    return Fraction(FORMATS[name].storage_bits, 8)


def napkin_params() -> int:
    return int(vendor(NAPKIN, "model_params"))


@claim(
    "rules.napkin.billions",
    kind="given",
    citation="the book's own choice: the napkin example's 7B model (claims/data/napkin.toml)",
)
def napkin_billions() -> Fraction:
    """The napkin model's size in billions of parameters."""
    return Fraction(napkin_params(), GB)


WEIGHT_FORMATS = ("fp64", "fp32", "fp16", "bf16", "int8", "int4")


@claim("rules.weights.{fmt}.bytes_per_param", kind="exact", over={"fmt": WEIGHT_FORMATS})
def weight_bytes_per_param(fmt: str) -> Fraction:
    """Bytes per parameter of weights stored in a format."""
    return bytes_per_element(fmt)


@claim("rules.weights.{fmt}.gb", kind="exact", over={"fmt": WEIGHT_FORMATS})
def weights_gb(fmt: str) -> Fraction:
    """The napkin model's weights in a format, in GB: parameters × bytes per parameter."""
    return napkin_params() * bytes_per_element(fmt) / GB


ADAM_PARTS = {"weights": ("fp32", 1), "gradients": ("fp32", 1), "moments": ("fp32", 2)}


@claim("rules.adam.bytes_per_param", kind="exact")
def adam_bytes_per_param() -> Fraction:
    """FP32 Adam training per parameter: weights, gradients, and two moment estimates, all FP32."""
    return sum((adam_part(part) for part in ADAM_PARTS), Fraction(0))


@claim("rules.adam.{part}_bytes_per_param", kind="exact", over={"part": tuple(ADAM_PARTS)})
def adam_part(part: str) -> Fraction:
    """One part of FP32 Adam's state per parameter: 4 for weights, 4 for gradients, 8 for both moments."""
    fmt, count = ADAM_PARTS[part]
    return count * bytes_per_element(fmt)


@claim("rules.adam.gb", kind="exact")
def adam_gb() -> Fraction:
    """The napkin model trained with Adam, in GB, before a single activation."""
    return napkin_params() * adam_bytes_per_param() / GB


@claim("rules.inference.bytes_per_param", kind="exact")
def inference_bytes_per_param() -> Fraction:
    """Inference per parameter: the weights alone, in BF16 (or FP16)."""
    if bytes_per_element("bf16") != bytes_per_element("fp16"):
        raise InvariantFailed("BF16 and FP16 should both be two bytes")
    return bytes_per_element("bf16")


@claim("rules.gap", kind="exact")
def training_over_inference() -> Fraction:
    """How many times more memory per parameter Adam training takes than inference."""
    return adam_bytes_per_param() / inference_bytes_per_param()


@claim("rules.fp64.over_bf16", kind="exact")
def fp64_over_bf16() -> Fraction:
    """FP64's bytes per parameter against BF16's."""
    return bytes_per_element("fp64") / bytes_per_element("bf16")


QUANT_PAIRS = {"int4_fp16": ("int4", "fp16"), "int8_fp32": ("int8", "fp32"), "int8_fp16": ("int8", "fp16")}


@claim("rules.quantised.{pair}.size", kind="exact", over={"pair": tuple(QUANT_PAIRS)})
def quantised_share(pair: str) -> Fraction:
    """A quantised model's size as a share of the original's: bytes per element over bytes per element."""
    small, large = QUANT_PAIRS[pair]
    return bytes_per_element(small) / bytes_per_element(large)


@claim("rules.quantised.{pair}.smaller", kind="exact", over={"pair": tuple(QUANT_PAIRS)})
def quantised_factor(pair: str) -> Fraction:
    """How many times smaller the quantised weights are."""
    return 1 / quantised_share(pair)


@claim("rules.quantised.int4_group.size", kind="given", citation="the source chapter: 'a group size like 128'")
def int4_group() -> int:
    """Weights that share one scale in grouped INT4."""
    return int(vendor(NAPKIN, "int4_group"))


@claim("rules.quantised.int4_group.bits", kind="exact")
def int4_group_bits() -> Fraction:
    """Bits per weight of grouped INT4: 4 for the code plus an FP16 scale's share of its group."""
    return INT_FORMATS["int4"].bits + Fraction(int(vendor(NAPKIN, "int4_scale_bits")), int4_group())


@claim("rules.quantised.int4_group.smaller", kind="exact")
def int4_group_smaller() -> Fraction:
    """How many times smaller grouped INT4 is than FP16, scales counted."""
    return FORMATS["fp16"].bits / int4_group_bits()


def lora_params(config: dict) -> int:
    """LoRA's trainable parameters: rank × (inputs + outputs) for every projection of every layer."""
    rank = int(vendor(NAPKIN, "lora_rank"))
    shapes = matrix_shapes(config)
    return config["num_hidden_layers"] * sum(rank * sum(shapes[name]) for name in LAYER_MATRICES)


@claim("rules.lora.rank", kind="given", citation="the worked example's choice")
def lora_rank() -> int:
    """The LoRA rank of the worked example."""
    return int(vendor(NAPKIN, "lora_rank"))


@claim("rules.lora.params", kind="exact")
def lora_trainable() -> int:
    """Trainable LoRA parameters on Qwen3-8B at the example's rank."""
    return lora_params(model_config("qwen3-8b"))


@claim("rules.lora.share", kind="exact")
def lora_share() -> Fraction:
    """The LoRA parameters as a share of Qwen3-8B's."""
    return Fraction(lora_trainable(), total_params())


@claim("rules.lora.gb", kind="exact")
def lora_gb() -> Fraction:
    """Training Qwen3-8B with LoRA, in GB: frozen BF16 weights plus Adam's 16 bytes for the adapters only."""
    return (total_params() * inference_bytes_per_param() + lora_trainable() * adam_bytes_per_param()) / GB


@claim("rules.full_training.qwen3_8b.gb", kind="exact")
def full_training_gb() -> Fraction:
    """Training every parameter of Qwen3-8B with FP32 Adam, in GB."""
    return total_params() * adam_bytes_per_param() / GB


@claim("rules.quantised.int4_group.gb", kind="exact")
def int4_group_gb() -> Fraction:
    """The napkin model's weights in grouped INT4, scales counted, in GB."""
    return napkin_params() * int4_group_bits() / 8 / GB
