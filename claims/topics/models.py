"""Qwen3-8B from its config.json: every weight matrix's shape, its elements and its bytes.

A layer's weights are stored as PyTorch stores an `nn.Linear`, (outputs, inputs), and
every size comes from a key of the shipped config. Summing the matrices gives the table
the book prints; adding the normalisation vectors (one RMSNorm weight of `hidden_size`
before attention and one before the MLP in every layer, a `head_dim` weight each for
the query and key norms, and the final norm) gives the real architecture's count, which
`transformers` confirms by building the model on the `meta` device.
"""

from __future__ import annotations

import json
from fractions import Fraction
from functools import cache
from typing import Any, Mapping

from claims.topics.formats import FORMATS
from verified_book import (
    Backend,
    InvariantFailed,
    NotOnBackend,
    claim,
    exact,
    excuse,
    model_config,
    model_config_all,
    vendor,
)

# why figures that divide by a file's size stand beside the dispute that a token reads all of it
FILE_SIZE_STANDS = "The file's size, which stands: what the book disputes is that a decoded token reads all of it."
PER_PARAMETER = "The file's bytes per parameter, a property of the file; no token's reads enter it."

MODEL = "qwen3-8b"
FILES = f"models/{MODEL}/files.toml"
LAYER_MATRICES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
VOCAB_MATRICES = ("embed_tokens", "lm_head")
TENSORS = ("embed_tokens", *LAYER_MATRICES, "lm_head")
GB = 10**9
#: the claim disputing the source's premise that decode reads the whole file per token (claims/topics/decode.py):
#: what a claim dividing by a file's size is excused from, with the reason its figure stands
WHOLE_FILE_READ = "decode.read_per_token.qwen3_8b.gb"


def bf16_bytes_per_element() -> Fraction:
    """Two bytes: BF16's storage width from its bit layout."""
    return Fraction(FORMATS["bf16"].storage_bits, 8)


