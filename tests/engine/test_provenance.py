"""Provenance: a record says what it was computed from, and reads as outdated once the book changes."""

from __future__ import annotations

import importlib.util
import inspect
import json
from pathlib import Path

import pytest
from harness import books, faults
from harness.paths import ROOT

from verified_book.authoring import inputs
from verified_book.authoring.registry import REGISTRY, Registry
from verified_book.engine import checkout, footprints, provenance
from verified_book.engine.source import source_of
from verified_book.records.record import ClaimMeta, Record
from verified_book.records.results import SCHEMA_VERSION, read

CLAIMS = '''
from fractions import Fraction
from verified_book.authoring.inputs import exact, vendor
from verified_book.authoring.registry import claim


def _per_token(bandwidth):
    return bandwidth / Fraction("16.4")


@claim("io.ceiling", kind="exact")
def ceiling():
    """Tokens per second: bandwidth over the bytes read per token."""
    return _per_token(exact(vendor("hw.toml", "memory_bandwidth")))
'''

DATA = '[memory_bandwidth]\nvalue = {value}\nunit = "GB/s"\nsource = "a data sheet"\n'


def _book(root: Path) -> faults.SampleBook:
    book = faults.SampleBook(root)
    book.claims("io", CLAIMS)
    (root / "data" / "hw.toml").write_text(DATA.format(value=273))
    book.page("page.md", "The ceiling is [16.6](claim:io.ceiling) tokens/s.\n")
    return book


def _outdated(book: faults.SampleBook) -> str | None:
    """What the site would say of the record now, deciding it without running the claim."""
    results = read(book.results_file)
    try:
        book.forget_modules()  # the claims as they are on disk now, not as a run imported them
        with books.opened(book.root):
            return provenance.outdated_reason(
                REGISTRY["io.ceiling"], results.claims["io.ceiling"], results.records["io.ceiling"]["none"]
            )
    finally:
        book.forget_modules()


def test_a_record_carries_its_provenance_and_the_run_header(tmp_path: Path) -> None:
    book = _book(tmp_path / "book")
    assert book.run().ret == 0
    data = json.loads(book.results_file.read_text())
    assert data["schema_version"] == SCHEMA_VERSION == 7
    record = data["records"]["io.ceiling"]["none"]
    assert record["inputs"] == [{"file": "hw.toml", "key": "memory_bandwidth", "value": 273, "line": 2}]
    assert {"date", "seconds", "kind", "source"}.isdisjoint(record)
    meta = data["claims"]["io.ceiling"]
    assert meta["kind"] == "exact" and meta["defined_at"].endswith("io.py:11") and len(meta["code"]) == 16
    assert set(data["run"]) >= {"date", "commit", "dirty", "versions", "backends", "seconds"}
    assert _outdated(book) is None


def test_a_changed_input_makes_the_record_outdated_with_old_and_new_value(tmp_path: Path) -> None:
    book = _book(tmp_path / "book")
    book.run()
    (book.root / "data" / "hw.toml").write_text(DATA.format(value=280))
    assert _outdated(book) == "computed from memory_bandwidth = 273; the book now says 280 (data/hw.toml)"
    book.run()
    assert _outdated(book) is None


def test_a_changed_helper_of_the_claim_makes_the_record_outdated(tmp_path: Path) -> None:
    book = _book(tmp_path / "book")
    book.run()
    book.claims("io", CLAIMS.replace('Fraction("16.4")', 'Fraction("16.40")'))
    assert (_outdated(book) or "").startswith("the claim's code changed since this record was made")


