"""The checkout a run verified: its commit, and whether its tree held changes, which a run's header records."""

from __future__ import annotations

import subprocess
from pathlib import Path


def commit_of(root: Path, own: tuple[Path, ...] = ()) -> tuple[str | None, bool | None]:
    """The checkout's commit and whether its tree has changes other than in `own` (the results
    folders a run writes to, whose changes are its output, not its input); (None, None) outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None, None
        outside = [
            f":(exclude){Path(p).resolve().relative_to(root.resolve())}"
            for p in own
            if Path(p).resolve().is_relative_to(root.resolve())
        ]
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *outside],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return head.stdout.strip(), bool(status.stdout.strip()) if status.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None, None
