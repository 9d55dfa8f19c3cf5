"""`verified-book init`: a new book in an empty folder, written from the engine's own template."""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: the book `init` writes, shipped with the engine (examples/minimal/README.md points here)
TEMPLATE = Path(__file__).resolve().parents[1] / "template"


def template_files() -> list[Path]:
    """The files of the book `init` writes, relative to the template's folder."""
    return sorted(
        p.relative_to(TEMPLATE)
        for p in TEMPLATE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )


def init(args: list[str]) -> int:
    """`verified-book init [FOLDER]`: a new book in an empty folder."""
    if len(args) > 1 or any(a.startswith("-") for a in args):
        print(
            "verified-book init: expected at most one argument, the folder for the new book; found " + " ".join(args),
            file=sys.stderr,
        )
        return 2
    folder = Path(args[0] if args else ".").resolve()
    if folder.exists() and not folder.is_dir():
        print(f"verified-book init: {folder} is a file; name a folder for the new book", file=sys.stderr)
        return 2
    # a folder with only hidden entries (.git, a .venv) counts as empty
    present = sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []
    if present:
        print(
            f"verified-book init: {folder} is not empty ({', '.join(present[:5])}"
            f"{', ...' if len(present) > 5 else ''}); a new book starts in an empty folder",
            file=sys.stderr,
        )
        return 1
    files = template_files()
    clashes = [str(f) for f in files if (folder / f).exists()]
    if clashes:
        print(
            f"verified-book init: {folder} already has {', '.join(clashes)}; a new book starts in an empty folder",
            file=sys.stderr,
        )
        return 1
    for relative in files:
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((TEMPLATE / relative).read_bytes())
    shown = os.path.relpath(folder) if folder.is_relative_to(Path.cwd()) else str(folder)
    print(
        f"verified-book: a new book in {folder}: one page (pages/index.md), its claims (book_claims/topics/half.py) "
        f"and their data (book_claims/data/); {len(files)} files.\n"
        + (f"  cd {shown}\n" if shown != "." else "")
        + "  pytest                  # verify every figure on the backends book.toml declares\n"
        "  mkdocs build --strict   # the site, each figure marked with what the runs found"
    )
    return 0
