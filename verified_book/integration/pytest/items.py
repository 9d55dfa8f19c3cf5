"""The book's collectors and items: each item asks the session to compute or judge, and reports what it says.

A failure reads as the engine words it (file:line, printed against computed); nothing here decides a status.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import pytest

from verified_book import backends as backends_mod
from verified_book.authoring.registry import REGISTRY, Claim
from verified_book.book.bindings import Binding, Page
from verified_book.engine import machine as machine_mod
from verified_book.engine.session import Session, case_id, figure_keywords, figure_name
from verified_book.engine.snippet_run import SnippetRun, run_as_script, shared_run
from verified_book.errors import BookError
from verified_book.integration.pytest.marks import mark_of, marks
from verified_book.integration.pytest.stash import COLLECTED, state

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr  # pytest exports no public name for a failure's representation


class ClaimsFile(pytest.File):
    """The book's claims, collected from its `book.toml`: one item per claim and backend, and
    one that fails when a topic module does not load."""

    def collect(self) -> Iterator[pytest.Item]:
        run = state(self.config)
        yield TopicsItem.from_parent(self, name=TopicsItem.NAME)
        collected = self.config.stash.get(COLLECTED, None)
        for claim in REGISTRY:
            if collected is not None and claim.id not in collected.claims:
                continue
            for backend in run.verifier.backends_for(claim):
                item = ClaimItem.from_parent(self, name=case_id(claim, backend.name), claim=claim, backend=backend)
                for mark in marks(run, claim, backend.name):
                    item.add_marker(mark)
                skip = run.hardware_skip(claim)
                if skip is None and not backend.available:
                    here = ", ".join(b.name for b in run.backends.values() if b.available) or "no backend"
                    skip = f"{backend.name} is not here: {backend.reason}; this machine has {here}"
                if skip:
                    item.add_marker(pytest.mark.skip(reason=skip))
                    item.not_here = skip
                yield item


class TopicsItem(pytest.Item):
    """A topic module that fails to import, or declares a bad claim, fails here and only here; so does
    a data file whose `source` states another number than its `value`, and an allow-list entry that
    excuses nothing. book.toml always holds one; a page holds one where the book has such a problem,
    so that checking the page alone says so too, and the run keeps one of them (`keep_one_load_check`)."""

    NAME = "every topic module loads"

    def runtest(self) -> None:
        errors = book_problems(state(self.config))
        if errors:
            raise BookFailure("\n".join(errors))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return str(excinfo.value)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.name


class ClaimItem(pytest.Item):
    """One claim on one backend: it computes and its invariants hold. Whether its printed
    figures still round to the value is the figure items' report, made once per figure."""

    def __init__(self, *, claim: Claim, backend: backends_mod.Backend, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.claim = claim
        self.backend = backend
        self.not_here: str | None = None  # why it will not run here, known at collection

    def runtest(self) -> None:
        check_claim(state(self.config), self.claim, self.backend)

    def reportinfo(self) -> tuple[Path, int, str]:
        return Path(self.claim.defined_in), self.claim.defined_line - 1, f"claim {self.claim.id} on {self.backend.name}"


def book_problems(run: Session) -> list[str]:
    """What keeps the book from loading cleanly, one message each: a topic module, a data file, the allow-list."""
    return [*map(str, run.load_errors), *(message for page, message in run.allowlist_problems() if page is None)]


def keep_one_load_check(items: list[pytest.Item]) -> None:
    """Of the load checks collected (book.toml's, and each page's where the book has a problem), keep book.toml's,
    or else the first page's: the same messages once."""
    checks = [item for item in items if isinstance(item, TopicsItem)]
    if len(checks) > 1:
        kept = next((c for c in checks if isinstance(c.parent, ClaimsFile)), checks[0])
        items[:] = [item for item in items if not isinstance(item, TopicsItem) or item is kept]


class BookPage(pytest.File):
    """A page of the book: one item per bound figure, plus the unbound-number check, and the book's load
    check where the book has a problem (a page checked alone still says that a topic module failed)."""

    def collect(self) -> Iterator[pytest.Item]:
        run = state(self.config)
        if book_problems(run):
            yield TopicsItem.from_parent(self, name=TopicsItem.NAME)
        rel = str(self.path.relative_to(run.root))
        page = next((p for p in run.book.pages if p.file == rel), None) or Page(rel)
        for binding in page.malformed:
            yield MalformedItem.from_parent(self, name=f"line {binding.line}: malformed", binding=binding)
        seen = Counter((b.line, b.text, b.claim_id) for b in page.bindings)
        for binding in page.bindings:
            claim = REGISTRY.get(binding.claim_id)
            twice = seen[(binding.line, binding.text, binding.claim_id)] > 1
            item = FigureItem.from_parent(self, name=figure_name(binding, twice), binding=binding)
            item.extra_keyword_matches.update(figure_keywords(binding, twice))
            if claim is not None:
                backends_used = (
                    [name for name in run.verifier.backends if claim.runs_on(name)]
                    if claim.needs_backend
                    else [backends_mod.NO_BACKEND.name]
                )  # names only: no library loads here
                names = set()
                for b in backends_used:
                    names.update(run.mark_names(claim, b))
                for n in sorted(names):
                    item.add_marker(mark_of(n))
                skip = run.hardware_skip(claim)
                if skip:
                    item.add_marker(pytest.mark.skip(reason=skip))
            yield item
        yield UnboundItem.from_parent(self, name="every number is bound", page=page)
        if run.output_blocks.of_page(rel):
            yield OutputBlocksItem.from_parent(self, name="every output block names its snippet", page=page)


class BookItem(pytest.Item):
    line = 0

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.line - 1, self.name

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | TerminalRepr:
        if isinstance(excinfo.value, BookFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class BookFailure(BookError, AssertionError):
    """A failure whose message is already a compiler-style report."""


class FigureItem(BookItem):
    def __init__(self, *, binding: Binding, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.binding = binding
        self.line = binding.line

    def runtest(self) -> None:
        judged = state(self.config).judge_figure(self.binding, self.nodeid)
        if judged.failure is not None:
            raise BookFailure(judged.failure)
        if judged.skip is not None:
            pytest.skip(judged.skip)


class MalformedItem(BookItem):
    def __init__(self, *, binding: Binding, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.binding = binding
        self.line = binding.line

    def runtest(self) -> None:
        bound = f"figure {self.binding.text} ({self.binding.claim_id}): " if self.binding.claim_id else ""
        raise BookFailure(f"{self.binding.where}:{self.binding.column}: {bound}{self.binding.error}")


class UnboundItem(BookItem):
    def __init__(self, *, page: Page, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.page = page
        self.line = 1

    def runtest(self) -> None:
        run = state(self.config)
        allowlist = run.book_config.shown(run.book_config.allowlist)
        lines = run.book.unbound_lines(self.page.file, allowlist)
        lines += [message for page, message in run.allowlist_problems() if page == self.page.file]
        if lines:
            raise BookFailure("\n".join(lines))


class OutputBlocksItem(BookItem):
    """A page's output blocks are declared right: each names a snippet of this book, and says which lines vary."""

    def __init__(self, *, page: Page, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.page = page
        self.line = 1

    def runtest(self) -> None:
        errors = state(self.config).output_blocks.errors(self.page.file)
        if errors:
            raise BookFailure("\n".join(errors))


class SnippetFile(pytest.File):
    """A lab snippet: run inside the test process in the default run (as a script there too where
    it sets what a library reads only as it loads, see `verified_book.engine.snippet_run`), as a script in the slow
    set."""

    def collect(self) -> Iterator[pytest.Item]:
        inside = SnippetItem.from_parent(self, name="runs in this process", runner=shared_run)
        script = SnippetItem.from_parent(self, name="runs as a script", runner=run_as_script)
        script.add_marker(pytest.mark.slow)
        for item in (inside, script):
            # a reader runs a snippet on any machine: `-m <machine>` runs it too, and its output is
            # recorded in that machine's results file beside the claims
            for name in ("cpu", *machine_mod.profiles()):
                item.add_marker(mark_of(name))
            yield item


class SnippetItem(BookItem):
    """A lab snippet runs as a reader would run it, its output is kept per machine, and what it
    printed is held against each output block of the book that shows it (`verified_book.book.snippet_output`)."""

    line = 1

    def __init__(self, *, runner: Callable[[Path], SnippetRun], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.runner = runner

    def runtest(self) -> None:
        judged = state(self.config).take_snippet_run(self.path, self.runner(self.path))
        if judged.failure is not None:
            raise BookFailure(judged.failure)


def check_claim(run: Session, claim: Claim, backend: backends_mod.Backend) -> None:
    """A claim item's check, as the session judges it: computed, skipped here, or failed."""
    judged = run.check_claim(claim, backend)
    if judged.skip is not None:
        pytest.skip(judged.skip)
    if judged.failure is not None:
        pytest.fail(judged.failure, pytrace=False)
