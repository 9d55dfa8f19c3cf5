"""Every claim on every backend present: it computes, its invariants hold, its figures match.

The parametrisation (one case per claim × backend, with markers and skip reasons) comes
from the `claims` pytest plugin; the figures' own tests are collected from `book/`.
"""
from __future__ import annotations

from typing import Any

from claims.pytest_plugin import RunState, check_claim


def test_claim(claim_case: tuple[Any, Any], claims_run: RunState) -> None:
    claim, backend = claim_case
    check_claim(claims_run, claim, backend)


def test_every_topic_module_loads(claims_run: RunState) -> None:
    """A topic module that fails to import, or declares a bad claim, fails here and only here."""
    assert not claims_run.load_errors, "\n".join(claims_run.load_errors)
