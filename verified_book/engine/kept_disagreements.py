"""Each data file's disagreements between an entry's `source` and its `value`, kept by the file's bytes.

Every process that opens the book checks every data file (`inputs.source_disagreements`), which parses each
of them, while an edit saves one: the problems of each file are kept under the SHA-256 of its bytes, in one
file per state of the code that finds them and of the data folder's place
(`<root>/.cache/verified-book/disagreements/<code>.pickle`), and only a file whose bytes are not kept is
parsed and checked again.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from verified_book.authoring import inputs
from verified_book.errors import Problem
from verified_book.records import kept

FOLDER = Path(".cache") / "verified-book" / "disagreements"
KEEP_STATES = 8  # states of the checking code a book's folder keeps


def source_disagreements(root: Path) -> list[Problem]:
    """`inputs.source_disagreements()` of the open book (whose root is `root`), each data file checked again
    only where its bytes are not those of a file checked before."""
    code = kept.code_of([inputs.__name__], {"verified_book"})
    if code is None:
        return inputs.source_disagreements()
    place = kept.named(root / FOLDER, hashlib.sha256(f"{inputs.shown_as()}\n{code}".encode()).hexdigest())
    found = kept.taken(place)
    before: dict[tuple[str, str], list[Problem]] = found if isinstance(found, dict) else {}
    now: dict[tuple[str, str], list[Problem]] = {}
    problems: list[Problem] = []
    for file in [f for f in inputs.data_files() if f.endswith(".toml")]:
        key = (file, _digest(file))
        if key in before:
            now[key] = before[key]
            problems += before[key]
            continue
        found_here = inputs.source_disagreements([file])
        problems += found_here
        if key[1] and _digest(file) == key[1]:  # not saved while it was checked: these are its bytes' problems
            now[key] = found_here
    if now.keys() != before.keys():
        kept.keep(place, now, KEEP_STATES)
    return sorted(problems, key=str)


def _digest(file: str) -> str:
    """The SHA-256 of a data file's bytes; empty where it cannot be read (the claims that read it say why)."""
    try:
        return hashlib.sha256((inputs.data_dir() / file).read_bytes()).hexdigest()
    except OSError:
        return ""
