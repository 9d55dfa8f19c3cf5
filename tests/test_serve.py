"""`verified-book serve`: what each kind of saved file recomputes, and that nothing else runs.

`plan` decides from what each held value was computed from; the engine is then driven on a copy
of the book `verified-book init` writes, counting every claim evaluated; the slow test starts the server itself and
reads the marks from the HTML it serves.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from verified_book.authoring import inputs
from verified_book.authoring.registry import REGISTRY
from verified_book.engine import check
from verified_book.engine.config import read_config, snapshot
from verified_book.integration.serve import GONE, Changes, Engine, Known, plan

EXAMPLE = Path(__file__).resolve().parents[1] / "verified_book" / "template"  # what `verified-book init` writes
ROOT = Path(__file__).resolve().parents[1]

KNOWN = {
    ("a.bits", "none"): Known("c1", (("formats.toml", "bits", 10),)),
    ("a.eps", "none"): Known("c2", (("formats.toml", "bits", 10),)),
    ("a.max", "none"): Known("c3", (("formats.toml", "bits", 10), ("formats.toml", "exponent", 5))),
    ("a.sum", "numpy"): Known("c4", (), "numpy", "2.1.0"),
    ("a.sum", "torch:cpu"): Known("c4", (), "torch", "2.5.1"),
    ("a.ms", "numpy"): Known("c5", (("given.toml", "count", 1000),), "numpy", "2.1.0", measured=True),
}
CODES = {"a.bits": "c1", "a.eps": "c2", "a.max": "c3", "a.sum": "c4", "a.ms": "c5"}


def test_a_saved_page_recomputes_nothing() -> None:
    decided = plan(KNOWN, Changes(pages=frozenset({"book/a.md"})), {})
    assert (decided.recompute, decided.new, decided.gone, decided.held_back) == (set(), set(), set(), set())


def test_a_data_file_recomputes_exactly_the_claims_whose_value_read_there_changed() -> None:
    now = {("formats.toml", "bits"): 10, ("formats.toml", "exponent"): 6}
    assert plan(KNOWN, Changes(data=frozenset({"formats.toml"})), now).recompute == {("a.max", "none")}
    now = {("formats.toml", "bits"): 11, ("formats.toml", "exponent"): 5}
    assert plan(KNOWN, Changes(data=frozenset({"formats.toml"})), now).recompute == {
        ("a.bits", "none"),
        ("a.eps", "none"),
        ("a.max", "none"),
    }
    # saved unchanged: nothing; a key gone counts as changed
    same = {("formats.toml", "bits"): 10, ("formats.toml", "exponent"): 5}
    assert plan(KNOWN, Changes(data=frozenset({"formats.toml"})), same).recompute == set()
    gone = {("formats.toml", "bits"): 10, ("formats.toml", "exponent"): GONE}
    assert plan(KNOWN, Changes(data=frozenset({"formats.toml"})), gone).recompute == {("a.max", "none")}


def test_a_claim_that_failed_runs_again_at_the_next_data_save() -> None:
    """A claim that failed on bad data read nothing to go by: any data file saved may be its mend."""
    known = {**KNOWN, ("a.bits", "none"): Known("c1", (), failed=True)}
    same = {("formats.toml", "bits"): 10, ("formats.toml", "exponent"): 5}
    assert plan(known, Changes(data=frozenset({"formats.toml"})), same).recompute == {("a.bits", "none")}
    assert plan(known, Changes(pages=frozenset({"book/a.md"})), {}).recompute == set()


def test_a_claim_module_recomputes_the_claims_whose_fingerprint_changed_and_names_new_and_gone() -> None:
    codes = {**CODES, "a.eps": "c2'", "a.new": "c9"}
    del codes["a.bits"]
    decided = plan(KNOWN, Changes(codes=codes), {})
    assert decided.recompute == {("a.eps", "none")}
    assert decided.new == {"a.new"} and decided.gone == {"a.bits"}
    assert plan(KNOWN, Changes(codes=CODES), {}).recompute == set()


def test_a_library_upgrade_recomputes_the_claims_computed_on_it() -> None:
    decided = plan(KNOWN, Changes(versions={"torch": "2.6.0"}), {})
    assert decided.recompute == {("a.sum", "torch:cpu")}


def test_an_upgrade_of_a_library_a_claim_computes_with_beyond_its_backend_recomputes_it() -> None:
    """transformers builds the model a torch claim counts; ml_dtypes gives numpy its bfloat16."""
    known = {
        **KNOWN,
        ("a.model", "torch:cpu"): Known("c6", (), "torch", "2.5.1", uses=(("transformers", "4.57.1"),)),
        ("a.bf16", "numpy"): Known("c7", (), "numpy", "2.1.0", uses=(("ml_dtypes", "0.5.3"),)),
    }
    assert plan(known, Changes(versions={"transformers": "4.58.0"}), {}).recompute == {("a.model", "torch:cpu")}
    decided = plan(known, Changes(versions={"ml_dtypes": "0.5.4"}), {})
    assert decided.recompute == {("a.bf16", "numpy")}
    assert decided.why[("a.bf16", "numpy")] == "ml_dtypes is 0.5.4 now, was 0.5.3"
    assert plan(known, Changes(versions={"transformers": "4.57.1"}), {}).recompute == set()


def test_measured_claims_rerun_only_when_asked() -> None:
    now = {("given.toml", "count"): 2000}
    decided = plan(KNOWN, Changes(data=frozenset({"given.toml"})), now, measured={"a.ms"})
    assert decided.recompute == set() and decided.held_back == {("a.ms", "numpy")}
    codes = {**CODES, "a.ms": "c5'"}
    assert plan(KNOWN, Changes(codes=codes), {}, measured={"a.ms"}).recompute == set()
    asked = plan(KNOWN, Changes(measure=True), {}, measured={"a.ms", "a.other"})
    assert asked.recompute == {("a.ms", "numpy")} and asked.new == {"a.other"}


def test_a_saved_snippet_holds_back_the_measured_claims_that_read_what_it_printed() -> None:
    known = {
        **KNOWN,
        ("a.ms", "numpy"): Known("c5", (), "numpy", "2.1.0", measured=True, snippets=("book/snippets/t.py",)),
    }
    saved = plan(known, Changes(snippets=frozenset({"book/snippets/t.py"})), {}, measured={"a.ms"})
    assert saved.recompute == set() and saved.held_back == {("a.ms", "numpy")}
    assert saved.why[("a.ms", "numpy")] == "book/snippets/t.py changed"
    assert plan(known, Changes(snippets=frozenset({"book/snippets/other.py"})), {}).held_back == set()
    asked = plan(known, Changes(snippets=frozenset({"book/snippets/t.py"}), measure=True), {}, measured={"a.ms"})
    assert asked.recompute == {("a.ms", "numpy")}


@pytest.fixture
def book(tmp_path: Path) -> Iterator[Path]:
    """A copy of the book `init` writes, opened in this process and given back after."""
    root = tmp_path / "minimal"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", "results", "site", ".cache"))
    restore = snapshot()
    try:
        with REGISTRY.isolated():
            yield root
    finally:
        restore()
        for name in [m for m in sys.modules if m.split(".")[0] == "book_claims"]:
            del sys.modules[name]


def test_the_engine_computes_once_then_only_what_each_save_changed(book: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[tuple[str, str]] = []
    evaluate = check.evaluate

    def counted(claim: Any, backend: Any) -> Any:
        ran.append((claim.id, backend.name))
        return evaluate(claim, backend)

    monkeypatch.setattr(check, "evaluate", counted)
    engine = Engine(read_config(book), machine_info=lambda info: {**info, "slug": "serve-test"})
    engine.start()
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
        path.write_text(text.replace(old, new, 1))
        os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))  # a new mtime even on a coarse clock
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


def started(book: Path) -> Engine:
    """serve's engine on the sample book, every claim computed once."""
    engine = Engine(read_config(book), machine_info=lambda info: {**info, "slug": "serve-test"})
    engine.start()
    return engine