REACHED = {
    "tables.py": """
from fractions import Fraction

BYTES = {"bf16": 2, "q4": Fraction(9, 16)}
""",
    "kinds.py": """
import functools
from dataclasses import dataclass
from fractions import Fraction


@functools.cache
def half():
    return Fraction(1, 2)


def _scale(bits):
    return Fraction(bits, 8)


@dataclass(frozen=True)
class Format:
    id: str
    bits: int

    def __str__(self):
        return self.id

    def bytes(self):
        return _scale(self.bits)


FORMATS = [Format("bf16", 16), Format("fp8", 8)]
""",
    "io.py": """
from verified_book.authoring.registry import claim

from . import tables
from .kinds import FORMATS, half
from .tables import BYTES

_SEEN = {}


@claim("io.bytes.{fmt}", kind="exact", over={"fmt": FORMATS})
def per_element(fmt):
    \"\"\"Bytes per element of a format, from its bit count.\"\"\"
    _SEEN[fmt.id] = True
    return fmt.bytes()


@claim("io.table", kind="exact")
def table():
    \"\"\"Bytes per element of bf16, as the table says.\"\"\"
    return BYTES["bf16"]


@claim("io.q4", kind="exact")
def q4():
    \"\"\"Bytes per element of q4, read through the module.\"\"\"
    return tables.BYTES["q4"]


@claim("io.half", kind="exact")
def one_half():
    \"\"\"A half, from a cached helper.\"\"\"
    return half()
""",
}


def _reached(tmp_path: Path) -> faults.SampleBook:
    """A sample book of the claims modules in `REACHED`."""
    book = faults.SampleBook(tmp_path / "book")
    for name, text in REACHED.items():
        book.claims(name.removesuffix(".py"), text)
    return book


def _fingerprints(book: faults.SampleBook, *, wide: bool = True) -> dict[str, str]:
    """Every claim's fingerprint as the book's files are now, in a registry of their own."""
    try:
        book.forget_modules()
        with books.opened(book.root):
            return {c.id: provenance.code_fingerprint(c, wide) for c in REGISTRY}
    finally:
        book.forget_modules()


REACHED_EDITS = [
    # a method of the class the claim's parameter is an instance of, and a helper that method calls
    ("kinds.py", "return _scale(self.bits)", "return _scale(self.bits) * 1", {"io.bytes.bf16", "io.bytes.fp8"}),
    ("kinds.py", "return Fraction(bits, 8)", "return Fraction(bits, 8) * 1", {"io.bytes.bf16", "io.bytes.fp8"}),
    # a table the claim reads, imported by name from another module, or read through that module
    ("tables.py", '"bf16": 2,', '"bf16": 3,', {"io.table", "io.q4"}),
    ("tables.py", "Fraction(9, 16)", "Fraction(10, 16)", {"io.table", "io.q4"}),
    # a helper behind functools.cache, which is no plain function
    ("kinds.py", "return Fraction(1, 2)", "return Fraction(1, 3)", {"io.half"}),
]


@pytest.mark.parametrize(("module", "old", "new", "moved"), REACHED_EDITS)
def test_what_a_claim_reaches_without_naming_it_is_part_of_its_fingerprint(
    tmp_path: Path, module: str, old: str, new: str, moved: set[str]
) -> None:
    """A claim's value moves with a method of the object it is handed, the helper that method calls, a table
    its code reads and a cached helper; so its fingerprint must, or `--changed` and `serve` would keep its
    old value."""
    book = _reached(tmp_path)
    before = _fingerprints(book)
    book.claims(module.removesuffix(".py"), REACHED[module].replace(old, new))
    after = _fingerprints(book)
    assert {c for c in before if before[c] != after[c]} == moved


def test_a_claims_footprint_names_every_file_whose_edit_moves_its_fingerprint(tmp_path: Path) -> None:
    """`--changed` reads a record again only where a file of its footprint changed (`engine.footprints`): each
    module an edit of which moves a claim's fingerprint (`REACHED_EDITS`) is among its code's files, the claim's
    own module too."""
    book = _reached(tmp_path)
    try:
        book.forget_modules()
        with books.opened(book.root):
            files = {c.id: footprints.code_files(c, book.root) for c in REGISTRY}
    finally:
        book.forget_modules()
    package = "code:sample_claims/"
    for module, _, _, moved in REACHED_EDITS:
        assert all(package + module in files[claim] for claim in moved), (module, moved)
    assert all(package + "io.py" in found for found in files.values())
    assert package + "tables.py" not in files["io.half"], "a module the claim's code never reaches is not its source"


