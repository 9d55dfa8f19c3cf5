"""Values this machine's records still speak for: a check's outcome rebuilt from its record, computing nothing.

A record keeps what a check computed: the value, the inputs it read and the version of the library that
computed it. Where the claim's code, those inputs and that version are as they were, on the machine that
made the record, computing again would give the same value; so a figure whose text moved can be judged
against the recorded value now. `--changed` does this for the figures an author edited, and the site for
a page edited since its records. A measurement is never reused: it is taken again.

The backends are known from the records too (`assumed_backends`): where the version of a library installed
here is the one the records name, its backends stand as they were found then and the library is loaded
only if a check must compute on it.
"""

from __future__ import annotations

import functools

from verified_book.authoring import inputs
from verified_book.authoring.registry import Claim
from verified_book.backends import ADAPTERS, Backend
from verified_book.engine.outcome import Outcome
from verified_book.engine.verdicts import once
from verified_book.records.record import DataInput, Record, SettingInput, SnippetInput
from verified_book.records.results import ResultsFile, from_json
from verified_book.vocabulary import Kind, OutcomeStatus, Status


def recorded_reads(record: Record) -> list[inputs.Read]:
    """The inputs a record names, as the engine read them: each data entry with its source and, where it
    is one, the machine it was measured on (as the data says now); each setting; each snippet's figure.
    Within `verdicts.judged_once`, each data entry's source and machine are read once, not once per machine
    whose records name it."""
    reads: list[inputs.Read] = []
    for entry in record.inputs or []:
        if isinstance(entry, DataInput):
            source, measured_on = once(
                "data entry", (), functools.partial(_entry_now, entry.file, entry.key), entry.file, entry.key
            )
            reads.append(
                inputs.Input(
                    entry.file,
                    entry.key,
                    from_json(entry.value),
                    entry.line or 0,
                    source=source,
                    measured_on=measured_on,
                    whole=entry.whole,
                )
            )
        elif isinstance(entry, SettingInput):
            reads.append(inputs.Setting(entry.setting, from_json(entry.value), entry.where))
        elif isinstance(entry, SnippetInput):
            reads.append(inputs.SnippetFigure(entry.snippet, entry.sha256, entry.where, entry.value))
    return reads


def _entry_now(file: str, key: str) -> tuple[str | None, str | None]:
    """A data entry's source and the machine it was measured on, as the data says now."""
    return inputs.source_of(file, key), inputs.measured_on(file, key)


def why_not_reused(claim: Claim, record: Record) -> str | None:
    """Why a record that still matches the book holds no value to judge a figure against; None where it does."""
    if claim.kind is Kind.MEASURED:
        return "a measurement is taken again, never reused"
    if record.status in (Status.FAILED, Status.SKIPPED) or record.value is None:
        return f"{record.status} when last recorded, with no value to judge against"
    return None


def recorded_outcome(claim: Claim, backend: str, record: Record, date: str | None, seconds: float = 0.0) -> Outcome:
    """The outcome a record keeps, for a check whose record still speaks for the book (see `why_not_reused`)."""
    return Outcome(
        claim,
        backend,
        OutcomeStatus.COMPUTED,
        value=from_json(record.value),
        inputs=recorded_reads(record),
        seconds=seconds,
        version=record.version,
        recorded=date or "an undated run",
    )


def same_build(installed: str | None, found: str) -> bool:
    """Whether the installed package (its metadata's version) is the build a run found (the version the library
    reported). PyPI's CUDA wheels of torch say `2.11.0` in their metadata and `2.11.0+cu130` when imported; a
    wheel that names its build (`2.13.0+cpu`) must name the same one."""
    if installed is None:
        return False
    return installed == found or ("+" not in installed and found.partition("+")[0] == installed)


def assumed_backends(results: ResultsFile) -> dict[str, Backend]:
    """The backends this machine's last run found, for each library whose installed version is still the one
    it found: available ones with that version, absent ones absent. A library not installed, upgraded, or
    not loaded by that run is left out, to be detected as usual."""
    found = results.run.backends or {}
    date = results.run.date or "an undated run"
    out: dict[str, Backend] = {}
    for adapter in ADAPTERS.values():
        versions = {name: found[name] for name in adapter.names if name in found}
        present = {v for v in versions.values() if v is not None}
        if len(present) != 1 or not same_build(adapter.installed_version(), next(iter(present))):
            continue
        for name, version in versions.items():
            out[name] = (
                Backend(name, True, f"as this machine's records of {date} found it", version, recorded=date)
                if version is not None
                else Backend(name, False, f"not here when this machine's records were made ({date})", recorded=date)
            )
    return out
