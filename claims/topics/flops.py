"""Counting the work: FLOPs per parameter, per job, and the arithmetic intensity of each job.

A matrix multiplication (m, k) @ (k, n) does m·n·k multiply-adds, two FLOPs each, so a
weight costs two FLOPs per token in the forward pass and, with the backward pass doing
twice the forward's work, six per training token. The book's FLOP table is computed from
the parameter count as the book states it, 8.2 billion; the `exact` claims use the exact
count, which moves two of the table's figures by one in the last digit. Claims come in
pairs, `.stated` and `.exact`.
"""

from __future__ import annotations

from fractions import Fraction

from claims.topics.models import GB, WHOLE_FILE_READ, checkpoint_gb, q4_k_m_gb, stated_params, total_params
from verified_book import claim, exact, excuse, given, vendor

# why figures that divide by a file's size stand beside the dispute that a token reads all of it
BOTH_SIDES = (
    "A gather does no multiply-adds, so leaving the embedding out takes it off the FLOPs and the bytes alike:"
    " at BF16 the intensity is unchanged to the digit printed; the Q4_K_M row keeps the source's file size, "
    "whose embedding share the book has no data for."
)

COUNTS = ("stated", "exact")
TERA = 10**12


def prompt_length() -> int:
    """The example prompt's length in tokens (a given)."""
    return int(given("flops.prompt_tokens"))


def pretraining_tokens() -> int:
    return int(given("flops.pretraining_tokens"))


# Jobs of the intensity table: the tokens that use each weight read (one stream of decode, a
# batch of them, or a prompt), and the file the weights come from.
JOBS = {
    "decode_bf16": (lambda: int(given("flops.single_stream_batch")), "bf16"),
    "decode_q4_k_m": (lambda: int(given("flops.single_stream_batch")), "q4_k_m"),
    "decode_batch8_bf16": (lambda: int(given("flops.decode_batch")), "bf16"),
    "prefill_bf16": (prompt_length, "bf16"),
}


def forward_flops_per_param() -> int:
    """One multiply-add per weight per token in a matmul, counted as the convention's FLOPs."""
    multiply_adds = 1  # (m, k) @ (k, n) does m·n·k multiply-adds: one per weight per token
    return multiply_adds * int(given("flops.per_multiply_add"))


def training_flops_per_param() -> int:
    """Forward, plus a backward pass of twice the forward: gradients for the inputs and the weights."""
    forward = forward_flops_per_param()
    backward = int(given("flops.backward_over_forward")) * forward
    return forward + backward


def params(which: str) -> Fraction:
    return stated_params() if which == "stated" else Fraction(total_params())


@claim("flops.per_param.{part}", kind="exact", over={"part": ("forward", "backward", "training")})
def per_param(part: str) -> int:
    """FLOPs per weight per token: two forward, four backward, six for a training token."""
    forward, training = forward_flops_per_param(), training_flops_per_param()
    return {"forward": forward, "backward": training - forward, "training": training}[part]


@claim("flops.backward_over_forward", kind="given")
def backward_over_forward() -> int:
    """How many times the forward pass's FLOPs the backward pass costs."""
    return int(given("flops.backward_over_forward"))


@claim("flops.pretraining_tokens", kind="given")
def pretraining_token_count() -> int:
    """The tokens of the pretraining example."""
    return pretraining_tokens()


@claim("flops.prompt_tokens", kind="given")
def prompt_tokens() -> int:
    """The example prompt's length in tokens."""
    return prompt_length()


@claim("flops.decode.gflop.{count}", kind="exact", over={"count": COUNTS})
def decode_gflop(count: str) -> Fraction:
    """One token through the model: 2 × parameters, in GFLOP (stated count, or exact)."""
    return forward_flops_per_param() * params(count) / GB


@claim("flops.prefill.tflop.{count}", kind="exact", over={"count": COUNTS})
def prefill_tflop(count: str) -> Fraction:
    """A 2,048-token prompt: 2 × parameters × tokens, in TFLOP (stated count, or exact)."""
    return forward_flops_per_param() * params(count) * prompt_length() / TERA


@claim("flops.training_token.gflop.{count}", kind="exact", over={"count": COUNTS})
def training_token_gflop(count: str) -> Fraction:
    """One training token, forward and backward: 6 × parameters, in GFLOP."""
    return training_flops_per_param() * params(count) / GB


@claim("flops.pretraining.flop.{count}", kind="exact", over={"count": COUNTS})
def pretraining_flop(count: str) -> Fraction:
    """Pretraining on a billion tokens: 6 × parameters × tokens, in FLOP."""
    return training_flops_per_param() * params(count) * pretraining_tokens()


def job_flops(job: str) -> Fraction:
    tokens, _ = JOBS[job]
    return forward_flops_per_param() * stated_params() * tokens()


def job_bytes(job: str) -> Fraction:
    _, fmt = JOBS[job]
    return (checkpoint_gb() if fmt == "bf16" else q4_k_m_gb()) * GB


@claim("flops.job.{job}.tokens", kind="given", over={"job": tuple(JOBS)})
def job_tokens(job: str) -> int:
    """Tokens that use each weight fetched: the batch in decode, the prompt length in prefill."""
    return JOBS[job][0]()


@claim("flops.job.{job}.gflop", kind="exact", over={"job": tuple(JOBS)})
def job_gflop(job: str) -> Fraction:
    """A job's FLOPs in GFLOP: 2 × parameters × tokens sharing one read of the weights."""
    return job_flops(job) / GB


@claim("flops.job.{job}.tflop", kind="exact", over={"job": tuple(JOBS)})
def job_tflop(job: str) -> Fraction:
    """A job's FLOPs in TFLOP."""
    return job_flops(job) / TERA


@claim("flops.job.{job}.intensity", kind="exact", over={"job": tuple(JOBS)})
def job_intensity(job: str) -> Fraction:
    """Arithmetic intensity, FLOPs per byte of weights read, against the quoted file size."""
    return job_flops(job) / job_bytes(job)


excuse(job_intensity, {WHOLE_FILE_READ: BOTH_SIDES})


@claim(
    "flops.tensor_core.fp16_multiple",
    kind="quoted",
    citation="NVIDIA Deep Learning Performance documentation, Train With Mixed Precision",
)
def tensor_core_multiple() -> int:
    """The multiple every matrix dimension must be for FP16 tensor-core shapes, as NVIDIA's guide states."""
    return int(exact(vendor("cuda_sm.toml", "tensor_core.fp16_dimension_multiple")))
