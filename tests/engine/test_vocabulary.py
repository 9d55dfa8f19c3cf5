"""The engine's words are defined once: no module writes a status out as a string of its own."""

from __future__ import annotations

import ast
from pathlib import Path

from harness.paths import ROOT
from hypothesis import given
from hypothesis import strategies as st

from verified_book.vocabulary import WORDS, OutcomeStatus, fingerprint

ENGINE = ROOT / "verified_book"
WORDS_HERE = {*WORDS, *(s.value for s in OutcomeStatus)}
#: the same letters meaning something else, each with why
NOT_STATUSES = {
    ("records/migrate.py", "environment"): "the run header's name in schema 0 files, which a migration renames",
    ("backends/__init__.py", "environment"): "where a setting comes from: the process environment",
    ("book/bindings.py", "disputed"): "the keyword a binding's title carries, which the book's author writes",
    ("authoring/catalogue.py", "unsourced"): "the catalogue's own field name for a device no vendor page backs",
}


def _quoted_words(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    keys = {id(k) for node in ast.walk(tree) if isinstance(node, ast.Dict) for k in node.keys if k is not None}
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in WORDS_HERE
        and id(node) not in keys
    ]


def test_no_engine_module_writes_a_status_word_of_its_own() -> None:
    found = []
    for path in sorted(ENGINE.rglob("*.py")):
        rel = path.relative_to(ENGINE).as_posix()
        if rel == "vocabulary.py" or "template" in path.parts:
            continue
        found += [
            f"verified_book/{rel}:{line}: {word!r}"
            for line, word in _quoted_words(path)
            if (rel, word) not in NOT_STATUSES
        ]
    assert found == [], "use the vocabulary's names (Status.X, OutcomeStatus.X, UNVERIFIED, ...):\n" + "\n".join(found)


def test_the_test_finds_a_quoted_status(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text('x = "stale"\ny = {"stale": 1}\nz = f"is {x} stale"\n')
    assert _quoted_words(sample) == [(1, "stale")]


@given(st.text())
def test_a_fingerprint_is_sixteen_hex_digits_and_a_text_s_is_its_utf8_bytes_s(text: str) -> None:
    shown = fingerprint(text)
    assert len(shown) == 16 and set(shown) <= set("0123456789abcdef")
    assert fingerprint(text.encode("utf-8")) == shown


def test_fingerprints_differ_where_the_text_differs_by_one_character() -> None:
    assert fingerprint("value = 273") != fingerprint("value = 274")


def _truncated_digests(path: Path) -> list[int]:
    """Lines of `path` that cut a hex digest to 16 characters: a fingerprint written out again."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr == "hexdigest"
        and isinstance(node.slice, ast.Slice)
        and isinstance(node.slice.upper, ast.Constant)
        and node.slice.upper.value == 16
    ]


def test_the_records_fingerprint_is_computed_in_one_place() -> None:
    elsewhere = {
        f"{path.relative_to(ENGINE)}:{line}"
        for path in sorted(ENGINE.rglob("*.py"))
        if path.name != "vocabulary.py"
        for line in _truncated_digests(path)
    }
    assert not elsewhere, f"a 16-hex SHA-256 written out again (use vocabulary.fingerprint): {sorted(elsewhere)}"
