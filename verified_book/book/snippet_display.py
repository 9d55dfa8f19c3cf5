"""A lab snippet as the book shows it: the code of a jupytext percent-format script, without its cell markers.

The script on disk stays the source (it round-trips through a notebook unchanged); a reader of
the page sees code whose prose cells are plain comments: `# %% [markdown]` and `# %%` lines are
gone, a Markdown heading inside a prose cell (`# # Title`) reads as one comment (`# Title`), and
cells are separated by one blank line.
"""

from __future__ import annotations

import re

_MARKER = re.compile(r"^# %%(?P<rest>.*)$")
_PROSE = re.compile(r"\[(?:markdown|md)\]")
_HEADING = re.compile(r"^#( +)#+ ")


def is_percent_script(source: str) -> bool:
    """Whether `source` is laid out in cells: a line that is a cell marker (`# %%`) opens one."""
    return any(_MARKER.match(line) for line in source.splitlines())


def _prose_line(line: str) -> str:
    """A line of a prose cell as a comment: Markdown's heading hashes after the comment's own go."""
    return _HEADING.sub("# ", line)


def reading_form(source: str) -> str:
    """The code a reader is shown: every cell marker removed, prose cells as comments, one blank line between cells."""
    cells: list[list[str]] = [[]]
    prose = False
    for line in source.splitlines():
        marker = _MARKER.match(line)
        if marker:
            cells.append([])
            prose = bool(_PROSE.search(marker.group("rest")))
            continue
        cells[-1].append(_prose_line(line) if prose else line)
    shown: list[str] = []
    for cell in cells:
        while cell and not cell[0].strip():
            cell.pop(0)
        while cell and not cell[-1].strip():
            cell.pop()
        if cell:
            shown.append("\n".join(cell))
    return "\n\n".join(shown) + "\n"
