"""Reading inputs: every way a claim reads a model's config is recorded, so a changed value is noticed."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from verified_book import inputs

CONFIG = {"hidden_size": 4096, "num_layers": 36}


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "data"
    (folder / "models" / "m").mkdir(parents=True)
    (folder / "models" / "m" / "config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
    previous = (inputs.DATA_DIR, inputs.SHOWN_AS)
    inputs.use_data_dir(folder, "data")
    yield folder
    inputs.use_data_dir(*previous)


def test_get_is_recorded_like_indexing(data: Path) -> None:
    with inputs.recording() as indexed:
        inputs.model_config("m")["hidden_size"]
    with inputs.recording() as got:
        assert inputs.model_config("m").get("hidden_size") == 4096
    assert got == indexed and [i.key for i in got] == ["hidden_size"]
    assert got[0].line == 2


def test_get_of_an_absent_key_gives_the_default_and_records_nothing(data: Path) -> None:
    with inputs.recording() as reads:
        assert inputs.model_config("m").get("rope_scaling", "none") == "none"
    assert reads == []


def test_get_sees_an_override(data: Path) -> None:
    with inputs.overridden("models/m/config.json", "num_layers", 37), inputs.recording() as reads:
        assert inputs.model_config("m").get("num_layers") == 37
    assert [(i.key, i.value) for i in reads] == [("num_layers", 37)]
