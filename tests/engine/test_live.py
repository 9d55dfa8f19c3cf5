"""The warm book behind `verified-book serve`: what each kind of saved file computes again, and that nothing else runs.

The engine is driven on a copy of the book `verified-book init` writes, counting every claim evaluated. What it
computes again is what `provenance.outdated_reason` says of the records of the values it holds
(tests/engine/test_invalidation.py holds it to the answers `--changed` and the site give); these tests pin what each
save costs and shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from harness.live_book import opened_copy, saving, started, write

from verified_book.engine import check
from verified_book.engine.live import Live
from verified_book.records.record import SnippetInput


@pytest.fixture
def book(tmp_path: Path) -> Iterator[Path]:
    """A copy of the book `init` writes, opened in this process and given back after."""
    with opened_copy(tmp_path / "minimal") as root:
        yield root


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every (claim, backend) evaluated from now on, in order."""
    out: list[tuple[str, str]] = []
    evaluate = check.evaluate

    def counted(claim: Any, backend: Any) -> Any:
        out.append((claim.id, backend.name))
        return evaluate(claim, backend)

    monkeypatch.setattr(check, "evaluate", counted)
    return out


def test_the_engine_computes_once_then_only_what_each_save_changed(book: Path, ran: list[tuple[str, str]]) -> None:
    engine = started(book)
    everything = {
        ("half.mantissa_bits", "none"),
        ("half.eps", "none"),
        ("half.max", "none"),
        ("half.sum_count", "none"),
        ("half.finfo_eps", "numpy"),
        ("half.sum_2049", "numpy"),
    }
    assert sorted(ran) == sorted(everything)  # once each; the measured half.sum_ms not at all

    def save(path: Path, old: str, new: str) -> Any:
        ran.clear()
        text = path.read_text()
        assert old in text
        write(path, text.replace(old, new, 1))
        return engine.apply(engine.changed())

    page = book / "pages" / "index.md"
    report = save(page, "[65504](claim:half.max)", "[65505](claim:half.max)")
    assert ran == [] and report.recomputed == []
    assert {b.text: s for b, s in report.figures.items() if b.claim_id == "half.max"} == {"65505": "stale"}
    assert any(p.startswith("pages/index.md:5: figure 65505 (half.max) is stale") for p in report.problems)

    data = book / "book_claims" / "data" / "formats.toml"
    report = save(data, "value = 5", "value = 6")  # the exponent: only the largest value reads it
    assert ran == [("half.max", "none")] and report.recomputed == ran
    report = save(data, "value = 6", "value = 6 # unchanged")
    assert ran == []

    topic = book / "book_claims" / "topics" / "half.py"
    report = save(
        topic,
        'return int(given("half.sum_count"))\n\n\n@claim("half.sum_ms"',
        'return int(given("half.sum_count")) * 1\n\n\n@claim("half.sum_ms"',
    )
    assert ran == [("half.sum_count", "none")]  # the measured half.sum_ms reads the same value but is not asked
    ran.clear()
    report = engine.apply([], measure=True)
    assert ran == [("half.sum_ms", "numpy")]
    report = save(page, "[65505](claim:half.max)", "[65504](claim:half.max)")
    assert ran == []  # judged against the value the exponent's edit recomputed, which nothing ran again for
    assert any(
        p.startswith("pages/index.md:5: figure 65504 (half.max) is stale in exact arithmetic: computed 4,292,870,144")
        for p in report.problems
    ), report.problems


KINDS = """
from dataclasses import dataclass
from fractions import Fraction

from verified_book.authoring.registry import claim


def _per_byte(bits):
    return Fraction(bits, 8)


@dataclass(frozen=True)
class Width:
    name: str
    bits: int

    def __str__(self):
        return self.name

    def bytes(self):
        return _per_byte(self.bits)


WIDTHS = [Width("fp16", 16), Width("fp8", 8)]
BLOCK = 32


@claim("kinds.bytes.{width}", kind="exact", over={"width": WIDTHS})
def per_element(width):
    \"\"\"Bytes per element of a width, from its bits.\"\"\"
    return width.bytes()


@claim("kinds.block", kind="exact")
def block():
    \"\"\"Elements in a block.\"\"\"
    return BLOCK
"""


