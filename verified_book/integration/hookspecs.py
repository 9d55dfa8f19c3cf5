"""Hooks a project or a reader's conftest.py can implement to shape a verification run."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec(firstresult=True)
def pytest_claims_machine_info(machine_info: dict[str, Any]) -> dict[str, Any] | None:
    """Extend or override this machine's fingerprint before its slug and markers are derived.

    Change `machine_info` in place, or return a new dict to replace it; the first
    non-None result wins. Useful where the OS hides a field (a GPU behind a VM) or a
    lab wants its own slug (`machine_info["slug"] = "lab-a100-3"`).
    """