def test_a_disputed_premise_and_an_excuse_beside_a_claim_are_not_its_code(tmp_path: Path) -> None:
    """What carries a premise and why a figure stands decide no value: declared beside the claim, they leave its
    fingerprint, and the records made before them, as they were."""
    book = faults.SampleBook(tmp_path / "book")
    book.claims("io", CLAIMS)
    before = _fingerprints(book)
    book.claims(
        "io",
        CLAIMS.replace("import claim", "import claim, disputes_premise, excuse")
        + '\ndisputes_premise(ceiling, _per_token)\nexcuse(ceiling, {"io.other": "it stands"})\n',
    )
    assert _fingerprints(book) == before
    try:
        book.forget_modules()
        with books.opened(book.root):
            declared = REGISTRY["io.ceiling"]
            assert declared.premise == ("sample_claims.io._per_token",)
            assert declared.excused == {"io.other": "it stands"}
            assert declared.excused_at["io.other"].endswith(f"io.py:{len(CLAIMS.splitlines()) + 3}")
    finally:
        book.forget_modules()


def test_a_cache_a_claim_fills_as_it_runs_is_not_its_code(tmp_path: Path) -> None:
    """`_SEEN` is filled by the claims themselves: read from its assignment, not its value, it says the same
    before and after they ran, in every process."""
    book = _reached(tmp_path)
    try:
        book.forget_modules()
        with books.opened(book.root):
            claim = REGISTRY["io.bytes.bf16"]
            before = provenance.code_fingerprint(claim)
            provenance._CODE_CACHE.clear()
            assert claim.compute(**claim.params) == 2
            assert provenance.code_fingerprint(claim) == before
    finally:
        book.forget_modules()


def test_a_record_fingerprinted_before_fingerprints_took_in_what_code_reaches_says_so(tmp_path: Path) -> None:
    """A record whose fingerprint is the narrower one older runs wrote cannot speak for the class it was handed:
    outdated, saying why, and never said to be a change of the claim's code."""
    book = _book(tmp_path / "book")
    book.claims("kinds", REACHED["kinds.py"])
    book.claims(
        "io",
        CLAIMS
        + """
from .kinds import FORMATS


@claim("io.bytes.{fmt}", kind="exact", over={"fmt": FORMATS})
def per_element(fmt):
    \"\"\"Bytes per element of a format.\"\"\"
    return fmt.bytes()
""",
    )
    book.page("bytes.md", "bf16 takes [2](claim:io.bytes.bf16) bytes.\n")
    assert book.run().ret == 0
    narrow = _fingerprints(book, wide=False)["io.bytes.bf16"]
    data = json.loads(book.results_file.read_text())
    data["claims"]["io.bytes.bf16"]["code"] = narrow
    book.results_file.write_text(json.dumps(data))
    results = read(book.results_file)
    try:
        book.forget_modules()
        with books.opened(book.root):
            why = provenance.outdated_reason(
                REGISTRY["io.bytes.bf16"], results.claims["io.bytes.bf16"], results.records["io.bytes.bf16"]["none"]
            )
    finally:
        book.forget_modules()
    assert (why or "").startswith("recorded before fingerprints took in what a claim's code reaches")


