"""The Machines page shows memory in one convention: GiB (as vendors print a memory's size) beside decimal GB.

An H200's driver reports 143,771 MiB: NVIDIA's "141 GB" is GiB, so the page reads 140.4 GiB (150.8 GB),
never 150.8 "GB" alone beside the hardware page's 141.
"""

from __future__ import annotations

from verified_book.site.machines import memory_words


def test_a_fingerprints_decimal_gb_is_shown_in_gib_first() -> None:
    h200 = round(143_771 * 2**20 / 1e9, 1)  # as the fingerprint stores nvidia-smi's MiB
    assert memory_words(h200) == "140.4 GiB (150.8 GB)"
    assert memory_words(137.4) == "128.0 GiB (137.4 GB)"  # a 128 GB (GiB) Mac


def test_a_memory_that_is_not_a_number_is_shown_as_it_is_or_not_at_all() -> None:
    assert memory_words(None) is None
    assert memory_words(True) is None
    assert memory_words("unknown") == "unknown"
