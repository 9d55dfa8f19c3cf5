"""One weight matrix read once per call at four batch sizes: from waiting on bytes to doing arithmetic.

The weight is Qwen3-8B's gate_proj as x @ w needs it, (hidden_size, intermediate_size),
in FP32. Its FLOPs per byte read are exact, batch / 2. The chapter prints one run of
book/snippets/intensity.py on the author's test box; its times are inputs
(claims/data/author_runs.toml), and the rates printed beside them must be the work over
those times. The measured claims read the times this machine's run of the snippet prints
(`verified_book.engine.snippet_figures`: the default run executes it once, inside the test
process), record them, and check the shape that must hold anywhere: the arithmetic rate
rises from batch 1 to batch 256 while the rate at which the weights are read falls.
"""

from __future__ import annotations

from fractions import Fraction

from claims.topics.formats import FORMATS
from verified_book import (
    Backend,
    InvariantFailed,
    claim,
    exact,
    given,
    model_config,
    snippet_figure,
    snippet_holds,
    table,
    vendor,
)

RUNS = "author_runs.toml"
PRINTED_ON = "author_test_box"  # no profile matches it: the printed timings are compared nowhere
BATCHES = tuple(table("given.toml")["intensity"]["batches"]["value"])  # the ids; values are read as inputs
GIGA = 10**9
MEGA = 10**6


def weight_shape() -> tuple[int, int]:
    """(inputs, outputs): gate_proj transposed, as x @ w multiplies it."""
    config = model_config("qwen3-8b")
    return config["hidden_size"], config["intermediate_size"]


def weight_bytes() -> int:
    inputs, outputs = weight_shape()
    return inputs * outputs * FORMATS["fp32"].storage_bits // 8


def batch_flops(batch: int) -> int:
    inputs, outputs = weight_shape()
    return 2 * sweep(batch) * inputs * outputs


def author_seconds(batch: int) -> Fraction:
    return exact(vendor(RUNS, f"intensity.ms.b{batch}")) / 1000


@claim("intensity.weight_mb", kind="exact")
def weight_mb() -> Fraction:
    """The FP32 weight's size in MB: 4096 × 12288 × 4 bytes."""
    return Fraction(weight_bytes(), MEGA)


def sweep(batch: int) -> int:
    """The batch of the sweep's row that the id `b{batch}` names, read as a given input."""
    return int(given("intensity.batches")[BATCHES.index(batch)])


@claim("intensity.b{batch}.batch", kind="given", over={"batch": BATCHES})
def batch_size(batch: int) -> int:
    """A batch size of the sweep."""
    return sweep(batch)


@claim("intensity.b{batch}.flop_per_byte", kind="exact", over={"batch": BATCHES})
def flop_per_byte(batch: int) -> Fraction:
    """FLOPs per byte of weight read at a batch size: 2 × batch × weights over 4 × weights."""
    return Fraction(batch_flops(batch), weight_bytes())


@claim("intensity.flop_ratio", kind="exact")
def flop_ratio() -> Fraction:
    """The arithmetic at batch 256 over batch 1, on the same bytes."""
    return Fraction(batch_flops(BATCHES[-1]), batch_flops(BATCHES[0]))


@claim("intensity.author.b{batch}.gflops", kind="exact", over={"batch": BATCHES})
def author_gflops(batch: int) -> Fraction:
    """The printed GFLOP/s at a batch size, from the printed time: FLOPs / time."""
    return batch_flops(batch) / author_seconds(batch) / GIGA


@claim("intensity.author.b{batch}.weight_gbps", kind="exact", over={"batch": BATCHES})
def author_weight_gbps(batch: int) -> Fraction:
    """The printed weight GB/s at a batch size, from the printed time: weight bytes / time."""
    return weight_bytes() / author_seconds(batch) / GIGA


@claim(
    "intensity.author.rate_ratio",
    kind="exact",
    measured_here="intensity.measured.gflops_rise",
    quote="and ran at twenty-five times the rate",
    quote_at="tensors-gpus-and-precision.txt:173",
)
def author_rate_ratio() -> Fraction:
    """The printed run's GFLOP/s at batch 256 over batch 1: the 'times the rate' of the prose.

    The source calls it twenty-five times; its own table's 439.9 over 17.2 is 25.6, nearer twenty-six."""
    return author_gflops(BATCHES[-1]) / author_gflops(BATCHES[0])


def printed_seconds(batch: int) -> float:
    """Seconds per call at a batch size as intensity.py printed them on this machine, from the row
    whose batch and weight size are the book's: a row that printed another batch, or a weight of
    another size, would time other work than the claims' arithmetic counts."""
    row_batch, weight = snippet_figure(f"intensity.b{batch}.batch"), snippet_figure("intensity.weight_mb")
    if row_batch != sweep(batch):
        raise InvariantFailed(
            f"intensity.py printed batch {row_batch:g} on the row where the book shows batch {sweep(batch)}"
        )
    if not snippet_holds("intensity.weight_mb", weight_mb()):
        raise InvariantFailed(
            f"intensity.py printed a {weight:g} MB weight; the book's weight is {float(weight_mb()):.1f} MB"
        )
    return float(snippet_figure(f"intensity.b{batch}.ms")) / 1000


def measured_rates(batch: int) -> tuple[float, float]:
    """(GFLOP/s, weight GB/s) of this machine's run at a batch size."""
    seconds = printed_seconds(batch)
    return batch_flops(batch) / seconds / GIGA, weight_bytes() / seconds / GIGA


@claim("intensity.threads", kind="measured", backends=("torch:cpu",), printed_on=PRINTED_ON, tolerance=0.0)
def threads(backend: Backend) -> int:
    """The CPU threads torch uses on this machine."""
    import torch

    return torch.get_num_threads()


@claim(
    "intensity.b{batch}.ms",
    kind="measured",
    over={"batch": BATCHES},
    backends=("torch:cpu",),
    printed_on=PRINTED_ON,
    tolerance=0.5,
)
def measured_ms(backend: Backend, batch: int) -> float:
    """Milliseconds per x @ w call at a batch size, as intensity.py prints them on this machine."""
    return printed_seconds(batch) * 1000


@claim("intensity.measured.gflops_rise", kind="measured", backends=("torch:cpu",))
def gflops_rise(backend: Backend) -> float:
    """GFLOP/s at batch 256 over batch 1 on this machine: more than one, as the work per byte grows."""
    low, high = measured_rates(BATCHES[0])[0], measured_rates(BATCHES[-1])[0]
    if not high > low:
        raise InvariantFailed(
            f"GFLOP/s did not rise from batch {BATCHES[0]} ({low:.1f}) to batch {BATCHES[-1]} ({high:.1f})"
        )
    return high / low


@claim("intensity.measured.bandwidth_fall", kind="measured", backends=("torch:cpu",))
def bandwidth_fall(backend: Backend) -> float:
    """Weight GB/s at batch 1 over batch 256 on this machine: more than one, as the same bytes serve more work."""
    high, low = measured_rates(BATCHES[0])[1], measured_rates(BATCHES[-1])[1]
    if not high > low:
        raise InvariantFailed(
            f"weight GB/s did not fall from batch {BATCHES[0]} ({high:.1f}) to batch {BATCHES[-1]} ({low:.1f})"
        )
    return high / low
