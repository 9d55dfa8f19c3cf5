"""The run's summary and verdict as text a terminal shows whole: a table in blocks no wider than a terminal,
and lines wrapped with their continuations indented."""

from __future__ import annotations

from typing import Mapping, Sequence

#: the widest a line of the run's summary or verdict may be: a terminal's width with room to spare
SUMMARY_WIDTH = 100


def table_lines(
    table: Mapping[str, Mapping[str, int]], columns: Sequence[str], rows: Sequence[str], width: int = SUMMARY_WIDTH
) -> list[str]:
    """The summary table as text no wider than `width`: each column as wide as its name or its widest count,
    and the columns that do not fit beside the first ones in a block of their own below, each block with its
    row names, so no terminal wraps a row."""
    label = max(len("backend"), *(len(r) for r in rows)) + 2
    widths = {c: max(len(c), *(len(str(table.get(r, {}).get(c, 0))) for r in rows)) + 1 for c in columns}
    blocks: list[list[str]] = [[]]
    for column in columns:
        if blocks[-1] and label + sum(widths[c] for c in blocks[-1]) + widths[column] > width:
            blocks.append([])
        blocks[-1].append(column)
    lines: list[str] = []
    for block in blocks:
        lines += [""] if lines else []
        lines.append(f"{'backend':<{label}}" + "".join(f"{c:>{widths[c]}}" for c in block))
        lines += [f"{r:<{label}}" + "".join(f"{table.get(r, {}).get(c, 0):>{widths[c]}}" for c in block) for r in rows]
    return lines


def wrapped(text: str, indent: str = "", width: int = SUMMARY_WIDTH) -> list[str]:
    """One line of the summary or the verdict as lines no wider than `width`, continuations indented past it."""
    import textwrap

    return textwrap.wrap(
        text,
        width,
        initial_indent=indent,
        subsequent_indent=indent + "    ",
        break_on_hyphens=False,
        break_long_words=False,  # a path stays whole, so it can be copied
    ) or [indent]


def verdict_lines(first: str, parts: Sequence[str]) -> str:
    """A verdict as a terminal shows it: `first` alone on its line (what held), then each part wrapped, indented."""
    return "\n".join([first, *(line for part in parts for line in wrapped(part, "  "))])
