"""The figures of the chapter's bandwidth questions (1, 4 and 5), right answers and wrong options alike.

Question 1: switching Qwen3-8B from BF16 (16.4 GB) to Q4_K_M (5.0 GB) on 273 GB/s.
Question 4: prefill time when the prompt doubles from 2,048 to 4,096 tokens.
Question 5: a 20 GB model on a 16 GB card at 1,792 GB/s, the other 4 GB behind PCIe Gen5
at 64 GB/s per direction. The question's givens (20 GB, 16 GB) are its own; bandwidths,
file sizes and formats come from the same inputs as the chapter's tables.
"""

from __future__ import annotations

from fractions import Fraction

from claims.topics.decode import bandwidth_gbps, ceiling
from claims.topics.flops import forward_flops_per_param, prompt_length
from claims.topics.formats import FORMATS
from claims.topics.hierarchy import MS_PER_S, TRACK_N_CARDS, link
from claims.topics.memory_lab import gb, gib
from claims.topics.models import (
    FILE_SIZE_STANDS,
    GB,
    PER_PARAMETER,
    WHOLE_FILE_READ,
    checkpoint_gb,
    gguf_bits_per_weight,
    q4_k_m_gb,
    total_params,
)
from verified_book import InvariantFailed, claim, devices, excuse, given, match_device

# why figures that divide by a file's size stand beside the dispute that a token reads all of it
QUESTION_GIVENS = (
    "Question 1 states the two file sizes and asks for bandwidth over them, as the chapter's decode table "
    "does; over the 15.1 GB a token reads, the BF16 ceiling is about 18, and the answer's point, a gain near "
    "the ratio of the bytes and not four, holds."
)

Q1_MACHINE = "dgx_spark"


def q1_nominal() -> int:
    """The "4" in Q4: the bits a naive reading of the name assumes (a given of the question)."""
    return int(given("questions.q1.nominal_bits"))


def q5_model_gb() -> Fraction:
    return Fraction(given("questions.q5.model_gb"))


def q5_vram_gb() -> Fraction:
    return Fraction(given("questions.q5.vram_gb"))


# Question 1 ---------------------------------------------------------------------------------


@claim("questions.q1.bandwidth", kind="quoted", citation="NVIDIA DGX Spark datasheet: memory bandwidth 273 GB/s")
def q1_bandwidth() -> Fraction:
    """Q1's machine bandwidth, 273 GB/s (the DGX Spark's vendor figure)."""
    return bandwidth_gbps(Q1_MACHINE)


@claim("questions.q1.file_gb.{fmt}", kind="exact", over={"fmt": ("bf16",)})
@claim("questions.q1.file_gb.{fmt}", kind="given", over={"fmt": ("q4_k_m",)})
def q1_file(fmt: str) -> Fraction:
    """Q1's file sizes: 16.4 GB at BF16 (the parameters at two bytes each), 5.0 GB at Q4_K_M (as the book gives it)."""
    return checkpoint_gb() if fmt == "bf16" else q4_k_m_gb()


excuse(q1_file, {WHOLE_FILE_READ: FILE_SIZE_STANDS})


@claim("questions.q1.ceiling.{fmt}", kind="exact", over={"fmt": ("bf16", "q4_k_m")})
def q1_ceiling(fmt: str) -> Fraction:
    """Q1's decode ceilings: 273 / 16.4 = 16.6 ('about 17') and 273 / 5.0 = 54.6 ('about 55') tokens/s."""
    return ceiling(bandwidth_gbps(Q1_MACHINE), q1_file(fmt))


excuse(q1_ceiling, {WHOLE_FILE_READ: QUESTION_GIVENS})


@claim("questions.q1.ratio", kind="exact")
def q1_ratio() -> Fraction:
    """Q1's gain from the switch, the ratio of the file sizes: 16.4 / 5.0 = 3.3."""
    return checkpoint_gb() / q4_k_m_gb()


excuse(q1_ratio, {WHOLE_FILE_READ: QUESTION_GIVENS})


@claim("questions.q1.nominal_bits.{fmt}", kind="given", over={"fmt": ("q4",)})
@claim("questions.q1.nominal_bits.{fmt}", kind="exact", over={"fmt": ("bf16",)})
def q1_nominal_bits(fmt: str) -> int:
    """Q1's wrong option's bit widths: 16 for BF16, 4 as the name Q4 suggests."""
    return FORMATS["bf16"].bits if fmt == "bf16" else q1_nominal()