USES = """
from verified_book.authoring.lazy import lazy_import
from verified_book.authoring.registry import claim

sympy = lazy_import("sympy")


def _build():
    from transformers import Qwen3Config

    return Qwen3Config


@claim("u.lazy", kind="exact")
def lazy():
    \"\"\"A half, as sympy, imported at its first use, computes it.\"\"\"
    return sympy.Rational(1, 2)


@claim("u.model", kind="library", backends=("torch:cpu",))
def model(backend):
    \"\"\"A model's layer count, from a helper that imports transformers.\"\"\"
    return _build()().num_hidden_layers


@claim("u.array", kind="library", backends=("numpy",))
def array(backend):
    \"\"\"One, summed by the backend.\"\"\"
    return int(backend.tensor([1]).sum())


@claim("u.plain", kind="exact")
def plain():
    \"\"\"Two.\"\"\"
    return 2
"""


def test_a_record_keeps_the_versions_of_the_libraries_its_claim_computes_with_beyond_its_backends(
    tmp_path: Path,
) -> None:
    """A library the claim's code imports (in a helper, or lazily) and a backend's companion (numpy's bfloat16 is
    ml_dtypes'): an upgrade of either can move the value, so a record names their versions (`Record.uses`); the
    backend's own library is its `version`."""
    book = faults.SampleBook(tmp_path / "book")
    book.claims("u", USES)
    try:
        book.forget_modules()
        with books.opened(book.root):
            uses = {c.id: provenance.uses_of(c, (c.backends or ("none",))[0]) for c in REGISTRY}
    finally:
        book.forget_modules()
    assert uses == {"u.lazy": ("sympy",), "u.model": ("transformers",), "u.array": ("ml_dtypes",), "u.plain": ()}


def test_a_record_is_outdated_where_a_library_it_was_computed_with_is_another_version_where_it_is_asked(
    tmp_path: Path,
) -> None:
    """The library part of the one rule: the record's backend's library (its `version`) and the others it computed
    with (`uses`), against the versions where the record is asked about. A version not known there says nothing."""
    book = faults.SampleBook(tmp_path / "book")
    book.claims("u", USES)
    try:
        book.forget_modules()
        with books.opened(book.root):
            claim = REGISTRY["u.array"]
            meta = ClaimMeta(kind="library", code=provenance.code_fingerprint(claim))
            record = Record(status="verified", value=1, inputs=[], version="2.0.0", uses={"ml_dtypes": "0.5.0"})

            def why(versions: dict[str, str | None] | None, on: Record = record) -> str | None:
                now = provenance.VersionsNow.of(versions) if versions is not None else None
                return provenance.outdated_reason(claim, meta, on, "numpy", now)

            assert why(None) is None and why({}) is None, "nothing known, nothing said"
            assert why({"numpy": "2.0.0", "ml_dtypes": "0.5.0"}) is None
            assert why({"numpy": "2.1.0"}) == "recorded on 2.0.0; this machine has 2.1.0 now"
            assert why({"numpy": None}) == "recorded on 2.0.0; this machine has none now"
            assert why({"numpy": "2.0.0", "ml_dtypes": "0.6.0"}) == (
                "computed with ml_dtypes 0.5.0, this machine has 0.6.0 now"
            )
            unkept = Record(status="verified", value=1, inputs=[], version="2.0.0")
            assert why({"ml_dtypes": "0.5.0"}, unkept) == (
                "recorded before records kept the versions of the other libraries it computes with (ml_dtypes)"
            )
            assert provenance.outdated_reason(claim, meta, record, "numpy") is None, "no versions asked about"
    finally:
        book.forget_modules()


