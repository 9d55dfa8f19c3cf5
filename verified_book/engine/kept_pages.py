"""The book's pages as read before, kept between runs: a page whose bytes have not changed is not parsed again.

Every run, `--changed`, `plan`, `serve`'s start and the site read every page of the book, and
parsing them (`bindings.read_page`) costs what the book's pages number. The pages are kept in one
file per book and parser, `<root>/.cache/verified-book/pages/<parser>.pickle`, each with the
SHA-256 of the bytes it was read from; a page is taken from there only while its bytes are the same,
and the parser is named by its source (`kept.code_of`), so an edit to the parser reads every page
anew. A kept file that cannot be read or written costs the parse and nothing else.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable

from verified_book.book import bindings
from verified_book.book.bindings import Page, read_page
from verified_book.records import kept

FOLDER = Path(".cache") / "verified-book" / "pages"
#: parsers (an edit of the engine's page reader makes a new one) whose pages a book's folder keeps
KEEP_PARSERS = 4

Kept = dict[str, tuple[str, Page]]  # a page's file (relative to the book's root) -> (SHA-256 of its bytes, page)


def read_pages(paths: Iterable[Path], root: Path) -> list[Page | OSError | UnicodeDecodeError]:
    """Each page of `paths`, read as `read_page` reads it (or the error that kept it from being read), taken
    from the book's kept pages where its bytes are those it was read from."""
    place = _place(root)
    found = kept.taken(place) if place is not None else None
    before: Kept = found if isinstance(found, dict) else {}
    now: Kept = {}
    out: list[Page | OSError | UnicodeDecodeError] = []
    for path in paths:
        try:
            raw = path.read_bytes()
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            out.append(e)
            continue
        digest = hashlib.sha256(raw).hexdigest()
        rel = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        was = before.get(rel)
        page = was[1] if was is not None and was[0] == digest else read_page(path, root, text)
        now[rel] = (digest, page)
        out.append(page)
    if place is not None and {k: v[0] for k, v in now.items()} != {k: v[0] for k, v in before.items()}:
        kept.keep(place, now, KEEP_PARSERS)
    return out


def read_or_raise(paths: Iterable[Path], root: Path) -> list[Page]:
    """`read_pages`, raising the first error that kept a page from being read, as `read_page` would."""
    out = []
    for page in read_pages(paths, root):
        if isinstance(page, Exception):
            raise page
        out.append(page)
    return out


def _place(root: Path) -> Path | None:
    """Where the pages read by this parser are kept; None where the parser's source cannot be read."""
    code = kept.code_of([bindings.__name__], {"verified_book"})
    if code is None:
        return None
    return kept.named(root / FOLDER, hashlib.sha256(code.encode()).hexdigest())
