"""One class per name in the engine: two classes of one name make a reader (and an import) guess which is meant."""

from __future__ import annotations

import ast

from harness.paths import ROOT

ENGINE = ROOT / "verified_book"


def test_no_two_classes_of_the_engine_share_a_name() -> None:
    where: dict[str, list[str]] = {}
    for path in sorted(ENGINE.rglob("*.py")):
        if "template" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(f"{path.relative_to(ENGINE.parent)}:{node.lineno}")
    shared = {name: places for name, places in where.items() if len(places) > 1}
    assert not shared, f"classes that share a name (give one another name): {shared}"
