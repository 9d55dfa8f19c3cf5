"""Block quantisation: one block of 32 weights as integer codes with one shared scale, and what GGUF stores.

The snippet's block is `np.random.default_rng(0).standard_normal(32) * 0.02` as float32.
Each backend quantises that same block with the symmetric rule

    qmax = 2^(bits - 1) - 1,  scale = fp16(max|x| / qmax),  q = clip(round(x / scale), -qmax - 1, qmax)

and the figures are its codes, scale, restored values and errors. The GGUF claims read
gguf-py, llama.cpp's own Python package: its table of block sizes (`GGML_QUANT_SIZES`)
and its reference quantisers, which run on the same block. Q8_0 is the snippet's rule;
Q4_0 is not (it divides by the signed extreme over -8 and uses codes -8..7), and the
claims show both. MXFP4 and NVFP4 are measured from what MLX's `quantize` returns and
from gguf's block sizes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from claims.ops import has, ops, supporting
from claims.topics.formats import FORMATS
from claims.topics.models import GB, MODEL, PER_PARAMETER, WHOLE_FILE_READ, matrix_shapes, q4_k_m_gb, total_params
from verified_book import Backend, InvariantFailed, NotOnBackend, claim, excuse, lazy_import, model_config

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_import("numpy")  # loaded by the first claim that computes with it

BLOCK_SEED = 0
BLOCK_SIZE = 32
BLOCK_SIGMA = 0.02
SCALE_BITS = 16  # one float16 scale per block
SHOWN = 6  # how many codes and values the snippet prints


@functools.cache
def snippet_block() -> np.ndarray:
    """The snippet's 32 consecutive weights, as float32."""
    rng = np.random.default_rng(BLOCK_SEED)
    return (rng.standard_normal(BLOCK_SIZE) * BLOCK_SIGMA).astype(np.float32)


@dataclass(frozen=True)
class Quantised:
    """One block quantised on one backend, brought back to numpy for comparison."""

    original: np.ndarray  # float32, the block as the backend held it
    codes: np.ndarray  # int8
    scale: float
    scale_bits: int
    restored: np.ndarray  # float32
    rms: float
    mean_error: float

    @property
    def error_vs_rms(self) -> float:
        return self.mean_error / self.rms

    @property
    def zero_codes(self) -> int:
        return int((self.codes == 0).sum())


def _qmax(bits: int) -> int:
    return 2 ** (bits - 1) - 1


@functools.cache
def quantise(backend: Backend, bits: int) -> Quantised:
    """The snippet's symmetric block quantiser, computed with the backend's own arithmetic."""
    qmax = _qmax(bits)
    adapter, module = backend.adapter, backend.module
    float32 = adapter.dtype("float32")
    with adapter.on_device():
        x = adapter.from_numpy(snippet_block().copy())
        scale = adapter.astype(abs(x).max() / qmax, adapter.dtype("float16"))
        codes = adapter.astype(
            module.clip(module.round(x / adapter.astype(scale, float32)), -qmax - 1, qmax), adapter.dtype("int8")
        )
        restored = adapter.astype(codes, float32) * adapter.astype(scale, float32)
        rms = float(module.sqrt((x**2).mean()).item())
        error = float(abs(restored - x).mean().item())
        return Quantised(
            adapter.to_numpy(x),
            adapter.to_numpy(codes),
            float(scale.item()),
            adapter.itemsize(scale) * 8,
            adapter.to_numpy(restored),
            rms,
            error,
        )


def _check_grid(backend: Backend, bits: int, q: Quantised) -> None:
    qmax = _qmax(bits)
    if q.codes.min() < -qmax - 1 or q.codes.max() > qmax:
        raise InvariantFailed(
            f"{backend.name}: {bits}-bit codes span {q.codes.min()}..{q.codes.max()}; the grid is {-qmax - 1}..{qmax}"
        )
    worst = float(np.abs(q.restored - snippet_block()).max())
    if worst > q.scale / 2 * (1 + 1e-3):
        raise InvariantFailed(
            f"{backend.name}: a {bits}-bit restored value is {worst:.3g} from its weight; rounding "
            f"to the grid keeps every error within half a step, {q.scale / 2:.3g}"
        )


