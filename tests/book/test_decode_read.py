"""What a decoded token reads: every weight of Qwen3-8B but the input embedding, of which it gathers one row.

The source has decode read the whole 16.4 GB checkpoint per token (`decode.read_per_token.qwen3_8b.gb`,
disputed in the book). These tests hold the claim to its shape: the embedding is the only matrix not
read whole, the untied output head is read whole, and transformers' model agrees with the config.
"""

from __future__ import annotations

from typing import Iterator

import pytest
from harness.paths import ROOT

from verified_book.authoring import inputs
from verified_book.engine.config import open_book, read_config

CONFIG = "models/qwen3-8b/config.json"


@pytest.fixture(scope="module")
def decode() -> Iterator[object]:
    with open_book(read_config(ROOT)).opened():
        from claims.topics import decode as module

        yield module


def test_a_token_reads_every_weight_but_the_embedding_and_one_row_of_it(decode) -> None:  # type: ignore[no-untyped-def]
    from claims.topics.models import bf16_total_bytes

    hidden, vocab = 4096, 151936
    assert decode.read_per_token_bytes() == bf16_total_bytes() - (vocab - 1) * hidden * 2
    assert 15.1e9 < decode.read_per_token_bytes() < 15.2e9


def test_a_larger_vocabulary_adds_only_the_output_heads_row(decode) -> None:  # type: ignore[no-untyped-def]
    before = decode.read_per_token_bytes()
    with inputs.overridden(CONFIG, "vocab_size", 151937):
        # the untied output head is read whole, one more row of it; the embedding still gives one row
        assert decode.read_per_token_bytes() - before == 4096 * 2


def test_transformers_agrees_with_the_config(decode) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("transformers")
    assert decode.read_per_token_transformers(None) == decode.read_per_token_gb()
