"""Mutation tests of the book: a wrong figure, a changed input or a lost disposition must make the suite fail.

The figures are judged against the values this run computed (the session's verifier
cache, shared with the claim items), so the figure test costs only the judging. The
input test computes again only the claims whose recorded inputs include the perturbed
input. The disposition test asks the book's premise check again with one disposition
taken away at a time. Each reports its counts in the terminal summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness import books, mutation

from verified_book.authoring import inputs
from verified_book.authoring.registry import REGISTRY, claim
from verified_book.backends import detect
from verified_book.book.bindings import Book
from verified_book.engine.check import Verifier
from verified_book.engine.machine import identify
from verified_book.engine.session import Session


class _Report:
    """Adds the mutation counts to the terminal summary, once per run."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.lines:
            terminalreporter.section("mutation of the book")
            for line in self.lines:
                terminalreporter.write_line(line)


def _report(config: pytest.Config, text: str) -> None:
    plugin = config.pluginmanager.get_plugin("claims-mutation-report")
    if plugin is None:
        plugin = _Report()
        config.pluginmanager.register(plugin, "claims-mutation-report")
    plugin.lines += text.splitlines()


def test_every_figure_mutant_is_caught(claims_run: Session, request: pytest.FixtureRequest) -> None:
    report = mutation.mutate_figures(claims_run.verifier)
    _report(request.config, report.summary())
    assert not report.survived, report.summary()
    assert report.kill_rate == 1.0


def test_every_disposition_removed_fails_the_book_naming_its_claim(
    claims_run: Session, request: pytest.FixtureRequest
) -> None:
    report = mutation.drop_dispositions(claims_run.verifier)
    _report(request.config, report.summary())
    assert report.tried and not report.missed, report.summary()


@pytest.mark.slow
def test_every_input_is_depended_on(claims_run: Session, request: pytest.FixtureRequest) -> None:
    report = mutation.perturb_inputs(claims_run.verifier)
    _report(request.config, report.summary())
    assert not report.unguarded and not report.problems, report.summary()


@pytest.mark.parametrize(
    ("printed", "last_digit", "times_ten"),
    [
        ("16.6", "16.1", "166.0"),
        ("8,190,427,136", "8,190,427,131", "81,904,271,360"),
        ("1.56 × 10^-2", "1.51 × 10^-2", "1.56 × 10^-1"),
        ("1.56e-02", "1.51e-02", "1.56e-01"),
        ("2^-7", "2^-2", "0.0781"),
        ("8.6%", "8.1%", "86.0%"),
        ("≈ 14", "≈ 19", "≈ 140"),
        ("16.4 GB", "16.9 GB", "164.0 GB"),
        ("0", "5", None),
        ("inf", None, None),
    ],
)
def test_mutants_change_the_last_printed_digit_and_the_scale(
    printed: str, last_digit: str | None, times_ten: str | None
) -> None:
    assert mutation.last_digit_mutant(printed) == last_digit
    assert mutation.times_ten_mutant(printed) == times_ten


# A small book with its own data folder, to show the input test's verdicts one by one.
DATA = {
    "gpu.toml": '[bandwidth]\nvalue = 273\nunit = "GB/s"\nsource = "a data sheet"\n\n'
    '[spare]\nvalue = 7\nunit = "x"\nsource = "unused"\n',
    "models/m/config.json": '{"hidden_size": 4096, "bos_token_id": 1, "eos_token_id": 2}',
}


@pytest.fixture
def small_book(tmp_path: Path) -> Any:
    data = tmp_path / "data"
    for name, text in DATA.items():
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_text(text)
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "page.md").write_text(
        "Ceiling [16.6](claim:small.ceiling), width [4,096](claim:small.width), tokens [3](claim:small.tokens).\n"
    )

    with books.with_data(data, inputs.shown_as()), books.fresh_registry():

        @claim("small.ceiling", kind="exact")
        def ceiling() -> Any:
            return inputs.exact(inputs.vendor("gpu.toml", "bandwidth")) / inputs.exact("16.4")

        @claim("small.width", kind="exact")
        def width() -> int:
            return inputs.model_config("m")["hidden_size"]

        @claim("small.tokens", kind="exact")
        def tokens() -> int:
            config = inputs.model_config("m")
            return config["bos_token_id"] + config["eos_token_id"]

        book = Book.read(tmp_path / "book", tmp_path)
        yield Verifier(REGISTRY, book, dict(detect()), identify({"cpu": "x"}, "small"))


def test_inputs_nothing_depends_on_are_named(small_book: Verifier) -> None:
    report = mutation.perturb_inputs(small_book, allowlist={})
    assert {i.key for i in report.guarded} == {"bandwidth", "hidden_size", "bos_token_id", "eos_token_id"}
    assert {i.key: why for i, why in report.unguarded.items()} == {"spare": "no claim reads it"}


def test_an_allow_listed_input_that_is_used_fails(small_book: Verifier) -> None:
    allow = {
        ("gpu.toml", "spare"): "kept for a later chapter",
        ("models/m/config.json", "bos_token_id"): "a token id",
        ("models/m/config.json", "no_such_key"): "stale entry",
    }
    report = mutation.perturb_inputs(small_book, allowlist=allow)
    assert [i.key for i in report.allowed] == ["spare"]
    assert any("bos_token_id is listed as unused, but a figure depends on it" in p for p in report.problems)
    assert any("no_such_key names no input" in p for p in report.problems)


def test_an_input_read_only_on_other_hardware_is_excused_only_where_unread(small_book: Verifier) -> None:
    elsewhere = {("gpu.toml", "spare"): "read on another machine", ("gpu.toml", "bandwidth"): "read here too"}
    report = mutation.perturb_inputs(small_book, allowlist={}, elsewhere=elsewhere)
    assert [i.key for i in report.elsewhere] == ["spare"]
    assert "bandwidth" in {i.key for i in report.guarded} and not report.problems


def test_the_allow_list_gives_a_reason_for_every_entry() -> None:
    entries = {**mutation.read_allowlist(), **mutation.read_allowlist(section=mutation.ELSEWHERE)}
    for (file, key), reason in entries.items():
        assert reason.strip(), f"claims/data/{mutation.ALLOWLIST}: [{file}] {key} has no reason"
        assert (inputs.data_dir() / file).exists(), f"claims/data/{mutation.ALLOWLIST}: [{file}] is no data file"