def test_the_site_asks_of_a_record_the_versions_its_machine_s_latest_run_found(tmp_path: Path) -> None:
    """The site runs nothing: a machine's versions now are those its results file's latest run found. A backend
    that run did not find is not known, so its earlier records are not called outdated for it."""
    from verified_book.engine import figure_status

    book = _book(tmp_path / "book")
    assert book.run().ret == 0
    results = read(book.results_file)
    results.run = results.run.model_copy(update={"backends": {"numpy": "2.1.0", "torch:cpu": None}})
    results.machine = results.machine.model_copy(update={"fingerprint": {"ml_dtypes": "0.6.0", "os": "Linux"}})
    now = provenance.versions_of_run(results)
    assert now.get("numpy") == (True, "2.1.0") and now.get("ml_dtypes") == (True, "0.6.0")
    assert now.get("torch:cpu") == (False, None) and now.get("os") == (False, None)
    record = Record(status="verified", value=1, inputs=[], version="2.0.0")
    try:
        book.forget_modules()
        with books.opened(book.root):
            assert figure_status.status_now(results, "io.ceiling", record, "numpy") == "outdated"
            assert figure_status.status_now(results, "io.ceiling", record, "torch:cpu") == "verified"
            assert figure_status.status_now(results, "io.ceiling", record) == "verified", "no backend, no version asked"
    finally:
        book.forget_modules()


def test_a_migrated_record_is_outdated_until_its_machine_runs_again(tmp_path: Path) -> None:
    book = _book(tmp_path / "book")
    book.results_dir.mkdir()
    book.results_file.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "slug": faults.SLUG,
                "environment": {},
                "records": {
                    "io.ceiling": {
                        "none": {
                            "status": "verified",
                            "kind": "exact",
                            "value": 16,
                            "figures": [],
                            "seconds": 0.1,
                            "date": "2026-11-01T00:00:00+00:00",
                            "source": "x.py:1",
                        }
                    }
                },
            }
        )
    )
    assert "before records carried their provenance" in (_outdated(book) or "")
    migrated = read(book.results_file)
    assert migrated.claims["io.ceiling"].model_dump(exclude_unset=True) == {"kind": "exact", "defined_at": "x.py:1"}
    assert migrated.run.seconds == {"io.ceiling": {"none": 0.1}}


def test_records_of_a_retired_claim_are_kept_but_not_counted(tmp_path: Path) -> None:
    book = _book(tmp_path / "book")
    book.run()
    data = json.loads(book.results_file.read_text())
    data["records"]["io.gone"] = {"none": {"status": "failed", "value": None, "figures": []}}
    book.results_file.write_text(json.dumps(data))
    book.run()
    results = read(book.results_file)
    assert "io.gone" in results.records
    assert results.counts({"io.ceiling"})["failed"] == 0 and results.counts()["failed"] == 1


def test_the_current_value_of_an_input_is_read_without_recording(tmp_path: Path) -> None:
    (tmp_path / "hw.toml").write_text(DATA.format(value=273))
    with books.with_data(tmp_path), inputs.recording() as reads:
        assert inputs.current("hw.toml", "memory_bandwidth") == 273
    assert reads == []


def test_a_setting_the_answer_depended_on_is_kept_in_the_record(tmp_path: Path) -> None:
    book = _book(tmp_path / "book")
    book.claims(
        "env",
        '''
from verified_book.authoring.inputs import setting
from verified_book.authoring.registry import claim


@claim("env.mode", kind="exact")
def mode():
    """A value that depends on a machine's setting."""
    return setting("BOOK_MODE", 3, "the environment")
''',
    )
    assert book.run().ret == 0
    record = json.loads(book.results_file.read_text())["records"]["env.mode"]["none"]
    assert record["status"] == "verified"
    assert record["inputs"] == [{"setting": "BOOK_MODE", "value": 3, "where": "the environment"}]


def test_a_backend_this_machine_lacks_leaves_no_skipped_record(tmp_path: Path) -> None:
    from verified_book.records.results import ResultsFile

    merged = ResultsFile(
        "m",
        records={
            "a.one": {"numpy": {"status": "verified"}, "mlx:gpu": {"status": "skipped"}},
            "a.two": {"mlx:gpu": {"status": "skipped"}},
        },
    )
    merged.merge(ResultsFile("m", run={"backends": {"numpy": "2.4", "mlx:gpu": None}}))
    assert {c: {b: r.model_dump(exclude_unset=True) for b, r in per.items()} for c, per in merged.records.items()} == {
        "a.one": {"numpy": {"status": "verified"}}
    }


