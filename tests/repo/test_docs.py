"""The engine's docs say what the code says: each fact a page prints is read from the code when the
docs are built (docs/hooks.py), and these tests hold each reading to its source."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from harness.paths import ROOT
from harness.scripts import script_module

DOCS = ROOT / "docs"


hooks = script_module(DOCS / "hooks.py", "docs_hooks")


def test_every_fact_a_page_asks_for_exists() -> None:
    asked = {
        (page.name, name) for page in DOCS.glob("*.md") for name in hooks.PLACEHOLDER.findall(page.read_text("utf-8"))
    }
    assert asked, "no page of docs/ asks for a fact"
    assert [where for where in asked if where[1] not in hooks.FACTS] == []
    assert {name for _, name in asked} == set(hooks.FACTS), "a fact is generated that no page prints"


def test_an_unknown_fact_fails_with_its_place() -> None:
    with pytest.raises(hooks.FactMissing, match=r"docs/x\.md:3: no fact named 'jbos'; expected one of jobs, "):
        hooks.fill("# X\n\n<!-- vb:jbos -->\n", "docs/x.md")


def test_the_jobs_are_those_verified_book_help_lists() -> None:
    help_text = "usage: verified-book JOB [ARGS]\n\njobs:\n  verified-book verify [PYTEST ARGS]\n      the checks,\n"
    help_text += "      then the site\n  verified-book init [FOLDER]\n      a new book\n\nmore prose\n"
    assert hooks.parse_jobs(help_text) == [
        ("verify [PYTEST ARGS]", "the checks, then the site"),
        ("init [FOLDER]", "a new book"),
    ]
    command = Path(sys.executable).with_name("verified-book")
    listed = subprocess.run([str(command), "--help"], capture_output=True, text=True, check=True).stdout
    table = hooks.jobs()
    for call in re.findall(r"^  verified-book (\S+)", listed, re.MULTILINE):
        assert f"| `{call}" in table, f"docs: the job {call!r} of `verified-book --help` is missing"


def test_the_options_are_the_groups_in_pytest_help() -> None:
    help_text = (
        "verified book:\n  --changed             Check only what changed\n                        since the records.\n"
        "  --rewrite-stale-figures\n                        Rewrite them.\n\nother:\n  --x  y\n"
    )
    assert hooks.parse_options(help_text) == [
        ("--changed", "Check only what changed since the records."),
        ("--rewrite-stale-figures", "Rewrite them."),
    ]
    with pytest.raises(hooks.FactMissing, match="no group 'verified book'"):
        hooks.parse_options("other:\n  --x  y\n")


def test_the_markers_are_the_book_s_and_not_pytest_s_or_the_suite_s() -> None:
    help_text = "@pytest.mark.exact: arithmetic\n@pytest.mark.skip(reason=None): skip it\n@pytest.mark.exact: again\n"
    assert hooks.parse_markers(help_text) == {"exact": "arithmetic", "skip": "skip it"}


@pytest.mark.slow
def test_the_markers_listed_are_those_the_book_s_plugin_declares() -> None:
    found = hooks.book_markers()
    kinds = ("exact", "given", "library", "measured", "quoted")
    hardware = [path.stem for path in (ROOT / "claims" / "data" / "hardware").glob("*.toml")]
    assert set(kinds) | set(hardware) | {"cpu", "cuda"} <= set(found)
    assert not {"skip", "parametrize", "browser", "slow", "hypothesis"} & set(found)


def test_every_extra_of_pyproject_is_listed() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]
    table = hooks.extras()
    assert [name for name in extras if f"| `{name}` |" not in table] == []


def test_every_status_is_listed_with_its_mark_and_meaning() -> None:
    from verified_book.vocabulary import WORDS

    table = hooks.statuses()
    for word in WORDS.values():
        assert f"| {word.glyph} {word.shape} | **{word.label}** | {hooks.cell(word.meaning)} |" in table


def test_the_layers_are_the_import_contract_s_in_its_order() -> None:
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["importlinter"]["contracts"][0]
    rows = hooks.layer_rows()
    assert len(rows) == len(contract["layers"])
    for row, layer in zip(rows, contract["layers"], strict=True):
        for dotted in layer.split("|"):
            assert dotted.strip().rsplit(".", 1)[-1] in row[0], f"{layer} is not in the row {row}"
    engine = next(row for row in rows if row[0] == "`engine/`")
    for module in (ROOT / "verified_book" / "engine").glob("*.py"):
        if module.stem != "__init__":
            assert f"`{module.stem}`" in engine[1]


def test_the_schema_page_gives_the_schema_s_version_and_every_definition() -> None:
    schema = json.loads((DOCS / "results.schema.json").read_text("utf-8"))
    page = hooks.schema()
    assert f"The current schema version is **{schema['properties']['schema_version']['const']}**." in page
    for name in schema["$defs"]:
        assert f"\n## {name}\n" in page


def test_the_benchmark_s_figures_come_with_their_machine_and_date() -> None:
    result = json.loads((ROOT / "benchmarks/results/cpu-x86_64-2c.json").read_text("utf-8"))
    page = hooks.benchmarks()
    assert f"**{result['machine']}**" in page and f"on {result['date'][:10]}" in page
    assert f"| {hooks._seconds(result['serve']['page_edit']['seconds'])} |" in page
    result["serve"]["start_s"] = 99.0
    assert ("`verified-book serve`: start, the claims computed once", "99 s") in hooks.benchmark_rows(result)


def test_the_scale_figures_come_from_the_results_file_with_each_size_s_date() -> None:
    result = json.loads((ROOT / "benchmarks/results/cpu-x86_64-2c.json").read_text("utf-8"))
    scale = result["scale"]
    assert hooks.scale_table(scale) in hooks.benchmarks()
    size = next(iter(scale["sizes"]))
    scale["sizes"][size]["full_run"]["seconds"] = 1234.0
    scale["sizes"][size]["date"] = "2031-01-02T03:04:05+0000"
    row = next(line for line in hooks.scale_table(scale).splitlines() if line.startswith("| the full run"))
    assert "| 1234 s |" in row and "growth ≤ 1.1" in row
    assert f"{size}× ({scale['sizes'][size]['figures']:,} figures, 2031-01-02)" in hooks.scale_table(scale)
    scale["sizes"][size]["earlier"] = {"full_run": "2030-12-31T00:00:00+0000"}  # kept from a run before
    row = next(line for line in hooks.scale_table(scale).splitlines() if line.startswith("| the full run"))
    assert "| 1234 s (2030-12-31) |" in row


def test_the_scale_table_finds_each_figure_where_the_results_file_says_it_is() -> None:
    scale = json.loads((ROOT / "benchmarks/results/cpu-x86_64-2c.json").read_text("utf-8"))["scale"]
    size = next(iter(scale["sizes"]))
    scale["sizes"][size]["second_run"]["seconds"] = 4321.0
    scale["figures"]["full_run_s"] = ["second_run", "seconds"]
    row = next(line for line in hooks.scale_table(scale).splitlines() if line.startswith("| the full run"))
    assert "| 4321 s |" in row
    del scale["figures"]["full_run_s"]
    with pytest.raises(hooks.FactMissing, match="full_run_s"):
        hooks.scale_table(scale)


def test_the_docs_give_a_fresh_clone_s_first_verdict_with_its_date_target_and_installer() -> None:
    result = json.loads((ROOT / "benchmarks/results/cpu-x86_64-2c.json").read_text("utf-8"))
    first = {
        "command": "git clone; python3 run.py verify",
        "date": "2031-01-02T03:04:05+0000",
        "seconds": 41.0,
        "setup_s": 23.0,
        "verdict_s": 15.0,
        "installer": "uv 9.9.9",
        "target_s": 45.0,
        "goal_s": 30.0,
        "met": True,
        "with_pip": {"seconds": 120.0, "setup_s": 100.0, "verdict_s": 16.0},
    }
    rows = dict(hooks.first_verdict_rows({**result, "first_verdict": first}))
    said = next(v for k, v in rows.items() if "on 2031-01-02" in k)
    assert said == "41 s: set-up 23 s with uv 9.9.9, verdict 15 s; target 45 s met (goal 30 s)"
    assert rows["the same with pip (`VERIFIED_BOOK_INSTALLER=pip`)"].startswith("120 s: set-up 100 s")
    if "first_verdict" in result:
        assert "a fresh clone to its first verdict" in hooks.benchmarks()


@pytest.mark.slow
def test_the_docs_build_strictly(tmp_path: Path) -> None:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", "docs/config/mkdocs.yml", "-d", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    install = (tmp_path / "install.html").read_text("utf-8")
    assert "<!-- vb:" not in install
    assert "<code>verify [PYTEST ARGS]</code>" in install, "the jobs were not put in the page"
    assert "unpkg.com" not in (tmp_path / "index.html").read_text("utf-8"), "a script from a CDN"
