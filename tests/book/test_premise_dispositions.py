"""The book's disputed premises propagate: every claim resting on one says what became of it."""

from __future__ import annotations

from harness import books
from harness.paths import ROOT

from verified_book.authoring.registry import REGISTRY
from verified_book.book.bindings import Book
from verified_book.engine import premises
from verified_book.engine.config import read_config


def test_every_claim_resting_on_a_disputed_premise_has_a_disposition() -> None:
    config = read_config(ROOT)
    with books.opened(ROOT):
        book = Book.read(config.pages, config.root, config.allowlist)
        assert premises.premise_problems(REGISTRY, book.bindings()) == []
        disputed = {c.id for c in premises.disputes(REGISTRY)}
        assert "decode.read_per_token.qwen3_8b.gb" in disputed
        found = premises.dependants(REGISTRY["decode.read_per_token.qwen3_8b.gb"], REGISTRY, book.by_claim())
        ids = {d.claim.id for d in found}
        # the source's whole-file ceilings and the hierarchy's read table rest on it; the ceilings over the
        # bytes read are re-derived from the whole count, and say so
        assert {"decode.ceiling.dgx_spark.bf16", "hierarchy.read.hbm3_h100.ceiling", "questions.q1.ceiling.bf16"} <= ids
        assert all(d.disposition is not None for d in found)
        assert "decode.read_per_token.qwen3_8b.embedding_gb" not in ids, "it reads the config, not the whole file"