def test_the_engines_own_code_is_not_part_of_a_claims_fingerprint(tmp_path: Path) -> None:
    """`vendor` and `exact` are the engine's: a change to them is pinned by the engine's tests, and
    does not make every record of every book outdated."""
    import inspect

    from verified_book.authoring.registry import Claim, Kind

    def ceiling() -> object:
        return inputs.exact(inputs.vendor("hw.toml", "memory_bandwidth"))

    claim = Claim("t.ceiling", Kind.EXACT, ceiling, "", defined_in="t.py", defined_line=1)
    sources = provenance._own_sources(claim.compute, provenance._package(ceiling), set())
    assert sources == [inspect.getsource(ceiling)]


@pytest.mark.slow
def test_a_fingerprint_is_the_same_in_every_process_and_checkout(tmp_path: Path) -> None:
    """Taken in a fresh interpreter, from another folder, with strings hashed another way, every claim's
    fingerprint is the one this process takes: a record's code is named the same wherever the book is
    checked or built, whatever order a set or a dict the code reaches was filled in."""
    import os
    import subprocess
    import sys

    root = ROOT
    script = (
        "import json; from pathlib import Path; from verified_book.engine.config import open_book, read_config; "
        "from verified_book.engine.provenance import code_fingerprint; "
        f"book = open_book(read_config(Path({str(root)!r}))); "
        "print(json.dumps({c.id: code_fingerprint(c) for c in book.registry}))"
    )
    there = {}
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert done.returncode == 0, done.stderr[-2000:]
        there[seed] = json.loads(done.stdout)
    with books.opened(root) as book:
        here = {c.id: provenance.code_fingerprint(c) for c in book.registry}
    assert len(here) > 500
    assert there["1"] == there["2"] == here


