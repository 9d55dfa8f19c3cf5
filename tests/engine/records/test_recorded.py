"""Outcomes rebuilt from records: judged again, a recorded value gives the verdict computing it gave."""

from __future__ import annotations

import pytest
from harness.paths import ROOT

from verified_book.authoring.registry import REGISTRY, Kind
from verified_book.backends import ADAPTERS
from verified_book.book.bindings import Book, book_pages, read_page
from verified_book.engine.check import HELD, judge
from verified_book.engine.machine import Machine
from verified_book.engine.provenance import outdated_reason
from verified_book.engine.recorded import assumed_backends, recorded_outcome, same_build, why_not_reused
from verified_book.records.record import Record
from verified_book.records.results import ResultsFile, read
from verified_book.vocabulary import Status

COMMITTED = ROOT / "results" / "cpu-x86_64-2c.json"


def test_every_committed_record_judges_its_figures_again_as_it_recorded_them() -> None:
    """Each figure of each current record in the committed results, judged against the value rebuilt from the
    record (JSON to the engine's types, inputs with their sources), gets the status the run that computed the
    value gave it: the round trip loses nothing a verdict depends on."""
    results = read(COMMITTED)
    book = Book(ROOT, [read_page(p, ROOT) for p in book_pages(ROOT / "book")], [])
    machine = Machine(dict(results.machine.fingerprint), results.slug, tuple(results.machine.markers))
    bindings = {(b.file, b.line, b.text): b for b in book.bindings()}
    compared, differ = 0, []
    for claim_id, per_backend in results.records.items():
        claim = REGISTRY.get(claim_id)
        if claim is None:
            continue
        for backend, record in per_backend.items():
            if why_not_reused(claim, record) or outdated_reason(claim, results.claims.get(claim_id), record):
                continue
            outcome = recorded_outcome(claim, backend, record, results.date_of(claim_id, backend))
            for figure in record.figures or []:
                binding = bindings.get((figure.file, figure.line, figure.printed))
                if binding is None or binding.claim_id != claim_id:
                    continue
                compared += 1
                status = judge(binding, outcome, machine).status
                # which held word a figure carries (verified, cited, premise...) is decided afresh from the data
                # flow (engine.evidence), also for records written before a word existed: held stays held
                if status != figure.status and not {status, figure.status} <= {str(h) for h in HELD}:
                    differ.append(f"{figure.file}:{figure.line} {claim_id}[{backend}]: {figure.status} -> {status}")
    assert not differ, "\n".join(differ)
    # the records of claims re-declared since (evidence, stated versions, the book's operations moved out of the
    # adapters) are outdated until their machine reruns, and are not judged again here
    assert compared >= 900, f"only {compared} recorded figures could be judged again"


def _record(status: str, value: object = 3) -> Record:
    return Record(status=status, value=value, figures=[], message="", inputs=[], version="1.0")


def test_a_measurement_or_a_record_without_a_value_is_never_reused() -> None:
    measured = next(c for c in REGISTRY if c.kind is Kind.MEASURED)
    exact = next(c for c in REGISTRY if c.kind is Kind.EXACT)
    assert why_not_reused(measured, _record(Status.VERIFIED.value)) == "a measurement is taken again, never reused"
    assert why_not_reused(exact, _record(Status.FAILED.value, None)).startswith("failed when last recorded")
    assert why_not_reused(exact, _record(Status.SKIPPED.value, None)).startswith("skipped when last recorded")
    assert why_not_reused(exact, _record(Status.STALE.value)) is None


def test_backends_are_known_from_the_records_only_while_the_installed_version_is_the_recorded_one() -> None:
    numpy = ADAPTERS["numpy"].installed_version()
    assert numpy is not None
    results = ResultsFile("m")
    results.run = results.run.model_copy(
        update={"backends": {"numpy": numpy, "torch:cpu": "0.0.1", "torch:cuda": None}, "date": "2026-12-01T10:00:00"}
    )
    known = assumed_backends(results)
    assert set(known) == {"numpy"}, "torch's records are of another version: it is detected as usual"
    assert known["numpy"].available and known["numpy"].version == numpy
    assert known["numpy"].recorded == "2026-12-01T10:00:00"
    torch = ADAPTERS["torch"].installed_version()
    results.run = results.run.model_copy(update={"backends": {"torch:cpu": torch, "torch:cuda": None}})
    known = assumed_backends(results)
    assert known["torch:cpu"].available and not known["torch:cuda"].available
    assert "not here when this machine's records were made" in known["torch:cuda"].reason


@pytest.mark.parametrize(
    ("installed", "found", "same"),
    [
        ("2.13.0+cpu", "2.13.0+cpu", True),
        ("2.11.0", "2.11.0+cu130", True),  # PyPI's CUDA wheel: no build in its metadata, the build when imported
        ("2.13.0+cpu", "2.13.0+cu130", False),
        ("2.11.0", "2.13.0+cu130", False),
        ("2.11.0", "2.11.0.post1", False),
        (None, "2.11.0", False),
    ],
)
def test_the_installed_build_is_the_recorded_one_only_where_the_metadata_allows_it(
    installed: str | None, found: str, same: bool
) -> None:
    assert same_build(installed, found) is same
