"""No module of the engine past its size: a thin door, one module a concern."""

from __future__ import annotations

from harness.paths import ROOT

#: the most lines one module of the engine holds: past it a module holds more than one concern
MODULE_LINES = 600


def test_no_module_of_the_engine_is_over_its_size() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in (ROOT / "verified_book").rglob("*.py")
    }
    over = {name: lines for name, lines in sizes.items() if lines > MODULE_LINES}
    assert not over, f"over {MODULE_LINES} lines: {over}"
