"""A lab snippet as the page shows it: the script's code and prose, without jupytext's cell markers."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness.paths import ROOT
from hypothesis import given
from hypothesis import strategies as st

from verified_book.book.snippet_display import is_percent_script, reading_form

SNIPPETS = sorted((ROOT / "book" / "snippets").glob("*.py"))


def test_shapes_reads_as_commented_code() -> None:
    shown = reading_form((ROOT / "book" / "snippets" / "shapes.py").read_text(encoding="utf-8"))
    lines = shown.splitlines()
    assert lines[0] == "# Shapes, dtypes and bytes", "the prose cell's heading is not one plain comment"
    assert "import numpy as np" in lines
    assert not any(line.startswith("# %%") for line in lines)
    assert "\n\n\n\n" not in shown, "cells are separated by more than one blank line"


@pytest.mark.parametrize("path", SNIPPETS, ids=lambda p: p.name)
def test_every_snippet_keeps_every_code_line_in_order_and_drops_only_markers(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert is_percent_script(source), f"{path.name} is not laid out in cells"
    shown = reading_form(source)
    code = [line for line in source.splitlines() if line.strip() and not line.startswith("# %%")]
    kept = [line for line in shown.splitlines() if line.strip()]
    assert len(kept) == len(code), f"{path.name}: {len(code)} lines of the script, {len(kept)} shown"
    for original, line in zip(code, kept, strict=True):
        same_comment = original.startswith("#") and line.startswith("# ") and line.lstrip("# ") == original.lstrip("# ")
        assert line == original or same_comment, f"{path.name}: {original!r} is shown as {line!r}"


def test_a_plain_script_is_not_taken_for_cells() -> None:
    assert not is_percent_script("import numpy as np\nprint(np.pi)  # %% not at the start\n")


_code_line = st.from_regex(r"[a-z_][a-z0-9_ =()+*.,]{0,30}", fullmatch=True)
_prose_line = st.from_regex(r"#( #{1,3})? [A-Za-z][A-Za-z ,.]{0,30}", fullmatch=True)


@st.composite
def percent_scripts(draw: st.DrawFn) -> tuple[str, list[str], list[str]]:
    """A percent-format script of random cells, with its code lines and its prose lines."""
    text: list[str] = []
    code: list[str] = []
    prose: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            text.append("# %% [markdown]")
            lines = draw(st.lists(_prose_line, min_size=1, max_size=4))
            prose += lines
        else:
            text.append("# %%")
            lines = draw(st.lists(_code_line, min_size=1, max_size=4))
            code += lines
        text += lines + [""] * draw(st.integers(0, 2))
    return "\n".join(text) + "\n", code, prose


@given(percent_scripts())
def test_any_script_loses_its_markers_and_nothing_else(script: tuple[str, list[str], list[str]]) -> None:
    source, code, prose = script
    shown = reading_form(source)
    lines = shown.splitlines()
    assert not any(line.startswith("# %%") for line in lines)
    assert [line for line in lines if line in code] == code, "a code line was lost or moved"
    for line in prose:
        words = line.lstrip("# ")
        assert f"# {words}" in lines, f"the prose line {line!r} is not shown as the comment '# {words}'"
    assert "\n\n\n" not in shown and not shown.startswith("\n") and shown.endswith("\n")
