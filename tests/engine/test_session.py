"""The session is the one place a door asks for the run's header and has the run's records written."""

from __future__ import annotations

from pathlib import Path

import pytest

from verified_book.engine.session import Session
from verified_book.records.record import RunHeader


def test_the_run_header_is_one_typed_header_with_the_machine_s_software(claims_run: Session) -> None:
    header = claims_run.run_header(commit=("0" * 40, False))
    assert isinstance(header, RunHeader)
    assert header.commit == "0" * 40 and header.dirty is False and header.date
    assert header.os == claims_run.machine.info.get("os")
    assert header.driver == claims_run.machine.info.get("driver")
    assert header.versions is not None and header.versions.get("python") == claims_run.machine.info.get("python")
    assert header.backends is not None and set(header.backends) == set(claims_run.backends.known())


def test_a_session_that_judged_nothing_writes_nothing(
    claims_run: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(claims_run, "results_dir", tmp_path)
    monkeypatch.setattr(claims_run.verifier, "judged", {})
    monkeypatch.setattr(claims_run, "outputs", {})
    assert claims_run.write_records() == []
    assert not list(tmp_path.iterdir()) and claims_run.results_path == tmp_path / f"{claims_run.machine.slug}.json"
