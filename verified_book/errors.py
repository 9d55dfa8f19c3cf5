"""What goes wrong, said once: the engine's errors share one base, and a problem to report is a value.

A `BookError` is raised where the engine cannot go on (a `book.toml` that does not parse, a data file
without the key a claim asks for); a `Problem` is what a run or a build reports and goes on past (a
topic module that does not import, a figure bound to an unknown claim). Both carry where (`file:line`),
what, and where it helps, the remedy, so no caller splits a message back apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class BookError(Exception):
    """The base of every error the engine raises about a book, its claims, data or records: raised with
    its text, or with a `Problem` whose parts a caller reads without splitting the text."""

    def __init__(self, what: object = "") -> None:
        self.problem = what if isinstance(what, Problem) else None
        super().__init__(str(what))


@dataclass(frozen=True)
class Problem:
    """Something a run or a build must report: where (`file:line`), what, and what to do about it."""

    where: str
    message: str
    remedy: str = ""

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" + (f"; {self.remedy}" if self.remedy else "")


def unparsable(path: str, error: ValueError) -> Problem:
    """A data or config file that does not parse, placed as a compiler places it (`file:line:column`): tomllib
    (before Python 3.14) says its line and column only in its text, json in attributes."""
    lineno, colno, message = getattr(error, "lineno", None), getattr(error, "colno", None), getattr(error, "msg", None)
    if lineno is None:
        found = re.fullmatch(r"(?s)(.*) \(at line (\d+), column (\d+)\)", str(error))
        if found:
            message, lineno, colno = found[1], int(found[2]), int(found[3])
    where = f"{path}:{lineno}:{colno}" if lineno is not None else path
    return Problem(where, f"does not parse: {message or error}")
