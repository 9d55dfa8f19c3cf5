"""The open book is one object held in a context variable: books opened one after the other, or one inside
another, or on another thread, each see their own claims and inputs."""

from __future__ import annotations

import contextvars
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from verified_book import given
from verified_book.authoring import inputs
from verified_book.authoring.registry import REGISTRY
from verified_book.authoring.state import NoBookOpen, current
from verified_book.engine.config import OpenBook, current_book, open_book, read_config
from verified_book.engine.machine import profiles

CLAIMS = '''from verified_book import claim, given


@claim("{name}.x", kind="given")
def x() -> int:
    """The book's x."""
    return given("x")
'''


def _book(root: Path, name: str, value: int) -> Path:
    """A book whose package `<name>_claims` declares one claim, `<name>.x`, reading `x = value` from its data."""
    package = root / f"{name}_claims"
    (package / "topics").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "topics" / "__init__.py").write_text("")
    (package / "topics" / "x.py").write_text(CLAIMS.format(name=name))
    (package / "data" / "hardware").mkdir(parents=True)
    (package / "data" / "given.toml").write_text(f'[x]\nvalue = {value}\nsource = "the book of {name}"\n')
    (package / "data" / "hardware" / f"{name}_box.toml").write_text(f'name = "the {name} box"\nbackends = ["numpy"]\n')
    (root / "book").mkdir()
    (root / "book.toml").write_text(f'[book]\ntopics = ["{name}_claims.topics"]\ndata = "{name}_claims/data"\n')
    return root


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[OpenBook, OpenBook]]:
    """Two books, opened one after the other in this process."""
    first = open_book(read_config(_book(tmp_path / "one", "first", 1)))
    second = open_book(read_config(_book(tmp_path / "two", "second", 2)))
    yield first, second
    for name in [m for m in sys.modules if m.split(".")[0] in ("first_claims", "second_claims")]:
        del sys.modules[name]


def test_two_books_opened_one_after_the_other_see_only_their_own_claims_and_inputs(
    two: tuple[OpenBook, OpenBook],
) -> None:
    first, second = two
    assert not first.load_errors and not second.load_errors
    assert first.registry.ids() == ["first.x"] and second.registry.ids() == ["second.x"]
    with first.opened():  # opened before the second: with module globals it would read the second's data now
        assert REGISTRY.ids() == ["first.x"] and "second.x" not in REGISTRY
        assert REGISTRY["first.x"].evaluate() == 1 == given("x")
        assert inputs.data_dir() == first.config.data and list(profiles()) == ["first_box"]
    with second.opened():
        assert REGISTRY.ids() == ["second.x"]
        assert REGISTRY["second.x"].evaluate() == 2 == given("x")
        assert inputs.shown_as() == "second_claims/data" and list(profiles()) == ["second_box"]


def test_a_book_opened_again_has_its_claims_without_importing_its_modules_again(tmp_path: Path) -> None:
    config = read_config(_book(tmp_path, "again", 3))
    try:
        first = open_book(config)
        module = sys.modules["again_claims.topics.x"]
        second = open_book(config)
        assert sys.modules["again_claims.topics.x"] is module, "not imported again"
        assert second.registry is not first.registry
        assert second.registry.ids() == first.registry.ids() == ["again.x"]
        assert second.registry["again.x"] is first.registry["again.x"]
        assert not second.load_errors
    finally:
        for name in [m for m in sys.modules if m.startswith("again_claims")]:
            del sys.modules[name]


def test_a_nested_book_gives_the_outer_one_back(two: tuple[OpenBook, OpenBook]) -> None:
    first, second = two
    outer = current()  # the run's own book
    with first.opened():
        assert current_book() is first
        with second.opened():
            assert current_book() is second and REGISTRY.ids() == ["second.x"]
        assert current_book() is first and REGISTRY.ids() == ["first.x"] and given("x") == 1
        assert str(first.root) in sys.path, "its content imports while it is open"
    assert current() is outer
    assert str(first.root) not in sys.path, "sys.path as it was"


def _on_a_thread(work: Callable[[], Any]) -> Any:
    found: list[Any] = []

    def run() -> None:
        try:
            found.append(work())
        except NoBookOpen as e:
            found.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return found[0]


def test_a_thread_sees_the_book_only_in_its_context(two: tuple[OpenBook, OpenBook]) -> None:
    first, _ = two
    with first.opened():
        assert isinstance(_on_a_thread(REGISTRY.ids), NoBookOpen), "a bare thread has no book"
        context = contextvars.copy_context()  # the starting thread's, as serve hands its threads
        assert _on_a_thread(lambda: context.run(REGISTRY.ids)) == ["first.x"]

    def entered() -> list[str]:
        with first.opened():
            return REGISTRY.ids()

    assert _on_a_thread(entered) == ["first.x"]
