"""What a run on one of the book's machines would check, answered from the claims and the profile alone.

`verified-book plan MARKER` and pytest's `--plan MARKER` both print `plan_lines`: nothing is computed,
no array library loaded, and pytest is not needed to say it.
"""

from __future__ import annotations

from verified_book import backends as backends_mod
from verified_book.authoring.registry import REGISTRY, Claim
from verified_book.book.bindings import Book, book_pages
from verified_book.engine import machine as machine_mod
from verified_book.engine.config import BookConfig, open_book
from verified_book.engine.kept_pages import read_or_raise
from verified_book.engine.session import applies_on
from verified_book.errors import BookError, Problem
from verified_book.vocabulary import NO_BACKEND_LABEL, NO_BACKEND_NAME

#: the heading under which the plan lists the claims no page prints
PLAN_UNPRINTED = "not printed"


class PlanError(BookError):
    """A plan asked for a machine the book does not describe."""


def plan_of(profile: machine_mod.Profile, book: Book) -> dict[str, list[tuple[Claim, list[str]]]]:
    """What a run on one of the book's machines would check, by the page that prints each claim's
    figures (`PLAN_UNPRINTED` for a claim printed nowhere): every claim with the backends it would
    run on there. Read from the claims and the profile alone: nothing is computed, no library loaded."""
    printed_on: dict[str, list[str]] = {}
    for binding in book.bindings():
        pages = printed_on.setdefault(binding.claim_id, [])
        if binding.file not in pages:
            pages.append(binding.file)
    names = [backends_mod.NO_BACKEND.name, *backends_mod.NAMES]
    plan: dict[str, list[tuple[Claim, list[str]]]] = {}
    for claim in REGISTRY:
        wanted = names[1:] if claim.needs_backend else names[:1]
        there = [
            b
            for b in wanted
            if (b == backends_mod.NO_BACKEND.name or claim.runs_on(b)) and applies_on(claim, b, profile)
        ]
        if there:
            for page in printed_on.get(claim.id) or [PLAN_UNPRINTED]:
                plan.setdefault(page, []).append((claim, there))
    return dict(sorted(plan.items(), key=lambda kv: (kv[0] == PLAN_UNPRINTED, kv[0])))


def plan_lines(marker: str, book: Book, option: str = "--plan") -> list[str]:
    """The plan for MARKER as it prints: a heading, then each page with its claims and their backends.
    `option` is how the reader asked for it, for the refusal of a marker the book does not know."""
    profiles = machine_mod.profiles()
    if marker not in profiles:
        raise PlanError(f"{option} {marker}: not one of the book's machines; expected one of {', '.join(profiles)}")
    profile = profiles[marker]
    plan = plan_of(profile, book)
    checks = {(claim.id, b) for entries in plan.values() for claim, backends in entries for b in backends}
    lines = [
        f"plan for {marker} ({profile.name}, backends {', '.join(profile.backends) or 'none listed'}, from "
        f"{profile.file}): {len(checks)} checks of {len({c for c, _ in checks})} claims; nothing was run"
    ]
    for page, entries in plan.items():
        lines.append(page)
        width = max(len(claim.id) for claim, _ in entries)
        lines += [f"  {claim.id:<{width}}  {', '.join(map(backend_label, backends))}" for claim, backends in entries]
    return lines


def backend_label(name: str) -> str:
    """A backend as the plan names it: the arithmetic kinds' `none` as what it means."""
    return NO_BACKEND_LABEL if name == NO_BACKEND_NAME else name


def book_plan(config: BookConfig, marker: str, option: str = "--plan") -> tuple[list[str], list[Problem]]:
    """Open the book at `config` and say its plan for MARKER, with the book's load errors; the book that
    was open before (if any) is open again afterwards."""
    book = open_book(config)
    with book.opened():
        pages = read_or_raise(book_pages(config.pages), config.root) if config.pages.is_dir() else []
        return plan_lines(marker, Book(config.root, pages, []), option), book.load_errors
