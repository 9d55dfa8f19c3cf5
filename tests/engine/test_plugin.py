"""The pytest plugin end to end, on a small sample book run inside this run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib

import pytest
from harness import faults
from harness.distributions import foreign_plugins

from verified_book.engine.machine import fingerprint, identify
from verified_book.vocabulary import Status

pytest_plugins = ["pytester"]

CLAIMS = '''
from fractions import Fraction
from verified_book.authoring.registry import claim

@claim("arith.ratio", kind="exact")
def ratio():
    """A decode ceiling: 273 GB/s over 16.4 GB."""
    return Fraction(273) / Fraction("16.4")

@claim("arith.square.{n}", kind="library", over={"n": (2, 3)}, backends=("numpy", "torch:cpu", "torch:cuda"))
def square(backend, n):
    """n squared, as the library computes it."""
    return int((backend.tensor([n]) ** 2).sum())

@claim("hw.vram", kind="measured", hardware="rtx5080")
def vram(backend):
    """The VRAM of the machine's GPU."""
    return 16
'''

PAGE = "The ceiling is [16.6](claim:arith.ratio) tokens/s and [4](claim:arith.square.2) is a square.\n"


@pytest.fixture
def book(pytester: pytest.Pytester) -> pytest.Pytester:
    return faults.sample_book(pytester, CLAIMS, PAGE, "arith.py")


run = faults.run_book


def _records(pytester: pytest.Pytester) -> dict:
    (path,) = (pytester.path / "results").glob("*.json")
    return json.loads(path.read_text())["records"]


def test_a_sound_book_passes_and_is_recorded(book: pytest.Pytester) -> None:
    result = run(book)
    assert result.ret == 0 and result.parseoutcomes().get("failed", 0) == 0
    result.stdout.fnmatch_lines(
        ["*verified book*", "backend*verified*stale*failed*disputed*", "none*", "backend*skipped*", "results: *"]
    )
    records = _records(book)
    assert records["arith.ratio"]["none"]["status"] == "verified"
    assert records["arith.square.2"]["numpy"]["figures"][0] == {
        "file": "book/page.md",
        "line": 1,
        "printed": "4",
        "stated": "4",
        "status": "verified",
    }


def test_a_stale_figure_names_place_claim_printed_and_computed(book: pytest.Pytester) -> None:
    (book.path / "book" / "page.md").write_text(PAGE.replace("16.6", "16.7"))
    result = run(book)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*book/page.md:1: figure 16.7 (arith.ratio) is stale in exact arithmetic: computed 16.6463*"]
    )
    assert _records(book)["arith.ratio"]["none"]["status"] == "stale"


def test_the_rewrite_option_puts_a_stale_figure_back_and_nothing_else(book: pytest.Pytester) -> None:
    page = book.path / "book" / "page.md"
    page.write_text(PAGE.replace("16.6", "16.9") + "Untouched: [4](claim:arith.square.2).\n")
    rewrite = run(book, "-q", "--rewrite-stale-figures")
    rewrite.stdout.fnmatch_lines(["rewrote 1 stale figure(s), judged again as rewritten: book/page.md:1 (16.9 → 16.6)"])
    assert (
        rewrite.ret == 0 and rewrite.parseoutcomes().get("rewritten") == 1 and "failed" not in rewrite.parseoutcomes()
    )
    assert _records(book)["arith.ratio"]["none"]["figures"][0]["printed"] == "16.6"  # recorded as rewritten
    assert page.read_text() == PAGE + "Untouched: [4](claim:arith.square.2).\n"
    assert run(book).ret == 0


def _profiles() -> dict[str, dict]:
    return {p.stem: tomllib.loads(p.read_text(encoding="utf-8")) for p in sorted(faults.PROFILES.glob("*.toml"))}


def _expect_rtx5080_selection(result: pytest.RunResult, markers: tuple[str, ...]) -> None:
    """`-m rtx5080` passes on every machine: the RTX 5080's claim runs where the machine is one, and
    is skipped with what the machine is everywhere else."""
    assert result.ret == 0 and result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()
    assert "passed" in result.stdout.str()
    skip_line = "*needs Desktop with an NVIDIA GeForce RTX 5080 (rtx5080); this machine is *"
    if "rtx5080" in markers:
        assert "needs Desktop with an NVIDIA GeForce RTX 5080" not in result.stdout.str()
    else:
        result.stdout.fnmatch_lines([skip_line])


def test_hardware_selection_skips_with_what_this_machine_is(book: pytest.Pytester) -> None:
    _expect_rtx5080_selection(run(book, "-m", "rtx5080"), identify(fingerprint()).markers)


@pytest.mark.parametrize("marker", sorted(_profiles()))
def test_the_engine_passes_on_every_profiled_machine(book: pytest.Pytester, marker: str) -> None:
    """A run fingerprinted as each of the book's machines (through the public hook) passes, selects
    that machine's items with `-m <marker>`, and runs the hardware-bound claim only on its machine."""
    fields = faults.profile_fingerprint(_profiles()[marker]["match"])
    book.makeconftest(faults.machine_conftest(fields))
    result = run(book, "-m", f"{marker} or rtx5080", "-rs")
    assert result.ret == 0 and result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()
    result.stdout.fnmatch_lines([f"machine: *matches {marker}*"])
    records = _records(book)
    assert records["arith.ratio"]["none"]["status"] == "verified"
    vram = {b: r["status"] for b, r in records.get("hw.vram", {}).items()}
    if marker == "rtx5080":
        assert vram and set(vram.values()) <= {"verified", "skipped"} and "verified" in vram.values(), vram
        assert "needs Desktop with an NVIDIA GeForce RTX 5080" not in result.stdout.str()
    else:
        assert "verified" not in vram.values(), vram
        result.stdout.fnmatch_lines(["*needs Desktop with an NVIDIA GeForce RTX 5080 (rtx5080); this machine is *"])


def test_two_subsets_leave_one_file_with_both(book: pytest.Pytester) -> None:
    run(book, "-k", "ratio")
    run(book, "-k", "square")
    records = _records(book)
    assert {"arith.ratio", "arith.square.2"} <= set(records)


def test_unknown_claim_and_unbound_number_fail_with_place(book: pytest.Pytester) -> None:
    (book.path / "book" / "page.md").write_text(PAGE + "A typo [4](claim:arith.sqare.2) and 17 unbound.\n")
    result = run(book)
    result.stdout.fnmatch_lines(
        [
            "*book/page.md:2: figure 4 binds to unknown claim 'arith.sqare.2'; did you mean arith.square.2*",
            "*book/page.md:2:*: number 17 is bound to no claim*or add it to book/allowlist.toml with a reason",
        ]
    )


def test_the_unbound_number_message_names_the_books_own_allow_list(book: pytest.Pytester) -> None:
    """A book whose allow-list is elsewhere (book.toml's `allowlist`) is told to add the number there."""
    toml = book.path / "book.toml"
    toml.write_text(toml.read_text().replace("[book]\n", '[book]\nallowlist = "excused/numbers.toml"\n'))
    (book.path / "book" / "page.md").write_text(PAGE + "And 17 unbound.\n")
    result = run(book)
    result.stdout.fnmatch_lines(
        [
            "*book/page.md:2:*: number 17 is bound to no claim: bind it as *"
            "or add it to excused/numbers.toml with a reason"
        ]
    )
    assert "book/allowlist.toml" not in result.stdout.str()


def test_a_book_that_declares_its_backends_computes_and_reports_on_those_alone(book: pytest.Pytester) -> None:
    """book.toml's `backends = ["numpy"]`: the summary has rows for no other backend, and the run
    computes nowhere else (a numpy-only book is not told that torch, MLX and JAX are "not here")."""
    toml = book.path / "book.toml"
    toml.write_text(toml.read_text().replace("[book]\n", '[book]\nbackends = ["numpy"]\n'))
    result = run(book)
    assert result.ret == 0, result.stdout.str()
    lines = result.stdout.lines
    header = next(i for i, line in enumerate(lines) if line.startswith("backend ") and "selected" in line)
    rows = [line.split()[0] for line in lines[header + 1 : header + 4]]
    assert rows == ["none", "numpy", "all"], result.stdout.str()
    assert set(_records(book)["arith.square.2"]) == {"numpy"}


def test_a_backend_the_engine_does_not_know_is_named_with_those_it_does(book: pytest.Pytester) -> None:
    toml = book.path / "book.toml"
    toml.write_text(toml.read_text().replace("[book]\n", '[book]\nbackends = ["numpy", "tensorflow"]\n'))
    result = run(book)
    assert result.ret != 0
    assert (
        "book.toml: [book] backends: unknown backend(s) 'tensorflow'; expected libraries (numpy, torch, mlx, jax)"
        in result.stderr.str() + result.stdout.str()
    )


def test_a_claim_that_raises_fails_alone(book: pytest.Pytester) -> None:
    (book.path / "sample_claims" / "broken.py").write_text(
        "from verified_book.authoring.registry import claim\n\n@claim('broken.one', kind='exact')\ndef one():\n    "
        "return 1 / 0\n"
    )
    result = run(book)
    result.stdout.fnmatch_lines(["*broken.one*raised ZeroDivisionError*"])
    records = _records(book)
    assert records["broken.one"]["none"]["status"] == "failed"
    assert records["arith.ratio"]["none"]["status"] == "verified"


def test_a_machine_selection_runs_the_snippets_and_records_their_output(book: pytest.Pytester) -> None:
    """`-m <machine>` (the fleet's and verify-cuda's selection) runs the snippets as well, so their output
    on that machine lands in its results file."""
    snippets = book.path / "book" / "snippets"
    snippets.mkdir()
    (snippets / "hello.py").write_text("print('hello from this machine')\n")
    page = book.path / "book" / "page.md"
    page.write_text(page.read_text() + "\n```output hello.py\nhello from this machine\n```\n")
    result = run(book, "-m", "rtx5080")
    assert result.ret == 0, result.stdout.str()
    (path,) = (book.path / "results").glob("*.json")
    outputs = json.loads(path.read_text())["run"]["outputs"]
    assert outputs["hello.py"]["text"] == "hello from this machine\n"


def test_the_summary_counts_the_selection_and_what_would_run_on_the_marked_machine(book: pytest.Pytester) -> None:
    result = run(book, "-m", "rtx5080")
    out = result.stdout.str()
    headers = [line for line in out.splitlines() if line.startswith("backend ")]  # a block more where 100 columns end
    columns = [word for header in headers for word in header.split()[1:]]
    assert columns == ["selected", *(s.value for s in Status), "not", "computable", "here"]
    for column in ("selected:", "verified:", "skipped:", "not computable here:"):
        assert f"  {column}" in out, "a legend says what each column counts"
    line = next(line for line in out.splitlines() if line.startswith("-m rtx5080:"))
    # the selection: hw.vram on numpy and torch:cpu (rtx5080 runs numpy, torch:cpu, torch:cuda...) and
    # every square claim on torch:cuda, none of which run on this machine
    selected, ran, there = map(int, re.findall(r"(\d+) checks selected, (\d+) ran here; (\d+) would run", line)[0])
    assert selected == ran + there and there > 0


def test_the_figures_line_counts_each_figure_once(book: pytest.Pytester) -> None:
    result = run(book)
    result.stdout.fnmatch_lines(
        [
            "figures (all 2 bound figures selected): 2 verified, 0 cited, 0 premise, 0 unsourced, 0 stale, 0 failed, "
            "0 disputed, 0 reference, 0 not computable here"
        ]
    )


# Start-up: what a run imports is what its selection needs.

#: libraries a run of the sample book imports only for a claim selected on them
LIBRARIES = ("torch", "mlx", "jax", "transformers", "hypothesis")


def _imports(pytester: pytest.Pytester, *args: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """The modules loaded once a fresh `pytest *args` in the sample book is done, and its run."""
    script = (
        "import sys, pytest\n"
        "code = pytest.main(sys.argv[1:])\n"
        "print('MODULES', ' '.join(sorted(sys.modules)))\n"
        "sys.exit(code)\n"
    )
    # plugins this machine has beyond the project's own are left out: what they import is not the engine's
    foreign = [arg for name in foreign_plugins() for arg in ("-p", f"no:{name}")]
    # and hypothesis's own, which imports hypothesis at every run's end where the dev extra installs it
    foreign += ["-p", "no:hypothesispytest"]
    done = subprocess.run(
        [sys.executable, "-c", script, "--no-results", *foreign, *args],
        cwd=pytester.path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(pytester.path), *sys.path])},
        capture_output=True,
        text=True,
        timeout=180,
    )
    (listed,) = [line for line in done.stdout.splitlines() if line.startswith("MODULES ")]
    return set(listed.split()[1:]), done


def _top_level(names: set[str]) -> set[str]:
    return {name.split(".")[0] for name in names}


@pytest.mark.slow
def test_help_opens_no_book_and_imports_no_backend(book: pytest.Pytester) -> None:
    names, done = _imports(book, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--no-results" in done.stdout, "the plugin's options are registered"
    assert "sample_claims" not in _top_level(names), "configure registers options only: the topics are not loaded"
    assert not _top_level(names) & set(LIBRARIES)


@pytest.mark.slow
def test_a_page_edit_checked_with_changed_loads_no_library(book: pytest.Pytester) -> None:
    """The author's fast check: after a run that recorded the page, an edited figure is judged against the
    recorded values in a fresh process that imports neither numpy nor torch (nor MLX, JAX, hypothesis)."""
    assert run(book).ret == 0
    computed = len(_records(book)["arith.square.2"])  # numpy and torch:cpu, and torch:cuda where there is one
    (book.path / "book" / "page.md").write_text(PAGE.replace("[4]", "[4.0]"))
    names, done = _imports(book, "--changed", "book/page.md")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    judged = f"{computed} checks judged again against the values this machine's records keep"
    assert computed >= 2 and judged in done.stdout, done.stdout[-3000:]
    loaded = _top_level(names) & {*LIBRARIES, "numpy", "ml_dtypes", "sympy"}
    assert not loaded, sorted(loaded)


@pytest.mark.slow
def test_a_page_of_exact_claims_imports_no_backend_library(book: pytest.Pytester) -> None:
    """A backend's library loads only for a claim selected on it; the machine's fingerprint needs none, and
    hypothesis's plugin, which would import hypothesis at the end of every run, is let go."""
    (book.path / "book" / "ratio.md").write_text("The ceiling is [16.6](claim:arith.ratio) tokens/s.\n")
    names, done = _imports(book, "book/ratio.md")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "sample_claims.arith" in names, "the book's topics are loaded for the run"
    assert not _top_level(names) & set(LIBRARIES), "nothing selected computes on a library"
    names, done = _imports(book, "book/page.md")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "torch" in _top_level(names), "the page's square is computed on torch too"


def test_a_keyword_naming_a_line_as_the_item_reads_is_told_the_word_it_answers_to(book: pytest.Pytester) -> None:
    result = run(book, "-k", "line 1 and ratio")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*-k 'line 1 and ratio' does not parse (at column 6: *): a figure's item answers to the word line_N*"
            "try -k 'line_1 and ratio'"
        ]
    )
    assert run(book, "-k", "line_1 and ratio").ret == 0