def saving(engine: Engine, path: Path) -> Callable[[str], Any]:
    """Saving `path` with a text, as an editor does (a new mtime even on a coarse clock): the engine's report."""

    def save(text: str) -> Any:
        path.write_text(text)
        os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
        return engine.apply(engine.changed())

    return save


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


def test_a_saved_snippet_renders_the_pages_that_show_it_and_says_how_to_run_it(book: Path) -> None:
    (book / "pages" / "code.md").write_text('# Its code alone\n\n```python\n--8<-- "pages/snippets/half_sum.py"\n```\n')
    (book / "pages" / "prose.md").write_text("# Its name alone\n\nThe script `pages/snippets/half_sum.py` sums ones.\n")
    engine = started(book)
    snippet = book / "pages" / "snippets" / "half_sum.py"
    saved = saving(engine, snippet)(snippet.read_text() + "# what it adds, in words\n")
    assert saved.what == "pages/snippets/half_sum.py saved" and not saved.recomputed and not saved.rebuild
    assert saved.pages == {"pages/index.md", "pages/code.md"}, "the pages that include its code or show its output"
    assert saved.problems == [
        "pages/snippets/half_sum.py: serve does not run snippets; `pytest pages/snippets/half_sum.py` runs it "
        "and checks its output blocks"
    ]


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
    engine = Engine(read_config(book), measured=True, machine_info=lambda info: {**info, "slug": "serve-test"})
    engine.start()
    key = ("lab.ms", "numpy")
    assert engine.known[key].snippets == ("pages/snippets/clock.py",)
    assert engine.session.verifier._outcomes[key].value == pytest.approx(0.5)

    saved = saving(engine, snippet)('print("took 0.700 ms a call")\n')
    assert saved.held_back == 1 and not saved.recomputed, saved.line()
    assert {b.where: status for b, status in saved.figures.items()} == {"pages/lab.md:4": "not here"}
    assert key not in engine.session.verifier._outcomes, "the value the old snippet printed is not kept"
    measured = engine.apply([], measure=True)
    assert key in measured.recomputed
    assert engine.session.verifier._outcomes[key].value == pytest.approx(0.7), "read from the snippet's new run"


