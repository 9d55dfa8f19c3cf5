"""The results store given bad files: corrupt, of a newer or older schema, written from many threads."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from harness.faults.common import (
    SLUG,
    SampleBook,
    Tally,
    _pairs,
    basic_pairs,
)
from verified_book.records import results

# ---------------------------------------------------------------- results store: bad files


def _good_update(slug: str, count: int = 3) -> Any:
    from verified_book.records.results import ResultsFile

    return ResultsFile(
        slug,
        machine={"slug": slug},
        records={
            f"fresh.item.r{i}": {"numpy": {"status": "verified", "value": i, "figures": []}} for i in range(count)
        },
    )


CORRUPT_FILES: dict[str, bytes] = {
    "truncated JSON": b'{"schema_version": 1, "slug": "m", "records": {',
    "empty file": b"",
    "not UTF-8": b'\xff\xfe{"slug": "m"}',
    "binary garbage": bytes(range(256)) * 4,
    "a JSON list at the top": b"[1, 2, 3]",
    "NaN literal": b'{"schema_version": 1, "slug": "m", "records": '
    b'{"a.b": {"numpy": {"status": "verified", "value": NaN}}}}',
    "nested 100,000 deep": b"[" * 100_000 + b"]" * 100_000,
    "5,000-digit integer": b'{"schema_version": 1, "slug": "m", "records": {}, "x": ' + b"9" * 5000 + b"}",
    "schema_version a string": b'{"schema_version": "1", "slug": "m", "records": {}}',
    "schema_version negative": b'{"schema_version": -3, "slug": "m", "records": {}}',
    "old schema with broken records": b'{"slug": "m", "records": [1, 2]}',
    "another machine's file under this name": b'{"schema_version": 1, "slug": "other", "records": {}}',
}


def corrupt_files(root: Path) -> Tally:
    """A results file that does not read: it is reported with its path and kept aside, never replaced silently."""
    tally = Tally(
        "results store",
        "corrupt results file",
        "reported with its path, kept aside byte for byte, a new file holds the run's records",
    )
    from verified_book.records.results import merge_into, read

    for n, (name, content) in enumerate(CORRUPT_FILES.items()):
        folder = root / f"corrupt-{n}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "m.json"
        path.write_bytes(content)
        warnings: list[str] = []
        update = _good_update("m")
        try:
            merge_into(path, update, warn=warnings.append)
        except Exception as e:  # a crash is what this scenario must not see; it is counted as unhandled
            tally.check(False, f"{name}: merge raised {type(e).__name__}: {e}")
            tally.keep(len(update.records), 0)
            continue
        aside = list(folder.glob("m.json.corrupt-*"))
        reported = len(warnings) == 1 and str(path) in warnings[0] and "kept aside" in warnings[0]
        kept_aside = len(aside) == 1 and aside[0].read_bytes() == content
        records = set(read(path).records)
        tally.keep(len(update.records), len(set(update.records) & records))
        tally.check(reported and kept_aside, f"{name}: reported {reported}, kept aside {kept_aside}: {warnings}")
    return tally


def newer_schema(root: Path) -> Tally:
    """A results file written by a newer schema: refused with what to upgrade; the run's records kept apart."""
    from verified_book.records.results import SCHEMA_VERSION

    tally = Tally(
        "results store",
        "results file from a newer schema",
        "left untouched; the message says what to upgrade; the run's records are kept beside it",
    )
    book = SampleBook.basic(root / "newer")
    book.results_dir.mkdir(parents=True, exist_ok=True)
    original = json.dumps({"schema_version": SCHEMA_VERSION + 1, "slug": SLUG, "records": {}, "new_field": [1]})
    book.results_file.write_text(original)
    run = book.run()
    unmerged = list(book.results_dir.glob(f"{SLUG}.json.unmerged-*"))
    kept = _pairs(json.loads(unmerged[0].read_text())["records"]) if len(unmerged) == 1 else set()
    expected = basic_pairs()
    tally.keep(len(expected), len(expected & kept))
    tally.check(
        book.results_file.read_text() == original
        and "update the project" in run.output
        and "run.py setup" in run.output
        and str(book.results_file) in run.output
        and len(unmerged) == 1,
        f"file untouched {book.results_file.read_text() == original}, unmerged {unmerged}\n{run.output[-1500:]}",
    )
    return tally


def older_schema(root: Path) -> Tally:
    """A results file of schema 0 (a flat list of records): migrated, and its records kept."""
    tally = Tally(
        "results store",
        "results file from an older schema",
        "migrated to the current schema; its records kept beside the run's",
    )
    book = SampleBook.basic(root / "older")
    book.results_dir.mkdir(parents=True, exist_ok=True)
    old = [{"claim": f"old.item.r{i}", "backend": "numpy", "status": "verified", "value": i} for i in range(4)]
    book.results_file.write_text(json.dumps({"slug": SLUG, "records": old}))
    run = book.run()
    data = json.loads(book.results_file.read_text())
    expected = {f"old.item.r{i}" for i in range(4)} | {"basic.ratio", "basic.square.2", "basic.square.3"}
    tally.keep(len(expected), len(expected & set(data["records"])))
    tally.check(
        run.ret == 0 and data.get("schema_version") == results.SCHEMA_VERSION and isinstance(data["records"], dict),
        f"exit {run.ret}, schema {data.get('schema_version')}\n{run.output[-1500:]}",
    )
    return tally


def locked_threads(root: Path, count: int = 8) -> Tally:
    """Merges racing in threads of one process: filelock serialises them as it does processes."""

    from verified_book.records.results import ResultsFile, merge_into, read

    tally = Tally("results store", "merges racing in threads", "every thread's records land")
    path = root / "threads" / "m.json"
    path.parent.mkdir(parents=True, exist_ok=True)

    def one(n: int) -> None:
        merge_into(path, ResultsFile("m", records={f"thread.item.t{n}": {"numpy": {"status": "verified", "value": n}}}))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = set(read(path).records)
    tally.keep(count, len(kept))
    tally.check(len(kept) == count, f"kept {sorted(kept)}")
    return tally
