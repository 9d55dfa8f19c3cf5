"""The book's options and markers: registered at configure, which opens no book and loads no topic.

pytest has no public API for a `-m` expression; `selects` is the one place that evaluates one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from verified_book.engine import machine as machine_mod
from verified_book.engine.config import ConfigError, read_config
from verified_book.integration import hookspecs
from verified_book.integration.pytest.marks import BACKEND_MARKERS, RUN_MARKERS, expression_of
from verified_book.vocabulary import KIND_MEANINGS


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("claims", "verified book")
    group.addoption(
        "--rewrite-stale-figures",
        action="store_true",
        default=False,
        help="Rewrite every stale figure in the book in place, at its printed precision, from the "
        "value computed in this run. Figures that hold are never touched.",
    )
    group.addoption(
        "--machine",
        dest="claims_machine",
        metavar="NAME",
        default=None,
        help="Record results under this name instead of this machine's own (its identity, "
        "~/.config/verified-book/machine.json); the records still carry this machine's id.",
    )
    group.addoption(
        "--results-dir",
        dest="claims_results_dir",
        metavar="DIR",
        default=None,
        help="Write <machine>.json under DIR instead of the book's local results folder (book.toml's "
        "local_results, else results).",
    )
    group.addoption(
        "--no-results",
        dest="claims_no_results",
        action="store_true",
        default=False,
        help="Verify without writing this machine's results file.",
    )
    group.addoption(
        "--beside-other-runs",
        dest="claims_beside",
        action="store_true",
        default=False,
        help="Do not wait for another run of this book that is timing the machine (or for other runs before "
        "timing it): run beside them, and mark the measurements of both runs contended.",
    )
    group.addoption(
        "--plan",
        dest="claims_plan",
        metavar="MARKER",
        default=None,
        help="List what a run on the book's machine MARKER (rtx5080, m4_max, ...) would check, and on which "
        "backend, by the page that prints each claim; run nothing. Works on any machine.",
    )
    group.addoption(
        "--changed",
        dest="claims_changed",
        action="store_true",
        default=False,
        help="Check only what changed since this machine's records: a claim whose code, inputs, library version "
        "or printed figures moved, or whose record did not hold. The rest is reported unchanged, with its date.",
    )
    group.addoption(
        "--reading",
        dest="claims_reading",
        metavar="FILE[:KEY]",
        action="append",
        default=[],
        help="Check only the claims that read this data file (relative to the book's data folder) or this key of "
        "it, as this machine's records say, and the figures bound to them; repeatable. Claims with no record here "
        "are checked too; a file or key the data does not hold is refused.",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Declare the book's markers (kinds, backends and one per hardware profile, each from its one
    definition) and nothing else: the book opens when the session starts, and not for `--help`."""
    try:
        book = read_config(Path(config.rootpath))
    except ConfigError as e:
        raise pytest.UsageError(str(e)) from None
    for kind, text in KIND_MEANINGS.items():
        config.addinivalue_line("markers", f"{kind.value}: {text}")
    for name, text in {**BACKEND_MARKERS, **RUN_MARKERS}.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    for marker, name in machine_mod.profile_names(book.data / book.hardware).items():
        config.addinivalue_line("markers", f"{marker}: applies on {name}")
    keyword_hint(config.getoption("keyword", "") or "")


def keyword_hint(expression: str) -> None:
    """Refuse a `-k` that names a figure's line as its item's name reads (`line 254`), saying the word it
    answers to: pytest alone says only that the expression does not parse."""
    spelled = re.sub(r"\bline (\d+)\b", r"line_\1", expression)
    if spelled == expression:
        return
    try:
        expression_of(expression)
    except SyntaxError as e:  # what pytest's expression parser raises
        raise pytest.UsageError(
            f"-k {expression!r} does not parse (at column {e.offset}: {e.msg}): a figure's item answers to the "
            f"word line_N, since -k cannot take the spaces and colons of its name; try -k {spelled!r}"
        ) from None