@claim("quantisation.block.first6", kind="library")
def block_first6(backend: Backend) -> tuple[float, ...]:
    """The first six weights of the snippet's block, as the backend holds them."""
    return tuple(float(v) for v in quantise(backend, 8).original[:SHOWN])


@claim("quantisation.block.size", kind="library")
def block_size(backend: Backend) -> int:
    """How many weights share one scale in the snippet: the block of Q8_0 and Q4_0."""
    size = int(quantise(backend, 8).codes.size)
    try:
        from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
    except ImportError:
        return size
    for qtype in (GGMLQuantizationType.Q8_0, GGMLQuantizationType.Q4_0):
        if GGML_QUANT_SIZES[qtype][0] != size:
            raise InvariantFailed(
                f"gguf's {qtype.name} blocks hold {GGML_QUANT_SIZES[qtype][0]} weights; the snippet's "
                f"block holds {size}"
            )
    return size


@claim("quantisation.block.rms", kind="library")
def block_rms(backend: Backend) -> float:
    """The block's root mean square, the typical size of its weights."""
    return quantise(backend, 8).rms


@claim("quantisation.q{bits}.codes", kind="library", over={"bits": (8, 4)})
def codes(backend: Backend, bits: int) -> tuple[int, ...]:
    """The first six integer codes at 8 or 4 bits."""
    q = quantise(backend, bits)
    _check_grid(backend, bits, q)
    return tuple(int(c) for c in q.codes[:SHOWN])


@claim("quantisation.q{bits}.scale", kind="library", over={"bits": (8, 4)})
def scale(backend: Backend, bits: int) -> float:
    """The block's one scale, max|x| / qmax stored in float16."""
    return quantise(backend, bits).scale


@claim("quantisation.q{bits}.restored", kind="library", over={"bits": (8, 4)})
def restored(backend: Backend, bits: int) -> tuple[float, ...]:
    """The first six values the codes map back to, code times scale."""
    return tuple(float(v) for v in quantise(backend, bits).restored[:SHOWN])


@claim("quantisation.q{bits}.bits_per_weight", kind="library", over={"bits": (8, 4)})
def bits_per_weight(backend: Backend, bits: int) -> Fraction:
    """Bits per weight with the block's scale counted: (32 x bits + 16) / 32."""
    q = quantise(backend, bits)
    return Fraction(q.codes.size * bits + q.scale_bits, q.codes.size)


@claim("quantisation.q{bits}.mean_error", kind="library", over={"bits": (8, 4)})
def mean_error(backend: Backend, bits: int) -> float:
    """Mean absolute difference between the restored values and the weights."""
    return quantise(backend, bits).mean_error


@claim("quantisation.q{bits}.error_vs_rms", kind="library", over={"bits": (8, 4)})
def error_vs_rms(backend: Backend, bits: int) -> float:
    """The mean error as a fraction of the block's rms: the price of the format."""
    return quantise(backend, bits).error_vs_rms


@claim("quantisation.q{bits}.zero_codes", kind="library", over={"bits": (8, 4)})
def zero_codes(backend: Backend, bits: int) -> int:
    """How many of the 32 weights became exactly zero."""
    return quantise(backend, bits).zero_codes


# --- GGUF: block sizes from gguf-py, and its reference quantisers on the same block -------------

GGUF_BACKEND = "numpy"  # gguf-py's quantisers are numpy code: its claims are declared on numpy alone


def _gguf(backend: Backend) -> Any:
    if backend.name not in (GGUF_BACKEND,):  # a caller that asks on another backend (the snapshots) gets a skip
        raise NotOnBackend(f"{backend.name}: gguf-py quantises with numpy; checked on the numpy backend")
    try:
        import gguf
    except ImportError:
        raise NotOnBackend("gguf (llama.cpp's gguf-py) is not installed") from None
    return gguf


def _quant_size(backend: Backend, name: str) -> tuple[int, int]:
    gguf = _gguf(backend)
    qtype = getattr(gguf.GGMLQuantizationType, name.upper(), None)
    if qtype is None or qtype not in gguf.GGML_QUANT_SIZES:
        raise NotOnBackend(f"gguf {getattr(gguf, '__version__', '')} has no {name.upper()} type")
    weights, size = gguf.GGML_QUANT_SIZES[qtype]
    return int(weights), int(size)