def test_data_that_stops_parsing_fails_its_claims_and_mending_it_recomputes_them(book: Path) -> None:
    data = book / "book_claims" / "data" / "formats.toml"
    good = data.read_text()
    save = saving(started(book), data)
    broken = save(good + "value = = 3\n")
    assert set(broken.figures.values()) == {"failed"} and broken.recomputed, broken.line()
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
    engine = Engine(read_config(book), machine_info=lambda info: {**info, "slug": "serve-test"})
    engine.start()
    data.write_text(data.read_text().replace("value = 5\n", "value = 6\n"))
    os.utime(data, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    report = engine.apply(engine.changed())
    shown = f"{inputs.SHOWN_AS}/formats.toml:7: fp16_exponent_bits: value = 6, but its source says 5 bits"
    assert [p for p in report.problems if "its source says" in p] == [
        f"{shown} ('IEEE 754-2019, table 3.5: binary16 has an exponent field of 5 bits'); correct one of them"
    ]
    assert f"\n  {shown}" in report.line()  # the terminal's line for the save says it


def test_a_page_edit_writes_the_records_of_its_figures_claims_only_and_keeps_them(
    book: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A saved page's records are merged from a thread while the page shows; the next look at the disk waits
    for them, and only the records of the claims whose figures were judged again are written."""
    engine = Engine(read_config(book), machine_info=lambda info: {**info, "slug": "serve-test"})
    engine.start()
    asked: list[list[tuple[str, str]]] = []
    results = engine.session.verifier.results

    def recorded(*args: Any, only: Any = None, **kwargs: Any) -> Any:
        asked.append(sorted(only) if only is not None else [])
        return results(*args, only=only, **kwargs)

    monkeypatch.setattr(engine.session.verifier, "results", recorded)
    page = book / "pages" / "index.md"
    page.write_text(page.read_text().replace("[65504](claim:half.max)", "[65505](claim:half.max)", 1))
    os.utime(page, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    engine.apply(engine.changed())
    held = {c for c, _ in engine.session.verifier.judged}  # the measured half.sum_ms was not asked for
    claims_on_page = {b.claim_id for b in engine.session.book.bindings() if b.file == "pages/index.md"} & held
    assert asked and {c for c, _ in asked[-1]} == claims_on_page
    assert engine.merged is not None and engine.merged.records["half.max"]["none"].status == "stale"  # shown now
    assert engine.changed() == []  # waits for the thread; the file it wrote is not a change
    on_disk = json.loads(engine.results_path.read_text())
    assert on_disk["records"]["half.max"]["none"]["figures"][0]["printed"] == "65505"
    assert engine.unkept is None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


MARK = re.compile(r'data-claim="([a-z0-9_.]+)" data-status="([a-z ]+)"')


def test_an_address_the_preview_cannot_listen_on_is_said_with_what_to_change() -> None:
    from verified_book.integration.serve import address_problem

    assert address_problem("127.0.0.1", _free_port()) is None
    assert address_problem("127.0.0.1", 70000) == "bind(): port must be 0-65535; choose a port with --port"
    not_here = address_problem("192.0.2.1", _free_port())  # TEST-NET-1 (RFC 5737): no machine's own address
    assert not_here is not None and not_here.endswith("; choose an address of this machine with --host")


def test_an_address_in_use_is_said_at_once_before_anything_is_computed(tmp_path: Path) -> None:
    root = tmp_path / "minimal"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", "results", "site", ".cache"))
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        refused = subprocess.run(
            [sys.executable, "-m", "verified_book.integration.cli", "serve", "--port", str(port)],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    assert refused.returncode == 1, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert refused.stderr == (
        f"verified-book serve: cannot listen on 127.0.0.1:{port}: Address already in use; another server holds it: "
        "choose another port with --port\n"
    )
    assert "computing" not in refused.stdout, "nothing is computed for a preview that cannot be served"
    assert not (root / "results").exists(), "nothing is written"


def test_a_port_taken_while_the_book_is_computed_is_said_as_a_port_in_use(
    book: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from verified_book.integration import serve as serve_mod

    port = _free_port()
    taken = socket.socket()
    start = Engine.start

    def start_while_another_takes_the_port(self: Engine) -> Any:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        return start(self)

    monkeypatch.setattr(Engine, "start", start_while_another_takes_the_port)
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")  # set by serve, undone after the test
    monkeypatch.chdir(book)
    try:
        code = serve_mod.serve(read_config(book), ["--port", str(port)])
    finally:
        taken.close()
    assert code == 1
    assert capsys.readouterr().err.endswith(
        f"verified-book serve: cannot listen on 127.0.0.1:{port}: Address already in use; another server holds it: "
        "choose another port with --port\n"
    )


@pytest.mark.slow
def test_serve_shows_each_saved_change_and_says_what_it_recomputed(tmp_path: Path) -> None:
    root = tmp_path / "minimal"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", "results", "site", ".cache"))
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "verified_book.integration.cli", "serve", "--port", str(port)],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: [lines.append(line) for line in proc.stdout or []], daemon=True).start()

    def wait(predicate: Any, what: str, limit: float = 120) -> None:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            if predicate():
                return
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{what}; serve said:\n{''.join(lines)[-4000:]}")

    def marks(page: str = "") -> list[tuple[str, str]]:
        try:
            served = urllib.request.urlopen(f"http://127.0.0.1:{port}/{page}", timeout=10)
            return MARK.findall(served.read().decode())
        except OSError:  # not served (yet, or any more): a 404 is an HTTPError, an OSError
            return []

    def said(start: int, pattern: str) -> str | None:
        return next((line for line in lines[start:] if re.search(pattern, line)), None)

    try:
        wait(lambda: said(0, "serve: http://"), "serve never started")
        assert ("half.max", "verified") in marks()
        start = len(lines)
        page = root / "pages" / "index.md"
        page.write_text(page.read_text().replace("[65504](claim:half.max)", "[65505](claim:half.max)"))
        wait(lambda: ("half.max", "stale") in marks(), "the edited figure never showed stale")
        wait(lambda: said(start, r"pages/index.md saved: .*no claim ran"), "no line for the page")
        assert said(start, r"pages/index.md:5: figure 65505 \(half.max\) is stale")

        start = len(lines)
        page.write_text(page.read_text().replace("[65505](claim:half.max)", "[65505](claim:half.maxx)"))
        wait(lambda: said(start, r"pages/index.md saved: .*1 failed"), "no line for the figure of an unknown claim")
        time.sleep(0.5)  # the page's render, which would log its own line for the figure
        named = [line for line in lines[start:] if "half.maxx" in line]
        assert named == [
            "  pages/index.md:5: figure 65505 binds to unknown claim 'half.maxx'; did you mean half.max, half.sum_ms?\n"
        ], named
        page.write_text(page.read_text().replace("[65505](claim:half.maxx)", "[65505](claim:half.max)"))
        wait(lambda: ("half.max", "stale") in marks(), "the figure's claim never came back")

        start = len(lines)
        data = root / "book_claims" / "data" / "formats.toml"
        data.write_text(data.read_text().replace("value = 10", "value = 11"))  # the mantissa: four claims read it
        wait(lambda: ("half.eps", "stale") in marks(), "the data edit never showed")
        line = said(start, r"formats.toml saved")
        assert line is not None and line.rstrip().endswith(
            "4 (claim, backend) recomputed: half.eps, half.finfo_eps, half.mantissa_bits, half.max"
        ), line

        start = len(lines)
        topic = root / "book_claims" / "topics" / "half.py"
        topic.write_text(
            topic.read_text().replace(
                'return int(given("half.sum_count"))\n', 'return int(given("half.sum_count")) + 1\n', 1
            )
        )
        wait(lambda: ("half.sum_count", "stale") in marks(), "the claim module's edit never showed")
        line = said(start, r"half.py saved")
        assert line is not None and line.rstrip().endswith("1 (claim, backend) recomputed: half.sum_count"), line

        start = len(lines)
        second = root / "pages" / "second.md"
        second.write_text("# Second\n\nFP16 tops out at [65504](claim:half.max), below [7](claim:half.nope).\n")
        wait(lambda: ("half.max", "stale") in marks("second.html"), "a new page was never served")
        wait(lambda: said(start, r"pages/second.md saved: 2 figure"), "no line for the new page")
        time.sleep(0.5)
        named = [line for line in lines[start:] if "half.nope" in line]
        assert len(named) == 1, f"the whole build logs nothing serve said: {named}"
        second.unlink()
        wait(lambda: said(start, r"pages/second.md removed: "), "no line for the page removed")
        wait(lambda: marks("second.html") == [], "the removed page is still served")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
