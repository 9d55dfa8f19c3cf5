"""The run's summary table and the verify verdict fit a terminal of 100 columns, wrapping by design."""

from __future__ import annotations

from verified_book.engine.terminal_text import SUMMARY_WIDTH, table_lines, wrapped
from verified_book.vocabulary import Status

COLUMNS = ("selected", *(s.value for s in Status), "not here")


def test_the_summary_table_fits_a_terminal_and_every_block_names_its_rows() -> None:
    table = {b: {c: 12345678 for c in COLUMNS} for b in ("numpy", "torch:cpu", "mlx:cpu", "none")}
    rows = [*table, "all"]
    table["all"] = {c: 123456789 for c in COLUMNS}
    lines = table_lines(table, COLUMNS, rows)
    assert max(len(line) for line in lines) <= SUMMARY_WIDTH, [len(line) for line in lines]
    blocks = "\n".join(lines).split("\n\n")
    assert len(blocks) > 1, "so many columns take two blocks"
    shown = [w for block in blocks for w in block.splitlines()[0].split()[1:]]
    assert shown == [w for c in COLUMNS for w in c.split()], "every column once, in order"
    for block in blocks:
        assert [line.split()[0] for line in block.splitlines()[1:]] == rows


def test_the_book_s_own_columns_fit_in_two_blocks() -> None:
    """Every status the vocabulary has, with four-digit counts, takes two blocks at most: one more status
    past this is what a third block would mean."""
    table = {b: {c: 2885 for c in COLUMNS} for b in ("numpy", "torch:cpu", "mlx:cpu", "none", "all")}
    lines = table_lines(table, COLUMNS, list(table))
    assert lines.count("") <= 1 and max(len(line) for line in lines) <= SUMMARY_WIDTH


def test_a_table_that_fits_stays_one_block() -> None:
    lines = table_lines({"numpy": {"selected": 3, "verified": 3}}, ("selected", "verified"), ["numpy"])
    assert lines == ["backend   selected verified", "numpy            3        3"]


def test_a_long_line_wraps_at_words_with_its_continuations_indented() -> None:
    lines = wrapped("word " * 60, "  ")
    assert len(lines) > 1 and all(len(line) <= SUMMARY_WIDTH for line in lines)
    assert lines[0].startswith("  word") and all(line.startswith("      word") for line in lines[1:])