@claim("questions.q1.nominal_factor", kind="exact")
def q1_nominal_factor() -> Fraction:
    """Q1's wrong option: 'a factor of four', 16 bits over 4."""
    return Fraction(FORMATS["bf16"].bits, q1_nominal())


@claim("questions.q1.nominal_share", kind="exact")
def q1_nominal_share() -> Fraction:
    """Q1's wrong option: '4 bits is a quarter of 16', 0.25."""
    return Fraction(q1_nominal(), FORMATS["bf16"].bits)


@claim("questions.q1.nominal_ceiling", kind="exact")
def q1_nominal_ceiling() -> Fraction:
    """Q1's wrong option's ceiling: the BF16 ceiling times four, 66.6 ('about 67') tokens/s."""
    return q1_ceiling("bf16") * q1_nominal_factor()


excuse(q1_nominal_ceiling, {WHOLE_FILE_READ: QUESTION_GIVENS})


@claim("questions.q1.bytes_per_param", kind="exact")
def q1_bytes_per_param() -> Fraction:
    """Q1's explanation: the Q4_K_M file is 5.0 GB over the exact parameter count, 0.61 bytes per parameter."""
    return q4_k_m_gb() * GB / total_params()


excuse(q1_bytes_per_param, {WHOLE_FILE_READ: PER_PARAMETER})


@claim("questions.q1.q4_k_bits_per_weight", kind="library", backends=("numpy",))
def q1_q4_k_bits(backend: object) -> Fraction:
    """Q1's explanation: Q4_K's 4.5 bits per weight, from gguf's block size (144 bytes per 256 weights)."""
    return gguf_bits_per_weight("Q4_K")


# Question 4 ---------------------------------------------------------------------------------


@claim("questions.q4.prompt_growth", kind="given")
def q4_prompt_growth() -> int:
    """How many times longer Q4's second prompt is."""
    return int(given("questions.q4.prompt_growth"))


@claim("questions.q4.tokens.{prompt}", kind="exact", over={"prompt": ("short", "long")})
def q4_tokens(prompt: str) -> int:
    """Q4's prompts: 2,048 tokens, and twice that, 4,096."""
    short = prompt_length()
    return short if prompt == "short" else int(given("questions.q4.prompt_growth")) * short


def _prefill_flops(tokens: int) -> Fraction:
    return forward_flops_per_param() * Fraction(total_params()) * tokens


@claim("questions.q4.time_ratio", kind="exact")
def q4_time_ratio() -> Fraction:
    """Q4's answer 'about 2T': compute-bound prefill time scales with 2 × parameters × tokens."""
    return _prefill_flops(q4_tokens("long")) / _prefill_flops(q4_tokens("short"))


@claim("questions.q4.inverse_ratio", kind="exact")
def q4_inverse_ratio() -> Fraction:
    """Q4's wrong option 'about T/2': the time if a longer prompt ran proportionally faster, the growth inverted."""
    return 1 / q4_time_ratio()


@claim("questions.q4.attention_ratio", kind="exact")
def q4_attention_ratio() -> Fraction:
    """Q4's wrong option 'about 4T': the attention term grows with the square of the length."""
    return Fraction(q4_tokens("long"), q4_tokens("short")) ** 2


# Question 5 ---------------------------------------------------------------------------------


def _q5_parts() -> dict[str, tuple[Fraction, Fraction]]:
    """(GB, GB/s) of Q5's two places: the card's VRAM and system memory over PCIe Gen5."""
    return {
        "vram": (q5_vram_gb(), bandwidth_gbps("rtx5090")),
        "system": (q5_model_gb() - q5_vram_gb(), link("pcie_gen5_x16_per_direction")),
    }


@claim("questions.q5.gb.{place}", kind="given", over={"place": ("model", "vram")})
@claim("questions.q5.gb.{place}", kind="exact", over={"place": ("system",)})
def q5_gigabytes(place: str) -> Fraction:
    """Q5's sizes: the 20 GB model, the 16 GB on the card, the 4 GB left in system memory."""
    return q5_model_gb() if place == "model" else _q5_parts()[place][0]


@claim(
    "questions.q5.bandwidth.{place}",
    kind="quoted",
    over={"place": ("vram", "system")},
    citation="NVIDIA GeForce RTX 5090 product page (1,792 GB/s); NVIDIA Hopper architecture in-depth post "
    "(PCIe Gen5 x16, 64 GB/s in each direction)",
)
def q5_bandwidth(place: str) -> Fraction:
    """Q5's bandwidths: 1,792 GB/s on the card, 64 GB/s per direction over PCIe Gen5 x16."""
    return _q5_parts()[place][1]


