"""Every reader of a page reads its code blocks the same way: a ``` line inside a ~~~ block is code for the
bindings scanner, the site's page transform, the rewrite's reread list and the snippet-output check alike,
and the prose after the block is prose for all of them."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from verified_book.authoring.registry import Claim, Kind
from verified_book.book.bindings import read_page
from verified_book.book.snippet_output import read_blocks
from verified_book.engine.rewrite import Rewrite, sentences_to_reread
from verified_book.site import transform

PAGE = """\
# A page

~~~markdown
```
Print [16.6](claim:t.ceiling) here.
~~~

The ceiling is [16.6](claim:t.ceiling) tokens/s, while the largest is [65,504](claim:t.max).

```output shapes.py
max=[65,504](claim:t.max)
```
"""
FIGURE_LINE = 8
CLAIMS = {
    "t.ceiling": Claim("t.ceiling", Kind.EXACT, lambda: Fraction(331, 20), "A ceiling.", "claims/t.py", 1),
    "t.max": Claim("t.max", Kind.LIBRARY, lambda b: 65504, "Largest float16.", "claims/t.py", 5),
}


def written(tmp_path: Path) -> Path:
    (tmp_path / "book").mkdir()
    path = tmp_path / "book" / "page.md"
    path.write_text(PAGE, encoding="utf-8")
    return path


def test_bindings_find_the_prose_figures_on_their_line_and_none_in_the_code(tmp_path: Path) -> None:
    page = read_page(written(tmp_path), tmp_path)
    assert [(b.line, b.text, b.in_output) for b in page.bindings] == [
        (FIGURE_LINE, "16.6", False),
        (FIGURE_LINE, "65,504", False),
        (11, "65,504", True),
    ]
    assert not page.unbound and not page.malformed


def test_render_marks_the_prose_figure_and_leaves_the_code_as_code(tmp_path: Path) -> None:
    page = read_page(written(tmp_path), tmp_path)
    rendered = transform.render_markdown(PAGE, page, transform.Context({}, CLAIMS.get))
    lines = rendered.markdown.split("\n")
    assert lines[2:6] == PAGE.split("\n")[2:6]  # the example, its ``` line included, is the author's text
    assert "claim:" not in lines[FIGURE_LINE - 1] and lines[FIGURE_LINE - 1].startswith("The ceiling is VBCLAIM")
    marked = [str(rendered.fragments[t]) for t in rendered.titles if rendered.titles[t] == "16.6"]
    assert len(marked) == 1 and 'data-claim="t.ceiling"' in marked[0] and "vb-fig__mark" in marked[0]
    assert len(rendered.blocks) == 1  # the output block, read as one, and not the ``` inside the example
    assert not rendered.problems


def test_the_reread_list_names_the_prose_sentence(tmp_path: Path) -> None:
    written(tmp_path)
    line = PAGE.split("\n")[FIGURE_LINE - 1]
    rewrite = Rewrite("book/page.md", FIGURE_LINE, line.index("[16.6]") + 1, "t.ceiling", "16.6", "16.7")
    (reread,) = sentences_to_reread(tmp_path, [rewrite])
    assert (reread.line, reread.figures) == (FIGURE_LINE, ("16.7",))
    assert reread.sentence == "The ceiling is 16.6 tokens/s, while the largest is 65,504."
    assert reread.why == "1 other figure and 'while'"


def test_snippet_output_reads_the_output_block_and_not_the_example(tmp_path: Path) -> None:
    (block,) = read_blocks(written(tmp_path), "book/page.md", lambda claim_id: False)
    assert (block.line, block.snippet, block.end_line) == (10, "shapes.py", 12)
    assert [(line.line, line.text) for line in block.lines] == [(11, "max=65,504")]
