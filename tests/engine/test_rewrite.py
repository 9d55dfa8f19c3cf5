"""`--rewrite-stale-figures` on the DGX Spark example: the author changes the Spark's bandwidth, the rewrite
fixes every figure computed from it, and lists the sentence it leaves false for the author to reread."""

from __future__ import annotations

import pytest
from harness import faults

pytest_plugins = ["pytester"]

TRACKS = ("dgx_spark", "ryzen_ai_max", "m4_max", "rtx5090")

CLAIMS = f'''
from fractions import Fraction
from verified_book.authoring.registry import claim
from verified_book.authoring.inputs import exact, vendor

TRACKS = {TRACKS!r}
BF16_BYTES = 16_381_470_720

def bandwidth(track):
    return exact(vendor(f"hardware/{{track}}.toml", "memory_bandwidth"))

@claim("decode.bandwidth.{{track}}", kind="quoted", citation="the machine's datasheet", over={{"track": TRACKS}})
def decode_bandwidth(track):
    """A machine's memory bandwidth in GB/s, as its vendor states it."""
    return bandwidth(track)

@claim("decode.ceiling.{{track}}.bf16", kind="exact", over={{"track": TRACKS}})
def decode_ceiling(track):
    """Batch-1 decode ceiling: bandwidth over the rounded 16.4 GB."""
    return bandwidth(track) / Fraction("16.4")

@claim("decode.ceiling_derived.{{track}}.bf16", kind="exact", over={{"track": TRACKS}})
def decode_ceiling_derived(track):
    """The ceiling over the bytes counted from the config."""
    return bandwidth(track) / Fraction(BF16_BYTES, 10**9)

@claim("models.total_bytes", kind="exact")
def total_bytes():
    """Qwen3-8B's BF16 bytes."""
    return BF16_BYTES
'''

# book/gpus-and-precision/1-tensors-and-bandwidth.md, its table and the paragraph after it
PAGE = """\
| Track, machine | Vendor bandwidth (GB/s) | Qwen3-8B at BF16 (tokens/s) |
| --- | --- | --- |
| S, DGX Spark | [273](claim:decode.bandwidth.dgx_spark) | [16.6](claim:decode.ceiling.dgx_spark.bf16) |
| X, Ryzen AI Max+ 395 | [256](claim:decode.bandwidth.ryzen_ai_max) | [15.6](claim:decode.ceiling.ryzen_ai_max.bf16) |
| M, Mac Studio with M4 Max | [546](claim:decode.bandwidth.m4_max) | [33.3](claim:decode.ceiling.m4_max.bf16) |
| N, desktop with RTX 5090 | [1,792](claim:decode.bandwidth.rtx5090) | [109.3](claim:decode.ceiling.rtx5090.bf16) |

The Spark's datasheet gives [273](claim:decode.bandwidth.dgx_spark) GB/s. Divide by the
[16,381,470,720](claim:models.total_bytes) bytes counted from the config
instead and the Spark's ceiling becomes [16.7](claim:decode.ceiling_derived.dgx_spark.bf16)
and the RTX 5090's [109.4](claim:decode.ceiling_derived.rtx5090.bf16), while the Ryzen's
[15.6](claim:decode.ceiling_derived.ryzen_ai_max.bf16) and the M4 Max's
[33.3](claim:decode.ceiling_derived.m4_max.bf16) stay as printed: the last digit of a
ceiling is only as good as the file size it divides by.
"""


ALLOWLIST = '[[allow]]\npattern = "RTX 5090|Max\\\\+ 395"\nreason = "product names"\nfiles = ["book/page.md"]\n'


@pytest.fixture
def book(pytester: pytest.Pytester) -> pytest.Pytester:
    return faults.sample_book(pytester, CLAIMS, PAGE, "decode.py", files={"book/allowlist.toml": ALLOWLIST})


run = faults.run_book


def test_the_rewrite_fixes_the_spark_figures_and_lists_the_sentence_it_leaves_false(book: pytest.Pytester) -> None:
    assert run(book).ret == 0
    spark = book.path / "data" / "hardware" / "dgx_spark.toml"
    spark.write_text(spark.read_text().replace("value = 273\n", "value = 280\n"))
    flagged = run(book, "-q")
    flagged.stdout.fnmatch_lines(
        ["data/hardware/dgx_spark.toml:*: memory_bandwidth: value = 280, but its source says 273 GB/s*"]
    )
    spark.write_text(spark.read_text().replace("bandwidth 273 GB/s", "bandwidth 280 GB/s"))
    result = run(book, "-q", "--rewrite-stale-figures")
    out = result.stdout.str()
    assert result.ret == 0 and result.parseoutcomes().get("rewritten") == 4, out
    assert "failed" not in result.parseoutcomes()
    result.stdout.fnmatch_lines(
        [
            "rewrote 4 stale figure(s), judged again as rewritten: book/page.md:3 (273 → 280), book/page.md:3 "
            "(16.6 → 17.1), book/page.md:8 (273 → 280), book/page.md:10 (16.7 → 17.1)",
            "reread 1 sentence(s): *",
            "  book/page.md:8: reread: 17.1 rewritten beside 4 other figures and 'instead', 'becomes', 'while', 'stay "
            "as printed': "
            "\"Divide by the 16,381,470,720 bytes counted from the config instead and the Spark's ceiling becomes 17.1 "
            "and the RTX 5090's 109.4, while the Ryzen's 15.6 and the M4 Max's 33.3 stay as printed: the last digit "
            "of a "
            'ceiling is only as good as the file size it divides by."',
        ]
    )
    # the sentence of the bandwidth alone compares nothing, and the table's rows are not prose
    assert "reread: 280" not in out and "page.md:3: reread" not in out
    assert "17.1](claim:decode.ceiling_derived.dgx_spark.bf16)" in (book.path / "book" / "page.md").read_text()
    assert run(book).ret == 0  # the suite passes: the sentence list is what tells the author to reread


# A page that shows Markdown: a ``` line inside a ~~~ block is code, and the prose after the block is prose.
EXAMPLE = """\
~~~markdown
A fence inside the example:
```
The Spark's ceiling becomes [16.7](claim:decode.ceiling_derived.dgx_spark.bf16)
~~~

"""


def test_a_fence_of_the_other_kind_inside_a_block_leaves_the_prose_after_it_prose(pytester: pytest.Pytester) -> None:
    book = faults.sample_book(pytester, CLAIMS, EXAMPLE + PAGE, "decode.py", files={"book/allowlist.toml": ALLOWLIST})
    assert run(book).ret == 0
    spark = book.path / "data" / "hardware" / "dgx_spark.toml"
    spark.write_text(spark.read_text().replace("value = 273\n", "value = 280\n").replace("273 GB/s", "280 GB/s"))
    result = run(book, "-q", "--rewrite-stale-figures")
    assert result.ret == 0 and result.parseoutcomes().get("rewritten") == 4, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "rewrote 4 stale figure(s), judged again as rewritten: book/page.md:9 (273 → 280), book/page.md:9 "
            "(16.6 → 17.1), book/page.md:14 (273 → 280), book/page.md:16 (16.7 → 17.1)",
            "reread 1 sentence(s): *",
            "  book/page.md:14: reread: 17.1 rewritten beside 4 other figures and *",
        ]
    )
    text = (book.path / "book" / "page.md").read_text()
    assert text.startswith(EXAMPLE)  # the example's figure is code: the rewrite leaves it as it is
    assert "becomes [17.1](claim:decode.ceiling_derived.dgx_spark.bf16)\nand the RTX" in text