@claim("questions.q5.ms.{place}", kind="exact", over={"place": ("vram", "system", "total")})
def q5_ms(place: str) -> Fraction:
    """Q5's milliseconds per token: 16 / 1,792 = 8.9 ('9 ms'), 4 / 64 = 62.5, together 71.4."""
    times = {name: gb / bw * MS_PER_S for name, (gb, bw) in _q5_parts().items()}
    return sum(times.values()) if place == "total" else times[place]


@claim("questions.q5.ceiling", kind="exact")
def q5_ceiling() -> Fraction:
    """Q5's answer: one token per 71.4 ms, a ceiling of 14 tokens/s."""
    return MS_PER_S / q5_ms("total")


@claim("questions.q5.all_vram_ceiling", kind="exact")
def q5_all_vram() -> Fraction:
    """Q5's comparison: a card holding all 20 GB allows 1,792 / 20 = 89.6 ('about 90') tokens/s."""
    return bandwidth_gbps("rtx5090") / q5_model_gb()


@claim("questions.q5.half_ceiling", kind="exact")
def q5_half() -> Fraction:
    """Q5's wrong option 'about 45: half the speed', half of the all-VRAM ceiling."""
    return q5_all_vram() / 2


@claim("questions.q5.slow_share.{of}", kind="exact", over={"of": ("bytes", "time")})
def q5_slow_share(of: str) -> Fraction:
    """Q5's slow part: a fifth of the bytes, seven eighths of the time."""
    if of == "bytes":
        return (q5_model_gb() - q5_vram_gb()) / q5_model_gb()
    return q5_ms("system") / q5_ms("total")


# Question 5's card against the catalogue, and its units -------------------------------------


@claim(
    "questions.q5.bandwidth.sold",
    kind="exact",
    quote="a card with 16 GB of VRAM whose bandwidth is 1,792 gigabytes per second",
    quote_at="tensors-gpus-and-precision.txt:482",
    citation="the catalogue of real devices, claims/data/devices.toml",
)
def q5_sold_bandwidth() -> Fraction:
    """The bandwidth of Q5's card if one is sold (its figure), else of the fastest catalogued card with its
    memory: no card has 16 GB at 1,792 GB/s (that is the 32 GB RTX 5090's); the RTX 5080 has 16 GB at 960."""
    return _q5_sold_card_bandwidth()


def _q5_sold_card_bandwidth() -> Fraction:
    stated = bandwidth_gbps("rtx5090")
    try:
        card = match_device(TRACK_N_CARDS, memory=q5_vram_gb(), bandwidth=stated)
    except InvariantFailed:
        with_memory = [d.bandwidth for d in devices(TRACK_N_CARDS) if q5_vram_gb() in d.memory and d.bandwidth]
        if not with_memory:
            raise
        return max(with_memory)
    assert card.bandwidth is not None
    return card.bandwidth


@claim("questions.q5.sold_ceiling", kind="exact")
def q5_sold_ceiling() -> Fraction:
    """Q5's split on the fastest 16 GB card that is sold (an RTX 5080): 16 / 960 + 4 / 64 s per thousand tokens."""
    seconds = q5_vram_gb() / _q5_sold_card_bandwidth() + (q5_model_gb() - q5_vram_gb()) / link(
        "pcie_gen5_x16_per_direction"
    )
    return 1 / seconds


def _q5_card_gb() -> Fraction:
    """Q5's card's "16 GB" in decimal GB: a vendor's capacity GB are GiB (claims/data/devices.toml)."""
    return q5_vram_gb() * gib() / gb()


@claim("questions.q5.gib.{what}", kind="exact", over={"what": ("vram_gb", "system", "ceiling")})
def q5_in_one_unit(what: str) -> Fraction:
    """Q5 with the card's GB read as GiB and the model's as decimal GB, as the book counts them: 17.2 GB on
    the card, 2.8 GB left over PCIe, and the ceiling that gives."""
    on_card = _q5_card_gb()
    spilled = q5_model_gb() - on_card
    if what == "vram_gb":
        return on_card
    if what == "system":
        return spilled
    return 1 / (on_card / bandwidth_gbps("rtx5090") + spilled / link("pcie_gen5_x16_per_direction"))
