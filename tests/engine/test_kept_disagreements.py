"""A data file's disagreements between `source` and `value`, kept by its bytes: the same problems as checking
every file, and a file parsed again only where its bytes are new."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from harness import books

from verified_book.authoring import inputs
from verified_book.engine import kept_disagreements

AGREES = '[bandwidth]\nunit = "GB/s"\nvalue = 273\nsource = "datasheet: 273 GB/s"\n'
DISAGREES = AGREES.replace("value = 273", "value = 280")


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "spark.toml").write_text(DISAGREES)
    (folder / "other.toml").write_text(AGREES)
    with books.with_data(folder, "data"):
        yield folder


def test_each_file_is_checked_again_only_where_its_bytes_are_new(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[list[str]] = []
    check = inputs.source_disagreements

    def counted(files: list[str] | None = None) -> list:
        checked.append(list(files or ["every file"]))
        return check(files)

    monkeypatch.setattr(inputs, "source_disagreements", counted)
    root = data.parent
    for text, again in [
        (None, ["other.toml", "spark.toml"]),
        (None, []),
        (AGREES, ["spark.toml"]),
        (DISAGREES, ["spark.toml"]),
    ]:
        if text is not None:
            (data / "spark.toml").write_text(text)
        inputs.forget_read()
        checked.clear()
        found = kept_disagreements.source_disagreements(root)
        assert sorted(f for files in checked for f in files) == again
        assert [str(p) for p in found] == [str(p) for p in check()]
    assert [p.where for p in found] == ["data/spark.toml:3"]
