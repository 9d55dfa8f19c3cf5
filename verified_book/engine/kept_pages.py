"""The book's pages as read before, kept between runs: a page whose bytes have not changed is not parsed again.

Every run, `--changed`, `plan`, `serve`'s start and the site read every page of the book, and
parsing them (`bindings.read_page`) costs what the book's pages number. Each page read is kept in a
file of its own, named by its path and the SHA-256 of its bytes, in one folder per parser,
`<root>/.cache/verified-book/pages/<parser>/`: a page is taken from there only while its bytes are the
same, and an edit writes the pages it changed and no other. The parser is named by its source
(`kept.code_of`), so an edit to the parser reads every page anew. A kept file that cannot be read or
written costs the parse and nothing else.
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

#: files a parser's folder keeps beyond one for each page of the book (pages as they were before an edit)
KEEP_EARLIER = 256


def read_pages(paths: Iterable[Path], root: Path) -> list[Page | OSError | UnicodeDecodeError]:
    """Each page of `paths`, read as `read_page` reads it (or the error that kept it from being read), taken
    from the book's kept pages where its bytes are those it was read from."""
    paths = list(paths)
    folder = _place(root)
    out: list[Page | OSError | UnicodeDecodeError] = []
    wrote = False
    for path in paths:
        try:
            raw = path.read_bytes()
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            out.append(e)
            continue
        rel = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        place = _of_page(folder, rel, raw) if folder is not None else None
        found = kept.taken(place) if place is not None else None
        if isinstance(found, Page) and found.file == rel:
            out.append(found)
            continue
        page = read_page(path, root, text)
        if place is not None:
            kept.keep(place, page, at_most=None)
            wrote = True
        out.append(page)
    if folder is not None and wrote:
        kept.let_go_oldest(folder, len(paths) + KEEP_EARLIER, ".pickle")
        kept.let_go_oldest(folder.parent, KEEP_PARSERS)
    return out


def _of_page(folder: Path, rel: str, raw: bytes) -> Path:
    """Where the page at `rel` read from the bytes `raw` is kept."""
    return kept.named(folder, hashlib.sha256(rel.encode() + b"\0" + raw).hexdigest())


def read_or_raise(paths: Iterable[Path], root: Path) -> list[Page]:
    """`read_pages`, raising the first error that kept a page from being read, as `read_page` would."""
    out = []
    for page in read_pages(paths, root):
        if isinstance(page, Exception):
            raise page
        out.append(page)
    return out


def _place(root: Path) -> Path | None:
    """The folder of the pages read by this parser; None where the parser's source cannot be read."""
    code = kept.code_of([bindings.__name__], {"verified_book"})
    if code is None:
        return None
    return root / FOLDER / hashlib.sha256(code.encode()).hexdigest()[:32]
