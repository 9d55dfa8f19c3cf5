"""Untrusted results files: sound ones carrying markup, and unsound ones of every shape."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

from harness.faults.common import (
    Tally,
)

# ---------------------------------------------------------------- untrusted results files

HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'


def sound_results(slug: str = "contrib", claim_id: str = "basic.ratio", text: str = "") -> dict[str, Any]:
    """A valid contributed results file; `text` is put in every free string field (for escaping tests)."""
    date = "2026-11-29T13:00:00+00:00"
    return {
        "schema_version": 1,
        "slug": slug,
        "machine": {
            "slug": slug,
            "markers": [],
            "fingerprint": {
                "cpu": f"Contributed CPU {text}",
                "arch": f"x86_64{text}",
                "cores": 8,
                "memory_gb": 64.0,
                "os": f"Linux {text}",
                "gpu": f"GPU {text}",
                "gpu_memory_gb": 16.0,
                "compute_capability": f"12.0{text}",
                "driver": f"580{text}",
                "python": f"3.12{text}",
                "torch": f"2.9{text}",
            },
        },
        "environment": {
            "date": date,
            "os": f"Linux {text}",
            "driver": f"580{text}",
            "versions": {"python": f"3.12{text}", "torch": f"2.9{text}"},
            "backends": {"numpy": f"2.3{text}", "torch:cpu": f"2.9{text}"},
        },
        "records": {
            claim_id: {
                "numpy": {
                    "status": "verified",
                    "kind": "exact",
                    "value": {"exact": "1365/82", "float": 1365 / 82},
                    "figures": [
                        {
                            "file": "book/index.md",
                            "line": 3,
                            "printed": f"16.6{text}",
                            "stated": f"16.6{text}",
                            "status": "verified",
                        }
                    ],
                    "message": f"computed here {text}",
                    "inputs": [f"claims/data/x.toml:1 value = 1 {text}"],
                    "source": f"claims/topics/x.py:1{text}",
                    "citation": f"a source {text}",
                    "hardware": None,
                    "date": date,
                    "seconds": 0.01,
                    "version": f"2.3{text}",
                }
            }
        },
        "outputs": {"lab.py": {"text": f"what the lab printed {text}", "date": date, "seconds": 0.5}},
    }


def _record(data: dict[str, Any]) -> dict[str, Any]:
    return data["records"]["basic.ratio"]["numpy"]


def _figure(data: dict[str, Any]) -> dict[str, Any]:
    return _record(data)["figures"][0]


def _nest(depth: int) -> Any:
    node: Any = 1
    for _ in range(depth):
        node = [node]
    return node


HOSTILE_VARIANTS: dict[str, tuple[str, Callable[[dict[str, Any]], Any]]] = {
    "slug with a path": ("names", lambda d: d.update(slug="../../etc/passwd")),
    "slug with markup": ("names", lambda d: d.update(slug="<script>x</script>")),
    "slug of 200 characters": ("names", lambda d: d.update(slug="a" * 200)),
    "machine slug not the file's": ("names", lambda d: d["machine"].update(slug="someone-else")),
    "unknown claim id": ("names", lambda d: d["records"].update({"no.such.claim": d["records"]["basic.ratio"]})),
    "claim id with markup": ("names", lambda d: d["records"].update({"<b>x</b>": {}})),
    "unknown backend": ("names", lambda d: d["records"]["basic.ratio"].update({"gpu:9": _record(d)})),
    "marker with markup": ("names", lambda d: d["machine"].update(markers=["<script>"])),
    "output name with a path": ("names", lambda d: d["outputs"].update({"../../x.py": {"text": "x"}})),
    "figure file outside the book": ("names", lambda d: _figure(d).update(file="../../etc/passwd")),
    "figure file absolute": ("names", lambda d: _figure(d).update(file="/etc/passwd")),
    "status not a status": ("types", lambda d: _record(d).update(status="great")),
    "figure status not a status": ("types", lambda d: _figure(d).update(status="<script>")),
    "kind not a kind": ("types", lambda d: _record(d).update(kind="magic")),
    "record not an object": ("types", lambda d: d["records"]["basic.ratio"].update(numpy=[1, 2])),
    "records a list": ("types", lambda d: d.update(records=[])),
    "inputs not strings": ("types", lambda d: _record(d).update(inputs=[{"a": 1}])),
    "message not a string": ("types", lambda d: _record(d).update(message=["x"])),
    "fingerprint nested": ("types", lambda d: d["machine"]["fingerprint"].update(cpu={"a": 1})),
    "output text not a string": ("types", lambda d: d["outputs"]["lab.py"].update(text=7)),
    "verified with a stale figure": ("types", lambda d: _figure(d).update(status="stale")),
    "figure line 0": ("figure lines", lambda d: _figure(d).update(line=0)),
    "figure line negative": ("figure lines", lambda d: _figure(d).update(line=-4)),
    "figure line a string": ("figure lines", lambda d: _figure(d).update(line="3")),
    "figure line true": ("figure lines", lambda d: _figure(d).update(line=True)),
    "figure line fractional": ("figure lines", lambda d: _figure(d).update(line=2.5)),
    "figure line past a million": ("figure lines", lambda d: _figure(d).update(line=10**9)),
    "value NaN": ("values", lambda d: _record(d).update(value=math.nan)),
    "value infinite": ("values", lambda d: _record(d).update(value=math.inf)),
    "exact and float disagree": ("values", lambda d: _record(d).update(value={"exact": "1/3", "float": 0.5})),
    "exact divides by zero": ("values", lambda d: _record(d).update(value={"exact": "1/0", "float": 1.0})),
    "value integer of 1,300 digits": ("values", lambda d: _record(d).update(value=10**1300)),
    "seconds negative": ("values", lambda d: _record(d).update(seconds=-1)),
    "seconds a year": ("values", lambda d: _record(d).update(seconds=3.2e7)),
    "memory NaN": ("values", lambda d: d["machine"]["fingerprint"].update(memory_gb=math.nan)),
    "date not a date": ("dates", lambda d: _record(d).update(date="yesterday")),
    "date in the future": ("dates", lambda d: _record(d).update(date="2999-01-01T00:00:00+00:00")),
    "date before 2000": ("dates", lambda d: _record(d).update(date="1970-01-01")),
    "environment date with markup": ("dates", lambda d: d["environment"].update(date="<script>")),
    "output date a number": ("dates", lambda d: d["outputs"]["lab.py"].update(date=20261129)),
    "string of 20,000 characters": ("sizes", lambda d: _record(d).update(citation="x" * 20_000)),
    "message of 200,000 characters": ("sizes", lambda d: _record(d).update(message="x" * 200_000)),
    "key of 500 characters": ("sizes", lambda d: d["machine"]["fingerprint"].update({"k" * 500: 1})),
    "value nested 40 deep": ("sizes", lambda d: _record(d).update(value=_nest(40))),
    "non-string key": ("sizes", lambda d: d["machine"]["fingerprint"].update({7: "x"})),
    "top level a list": ("types", lambda d: [d]),
}

HOSTILE_FILES: dict[str, bytes] = {
    "NaN literal in the file": b'{"schema_version": 1, "slug": "contrib", "records": {}, "x": NaN}',
    "Infinity literal in the file": b'{"schema_version": 1, "slug": "contrib", "records": {}, "x": -Infinity}',
    "nested 100,000 deep in the file": b'{"slug": "contrib", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "integer of 5,000 digits in the file": b'{"slug": "contrib", "x": ' + b"9" * 5000 + b"}",
    "not UTF-8": b'{"slug": "contrib\xff"}',
    "schema from the future": b'{"schema_version": 99, "slug": "contrib", "records": {}}',
}


def hostile_results(root: Path, known_claims: set[str] | None = None) -> Tally:
    """A contributed results file is untrusted: each hostile variant is refused, naming the file."""
    from verified_book.records.results import ResultsError, read, validate

    known = known_claims if known_claims is not None else {"basic.ratio"}
    tally = Tally(
        "contributed results",
        "hostile results file",
        "refused before it is merged or rendered, with the file and the field named",
    )
    where = "results/contrib.json"
    sound = sound_results(text=HOSTILE)
    tally.check(validate(sound, where, known) == [], f"the sound file is refused: {validate(sound, where, known)}")
    for name, (_, mutate) in HOSTILE_VARIANTS.items():
        data = json.loads(json.dumps(sound))
        replaced = mutate(data)
        data = replaced if isinstance(replaced, list) else data
        problems = validate(data, where, known)
        tally.check(bool(problems) and all(p.startswith(where) for p in problems), f"{name}: {problems or 'accepted'}")
    folder = root / "hostile"
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in HOSTILE_FILES.items():
        path = folder / "contrib.json"
        path.write_bytes(content)
        try:
            read(path, known)
        except ResultsError as e:
            tally.check(str(path) in str(e), f"{name}: {e}")
        except Exception as e:  # anything but a ResultsError is a crash of the reader
            tally.check(False, f"{name}: {type(e).__name__}: {e}")
        else:
            tally.check(False, f"{name}: accepted")
    return tally