def test_a_tree_is_dirty_by_its_changes_but_not_by_the_results_a_run_writes(tmp_path: Path) -> None:
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "m.json").write_text("{}")
    (tmp_path / "page.md").write_text("one\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    (tmp_path / "results" / "m.json").write_text('{"a": 1}')
    commit, dirty = checkout.commit_of(tmp_path, (tmp_path / "results",))
    assert commit and len(commit) == 40 and dirty is False
    (tmp_path / "page.md").write_text("two\n")
    assert checkout.commit_of(tmp_path, (tmp_path / "results",))[1] is True


def test_the_runs_summary_counts_the_files_records_that_are_outdated(tmp_path: Path) -> None:
    book = _book(tmp_path / "book")
    book.claims(
        "more",
        '''
from verified_book.authoring.registry import claim


@claim("more.two", kind="exact")
def two():
    """Two."""
    return 2
''',
    )
    assert book.run().ret == 0
    (book.root / "data" / "hw.toml").write_text(DATA.format(value=280))
    run = book.run("-k", "more")  # io.ceiling is not rerun: its record is outdated now
    assert faults.summary_rows(run.output)["none"]["outdated"] == 1
    assert faults.summary_rows(book.run().output)["none"].get("outdated", 0) == 0


SOURCES = '''
import contextlib
import functools


def plain(x):
    return x + 1


@functools.cache
@contextlib.contextmanager
def decorated():
    yield 1


class Shape:
    """A class, read by its name."""

    def method(self):
        return 2


    # a comment inside the class
ratio = lambda a, b: a / b  # noqa: E731 - a lambda: the parse places none, inspect reads it
'''


def test_a_definition_s_source_is_what_inspect_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fingerprint reads each file once; it must give inspect's own text, or every record would read as outdated."""
    import importlib
    import inspect

    (tmp_path / "sources_sample.py").write_text(SOURCES)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("sources_sample")
    for obj in (module.plain, module.decorated, module.Shape, module.Shape.method, module.ratio):
        assert source_of(obj) == inspect.getsource(obj), obj
    assert source_of(len) is None


def test_every_definition_the_book_s_claims_reach_reads_as_inspect_reads_it() -> None:
    import inspect

    reached: dict[int, object] = {}

    def walk(fn: object, package: str) -> None:
        if id(fn) in reached or provenance._package(fn) != package:
            return
        reached[id(fn)] = fn
        read = provenance._read(fn)
        for target in (read.named + read.reached) if read else ():
            if not isinstance(target, provenance.Constant):
                walk(target, package)

    for c in REGISTRY:
        walk(c.compute, provenance._package(c.compute))
    assert len(reached) > 100
    differ = [obj for obj in reached.values() if source_of(obj) != inspect.getsource(obj)]  # type: ignore[arg-type]
    assert not differ


SNIPPET_CLAIMS = '''
from verified_book.authoring.registry import claim
from verified_book.engine.snippet_figures import snippet_figure


@claim("lab.ms", kind="measured", backends=("numpy",))
def ms(backend):
    """Milliseconds per call, as s.py prints them on this machine."""
    return snippet_figure("lab.ms")
'''


def test_a_figure_read_from_a_snippets_run_is_outdated_once_the_snippet_changes(tmp_path: Path) -> None:
    book = faults.SampleBook(tmp_path / "book")
    book.claims("lab", SNIPPET_CLAIMS)
    book.page("lab.md", "What s.py prints:\n\n```output s.py varies=1\ntook [1.25](claim:lab.ms) ms a call\n```\n")
    snippet = book.root / "book" / "snippets" / "s.py"
    snippet.parent.mkdir()
    snippet.write_text('print("took 1.25 ms a call")\n')
    assert book.run().ret == 0
    data = json.loads(book.results_file.read_text())
    record = data["records"]["lab.ms"]["numpy"]
    assert record["status"] == "verified"
    assert record["inputs"] == [
        {
            "snippet": "book/snippets/s.py",
            "sha256": record["inputs"][0]["sha256"],
            "where": "book/lab.md:4",
            "value": "1.25",
        }
    ]

    def outdated() -> str | None:
        try:
            book.forget_modules()
            with books.opened(book.root):
                return provenance.outdated_reason(
                    REGISTRY["lab.ms"],
                    ClaimMeta.model_validate(data["claims"]["lab.ms"]),
                    Record.model_validate(record),
                )
        finally:
            book.forget_modules()

    assert outdated() is None
    snippet.write_text('print("took 1.25 ms a call")  # the same line, from another program\n')
    assert outdated() == "computed from what book/snippets/s.py printed ('1.25'); the snippet has changed since"
    snippet.unlink()
    assert outdated() == "computed from what book/snippets/s.py printed; the book has no such snippet now"


PLACED = """\
import functools
from verified_book.authoring.registry import Registry, claim

PLACED = Registry()


def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)

    return wrapper


@claim("placed.plain", kind="exact", registry=PLACED)
def plain():
    return 1


@claim("placed.wrapped", kind="exact", registry=PLACED)
@traced
def wrapped():
    return 2
"""


def test_a_claim_is_placed_at_its_first_decorator_as_inspect_reads_it_wrapped_or_not(tmp_path: Path) -> None:
    """`defined_at`'s line comes off the code object; it must be the line `inspect` finds by reading the
    source, for a plain function and for one another decorator wraps."""
    (tmp_path / "placed.py").write_text(PLACED)
    spec = importlib.util.spec_from_file_location("placed", tmp_path / "placed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    placed: Registry = module.PLACED
    lines = PLACED.splitlines()
    for claim_id in ("placed.plain", "placed.wrapped"):
        claim = placed[claim_id]
        assert lines[claim.defined_line - 1].startswith(f'@claim("{claim_id}"'), claim.defined_at
        assert claim.defined_line == inspect.getsourcelines(claim.compute)[1]
