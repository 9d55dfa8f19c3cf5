"""The repository's folders, named once: a test file computes no path from where it happens to sit."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root: the project's own book (book.toml, book/, claims/, results/) and its scripts."""
SAMPLES = ROOT / "tests" / "samples"
"""The sample pages and books the tests read, shared by every group of tests."""
