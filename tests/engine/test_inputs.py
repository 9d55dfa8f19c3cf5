"""Stated inputs: every way a claim reads a model's config is recorded, so a changed value is noticed,
and a key a claim asks for and does not find names the file and the key."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import pytest
from harness import books
from harness.paths import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from verified_book.authoring import inputs
from verified_book.engine.config import ConfigError, read_config


@pytest.fixture(autouse=True)
def the_book_s_data() -> Iterator[None]:
    """This book's data folder, read afresh."""
    with books.with_data(ROOT / "claims" / "data", "claims/data"):
        yield


def test_a_missing_config_key_names_the_file_and_the_key() -> None:
    config = inputs.model_config("qwen3-8b")
    with pytest.raises(inputs.InputError) as caught:
        config["num_attention_head"]
    text = str(caught.value)
    assert "models/qwen3-8b/config.json" in text and "'num_attention_head'" in text
    assert "num_attention_heads" in text, "a near key is suggested"
    assert isinstance(caught.value, KeyError), "code that asks `key in config` through KeyError still works"


def test_get_reads_and_records_a_present_key_and_defaults_an_absent_one() -> None:
    config = inputs.model_config("qwen3-8b")
    with inputs.recording() as reads:
        heads = config.get("num_attention_heads")
        absent = config.get("no_such_key", 7)
    assert heads == config["num_attention_heads"] and absent == 7
    assert [(r.file, r.key) for r in reads] == [("models/qwen3-8b/config.json", "num_attention_heads")]


def test_a_claim_that_asks_for_a_missing_key_fails_with_a_bad_input_message() -> None:
    from verified_book.authoring.registry import Claim, Kind
    from verified_book.backends import NO_BACKEND
    from verified_book.engine.check import FAILED, evaluate

    def compute() -> int:
        return inputs.model_config("qwen3-8b")["hidden_sizes"]

    claim = Claim(
        id="test.missing_key",
        kind=Kind.EXACT,
        compute=compute,
        doc="A key the config lacks.",
        defined_in="tests/engine/test_inputs.py",
        defined_line=1,
    )
    outcome = evaluate(claim, NO_BACKEND)
    assert outcome.status == FAILED
    assert "bad input" in outcome.message and "models/qwen3-8b/config.json" in outcome.message
    assert "'hidden_sizes'" in outcome.message


CONFIG = {"hidden_size": 4096, "num_layers": 36}


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "data"
    (folder / "models" / "m").mkdir(parents=True)
    (folder / "models" / "m" / "config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
    with books.with_data(folder, "data"):
        yield folder


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


@pytest.mark.parametrize(
    ("name", "text", "where", "what"),
    [
        ("spark.toml", "[bandwidth]\nvalue = 27 3\n", "data/spark.toml:2:12", "Expected newline or end of document"),
        ("models/m/config.json", '{\n  "hidden_size": 4096,\n}\n', "data/models/m/config.json:3:1", "Expecting"),
    ],
)
def test_a_data_file_that_does_not_parse_is_placed_at_its_line_and_column(
    data: Path, name: str, text: str, where: str, what: str
) -> None:
    """An author mends a file at the place the parser stopped: the message says it as a compiler would."""
    (data / name).write_text(text)
    with pytest.raises(inputs.InputError) as caught:
        inputs.table(name) if name.endswith(".toml") else inputs.model_config("m")
    assert str(caught.value).startswith(f"{where}: does not parse: {what}"), str(caught.value)


def test_a_book_toml_that_does_not_parse_is_placed_at_its_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "book.toml").write_text('[book]\ntitle = "A book\n')
    with pytest.raises(ConfigError) as caught:
        read_config(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / 'book.toml'}:2:"), str(caught.value)
    assert "does not parse: " in str(caught.value) and "(at line" not in str(caught.value)


def _line_by_scanning(text: str, key: str) -> int:
    """Where a key is stated, found the slow way: each pattern tried on every line in turn (`_line_of`'s rule)."""
    leaf, table = re.escape(key.split(".")[-1]), re.escape(key.split(".")[0])
    patterns = (rf"^\s*\[{re.escape(key)}\]", rf'^\s*"?{leaf}"?\s*[=:]', rf"^\s*\[{table}\]")
    lines = text.splitlines()
    for pattern in patterns:
        for number, line in enumerate(lines, 1):
            if re.search(pattern, line):
                return inputs._value_line(lines, number) if line.lstrip().startswith("[") else number
    return 1


NAMES = st.sampled_from(["a", "b", "ab", "a_b", "value", "source", "x1", "b-2"])
DOTTED = st.lists(NAMES, min_size=1, max_size=3).map(".".join)
LINES = st.one_of(
    DOTTED.map(lambda k: f"[{k}]"),
    DOTTED.map(lambda k: f"[[{k}]]"),
    st.tuples(st.sampled_from(["", "  "]), NAMES, st.sampled_from([" = 1", "=2", ' = "s"', ": 3", " : {"])).map(
        "".join
    ),
    NAMES.map(lambda k: f'"{k}" = 1'),
    NAMES.map(lambda k: f'  "{k}": 2,'),
    st.sampled_from(["", "# a comment", "value = 5", "  value=6", "}", "x1.a = 1"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=25).map("\n".join), DOTTED)
def test_where_a_key_is_stated_is_found_in_one_pass_as_scanning_each_pattern_finds_it(text: str, key: str) -> None:
    """A data file's lines are indexed once (`_places`), not searched again for every key a claim reads: the book's
    reads grew with the square of its data otherwise. The line found is the one the patterns find, in order."""
    assert inputs._line_of(text, key) == _line_by_scanning(text, key)