def matrix_shapes(config: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """Each weight matrix's stored shape, (outputs, inputs), from the config's keys."""
    hidden = config["hidden_size"]
    head_dim = config["head_dim"]
    attention = config["num_attention_heads"] * head_dim
    key_value = config["num_key_value_heads"] * head_dim
    intermediate = config["intermediate_size"]
    vocab = config["vocab_size"]
    return {
        "embed_tokens": (vocab, hidden),
        "q_proj": (attention, hidden),
        "k_proj": (key_value, hidden),
        "v_proj": (key_value, hidden),
        "o_proj": (hidden, attention),
        "gate_proj": (intermediate, hidden),
        "up_proj": (intermediate, hidden),
        "down_proj": (hidden, intermediate),
        "lm_head": (vocab, hidden),
    }


def elements(shape: tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def layer_matrix_elements(config: Mapping[str, Any]) -> int:
    shapes = matrix_shapes(config)
    return sum(elements(shapes[name]) for name in LAYER_MATRICES)


def vocab_matrix_elements(config: Mapping[str, Any]) -> int:
    """The embedding, plus the output head when it is a matrix of its own (untied)."""
    shapes = matrix_shapes(config)
    heads = 1 if config["tie_word_embeddings"] else 2
    return heads * elements(shapes["embed_tokens"])


def matrix_elements(config: Mapping[str, Any]) -> int:
    """Every weight matrix: the layers' seven each, plus the vocabulary matrices."""
    return config["num_hidden_layers"] * layer_matrix_elements(config) + vocab_matrix_elements(config)


def norm_elements(config: Mapping[str, Any]) -> int:
    """The RMSNorm weight vectors the matrix table leaves out."""
    hidden, head_dim = config["hidden_size"], config["head_dim"]
    per_layer = 2 * hidden + 2 * head_dim  # input and post-attention norms; q_norm and k_norm
    return config["num_hidden_layers"] * per_layer + hidden  # plus the final norm


def total_params() -> int:
    """The real architecture's parameter count, from the config alone."""
    config = model_config(MODEL)
    return matrix_elements(config) + norm_elements(config)


def stated_params() -> Fraction:
    """The count as the book states it, to a tenth of a billion: the '8.2 billion'."""
    return Fraction(round(Fraction(total_params(), GB // 10)), 10) * GB


def gguf_bits_per_weight(type_name: str) -> Fraction:
    """Bits per weight of a GGUF block type, from the gguf package's block sizes (weights, bytes)."""
    import gguf

    weights, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[type_name]]
    return Fraction(size * 8, weights)


def bf16_total_bytes() -> Fraction:
    return total_params() * bf16_bytes_per_element()


def checkpoint_gb() -> Fraction:
    """The BF16 checkpoint's size as the book states it, in GB: the parameters at two bytes each, to a
    tenth of a GB (16.38 GB printed 16.4), the figure the worked examples divide by."""
    return Fraction(round(bf16_total_bytes() / (GB // 10)), 10)


def q4_k_m_gb() -> Fraction:
    """The Q4_K_M GGUF file's size as the book gives it, in GB (claims/data/models/qwen3-8b/files.toml)."""
    return exact(vendor(FILES, "q4_k_m_file"))


@claim("models.qwen3_8b.{tensor}.shape", kind="exact", over={"tensor": TENSORS})
def tensor_shape(tensor: str) -> tuple[int, int]:
    """A weight matrix's stored shape, (outputs, inputs), from config.json."""
    return matrix_shapes(model_config(MODEL))[tensor]


@claim("models.qwen3_8b.{tensor}.elements", kind="exact", over={"tensor": TENSORS})
def tensor_elements(tensor: str) -> int:
    """A weight matrix's element count: the product of its shape."""
    return elements(matrix_shapes(model_config(MODEL))[tensor])


@claim("models.qwen3_8b.{tensor}.bf16_bytes", kind="exact", over={"tensor": TENSORS})
def tensor_bytes(tensor: str) -> Fraction:
    """A weight matrix's size at BF16: elements times two bytes."""
    return elements(matrix_shapes(model_config(MODEL))[tensor]) * bf16_bytes_per_element()


@claim("models.qwen3_8b.layer.elements", kind="exact")
def layer_elements() -> int:
    """One decoder layer's seven weight matrices, in elements."""
    return layer_matrix_elements(model_config(MODEL))


@claim("models.qwen3_8b.layer.bf16_bytes", kind="exact")
def layer_bytes() -> Fraction:
    """One decoder layer's seven weight matrices at BF16, in bytes."""
    return layer_matrix_elements(model_config(MODEL)) * bf16_bytes_per_element()


@claim("models.qwen3_8b.layers", kind="exact")
def layers() -> int:
    """The number of decoder layers."""
    return model_config(MODEL)["num_hidden_layers"]


@claim("models.qwen3_8b.matrices.elements", kind="exact")
def all_matrix_elements() -> int:
    """Every weight matrix of the model: the layers' plus the two vocabulary matrices."""
    return matrix_elements(model_config(MODEL))


@claim("models.qwen3_8b.matrices.bf16_bytes", kind="exact")
def all_matrix_bytes() -> Fraction:
    """Every weight matrix of the model at BF16, in bytes."""
    return matrix_elements(model_config(MODEL)) * bf16_bytes_per_element()


@claim("models.qwen3_8b.norms.elements", kind="exact")
def norms() -> int:
    """The normalisation vectors the matrix table omits, counted from the config."""
    return norm_elements(model_config(MODEL))


@claim("models.qwen3_8b.total.params", kind="exact")
def total() -> int:
    """The real architecture's parameter count: matrices plus normalisation vectors."""
    return total_params()


@claim("models.qwen3_8b.total.billions", kind="exact")
def total_billions() -> Fraction:
    """The parameter count in billions, the '8.2 billion' of the book's prose."""
    return Fraction(total_params(), GB)


@claim("models.qwen3_8b.total.bf16_bytes", kind="exact")
def total_bytes() -> Fraction:
    """Every parameter at BF16, in bytes: what the BF16 checkpoint holds, headers aside."""
    return bf16_total_bytes()


excuse(total_bytes, {WHOLE_FILE_READ: FILE_SIZE_STANDS})


@cache
def _transformers_count(config_json: str) -> int:
    """Parameters of Qwen3ForCausalLM built on the meta device from `config_json` (a config.json's text: the cache's
    key, and the lists stay lists, which a strict config class insists on)."""
    import torch

    try:
        from transformers import Qwen3Config, Qwen3ForCausalLM
    except ImportError as e:
        raise NotOnBackend(f"transformers with Qwen3 support is not importable ({e})") from None
    with torch.device("meta"):
        model = Qwen3ForCausalLM(Qwen3Config(**json.loads(config_json)))
    return sum(p.numel() for p in model.parameters())


@claim("models.qwen3_8b.total.transformers", kind="library", backends=("torch:cpu",))
def transformers_params(backend: Backend) -> int:
    """The parameter count of Qwen3ForCausalLM built from the config on the meta device.

    It must equal the matrices plus the normalisation vectors counted from the config:
    that is what says the matrix table omits only those vectors.
    """
    config = model_config_all(MODEL)
    counted = _transformers_count(json.dumps(config, sort_keys=True))
    tracked = model_config(MODEL)
    matrices, vectors = matrix_elements(tracked), norm_elements(tracked)
    if counted != matrices + vectors:
        raise InvariantFailed(
            f"transformers builds {counted:,} parameters from claims/data/models/{MODEL}/config.json; the matrix table "
            f"has {matrices:,} and the normalisation vectors {vectors:,}, which leaves "
            f"{counted - matrices - vectors:,} unexplained"
        )
    return counted


@claim(
    "models.qwen3_8b.checkpoint_gb",
    kind="exact",
    assumes="the BF16 checkpoint holds the parameters counted from config.json at two bytes each and nothing "
    "else; its file size is not stored (claims/data/models/qwen3-8b/files.toml)",
)
def checkpoint() -> Fraction:
    """The BF16 checkpoint's size in GB: the parameters counted from config.json at two bytes each, to a tenth of a
    GB."""
    return checkpoint_gb()


excuse(checkpoint, {WHOLE_FILE_READ: FILE_SIZE_STANDS})


@claim("models.qwen3_8b.q4_k_m_gb", kind="given")
def q4_k_m() -> Fraction:
    """The Q4_K_M file's size in GB as the book gives it; it must lie between Q4_K's and Q8_0's bits per weight."""
    quoted = q4_k_m_gb()
    bits = quoted * GB * 8 / total_params()
    low, high = gguf_bits_per_weight("Q4_K"), gguf_bits_per_weight("Q8_0")
    if not low <= bits <= high:
        raise InvariantFailed(
            f"the quoted Q4_K_M file of {float(quoted)} GB is {float(bits):.2f} bits per parameter, "
            f"outside Q4_K's {float(low)} to Q8_0's {float(high)}"
        )
    return quoted


excuse(q4_k_m, {WHOLE_FILE_READ: FILE_SIZE_STANDS})