def test_a_saved_method_or_constant_recomputes_the_claims_that_reach_it_and_only_those(
    book: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim handed an object computes with its class's methods, and a claim may read a module's constant
    without naming a function: saving either recomputes exactly the claims that reach it."""
    topic = book / "book_claims" / "topics" / "kinds.py"
    topic.write_text(KINDS)
    ran: list[tuple[str, str]] = []
    values: dict[str, Any] = {}
    evaluate = check.evaluate

    def counted(claim: Any, backend: Any) -> Any:
        ran.append((claim.id, backend.name))
        outcome = evaluate(claim, backend)
        values[claim.id] = outcome.value
        return outcome

    monkeypatch.setattr(check, "evaluate", counted)
    engine = started(book)
    save = saving(engine, topic)
    ran.clear()
    doubled = KINDS.replace("return _per_byte(self.bits)", "return _per_byte(self.bits) * 2")
    report = save(doubled)
    assert sorted(ran) == [("kinds.bytes.fp16", "none"), ("kinds.bytes.fp8", "none")]
    assert (values["kinds.bytes.fp16"], values["kinds.bytes.fp8"]) == (4, 2)  # the method as saved
    ran.clear()
    report = save(doubled.replace("BLOCK = 32", "BLOCK = 64"))
    assert ran == [("kinds.block", "none")] and report.recomputed == ran


def test_a_claim_module_computes_a_claim_new_to_it_and_lets_go_of_one_gone_from_it(
    book: Path, ran: list[tuple[str, str]]
) -> None:
    engine = started(book)
    topic = book / "book_claims" / "topics" / "half.py"
    text = topic.read_text()
    gone = '@claim("half.sum_2049", kind="library")'
    added = (
        '\n\n@claim("half.sign_bits", kind="exact")\ndef sign_bits() -> int:\n    """One sign bit."""\n    return 1\n'
    )
    ran.clear()
    report = saving(engine, topic)(text.replace(gone, "") + added)
    assert ran == [("half.sign_bits", "none")], "the new claim, and no other: none of the rest changed"
    assert ("half.sum_2049", "numpy") not in engine.held and engine.session.verifier.computed(
        ("half.sum_2049", "numpy")
    ) is None
    assert {b.text: s for b, s in report.figures.items() if b.claim_id == "half.sum_2049"} == {
        "2048": "failed",
        "2048.0": "failed",
    }, "its figures bind to a claim the book no longer has"
    assert report.invalidated == {}, "nothing held was invalidated: one claim is new, one gone"


def test_a_data_key_removed_counts_as_changed_and_a_file_saved_unchanged_computes_nothing(
    book: Path, ran: list[tuple[str, str]]
) -> None:
    engine = started(book)
    data = book / "book_claims" / "data" / "formats.toml"
    text = data.read_text()
    ran.clear()
    assert saving(engine, data)(text + "\n# a comment\n").recomputed == [] and ran == []
    without = text.replace("[fp16_exponent_bits]\nvalue = 5\n", "[fp16_other]\nvalue = 5\n")
    report = saving(engine, data)(without)
    assert ran == [("half.max", "none")], "the only claim that read the exponent"
    assert report.invalidated[("half.max", "none")].startswith(
        "computed from fp16_exponent_bits = 5 (formats.toml); now"
    )
    assert report.figures and set(report.figures.values()) == {"failed"}


def test_a_library_upgraded_on_disk_names_what_was_computed_with_it_and_starts_again(
    book: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """numpy is the backend of two claims; ml_dtypes gives numpy its bfloat16 and float8 types, so every value
    computed on numpy was computed with it too. The process cannot import a second version: it starts again."""
    engine = started(book)
    installed = Live.installed
    on_numpy = {("half.finfo_eps", "numpy"), ("half.sum_2049", "numpy")}
    for library, version in (("numpy", "9.9.9"), ("ml_dtypes", "9.9.9")):
        monkeypatch.setattr(
            Live, "installed", staticmethod(lambda name, v=version, lib=library: v if name == lib else installed(name))
        )
        report = engine.look()
        assert set(report.invalidated) == on_numpy, (library, report.invalidated)
        assert report.restart is not None and report.restart.startswith(f"{library} ")
        assert report.restart.endswith("on disk: 2 (claim, backend) computed on it; starting again")
        assert not report.recomputed, "nothing is computed on the library imported before"
    assert report.invalidated[("half.finfo_eps", "numpy")].startswith("computed with ml_dtypes ")
    monkeypatch.undo()
    assert engine.look().restart is None, "the version on disk is the one imported again"


def test_an_upgrade_of_a_library_no_value_held_was_computed_with_starts_nothing_again(
    book: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = started(book)
    installed = Live.installed
    monkeypatch.setattr(
        Live, "installed", staticmethod(lambda name: "9.9.9" if name == "transformers" else installed(name))
    )
    report = engine.look()
    assert report.restart is None and report.invalidated == {}


def test_measured_claims_are_held_back_until_asked_for(book: Path, ran: list[tuple[str, str]]) -> None:
    engine = started(book)
    given = book / "book_claims" / "data" / "given.toml"
    ran.clear()
    report = saving(engine, given)(given.read_text().replace("value = 1000000", "value = 2000000"))
    assert ran == [("half.sum_count", "none")], "the measured half.sum_ms is not computed when not asked"
    assert report.held_back == 0, "a measured value never computed is not held, nor held back"
    ran.clear()
    asked = engine.apply([], measure=True)
    assert ran == [("half.sum_ms", "numpy")] and asked.invalidated == {}
    ran.clear()
    report = saving(engine, given)(given.read_text().replace("value = 2000000", "value = 3000000"))
    assert ran == [("half.sum_count", "none")]
    assert report.held_back == 1 and ("half.sum_ms", "numpy") in report.invalidated, report.line()
    assert "1 measured held back (m to measure)" in report.line()
    ran.clear()
    asked = engine.apply([], measure=True)
    assert ran == [("half.sum_ms", "numpy")] and asked.invalidated[("half.sum_ms", "numpy")] == (
        "computed from half.sum_count = 2000000; the book now says 3000000 (book_claims/data/given.toml)"
    )


def test_a_page_added_or_removed_builds_the_site_whole_and_an_edited_one_only_itself(book: Path) -> None:
    engine = started(book)
    second = book / "pages" / "second.md"
    added = saving(engine, second)("FP16 tops out at [65504](claim:half.max).\n")
    assert added.rebuild and added.what == "pages/second.md saved" and not added.recomputed, added.line()
    assert {b.where: status for b, status in added.figures.items()} == {"pages/second.md:1": "verified"}
    edited = saving(engine, second)("FP16 tops out at [65505](claim:half.max).\n")
    assert not edited.rebuild and edited.pages == {"pages/second.md"}, edited.line()
    second.unlink()
    removed = engine.apply(engine.changed())
    assert removed.rebuild and removed.what == "pages/second.md removed" and not removed.figures, removed.line()
    assert "pages/second.md" not in {p.file for p in engine.session.book.pages}


def test_a_measured_figure_read_from_a_saved_snippet_is_not_held_until_measured_again_from_its_new_run(
    book: Path,
) -> None:
    (book / "book_claims" / "topics" / "lab.py").write_text(
        "from verified_book.authoring.registry import claim\n"
        "from verified_book.engine.snippet_figures import snippet_figure\n\n\n"
        '@claim("lab.ms", kind="measured", backends=("numpy",), printed_on="author_test_box", tolerance=0.5)\n'
        "def ms(backend):\n"
        '    """Milliseconds per call, as clock.py prints them here."""\n'
        '    return snippet_figure("lab.ms")\n'
    )
    with (book / "book.toml").open("a") as toml:
        toml.write('elsewhere = ["author_test_box"]\n')
    snippet = book / "pages" / "snippets" / "clock.py"
    snippet.write_text('print("took 0.500 ms a call")\n')
    block = "```output clock.py varies=1\ntook [0.500](claim:lab.ms) ms a call\n```\n"
    (book / "pages" / "lab.md").write_text("# Lab\n\n" + block)
    engine = started(book, measured=True)
    key = ("lab.ms", "numpy")
    read = [e.snippet for e in engine.held[key].record.inputs or [] if isinstance(e, SnippetInput)]
    assert read == ["pages/snippets/clock.py"]
    held = engine.session.verifier.computed(key)
    assert held is not None and held.value == pytest.approx(0.5)

    saved = saving(engine, snippet)('print("took 0.700 ms a call")\n')
    assert saved.held_back == 1 and not saved.recomputed, saved.line()
    assert {b.where: status for b, status in saved.figures.items()} == {"pages/lab.md:4": "not here"}
    assert engine.session.verifier.computed(key) is None, "the value the old snippet printed is not kept"
    measured = engine.apply([], measure=True)
    assert key in measured.recomputed
    measured_now = engine.session.verifier.computed(key)
    assert measured_now is not None and measured_now.value == pytest.approx(0.7), "read from the snippet's new run"


def test_data_that_stops_parsing_fails_its_claims_and_mending_it_recomputes_them(book: Path) -> None:
    data = book / "book_claims" / "data" / "formats.toml"
    good = data.read_text()
    engine = started(book)
    save = saving(engine, data)
    broken = save(good + "value = = 3\n")
    assert set(broken.figures.values()) == {"failed"} and broken.recomputed, broken.line()
    page = book / "pages" / "index.md"
    assert saving(engine, page)(page.read_text() + "\nMore prose.\n").recomputed == [], "a page is not their mend"
    mended = save(good)
    assert sorted(mended.recomputed) == sorted(broken.recomputed), mended.line()
    assert "failed" not in mended.figures.values() and mended.figures, mended.line()


def test_a_claim_module_that_stops_importing_says_why_its_figures_fail_and_mending_it_recomputes_them(
    book: Path,
) -> None:
    topic = book / "book_claims" / "topics" / "half.py"
    good = topic.read_text()
    save = saving(started(book), topic)
    broken = save(good + "\nx = (\n")
    assert set(broken.figures.values()) == {"failed"} and broken.recomputed == [], broken.line()
    cause = (
        f"the first: book_claims/topics/half.py:{len(good.splitlines()) + 2}: book_claims.topics.half does not import"
    )
    assert broken.problems and all(
        "binds to unknown claim" in p
        and "the book's claims did not all load (1 problem in its topic modules" in p
        and cause in p
        for p in broken.problems
    ), broken.problems
    mended = save(good)
    assert "failed" not in mended.figures.values() and mended.recomputed, mended.line()
    assert mended.problems == []


def test_a_number_bound_to_nothing_is_said_at_the_save_that_writes_it_and_at_the_allow_lists(book: Path) -> None:
    """What `every number is bound` fails with, serve says as the page or the allow-list is saved: a number in
    the prose with no claim, and an allow-list entry that excuses nothing or does not read."""
    engine = started(book)
    page = book / "pages" / "index.md"
    text = page.read_text()
    report = saving(engine, page)(text.replace("bits of mantissa", "bits of mantissa, 3 of them spare"))
    assert [p.split("\n")[0] for p in report.problems] == [
        "pages/index.md:3:61: number 3 is bound to no claim: bind it as [3](claim:...) or add it to "
        "pages/allowlist.toml with a reason"
    ]
    allowlist = book / "pages" / "allowlist.toml"
    entries = allowlist.read_text()
    save_allowlist = saving(engine, allowlist)
    excused = (
        entries
        + '\n[[allow]]\npattern = "3 of them spare"\nreason = "a count in passing"\nfiles = ["pages/index.md"]\n'
    )
    report = save_allowlist(excused)
    assert report.what == "pages/allowlist.toml saved" and report.problems == []
    report = saving(engine, page)(text)  # the number gone: the entry excuses nothing now
    assert report.problems == [
        "pages/allowlist.toml:24: allow-list entry '3 of them spare' excuses nothing; remove it, or fix its pattern "
        "or files"
    ]
    report = save_allowlist(entries.replace('pattern = "between 1 and the next"', 'pattern = "between (1"'))
    said, *rest = report.problems
    assert not [line for line in rest if "is bound to no claim" in line], rest  # the entries read last stand
    assert said.startswith("pages/allowlist.toml:4: allow-list entry needs a valid `pattern` regex")
    assert said.endswith("(the allow-list as last read stands until this one reads)")


def test_a_saved_data_file_whose_source_states_another_number_says_so(book: Path) -> None:
    data = book / "book_claims" / "data" / "formats.toml"
    data.write_text(
        data.read_text()
        .replace("value = 5\n", 'value = 5\nunit = "bits"\n')
        .replace("a 5-bit exponent field", "an exponent field of 5 bits")
    )
    engine = started(book)
    write(data, data.read_text().replace("value = 5\n", "value = 6\n"))
    report = engine.apply(engine.changed())
    data_folder = engine.opened_book.inputs.shown_as
    shown = f"{data_folder}/formats.toml:7: fp16_exponent_bits: value = 6, but its source says 5 bits"
    assert [p for p in report.problems if "its source says" in p] == [
        f"{shown} ('IEEE 754-2019, table 3.5: binary16 has an exponent field of 5 bits'); correct one of them"
    ]
    assert f"\n  {shown}" in report.line()  # the terminal's line for the save says it


def test_a_page_edit_writes_the_records_of_its_figures_claims_only_and_keeps_them(
    book: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A saved page's records are merged from a thread while the page shows; the next look at the disk waits
    for them, and only the records of the claims whose figures were judged again are written."""
    engine = started(book)
    asked: list[list[tuple[str, str]]] = []
    results = engine.session.verifier.results

    def recorded(*args: Any, only: Any = None, **kwargs: Any) -> Any:
        asked.append(sorted(only) if only is not None else [])
        return results(*args, only=only, **kwargs)

    monkeypatch.setattr(engine.session.verifier, "results", recorded)
    page = book / "pages" / "index.md"
    write(page, page.read_text().replace("[65504](claim:half.max)", "[65505](claim:half.max)", 1))
    engine.apply(engine.changed())
    held = {c for c, _ in engine.session.verifier.judged}  # the measured half.sum_ms was not asked for
    claims_on_page = {b.claim_id for b in engine.session.book.bindings() if b.file == "pages/index.md"} & held
    assert asked and {c for c, _ in asked[-1]} == claims_on_page
    assert engine.merged is not None and engine.merged.records["half.max"]["none"].status == "stale"  # shown now
    assert engine.changed() == []  # waits for the thread; the file it wrote is not a change
    on_disk = json.loads(engine.results_path.read_text())
    assert on_disk["records"]["half.max"]["none"]["figures"][0]["printed"] == "65505"
    assert engine.unkept is None


def test_a_reload_opens_a_fresh_book_and_a_build_on_another_thread_sees_it(
    book: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saving a claim module opens a new book (a new registry), not the old one emptied; livereload's build
    thread and the records' writer work in the book as last loaded."""
    import threading

    from verified_book.authoring.registry import REGISTRY
    from verified_book.engine import live as live_mod
    from verified_book.engine.config import current_book

    engine = started(book)
    before = engine.opened_book
    old_registry = before.registry
    topic = book / "book_claims" / "topics" / "half.py"
    text = topic.read_text()
    write(topic, text + '\n\n@claim("half.one", kind="exact")\ndef one() -> int:\n    """One."""\n    return 1\n')
    seen: dict[str, Any] = {}

    def build() -> None:  # what serve's builder does on livereload's thread
        report = engine.look()
        with engine.opened():
            seen["ids"] = REGISTRY.ids()
            seen["book"] = current_book()
        seen["report"] = report

    thread = threading.Thread(target=build)
    thread.start()
    thread.join()
    assert engine.opened_book is not before and seen["book"] is engine.opened_book
    assert "half.one" in seen["ids"] and "half.one" not in old_registry, "the old registry is left as it was"
    assert ("half.one", "none") in seen["report"].recomputed

    merging: list[Any] = []
    merge_into = live_mod.merge_into

    def recorded(path: Path, update: Any, **options: Any) -> Any:
        merging.append(current_book())
        return merge_into(path, update, **options)

    monkeypatch.setattr(live_mod, "merge_into", recorded)
    engine.write(wait=False)
    engine.write(wait=False)  # the second waits for the first, and is written by a thread as well
    engine.written()
    assert merging and all(b is engine.opened_book for b in merging), "the writer thread runs in the book's context"
    assert current_book() is not engine.opened_book, "outside its calls, the run's own book is current"
