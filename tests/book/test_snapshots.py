"""Snapshots of the precision chapter's full tables on each backend, so any drift in a library shows as a diff.

The book prints a few cells of each table; these files keep every cell: what `finfo`
reports, the casts, the rounding of a million weights, and the block quantiser's codes
and values (with gguf's reference quantisers on numpy). One file per backend, in
`tests/book/test_snapshots/precision_<backend>.yml`. A backend that is absent skips; one that
is present but has no file yet skips too, naming the command that records it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from claims.topics import casts, quantisation, rounding
from claims.topics.formats import FINFO_FIELDS, FINFO_FORMATS, FORMATS, finfo
from verified_book import backends
from verified_book.authoring.registry import NotOnBackend

SNAPSHOTS = Path(__file__).with_suffix("")


def finfo_table(backend: backends.Backend) -> dict[str, Any]:
    """Every finfo field the chapter's format table uses, per format; 'absent' where the backend has no dtype."""
    out: dict[str, Any] = {}
    for fmt_id in FINFO_FORMATS:
        try:
            info = finfo(backend, FORMATS[fmt_id])
        except NotOnBackend:
            out[fmt_id] = "absent"
            continue
        row = {"bits": int(getattr(info, "bits", FORMATS[fmt_id].bits))}
        for field in FINFO_FIELDS:
            value = (
                getattr(info, field, None)
                if field != "smallest_normal"
                else (getattr(info, "smallest_normal", None) or getattr(info, "tiny", None))
            )
            row[field] = float(value) if value is not None else "absent"
        out[fmt_id] = row
    return out


def gguf_table(backend: backends.Backend) -> dict[str, Any]:
    """gguf's reference Q8_0 and Q4_0 quantisers on the snippet's block (numpy only)."""
    out: dict[str, Any] = {}
    for qtype in ("q8_0", "q4_0"):
        try:
            ref = quantisation.reference(backend, qtype)
        except NotOnBackend:
            return {}
        out[qtype] = {
            "codes": [int(c) for c in ref.codes],
            "scale": ref.scale,
            "restored": [round(float(v), 8) for v in ref.restored],
            "zero_codes": ref.zero_codes,
        }
    return out


def precision_table(backend: backends.Backend) -> dict[str, Any]:
    table = {
        "finfo": finfo_table(backend),
        "casts": casts.table(backend),
        "rounding": rounding.table(backend),
        "quantiser": quantisation.table(backend),
    }
    gguf = gguf_table(backend)
    if gguf:
        table["gguf_reference"] = gguf
    return table


def _slug(name: str) -> str:
    return name.replace(":", "_")


@pytest.mark.parametrize("name", backends.NAMES)
def test_precision_snapshot(name: str, data_regression: Any, request: pytest.FixtureRequest) -> None:
    backend = backends.detect()[name]
    if not backend.available:
        pytest.skip(f"{name} is not here: {backend.reason}")
    basename = f"precision_{_slug(name)}"
    regenerating = request.config.getoption("force_regen") or request.config.getoption("regen_all")
    if not (SNAPSHOTS / f"{basename}.yml").exists() and not regenerating:
        pytest.skip(
            f"no snapshot recorded for {name} yet: run `pytest tests/book/test_snapshots.py --force-regen` "
            f"here and review tests/book/test_snapshots/{basename}.yml before committing it"
        )
    data_regression.check(precision_table(backend), basename=basename)
