"""The distributions a requirement installs, and the pytest plugins a machine has beyond them."""

from __future__ import annotations

import importlib.metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def requirement_closure(root: str, extras: set[str]) -> set[str]:
    """The distributions `root[extras]` installs, read from the installed distributions' own metadata."""
    seen: set[str] = set()
    walked: set[tuple[str, frozenset[str]]] = set()  # each distribution once per set of extras: cycles end
    todo = [(root, frozenset(extras))]
    while todo:
        name, wanted = todo.pop()
        key = canonicalize_name(name)
        if (key, wanted) in walked:
            continue
        walked.add((key, wanted))
        seen.add(key)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            requirement = Requirement(text)
            markers = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if requirement.marker is None or any(requirement.marker.evaluate(m) for m in markers):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return seen


def foreign_plugins() -> list[str]:
    """The pytest plugins installed here (entry points of `pytest11`) that the project's `dev` extra does not
    bring: a machine's own, such as a CUDA image's jaxtyping, whose plugin imports numpy at start-up."""
    ours = requirement_closure("verified-book", {"dev"})
    return sorted(
        {
            ep.name
            for ep in importlib.metadata.entry_points(group="pytest11")
            if ep.dist is None or canonicalize_name(ep.dist.name) not in ours
        }
    )
