"""`--reading FILE[:KEY]` and `--changed`: a run narrowed by this machine's records, on a sample book."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest
from harness import books, faults
from harness.paths import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from verified_book.authoring import inputs
from verified_book.engine.selection import ReadingError, checked_reading

pytest_plugins = ["pytester"]

CLAIMS = '''
from fractions import Fraction
from verified_book.authoring.registry import claim
from verified_book.authoring.inputs import exact, vendor

@claim("spark.ceiling", kind="exact")
def spark_ceiling():
    """The DGX Spark's decode ceiling: its bandwidth over 16.4 GB."""
    return exact(vendor("hardware/dgx_spark.toml", "memory_bandwidth")) / Fraction("16.4")

@claim("spark.capacity", kind="exact")
def spark_capacity():
    """The DGX Spark's memory."""
    return exact(vendor("hardware/dgx_spark.toml", "memory_capacity"))

@claim("ryzen.ceiling", kind="exact")
def ryzen_ceiling():
    """The Ryzen's decode ceiling."""
    return exact(vendor("hardware/ryzen_ai_max.toml", "memory_bandwidth")) / Fraction("16.4")

@claim("lib.square", kind="library", backends=("numpy",))
def square(backend):
    """3 squared, as the library computes it."""
    return int((backend.tensor([3]) ** 2).sum())
