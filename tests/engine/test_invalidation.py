"""One rule of what an edit invalidates, asked by `serve`, `--changed` and the site alike.

A table of edits (page prose, a printed figure, a claim's code, a helper it calls, a data value a claim
reads, a data key none reads, a library's version, a snippet a figure is read from) is driven through
the three on a small book: the warm book behind `serve` (`engine/live.py`, which computes again what it
names and holds back the measured ones), `--changed`'s selection from the records made before the edit
(`engine/selection.py`: the checks it reruns, not those it only judges again from their records), and the
site's outdated mark on those records (`site/render.py`). Each row names what it invalidates; all three
must name exactly that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from harness.edits import EDITS, Edit, add_lab
from harness.live_book import opened_copy, started, write

from verified_book.authoring.registry import REGISTRY
from verified_book.engine import check, figure_status, live
from verified_book.engine.selection import select_changed
from verified_book.records.results import ResultsFile, read
from verified_book.vocabulary import Status


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, live.Live]]:
    """The small book, warm, with a measured figure read from a snippet's output and a data key no claim reads."""
    with opened_copy(tmp_path_factory.mktemp("edits") / "minimal") as root:
        add_lab(root)
        yield root, started(root, measured=True)


def records(warm: live.Live) -> ResultsFile:
    """This machine's records as the warm book last wrote them."""
    warm.written()
    return read(warm.results_path)


def changed_reruns(warm: live.Live, before: ResultsFile) -> set[tuple[str, str]]:
    """What `--changed` reruns of the checks `before` records: those it does not only judge again."""
    session = warm.session
    versions = {name: b.version for name, b in session.backends.detected().items()}
    pairs = [(c, b) for c, per in before.records.items() for b in per]
    selection = select_changed(
        before, REGISTRY, session.book.by_claim(), pairs, versions, libraries=dict(session.machine.info)
    )
    return selection.pairs - set(selection.reusable)


def site_outdated(before: ResultsFile) -> set[tuple[str, str]]:
    """What the site marks outdated of the records `before` holds."""
    return {
        (c, b)
        for c, per in before.records.items()
        for b, record in per.items()
        if figure_status.status_now(before, c, record, b) == Status.OUTDATED.value
    }


def numpy_recorded_as(results: ResultsFile, version: str) -> None:
    """Every record `results` holds of the numpy backend, as if computed on numpy `version`."""
    for per in results.records.values():
        if "numpy" in per:
            per["numpy"] = per["numpy"].model_copy(update={"version": version})


@pytest.mark.parametrize("edit", EDITS, ids=[e.name for e in EDITS])
def test_serve_changed_and_the_site_agree_on_what_an_edit_invalidates(
    edit: Edit, book: tuple[Path, live.Live], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, warm = book
    before = records(warm)
    expected = {(c, b) for c, per in before.records.items() for b in per if c in edit.invalidates}
    assert before.records.keys() >= set(edit.invalidates), "the book holds a record of every claim the row names"
    path = root / edit.file
    text = path.read_text() if edit.file else ""
    if edit.file:
        assert text.count(edit.old) == 1, f"{edit.file}: {edit.old!r} is not there once"
        write(path, text.replace(edit.old, edit.new))
    else:  # the library's version: on disk another than the records name, where the site and --changed read them
        installed = live.Live.installed
        monkeypatch.setattr(
            live.Live, "installed", staticmethod(lambda name: "0.0.1" if name == "numpy" else installed(name))
        )
        numpy_recorded_as(before, "0.0.1")
    try:
        served = warm.look()
        assert set(served.invalidated) == expected, served.invalidated
        with warm.opened():  # --changed and the site ask the book as serve last loaded it
            assert changed_reruns(warm, before) == expected
            assert site_outdated(before) == expected
            if edit.name == "a library's version":
                assert served.restart and served.restart.startswith("numpy "), "serve starts again to import it"
            if edit.name == "a printed figure":
                figure_rejudged_alike(warm, before, served)
    finally:
        if edit.file:
            write(path, text)
        monkeypatch.undo()
        warm.look()
    assert not warm.look().invalidated, "put back, nothing is left to compute"


def figure_rejudged_alike(warm: live.Live, before: ResultsFile, served: live.Report) -> None:
    """The figure edited is judged again against the value held, computing nothing, and found stale, by all three."""
    (binding,) = [b for b in warm.session.book.bindings() if b.text == "65505"]
    assert served.figures[binding] == Status.STALE.value and not served.recomputed
    session = warm.session
    versions = {name: b.version for name, b in session.backends.detected().items()}
    selection = select_changed(before, REGISTRY, session.book.by_claim(), [("half.max", "none")], versions)
    rejudged = selection.rejudged[("half.max", "none")]
    assert check.judge(binding, rejudged, session.machine).status == Status.STALE
    record = before.records["half.max"]["none"]
    shown = figure_status.measure(binding, REGISTRY["half.max"], before, "none", record, before.slug)
    assert (shown.status, shown.rejudged) == (Status.STALE.value, True)


def test_the_rows_name_every_kind_of_edit_the_rule_covers() -> None:
    """The table is the rule's specification: a row dropped is a promise no longer checked."""
    kinds: dict[str, Callable[[Edit], Any]] = {
        "prose": lambda e: e.file.endswith(".md") and "claim:" not in e.old,
        "figure": lambda e: e.file.endswith(".md") and "claim:" in e.old,
        "code": lambda e: e.file.endswith("half.py") and "_bits" not in e.old,
        "helper": lambda e: e.file.endswith("half.py") and "_bits" in e.old,
        "data read": lambda e: e.file.endswith(".toml") and bool(e.invalidates),
        "data not read": lambda e: e.file.endswith(".toml") and not e.invalidates,
        "library": lambda e: not e.file,
        "snippet": lambda e: "snippets/" in e.file,
    }
    assert all(sum(1 for e in EDITS if is_kind(e)) == 1 for is_kind in kinds.values())
    assert len(EDITS) == len(kinds)
