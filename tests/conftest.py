"""Fixtures every group of tests shares: the suite's own machine identity, a real browser, and pytester set up
after the array libraries are loaded."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _state_of(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


@pytest.fixture(scope="session", autouse=True)
def own_machine_and_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The suite's own machine identity and state folder, in the environment of every run it starts (in this
    process and in the ones it spawns): no test mints, renames or retires the reader's machine, or keeps records
    in the reader's state folder. The identity starts as a copy of the reader's, so a run of the book names this
    machine as the reader's runs do. Ending the session checks that the reader's identity file is as it was."""
    from verified_book.records import identity, unsaved

    real = identity.default_path()  # the reader's, before the suite points the engine elsewhere
    before = _state_of(real)
    home = tmp_path_factory.mktemp("machine")
    if before is not None:  # the same machine as the reader's, under the same name, in a file of the suite's own
        (home / "machine.json").write_bytes(before)
    saved = {name: os.environ.get(name) for name in (identity.FILE_VARIABLE, unsaved.STATE_VARIABLE)}
    os.environ[identity.FILE_VARIABLE] = str(home / "machine.json")
    os.environ[unsaved.STATE_VARIABLE] = str(home / "state")
    yield {"real": real, "before": before}
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    assert _state_of(real) == before, f"the test suite changed the reader's machine identity, {real}"


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, driven by Playwright; skipped where it is not installed."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent: install Debian's chromium package to run the browser tests")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def torch_operators_loaded() -> None:
    """torch's lazily imported compiler modules, loaded once before any pytester fixture exists.

    pytester drops every module a test imported once the test ends, and torch registers each
    operator library in C++ once per process: a module such as torch._inductor.test_operators
    (pulled in through torch._dynamo by some operators' decompositions) first imported inside one
    in-process run fails the next run that imports it again ("Only a single TORCH_LIBRARY can be
    used to register the namespace"). Loaded before pytester takes its snapshot, it is kept. So are the
    array libraries themselves, which a run loads only when a selected claim needs one: MLX imported
    again after pytester dropped it aborts the process.
    """
    import importlib.util

    from verified_book import backends

    for adapter in backends.ADAPTERS.values():
        adapter.detect()
    if importlib.util.find_spec("torch") is not None:
        import torch._dynamo  # noqa: F401


@pytest.fixture
def pytester(torch_operators_loaded: None, pytester: pytest.Pytester) -> pytest.Pytester:
    """pytester's own fixture, set up after `torch_operators_loaded`."""
    return pytester
