"""A chart kept between builds: the same chart as drawn afresh, and drawn again when anything it is drawn
from moves (a record, an argument, the drawing code, matplotlib)."""

from __future__ import annotations

import os
import sys
import textwrap
import types
from pathlib import Path

import pytest
from harness.paths import ROOT

from claims import plots
from verified_book.records import kept
from verified_book.records.fleet import read_all
from verified_book.records.results import ResultsFile
from verified_book.site import plot_cache


@pytest.fixture(scope="module")
def committed() -> dict[str, ResultsFile]:
    found = read_all(ROOT / "results", lambda problem: pytest.fail(problem))
    assert found, "the book commits at least one machine's results"
    return found


def started_after(monkeypatch: pytest.MonkeyPatch, *sources: Path) -> None:
    """As if this process had started after `sources` were last written: their source is the code running."""
    monkeypatch.setattr(kept, "_LOADED_AT", max(p.stat().st_mtime for p in sources) + 1)


class Counted:
    """A drawing that counts its calls, defined in a module whose source the test controls."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str = "LINE = 1\n") -> None:
        self.calls = 0
        self.monkeypatch = monkeypatch
        self.module = types.ModuleType("drawing_under_test")
        (tmp_path / "src").mkdir(exist_ok=True)
        self.path = tmp_path / "src" / "drawing_under_test.py"
        self.write(source)
        self.module.__file__ = str(self.path)
        monkeypatch.setitem(sys.modules, self.module.__name__, self.module)

        def chart(*args: object) -> str:
            self.calls += 1
            return f"<svg>{self.module.LINE} {len(args)}</svg>"

        chart.__module__ = self.module.__name__
        self.chart = chart

    def write(self, source: str) -> None:
        import linecache

        before = self.path.stat().st_mtime_ns if self.path.exists() else 0
        self.path.write_text(textwrap.dedent(source))
        later = max(self.path.stat().st_mtime_ns, before + 2_000_000_000)  # an edit linecache sees at any size
        os.utime(self.path, ns=(later, later))
        linecache.checkcache(str(self.path))
        exec(compile(self.path.read_text(), str(self.path), "exec"), self.module.__dict__)
        started_after(self.monkeypatch, self.path)


def test_a_kept_chart_is_the_chart_drawn_afresh(tmp_path: Path, committed: dict[str, ResultsFile]) -> None:
    slug = sorted(committed)[0]
    jobs = plots.intensities(committed)
    fresh = plots.roofline(committed[slug], jobs)
    with plot_cache.kept_in(tmp_path):
        first = plot_cache.remembered(plots.roofline, committed[slug], jobs)
        again = plot_cache.remembered(plots.roofline, committed[slug], jobs)
    assert first == fresh and again == fresh
    assert len(list(tmp_path.glob("*.pickle"))) == 1


def test_a_chart_is_drawn_once_while_nothing_it_is_drawn_from_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, committed: dict[str, ResultsFile]
) -> None:
    drawing = Counted(tmp_path, monkeypatch)
    results = committed[sorted(committed)[0]]
    with plot_cache.kept_in(tmp_path):
        for _ in range(3):
            assert plot_cache.remembered(drawing.chart, results, {"job": 1.5}) == "<svg>1 2</svg>"
    assert drawing.calls == 1
    with plot_cache.kept_in(tmp_path):  # a later build
        plot_cache.remembered(drawing.chart, results, {"job": 1.5})
    assert drawing.calls == 1


def test_a_record_an_argument_or_the_code_moving_draws_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, committed: dict[str, ResultsFile]
) -> None:
    drawing = Counted(tmp_path, monkeypatch)
    slug = sorted(committed)[0]
    results = committed[slug]
    cache = tmp_path / "kept"
    with plot_cache.kept_in(cache):
        plot_cache.remembered(drawing.chart, results, {"job": 1.5})
        plot_cache.remembered(drawing.chart, results, {"job": 1.6})  # another argument
    assert drawing.calls == 2

    # one record's value moved: a machine contributed again
    document = results.to_document()
    claim_id, per_backend = next(iter(sorted(document.records.items())))
    backend = sorted(per_backend)[0]
    moved = document.model_copy(deep=True)
    moved.records[claim_id][backend] = moved.records[claim_id][backend].model_copy(update={"value": 12345})
    with plot_cache.kept_in(cache):
        plot_cache.remembered(drawing.chart, ResultsFile.from_document(moved), {"job": 1.5})
    assert drawing.calls == 3

    drawing.write("LINE = 2\n")  # the drawing's module changed
    with plot_cache.kept_in(cache):
        assert plot_cache.remembered(drawing.chart, results, {"job": 1.5}) == "<svg>2 2</svg>"
    assert drawing.calls == 4

    monkeypatch.setattr(plot_cache, "_matplotlib", lambda: "99.0")  # matplotlib was upgraded
    with plot_cache.kept_in(cache):
        plot_cache.remembered(drawing.chart, results, {"job": 1.5})
    assert drawing.calls == 5


def test_outside_a_build_nothing_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawing = Counted(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    plot_cache.remembered(drawing.chart, 1)
    plot_cache.remembered(drawing.chart, 1)
    assert drawing.calls == 2
    assert not list(tmp_path.rglob("*.pickle"))


def test_a_damaged_or_unwritable_cache_costs_a_drawing_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawing = Counted(tmp_path, monkeypatch)
    cache = tmp_path / "kept"
    with plot_cache.kept_in(cache):
        plot_cache.remembered(drawing.chart, 1)
    (kept,) = cache.glob("*.pickle")
    kept.write_bytes(b"not a pickle")
    with plot_cache.kept_in(cache):
        assert plot_cache.remembered(drawing.chart, 1) == "<svg>1 1</svg>"
    assert drawing.calls == 2
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with plot_cache.kept_in(blocked / "kept"):  # a folder that cannot be made
        assert plot_cache.remembered(drawing.chart, 1) == "<svg>1 1</svg>"
    assert drawing.calls == 3


def test_the_cache_lets_go_of_the_oldest_charts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawing = Counted(tmp_path, monkeypatch)
    monkeypatch.setattr(plot_cache, "KEEP_AT_MOST", 3)
    with plot_cache.kept_in(tmp_path / "kept"):
        for n in range(5):
            plot_cache.remembered(drawing.chart, n)
    assert len(list((tmp_path / "kept").glob("*.pickle"))) == 3


def test_a_change_to_what_the_drawing_imports_from_the_book_draws_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    package = tmp_path / "book_under_test"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helper.py").write_text("def scale(x):\n    return 2 * x\n")
    drawing_source = "from book_under_test.helper import scale\n\nCALLS = []\n\n\ndef chart(x):\n"
    (package / "drawing.py").write_text(drawing_source + "    CALLS.append(x)\n    return scale(x)\n")
    started_after(monkeypatch, *package.glob("*.py"))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("book_under_test", "book_under_test.helper", "book_under_test.drawing"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    drawing = importlib.import_module("book_under_test.drawing")
    cache = tmp_path / "kept"
    with plot_cache.kept_in(cache):
        assert plot_cache.remembered(drawing.chart, 3) == 6
        assert plot_cache.remembered(drawing.chart, 3) == 6
    assert drawing.CALLS == [3]
    helper = package / "helper.py"
    helper.write_text("def scale(x):\n    return 3 * x  # tripled\n")
    later = helper.stat().st_mtime_ns + 2_000_000_000  # an edit that Python's caches of sources and bytecode see
    os.utime(helper, ns=(later, later))
    importlib.reload(sys.modules["book_under_test.helper"])
    drawing = importlib.reload(drawing)
    started_after(monkeypatch, helper)  # the next build's process
    with plot_cache.kept_in(cache):
        assert plot_cache.remembered(drawing.chart, 3) == 9
    assert drawing.CALLS == [3]


def test_a_drawing_whose_source_cannot_be_read_is_drawn_each_time(tmp_path: Path) -> None:
    calls: list[int] = []
    namespace: dict[str, object] = {"__name__": "typed_in_at_a_prompt", "calls": calls}
    exec("def chart(x):\n    calls.append(x)\n    return x\n", namespace)
    chart = namespace["chart"]
    module = types.ModuleType("typed_in_at_a_prompt")
    sys.modules["typed_in_at_a_prompt"] = module
    try:
        with plot_cache.kept_in(tmp_path):
            plot_cache.remembered(chart, 1)  # type: ignore[arg-type]
            plot_cache.remembered(chart, 1)  # type: ignore[arg-type]
    finally:
        del sys.modules["typed_in_at_a_prompt"]
    assert calls == [1, 1]
    assert not list(tmp_path.glob("*.pickle"))


def test_a_drawing_whose_file_changed_since_this_process_started_is_drawn_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live preview imported the module before its author edited it: the source on disk is not the code
    running, so no key can name that code, and nothing is kept or taken back."""
    drawing = Counted(tmp_path, monkeypatch)
    monkeypatch.setattr(kept, "_LOADED_AT", drawing.path.stat().st_mtime - 1)
    with plot_cache.kept_in(tmp_path / "kept"):
        plot_cache.remembered(drawing.chart, 1)
        plot_cache.remembered(drawing.chart, 1)
    assert drawing.calls == 2
    assert not (tmp_path / "kept").exists()