# The layout of each block as ggml's structs declare it: bytes of each part, in order.
def _layout(backend: Backend, name: str) -> dict[str, int]:
    weights, _ = _quant_size(backend, name)
    half = np.dtype(np.float16).itemsize
    if name == "q8_0":
        return {"scale": half, "codes": weights * 8 // 8}
    if name == "q4_0":
        return {"scale": half, "codes": weights * 4 // 8}
    if name == "q4_k":
        from gguf.quants import Q4_K

        return {"d": half, "dmin": half, "scales": Q4_K.K_SCALE_SIZE, "codes": weights * 4 // 8}
    if name == "mxfp4":
        return {"scale": 1, "codes": weights * 4 // 8}  # one E8M0 exponent per block
    if name == "nvfp4":
        return {"scales": weights // 16, "codes": weights * 4 // 8}  # one E4M3 scale per 16 weights
    raise KeyError(name)


GGUF_TYPES = ("q8_0", "q4_0", "q4_k", "mxfp4", "nvfp4")


@claim("quantisation.gguf.{qtype}.block_weights", kind="library", over={"qtype": GGUF_TYPES}, backends=(GGUF_BACKEND,))
def gguf_block_weights(backend: Backend, qtype: str) -> int:
    """Weights per block of a GGUF type, from gguf-py's GGML_QUANT_SIZES."""
    return _quant_size(backend, qtype)[0]


@claim("quantisation.gguf.{qtype}.block_bytes", kind="library", over={"qtype": GGUF_TYPES}, backends=(GGUF_BACKEND,))
def gguf_block_bytes(backend: Backend, qtype: str) -> int:
    """Bytes per block of a GGUF type, which must equal the sum of its declared parts."""
    weights, size = _quant_size(backend, qtype)
    parts = _layout(backend, qtype)
    if sum(parts.values()) != size:
        raise InvariantFailed(
            f"gguf's {qtype.upper()} block is {size} bytes per {weights} weights; its parts "
            f"{parts} add up to {sum(parts.values())}"
        )
    return size


@claim(
    "quantisation.gguf.{qtype}.bits_per_weight", kind="library", over={"qtype": GGUF_TYPES}, backends=(GGUF_BACKEND,)
)
def gguf_bits_per_weight(backend: Backend, qtype: str) -> Fraction:
    """Bits per weight of a GGUF type: block bytes x 8 over block weights, scales included."""
    weights, size = _quant_size(backend, qtype)
    return Fraction(size * 8, weights)


@claim(
    "quantisation.gguf.{qtype}.{part}_bytes",
    kind="library",
    over={"qtype": ("q4_k",), "part": ("d", "dmin", "scales", "codes")},
    backends=(GGUF_BACKEND,),
)
def gguf_part_bytes(backend: Backend, qtype: str, part: str) -> int:
    """Bytes of one part of a Q4_K block: two float16 super-scales, packed 6-bit scales and minimums, nibbles."""
    gguf_block_bytes(backend, qtype)
    return _layout(backend, qtype)[part]


@claim(
    "quantisation.gguf.{qtype}.code_bytes", kind="library", over={"qtype": ("q8_0", "q4_0")}, backends=(GGUF_BACKEND,)
)
def gguf_code_bytes(backend: Backend, qtype: str) -> int:
    """Bytes of codes in one block: 32 one-byte codes for Q8_0, 16 bytes of nibbles for Q4_0."""
    gguf_block_bytes(backend, qtype)
    return _layout(backend, qtype)["codes"]


@claim("quantisation.gguf.q4_k.sub_block_weights", kind="library", backends=(GGUF_BACKEND,))
def q4_k_sub_block(backend: Backend) -> int:
    """Weights per sub-block of Q4_K, from how many 6-bit scales gguf unpacks from one block's 12 bytes."""
    _gguf(backend)
    from gguf.quants import Q4_K

    weights, _ = _quant_size(backend, "q4_k")
    scales, minimums = Q4_K.get_scale_min(np.zeros((1, Q4_K.K_SCALE_SIZE), dtype=np.uint8))
    count = scales.shape[-1]
    if minimums.shape[-1] != count or count * (6 + 6) != Q4_K.K_SCALE_SIZE * 8:
        raise InvariantFailed(
            f"Q4_K unpacks {count} scales and {minimums.shape[-1]} minimums from "
            f"{Q4_K.K_SCALE_SIZE} bytes; a 6-bit scale and a 6-bit minimum each would fill them exactly"
        )
    return weights // count


@functools.cache
def reference(backend: Backend, qtype: str) -> Quantised:
    """gguf-py's reference quantiser (bit-exact with ggml's C code) on the snippet's block."""
    gguf = _gguf(backend)
    from gguf.quants import dequantize, quantize

    kind = getattr(gguf.GGMLQuantizationType, qtype.upper())
    block = snippet_block()
    raw = quantize(block.reshape(1, -1), kind)
    back = dequantize(raw, kind).reshape(-1).astype(np.float32)
    scale = float(raw[0, :2].view(np.float16)[0])
    if qtype == "q8_0":
        codes = raw[0, 2:].view(np.int8).copy()
    else:  # nibbles: low halves are weights 0..15, high halves 16..31, stored with an offset of 8
        packed = raw[0, 2:]
        codes = np.concatenate([packed & 0x0F, packed >> 4]).astype(np.int8) - 8
    rms = float(np.sqrt(np.mean(block**2)))
    return Quantised(block.copy(), codes.astype(np.int8), abs(scale), 16, back, rms, float(np.abs(back - block).mean()))


@claim(
    "quantisation.gguf.{qtype}.{field}",
    kind="library",
    over={"qtype": ("q8_0", "q4_0"), "field": ("codes", "error_vs_rms", "zero_codes", "codes_differing")},
    backends=(GGUF_BACKEND,),
)
@claim(
    "quantisation.gguf.{qtype}.{field}",
    kind="library",
    over={"qtype": ("q8_0",), "field": ("scale",)},
    backends=(GGUF_BACKEND,),
)
@claim(
    "quantisation.gguf.{qtype}.{field}",
    kind="library",
    over={"qtype": ("q4_0",), "field": ("scale",)},
    backends=(GGUF_BACKEND,),
    quote="Those are the two oldest GGUF types, and the snippet is their algorithm.",
    quote_at="tensors-gpus-and-precision.txt:391",
)
def gguf_reference(backend: Backend, qtype: str, field: str) -> Any:
    """What ggml's own Q8_0 and Q4_0 quantisers make of the snippet's block, and how many codes differ from it."""
    ref = reference(backend, qtype)
    if field == "codes":
        return tuple(int(c) for c in ref.codes[:SHOWN])
    if field == "scale":
        return ref.scale
    if field == "error_vs_rms":
        return ref.error_vs_rms
    if field == "zero_codes":
        return ref.zero_codes
    ours = quantise(backend, 8 if qtype == "q8_0" else 4)
    return int((ours.codes != ref.codes).sum())


# --- Qwen3-8B's Q4_K_M file -------------------------------------------------------------------


def _q4_k_m_bytes() -> Fraction:
    return q4_k_m_gb() * GB


@claim("quantisation.q4_k_m.bytes_per_param", kind="exact")
def q4_k_m_bytes_per_param() -> Fraction:
    """Bytes per parameter of Qwen3-8B's Q4_K_M file: the quoted size over the parameter count from config.json."""
    return _q4_k_m_bytes() / total_params()


excuse(q4_k_m_bytes_per_param, {WHOLE_FILE_READ: PER_PARAMETER})


@claim("quantisation.q4_k_m.bits_per_param", kind="exact")
def q4_k_m_bits_per_param() -> Fraction:
    """Bits per parameter of Qwen3-8B's Q4_K_M file: above Q4_K's 4.5, because the _M mix keeps some tensors wider."""
    return _q4_k_m_bytes() * 8 / total_params()


excuse(q4_k_m_bits_per_param, {WHOLE_FILE_READ: PER_PARAMETER})


# --- MXFP4 and NVFP4: what MLX's quantize returns, and gguf's blocks --------------------------

FP4_MODES = {"mxfp4": 32, "nvfp4": 16}  # the block each format's specification fixes


FP4_BACKENDS = (GGUF_BACKEND, *supporting("fp4_quantize"))  # gguf's block layout, or the library's own quantiser


@functools.cache
def _library_fp4(backend: Backend, mode: str) -> tuple[int, float]:
    """(weights per scale, bits per weight) measured from the arrays the library's quantiser returns."""
    group, bits, error = ops(backend).quantize_fp4(mode, FP4_MODES[mode])
    if not error < 0.25:
        raise InvariantFailed(
            f"{backend.name}: {mode} round trip has mean error {error:.2%} of the mean weight; "
            "a 4-bit float grid with a per-block scale stays well under a quarter"
        )
    return group, bits


@claim("quantisation.{mode}.block", kind="library", over={"mode": tuple(FP4_MODES)}, backends=FP4_BACKENDS)
def fp4_block(backend: Backend, mode: str) -> int:
    """Weights per scale: 32 for MXFP4, 16 for NVFP4 (MLX's scales array, or gguf's block layout)."""
    if has(backend, "fp4_quantize"):
        return _library_fp4(backend, mode)[0]
    weights, size = _quant_size(backend, mode)
    scales = size - weights * 4 // 8  # bytes left after the 4-bit elements, one byte per scale
    return weights // scales


@claim("quantisation.{mode}.bits_per_weight", kind="library", over={"mode": tuple(FP4_MODES)}, backends=FP4_BACKENDS)
def fp4_bits_per_weight(backend: Backend, mode: str) -> float:
    """Bits per weight of MXFP4 (4 + 8/32) and NVFP4 (4 + 8/16), measured from stored bytes."""
    if has(backend, "fp4_quantize"):
        bits = _library_fp4(backend, mode)[1]
    else:
        bits = float(gguf_bits_per_weight(backend, mode))
    derived = 4 + 8 / FP4_MODES[mode]
    if bits != derived:
        raise InvariantFailed(
            f"{backend.name}: {mode} stores {bits} bits per weight; a 4-bit element plus one 8-bit "
            f"scale per {FP4_MODES[mode]} gives {derived}"
        )
    return bits


@claim("quantisation.nvfp4.tensor_scalar_bits", kind="exact")
def nvfp4_tensor_scalar_bits() -> Fraction:
    """What NVFP4's one FP32 scalar per tensor adds per weight, for one of Qwen3-8B's q_proj matrices."""
    rows, columns = matrix_shapes(model_config(MODEL))["q_proj"]
    return Fraction(np.dtype(np.float32).itemsize * 8, rows * columns)


def table(backend: Backend) -> dict[str, Any]:
    """The snippet's quantiser outputs on one backend, as plain numbers (for snapshots)."""
    out: dict[str, Any] = {}
    for bits in (8, 4):
        q = quantise(backend, bits)
        out[f"q{bits}"] = {
            "codes": [int(c) for c in q.codes],
            "scale": q.scale,
            "restored": [round(float(v), 8) for v in q.restored],
            "rms": round(q.rms, 8),
            "mean_error": round(q.mean_error, 9),
            "zero_codes": q.zero_codes,
        }
    return out


@claim("quantisation.gguf.q8_0.bits_over_bf16", kind="library", backends=(GGUF_BACKEND,))
def gguf_q8_0_over_bf16(backend: Backend) -> Fraction:
    """Q8_0's bits per weight over BF16's: the 8-bit codes plus a 16-bit scale per block, against 16 bits."""
    return gguf_bits_per_weight(backend, "q8_0") / FORMATS["bf16"].storage_bits


@claim("quantisation.nvfp4.block_over_mxfp4", kind="library", backends=FP4_BACKENDS)
def nvfp4_block_over_mxfp4(backend: Backend) -> Fraction:
    """NVFP4's block against MXFP4's: weights per scale of each, as the library or gguf's layout gives them."""
    return Fraction(fp4_block(backend, "nvfp4"), fp4_block(backend, "mxfp4"))