'''

PAGE = (
    "The Spark reads [16.6](claim:spark.ceiling) tokens/s from [128](claim:spark.capacity) GB; the Ryzen "
    "[15.6](claim:ryzen.ceiling); a square [9](claim:lib.square).\n"
)


@pytest.fixture
def book(pytester: pytest.Pytester) -> pytest.Pytester:
    return faults.sample_book(pytester, CLAIMS, PAGE, "sample.py")


run = faults.run_book


def _results(pytester: pytest.Pytester) -> tuple[Path, dict]:
    (path,) = (pytester.path / "results").glob("*.json")
    return path, json.loads(path.read_text())


FIGURE_ITEM = re.compile(r"page\.md::line [^(]*\(([a-z0-9_.:]+)\)")  # the figure item's name, as -v shows it


def _figures_run(result: pytest.RunResult) -> set[str]:
    """The claims whose figures the run checked, from the -v lines (not the summary's, whose message follows)."""
    return {
        found[1].replace("::", ".")
        for line in result.outlines
        if line.startswith("book/page.md::") and ("PASSED" in line or "FAILED" in line)
        if (found := FIGURE_ITEM.search(line))
    }


def _set_bandwidth(pytester: pytest.Pytester, value: int, was: int = 273) -> None:
    path = pytester.path / "data" / "hardware" / "dgx_spark.toml"
    text = path.read_text()
    assert f"value = {was}\n" in text
    path.write_text(text.replace(f"value = {was}\n", f"value = {value}\n").replace(f"{was} GB/s", f"{value} GB/s"))


def test_reading_selects_the_claims_that_read_the_input_and_their_figures(book: pytest.Pytester) -> None:
    first = run(book, "-v", "--reading", "hardware/dgx_spark.toml:memory_bandwidth")
    assert first.ret == 0
    assert _figures_run(first) == {"spark.ceiling", "spark.capacity", "ryzen.ceiling", "lib.square"}
    first.stdout.fnmatch_lines(["*4 claims with no usable record here, so what they read is not known: selected too*"])
    key = run(book, "-v", "--reading", "hardware/dgx_spark.toml:memory_bandwidth")
    assert _figures_run(key) == {"spark.ceiling"}, key.stdout.str()
    # what it selects is arithmetic: the backends are taken as the records found them, no library detected
    key.stdout.fnmatch_lines(["backends: numpy * (as recorded; not loaded)"])
    whole = run(book, "-v", "--reading", "data/hardware/dgx_spark.toml")
    assert _figures_run(whole) == {"spark.ceiling", "spark.capacity"}
    _set_bandwidth(book, 280)
    stale = run(book, "-v", "--reading", "hardware/dgx_spark.toml:memory_bandwidth")
    assert stale.ret == 1 and _figures_run(stale) == {"spark.ceiling"}
    stale.stdout.fnmatch_lines(["*figure 16.6 (spark.ceiling) is stale in exact arithmetic: computed 17.07*"])


def test_a_mistyped_reading_is_refused_naming_what_is_near_with_records_or_without(book: pytest.Pytester) -> None:
    """Records can only say that no claim read a name that is not there: the run would check nothing, or, on a
    machine with no records yet, everything. The name is looked up in the data instead."""
    refused = {
        "hardware/dgx_spark.toml:bandwidth": "ERROR: --reading hardware/dgx_spark.toml:bandwidth: "
        "data/hardware/dgx_spark.toml has no key 'bandwidth'; did you mean 'memory_bandwidth'?",
        "hardware/dgx.toml": "ERROR: --reading hardware/dgx.toml: data/hardware/dgx.toml is no data file of the "
        "book; expected a file relative to data/; did you mean hardware/dgx_spark.toml?",
        "hardware/dgx_spark.toml:memory_bandwidth.value": "ERROR: --reading hardware/dgx_spark.toml:memory_bandwidth"
        ".value: 'memory_bandwidth' is one entry of data/hardware/dgx_spark.toml (its value, unit and source), "
        "read whole; name it as hardware/dgx_spark.toml:memory_bandwidth",
    }
    for records in ("none yet", "a full run's"):
        if records == "a full run's":
            assert run(book).ret == 0
        for argument, said in refused.items():
            result = run(book, "--reading", argument)
            assert result.ret == pytest.ExitCode.USAGE_ERROR, (records, argument, result.stdout.str())
            assert said in result.stderr.str(), (records, result.stderr.str())
            assert "passed" not in result.stdout.str(), "nothing is checked"


@contextlib.contextmanager
def _the_book_s_data() -> Iterator[None]:
    with books.with_data(ROOT / "claims" / "data", "claims/data"):
        yield


def _names(node: Any, prefix: str = "") -> Iterator[str]:
    """Every key a reading may name in a parsed TOML file: each table, down to an entry (a table with a value);
    a quoted key holding a dot is no input's, since a claim names its entry by a dotted path."""
    for key, value in node.items():
        if isinstance(value, dict) and "." not in key:
            yield prefix + key
            if "value" not in value:
                yield from _names(value, f"{prefix}{key}.")


with _the_book_s_data():
    READABLE = sorted(
        f"{file}:{name}"
        for file in inputs.data_files()
        for name in (inputs.table(file) if file.endswith(".json") else _names(inputs.table(file)))
    )


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(READABLE), st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=6))
def test_every_key_of_the_book_s_data_is_a_reading_and_a_key_beside_one_is_refused(name: str, extra: str) -> None:
    file, _, key = name.partition(":")
    with _the_book_s_data():
        assert checked_reading(name).key == key
        assert checked_reading(f"claims/data/{name}").file == file
        for typo in (f"{name}{extra}", f"{file}x:{key}"):
            if typo.partition(":")[0] in inputs.data_files() and typo in READABLE:
                continue
            with pytest.raises(ReadingError) as refused:
                checked_reading(typo)
            assert str(refused.value).startswith(f"--reading {typo}: ")
            assert "claims/data/" in str(refused.value)


def test_reading_and_changed_leave_the_tests_of_anything_but_the_book(book: pytest.Pytester) -> None:
    """An author's `--reading` or `--changed` from the root selects among the book's checks: the project's other
    tests, which the ini's testpaths collect too, are not even imported; named on the command line, they are
    collected and deselected, since they read no record; a plain run runs them."""
    book.makeini("[pytest]\ntestpaths = book.toml book tests\naddopts = -p no:cacheprovider -ra\n")
    (book.path / "tests").mkdir()
    imported = book.path / "imported.log"
    (book.path / "tests" / "test_engine_own.py").write_text(
        f"with open({str(imported)!r}, 'a') as log:\n    log.write('imported\\n')\n\n\n"
        "def test_the_engine_itself():\n    pass\n"
    )
    plain = run(book, "-v")
    assert plain.ret == 0 and "tests/test_engine_own.py::test_the_engine_itself PASSED" in plain.stdout.str()
    assert imported.read_text() == "imported\n"
    for narrowed in (["--reading", "hardware/dgx_spark.toml:memory_bandwidth"], ["--changed"]):
        imported.write_text("")
        result = run(book, "-v", *narrowed)
        assert result.ret == 0, result.stdout.str()
        assert "test_the_engine_itself" not in result.stdout.str(), narrowed
        assert imported.read_text() == "", f"{narrowed} imported the engine's tests"
        named = run(book, "-v", *narrowed, "book.toml", "book", "tests/test_engine_own.py")
        assert named.ret == 0 and "test_the_engine_itself" not in named.stdout.str(), named.stdout.str()
        assert re.search(r"\b\d+ deselected", named.stdout.str()), narrowed
        assert imported.read_text() == "imported\n", "a test named on the command line is collected, then deselected"


@pytest.mark.slow
def test_changed_reruns_only_what_moved_and_reports_the_rest_unchanged_with_its_date(book: pytest.Pytester) -> None:
    assert run(book).ret == 0
    path, first = _results(book)
    dates = first["run"]["dates"]
    nothing = run(book, "-v", "--changed")
    assert nothing.ret == 0 and _figures_run(nothing) == set()
    nothing.stdout.fnmatch_lines(
        [
            "--changed: 0 claim × backend checks rerun",
            # spark.capacity returns its vendor figure unchanged: cited (verified_book.engine.evidence.evidence)
            f"--changed: 4 records unchanged since this machine's last run and not checked now (1 cited, 3 verified; "
            f"last checked {dates['spark.ceiling']['none']}): they keep their recorded status and date",
            f"  unchanged spark.ceiling[[]none]: verified as of {dates['spark.ceiling']['none']}",
        ]
    )
    assert "verified now" not in nothing.stdout.str()

    # the printed text of a figure
    page = book.path / "book" / "page.md"
    page.write_text(PAGE.replace("[128]", "[128.0]"))
    text = run(book, "-v", "--changed")
    assert _figures_run(text) == {"spark.capacity"}, text.stdout.str()
    text.stdout.fnmatch_lines(
        [
            "--changed: 0 claim × backend checks rerun",
            "--changed: 1 checks judged again against the values this machine's records keep (computed "
            f"{dates['spark.capacity']['none']}; *): nothing computed for them",
            "*rejudged  spark.capacity[[]none]: a figure's text or place changed since the record "
            "(book/page.md:1: 128.0)*",
        ]
    )
    _, rejudged = _results(book)
    assert rejudged["run"]["dates"]["spark.capacity"]["none"] == dates["spark.capacity"]["none"]  # computed then
    assert rejudged["records"]["spark.capacity"]["none"]["figures"][0]["printed"] == "128.0"  # judged now
    assert run(book, "--changed").ret == 0  # recorded now: nothing moved
    assert _figures_run(run(book, "-v", "--changed")) == set()

    # an input
    _set_bandwidth(book, 280)
    moved = run(book, "-v", "--changed")
    assert moved.ret == 1 and _figures_run(moved) == {"spark.ceiling"}
    moved.stdout.fnmatch_lines(
        ["*rerun     spark.ceiling[[]none]: computed from memory_bandwidth = 273; the book now says 280*"]
    )
    # a record that did not hold is rerun until it holds
    assert _figures_run(run(book, "-v", "--changed")) == {"spark.ceiling"}
    _set_bandwidth(book, 273, was=280)

    # the library's version
    path, data = _results(book)
    data["records"]["lib.square"]["numpy"]["version"] = "1.0.0"
    path.write_text(json.dumps(data))
    version = run(book, "-v", "--changed")
    assert "lib.square" in _figures_run(version), version.stdout.str()
    version.stdout.fnmatch_lines(["*rerun     lib.square[[]numpy]: recorded on 1.0.0; this machine has * now*"])
    _, after = _results(book)
    assert after["run"]["dates"]["ryzen.ceiling"]["none"] == dates["ryzen.ceiling"]["none"]  # not rerun, date kept

    # the version of another library the value was computed with: numpy's bfloat16 is ml_dtypes'
    path, data = _results(book)
    assert set(data["records"]["lib.square"]["numpy"]["uses"]) == {"ml_dtypes"}
    assert "uses" not in data["records"]["spark.ceiling"]["none"]  # arithmetic: no library
    data["records"]["lib.square"]["numpy"]["uses"]["ml_dtypes"] = "0.0.1"
    path.write_text(json.dumps(data))
    companion = run(book, "-v", "--changed")
    assert _figures_run(companion) == {"lib.square"}, companion.stdout.str()
    companion.stdout.fnmatch_lines(
        ["*rerun     lib.square[[]numpy]: computed with ml_dtypes 0.0.1, this machine has * now*"]
    )
    # a record from before records kept them does not pass for one made with this machine's
    path, data = _results(book)
    del data["records"]["lib.square"]["numpy"]["uses"]
    path.write_text(json.dumps(data))
    older = run(book, "-v", "--changed")
    assert _figures_run(older) == {"lib.square"}, older.stdout.str()
    older.stdout.fnmatch_lines(
        [
            "*rerun     lib.square[[]numpy]: recorded before records kept the versions of the other libraries it "
            "computes with (ml_dtypes)*"
        ]
    )
    assert _figures_run(run(book, "-v", "--changed")) == set()


def test_changed_says_why_it_checks_everything_no_records_yet_or_records_that_do_not_read(
    book: pytest.Pytester,
) -> None:
    first = run(book, "--changed")
    assert first.ret == 0 and "--changed: this machine has no records yet: everything is checked" in first.stdout.str()
    path, _ = _results(book)
    path.write_text(path.read_text()[:200])
    torn = run(book, "--changed")
    assert torn.ret == 0
    torn.stdout.fnmatch_lines([f"--changed: this machine's records do not read ({path}:*): everything is checked"])
    assert "no records yet" not in torn.stdout.str()
    (aside,) = path.parent.glob(f"{path.name}.corrupt-*")  # kept, and a new file holds this run's records
    assert len(aside.read_text()) == 200 and _results(book)[1]["records"]


@pytest.mark.slow  # pytest and two xdist workers
def test_under_xdist_changed_still_reports_each_record_it_leaves_unchanged(tmp_path: Path) -> None:
    """The selection is made where the items are collected, in each worker: the controller, which prints the
    summary, says it from what a worker hands back, with every record not rerun and its date."""
    book = faults.SampleBook(tmp_path / "changed")
    book.claims(
        "work",
        "from verified_book.authoring.registry import claim\n\n\n"
        '@claim("work.plain.{i}", kind="exact", over={"i": (0, 1)})\n'
        "def plain(i):\n    return i\n",
    )
    book.page("page.md", "Zero [0](claim:work.plain.0), one [1](claim:work.plain.1).\n")
    assert book.run().ret == 0
    (book.root / "book" / "page.md").write_text("Zero [0](claim:work.plain.0), one [1.0](claim:work.plain.1).\n")
    parallel = book.run_apart("-n", "2", "-v", "--changed", absent=("torch", "mlx"))
    assert parallel.ret == 0, parallel.output[-3000:]
    for said in (
        "--changed: 0 claim × backend checks rerun",
        "--changed: 1 checks judged again against the values this machine's records keep",
        "--changed: 1 records unchanged since this machine's last run and not checked now (1 verified; last checked",
        "  rejudged  work.plain.1[none]: a figure's text or place changed since the record (book/page.md:1: 1.0)",
        "  unchanged work.plain.0[none]: verified as of ",
    ):
        assert said in parallel.output, (said, parallel.output[-3000:])


def test_the_default_run_stays_complete(book: pytest.Pytester) -> None:
    run(book)
    assert _figures_run(run(book, "-v")) == {"spark.ceiling", "spark.capacity", "ryzen.ceiling", "lib.square"}


COUNTED = (
    CLAIMS
    + """
import os

@claim("lib.cube", kind="library", backends=("numpy",))
def cube(backend):
    \"\"\"2 cubed, as the library computes it; each computation adds a line to the file COMPUTED_LOG names.\"\"\"
    with open(os.environ["COMPUTED_LOG"], "a") as log:
        log.write("cube\\n")
    return int((backend.tensor([2]) ** 3).sum())
"""
)


@pytest.mark.slow
def test_changed_judges_an_edited_figure_against_its_record_and_computes_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The author's loop: a figure edited on a page is judged against the value this machine's record keeps,
    as long as the claim's code, its inputs and the library's version are those of the record; the library
    is not loaded for it, and the record keeps the date its value was computed on."""
    log = pytester.path / "computed.log"
    monkeypatch.setenv("COMPUTED_LOG", str(log))
    book = faults.sample_book(pytester, COUNTED, PAGE + "A cube: [8](claim:lib.cube).\n", "sample.py")
    assert run(book).ret == 0 and log.read_text() == "cube\n"
    _, first = _results(book)
    computed_on = first["run"]["dates"]["lib.cube"]["numpy"]
    page = book.path / "book" / "page.md"

    page.write_text(page.read_text().replace("[8]", "[8.0]"))
    same = run(book, "-v", "--changed", "book/page.md")  # the page alone: no claim is collected on a backend
    assert same.ret == 0 and _figures_run(same) == {"lib.cube"}, same.stdout.str()
    same.stdout.fnmatch_lines(["backends: numpy * (as recorded; not loaded)", "*rejudged  lib.cube[[]numpy]: *"])
    assert "torch" not in same.stdout.str().split("backends: ")[1].splitlines()[0], "no other library is loaded"
    page.write_text(page.read_text().replace("[8.0]", "[9]"))
    stale = run(book, "--changed", "book/page.md")
    assert stale.ret == 1
    stale.stdout.fnmatch_lines(
        [f"*figure 9 (lib.cube) is stale on numpy * (this machine's record of {computed_on}): computed 8*"]
    )
    assert log.read_text() == "cube\n", "no run after the first computed the cube"
    _, after = _results(book)
    assert after["run"]["dates"]["lib.cube"]["numpy"] == computed_on
    assert after["records"]["lib.cube"]["numpy"]["status"] == "stale"

    # the library's version moved: the recorded value no longer speaks, the claim computes again
    path, data = _results(book)
    data["records"]["lib.cube"]["numpy"]["version"] = "1.0.0"
    path.write_text(json.dumps(data))
    moved = run(book, "-v", "--changed")
    moved.stdout.fnmatch_lines(["*rerun     lib.cube[[]numpy]: recorded on 1.0.0; this machine has * now*"])
    assert log.read_text() == "cube\ncube\n"
