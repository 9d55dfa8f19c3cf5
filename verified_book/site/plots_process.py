"""A book's plots page, drawn in a process of its own while the site's other pages render.

Drawing is the slowest page of a build (matplotlib alone takes a second to load) and needs
nothing but the results files. Where a second core is free, the site starts
`python -m verified_book.site.plots_process`, which loads the drawing's code and reads the results
files itself (`build.read_results`, as the site reads them: handing over what the site read would
cost the site the time of copying every record) while the site reads them, draws, and gives the
page back when the site reaches it. Results the site holds in memory only are handed over (`give`).
The child is a plain interpreter, not a multiprocessing one, so nothing of the process that
builds the site (its main module, its threads) is imported or copied again.
Where the child cannot give a page back, the page is drawn in the building process instead,
so a drawing error surfaces there, once, with its own traceback.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from verified_book.records.results import ResultsFile
from verified_book.site import plot_cache
from verified_book.site.render import GeneratedPage

Draw = Callable[[Mapping[str, ResultsFile]], GeneratedPage]


def drawn(draw: Draw, results: Mapping[str, ResultsFile], root: Path) -> GeneratedPage:
    """The page `draw` makes of the results, its charts kept in the book's cache (`plot_cache`)."""
    with plot_cache.kept_in(root / plot_cache.FOLDER):
        return draw(results)


def function(where: str) -> Draw:
    """The function `module:function` names; ImportError or AttributeError where it names none."""
    module, _, name = where.partition(":")
    draw: Draw = getattr(importlib.import_module(module), name)
    return draw


class Drawing:
    """One plots page being drawn apart; `page()` waits for it, or draws it here."""

    def __init__(
        self, where: str, root: Path, results: Mapping[str, ResultsFile] | None, reads_from: Path | None = None
    ) -> None:
        """Start the child, which loads the drawing's code and then waits for the results: pass them
        here, or `give` them once read (None), so the child's start overlaps their reading, or let it read
        them (`read_apart`) from the book's results folder, or `reads_from`, as the site reads them."""
        self.where = where
        self.root = root
        self.reads_from = reads_from
        self.results: Mapping[str, ResultsFile] | None = None
        self._folder = tempfile.TemporaryDirectory(prefix="verified-book-plots-")
        self._given = Path(self._folder.name) / "results.pickle"
        # the book's root first on the path, as the building process has it, to import the book's package
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(root), os.environ.get("PYTHONPATH"))))}
        self._child: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-m", __name__, where, str(self._given), str(root)],
            cwd=root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        if results is not None:
            self.give(results)

    def give(self, results: Mapping[str, ResultsFile]) -> None:
        """The results to draw from: written beside the child, which reads them once told so on its input."""
        self.results = results
        self._given.write_bytes(pickle.dumps(dict(results)))
        self._tell(GIVEN)

    def read_apart(self, results: Mapping[str, ResultsFile]) -> None:
        """The child reads the results files itself; `results` are the same files as the site read them, drawn
        from here where the child gives no page back."""
        self.results = results
        self._tell(READ + os.fsencode(str(self.reads_from or "")))

    def _tell(self, line: bytes) -> None:
        if self._child is not None and self._child.stdin is not None:
            try:
                self._child.stdin.write(line + b"\n")
                self._child.stdin.flush()
            except BrokenPipeError:  # the child is gone: `page` draws here
                pass

    def page(self) -> GeneratedPage:
        """The drawn page: the child's, or drawn here where the child gave none back."""
        if self.results is None:
            self.cancel()
            raise ValueError(f"the drawing of {self.where} was given no results")
        child, self._child = self._child, None
        try:
            if child is not None:
                out, err = child.communicate()
                page = _unpickled(out) if child.returncode == 0 else None
                if isinstance(page, GeneratedPage):
                    sys.stderr.write(err.decode(errors="replace"))  # the drawing's own warnings
                    return page
        finally:
            self._folder.cleanup()
        return drawn(function(self.where), self.results, self.root)

    def cancel(self) -> None:
        """Stop the child (the build failed before it reached the page)."""
        child, self._child = self._child, None
        if child is not None:
            child.kill()
            child.communicate()
        self._folder.cleanup()


def _unpickled(data: bytes) -> Any:
    try:
        return pickle.loads(data)
    except Exception:  # noqa: BLE001 - whatever the child wrote, the page is then drawn here
        return None


#: what the building process tells the child on its input, in one line: the results are written beside it
#: (GIVEN), or the child reads them itself (READ, then the results folder the site reads, empty for the book's own)
GIVEN, READ = b"given", b"read "


def read_here(root: Path, folder: Path | None) -> dict[str, ResultsFile]:
    """The results files as the site reads them (`build.read_results`); their problems are the site's to say."""
    from verified_book.engine.config import read_config
    from verified_book.site.build import read_results

    return read_results(read_config(root), folder, "results", lambda problem: None, lambda text: None).files


def main(argv: list[str]) -> int:
    where, given, root = argv
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the page alone
        draw = function(where)
        told = sys.stdin.buffer.readline().rstrip(b"\n")  # the building process says where the results are
        if told.startswith(READ):
            folder = os.fsdecode(told[len(READ) :])
            results: Any = read_here(Path(root), Path(folder) if folder else None)
        else:
            results = pickle.loads(Path(given).read_bytes())
        page = drawn(draw, results, Path(root))
    sys.stdout.buffer.write(pickle.dumps(page))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
