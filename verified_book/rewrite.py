"""Rewrite stale figures in the book in place, the way `--force-regen` rewrites a data file.

Only figures judged stale in this run are touched, each at its printed precision and
in its printed notation; a figure that holds, a disputed one, and one whose backends
disagree among themselves are left as they are.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from verified_book.bindings import BINDING, Binding

if TYPE_CHECKING:
    from verified_book.check import Verifier


def _replacement(binding: Binding, new_text: str) -> tuple[str, str | None]:
    """New link text and title for a stale binding: the title carries the value when there is one."""
    title = binding.title
    if title is not None and binding.stated != binding.text:
        parts = [p.strip() for p in title.split(";")]
        parts[0] = new_text
        return binding.text, "; ".join(parts)
    return new_text, title


def rewrite_stale(verifier: "Verifier", root: Path) -> list[str]:
    """Rewrite every stale figure from the values this run computed; return 'file:line' of each."""
    from verified_book.backends import NO_BACKEND

    plans: dict[tuple[str, int, int], str] = {}
    for (claim_id, backend_name), outcome in verifier.judged.items():
        claim = verifier.registry[claim_id]
        backend = verifier.backends.get(backend_name, NO_BACKEND)
        for verdict in verifier.verdicts(claim, backend):
            if verdict.status != "stale" or verdict.binding.printed is None:
                continue
            key = (verdict.binding.file, verdict.binding.line, verdict.binding.column)
            new = verdict.binding.printed.render(outcome.value)
            # Backends that disagree leave no single value to write.
            plans[key] = new if plans.get(key, new) == new else ""
    edits: dict[str, list[tuple[int, int, str]]] = {}
    for (file, line, column), new in plans.items():
        if new:
            edits.setdefault(file, []).append((line, column, new))
    changed = []
    for file, items in edits.items():
        path = root / file
        lines = path.read_text(encoding="utf-8").split("\n")
        for line, column, new in sorted(items, reverse=True):
            text = lines[line - 1]
            match = BINDING.match(text, column - 1)
            if not match:
                continue
            binding = next(b for b in verifier.bindings.get(match.group("id"), [])
                           if b.file == file and b.line == line and b.column == column)
            link_text, title = _replacement(binding, new)
            title_part = f' "{title}"' if title is not None else ""
            lines[line - 1] = text[: match.start()] + f"[{link_text}](claim:{match.group('id')}{title_part})" + text[match.end():]
            changed.append(f"{file}:{line}")
        path.write_text("\n".join(lines), encoding="utf-8")
    return sorted(changed)
