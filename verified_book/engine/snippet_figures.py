"""Measured claims whose value is what a book snippet prints on this machine.

A snippet that times the machine prints figures a chapter binds to measured claims: the
milliseconds per call of `intensity.py`, the seconds and the rate of `matmul_cost.py`.
Timing the same work again inside the claims would time the machine twice, and time
something a little different from what a reader's run prints. Such a claim reads its value
from this process's run of the snippet instead (`snippet_figure`): the number the run
printed where the book's output block shows the claim's figure.

The snippet runs once per process (`snippet_run.shared_run`), for its own check and for
every claim that reads it. Each read is recorded as an input of the claim (the snippet,
a hash of its source, the book's line), so a record made before the snippet changed reads
as outdated, as one made before its data changed does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from verified_book.authoring import inputs
from verified_book.authoring.registry import is_measured
from verified_book.book.bindings import book_pages
from verified_book.book.figures import FigureSyntaxError, Printed, parse
from verified_book.book.snippet_output import BookOutputs, NotPrinted, printed_figure, read_book
from verified_book.engine.config import current_book
from verified_book.engine.snippet_run import SnippetRun, forget_shared_runs, shared_run
from verified_book.vocabulary import fingerprint


class SnippetFigureError(inputs.InputError):
    """A claim asked for a figure its snippet's run did not print: the snippet failed, or printed another line."""


@dataclass
class SnippetFigures:
    """Where an open book's snippet figures are read from (its root, pages and snippets), and what was read:
    its output blocks, once, and its runs of the snippets, each with its source's hash."""

    root: Path
    pages: Path
    snippets: Path
    outputs: BookOutputs | None = None
    ran: dict[Path, tuple[SnippetRun, str]] = field(default_factory=dict)


def _state() -> SnippetFigures:
    return current_book().snippets


def forget_runs() -> None:
    """Forget the open book's runs of the snippets, so that the next figure read runs its snippet as it is now
    (a live preview, after a snippet was saved)."""
    _state().ran.clear()
    forget_shared_runs()


def book_outputs() -> BookOutputs:
    """The open book's output blocks, read once per book (the claims are loaded by then)."""
    state = _state()
    if state.outputs is None:
        pages = book_pages(state.pages) if state.pages.is_dir() else []
        state.outputs = read_book(pages, state.root, state.snippets, is_measured)
    return state.outputs


def shown(path: Path) -> str:
    """A snippet's path as records and messages name it: relative to the book's root."""
    root = _state().root
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def source_hash(path: Path) -> str:
    """What a record keeps of the snippet it read: a hash of the source that printed the figure."""
    return fingerprint(path.read_bytes())


def snippet_hashes(snippets: Path) -> Callable[[str], str | None]:
    """A snippet's source hash by its file name, in the folder `snippets`; None for a name it does not hold."""

    def of(name: str) -> str | None:
        path = snippets / name
        return source_hash(path) if path.is_file() else None

    return of


def _ran(path: Path) -> tuple[SnippetRun, str]:
    """The open book's run of a snippet, and the hash of its source, read once beside the run."""
    ran = _state().ran
    if path not in ran:
        ran[path] = (shared_run(path), source_hash(path))
    return ran[path]


def snippet_figure(claim_id: str) -> float | tuple[float, ...]:
    """The number this machine's run of a snippet printed where the book shows `claim_id`'s figure.

    The block is the first that shows the figure on a line declared varying (`varies=`): a
    line that does not vary must print the book's number, so there is nothing to read. A
    figure of several numbers gives them all.
    """
    values = tuple(float(p.value) for p in _printed(claim_id))  # type: ignore[arg-type]
    return values[0] if len(values) == 1 else values


def snippet_holds(claim_id: str, value: object) -> bool:
    """Whether the figure this machine's run printed for `claim_id` holds `value` at its printed precision."""
    (printed,) = _printed(claim_id)
    return printed.holds(value)


def _printed(claim_id: str) -> tuple[Printed, ...]:
    block = next(
        (
            b
            for b in book_outputs().blocks
            for line in b.lines
            if line.varies and any(n.claim_id == claim_id for n in line.numbers)
        ),
        None,
    )
    if block is None or block.snippet is None:
        raise SnippetFigureError(
            f"no output block of the book shows {claim_id} on a line declared varying "
            "(```output <snippet> varies=<lines>), so no snippet's run prints it"
        )
    snippets = _state().snippets
    path = snippets / block.snippet
    if not path.is_file():
        raise SnippetFigureError(f"{block.where}: the block shows {block.snippet}, which is not in {shown(snippets)}")
    run, digest = _ran(path)
    if run.exit_status != 0:
        raise SnippetFigureError(
            f"{shown(path)} exited {run.exit_status} ({run.how}), so it printed no {claim_id} "
            f"for {block.where}:\n{run.stderr[-2000:]}"
        )
    try:
        line, texts = printed_figure(block, run.stdout, claim_id)
    except NotPrinted as e:
        raise SnippetFigureError(f"{e} ({run.how})") from None
    inputs.snippet_figure_read(inputs.SnippetFigure(shown(path), digest, line.where, " ".join(texts)))
    try:
        printed = tuple(parse(text) for text in texts)
    except FigureSyntaxError:
        printed = ()
    if not printed or any(isinstance(p.value, tuple) for p in printed):
        raise SnippetFigureError(
            f"{line.where}: {shown(path)} printed {' '.join(texts)!r} for {claim_id}, which does not read as a number"
        )
    return printed
