"""The library versions the book names beside the author's outputs are the ones the source printed.

Each version in prose is bound to `author_runs.version.<library>`, which reads its transcription in
`claims/data/author_runs.toml`; this test holds the transcription to the source's captions, so a
version typed wrong in the data (or the book) fails here or at its figure.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterator

import pytest
from harness.paths import ROOT

from verified_book.authoring import inputs
from verified_book.book.bindings import Book
from verified_book.engine.config import open_book, read_config

SOURCES = Path(os.environ.get("BOOK_SOURCES") or ROOT.parent / "shared" / "sources")  # as tests/book/test_kinds.py
SOURCE = SOURCES / "tensors-gpus-and-precision.txt"


@pytest.fixture(scope="module")
def book() -> Iterator[None]:
    with open_book(read_config(ROOT)).opened():
        yield


@pytest.mark.skipif(not SOURCE.is_file(), reason=f"the source texts are not beside the repository ({SOURCE})")
def test_each_transcribed_version_is_the_one_every_caption_of_the_source_prints(book: None) -> None:
    text = SOURCE.read_text(encoding="utf-8")
    for library in ("numpy", "torch"):
        printed = set(re.findall(rf"\b{library} (\d+\.\d+\.\d+)", text))
        transcribed = str(inputs.table("author_runs.toml")["versions"][library]["value"])
        assert printed == {transcribed}, (library, printed, transcribed)


def test_every_version_the_book_names_is_bound(book: None) -> None:
    bindings = [b for b in Book.read(ROOT / "book", ROOT).bindings() if b.claim_id.startswith("author_runs.version.")]
    assert {(b.claim_id, b.text) for b in bindings} == {
        ("author_runs.version.numpy", "2.5.2"),
        ("author_runs.version.torch", "2.14.0"),
    }
    assert len(bindings) == 5  # three outputs of numpy, two of torch, each captioned with its version
