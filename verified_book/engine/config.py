"""Where a book keeps its parts: `book.toml` at the book's root, read here for both plugins.

The engine knows no book. Every door (the pytest plugin, the MkDocs plugin, the CLI, serve) reads
`book.toml` with `read_config` and calls `open_book`, which returns one `OpenBook`: the book's
registry, inputs, profiles and snippet figures, made current with `with book.opened():`. A book
that another author writes is a folder with a `book.toml`, its pages and its claims.

    [book]
    pages = "book"                      # the Markdown pages (MkDocs' docs_dir)
    snippets = "book/snippets"          # lab scripts, each run and its output recorded
    allowlist = "book/allowlist.toml"   # numbers that are not figures, each with a reason
    topics = ["claims.topics"]          # packages whose modules declare the claims
    data = "claims/data"                # stated inputs (configs, vendor figures)
    hardware = "hardware"               # hardware profiles, a folder inside `data`
    results = "results"                 # one results file per machine, committed: what the site shows
    local_results = "results.local"     # optional: where a run on this clone writes its machine's file
                                        # (git-ignored; the site shows it beside `results`); default `results`
    plausible = "claims.topics.measured:plausible"  # optional: bounds a contributed measured value must lie in
    plots = "claims.plots:render_plots_page"  # optional: draws the plots page from the results (each chart
                                        # through verified_book.site.plot_cache.remembered is kept between builds)
    offline = true                      # optional: refuse network access while claims compute
    elsewhere = ["author_test_box"]     # optional: machines a measured figure may be printed for that no
                                        # hardware profile describes; compared nowhere, shown as reference
    backends = ["numpy"]                # optional: the libraries (or backends, "torch:cpu") the book computes on;
                                        # every one the engine knows by default. Only these are detected,
                                        # imported and listed in a run's summary.
"""

from __future__ import annotations

import contextlib
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from verified_book.authoring.state import BookState, NoBookOpen, current
from verified_book.engine.kept_fingerprints import KeptFingerprints
from verified_book.errors import BookError, Problem, unparsable

if TYPE_CHECKING:
    from verified_book.engine.machine import Profile

FILE_NAME = "book.toml"


class ConfigError(BookError):
    """A `book.toml` that is missing, does not parse, or names something wrongly."""


@dataclass(frozen=True)
class BookConfig:
    """One book's layout, every path absolute."""

    root: Path
    pages: Path
    snippets: Path
    allowlist: Path
    topics: tuple[str, ...]
    data: Path
    hardware: str
    results: Path
    plots: str | None = None
    offline: bool = False
    local_results: Path | None = None
    plausible: str | None = None
    elsewhere: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()  # the libraries or backends the book declares; () for every one

    @property
    def writes_to(self) -> Path:
        """Where a run writes this machine's results file: the local folder where the book has one."""
        return self.local_results or self.results

    def shown(self, path: Path) -> str:
        """A path as messages print it: relative to the book's root where it lies inside."""
        path = Path(path)
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)


DEFAULTS: dict[str, Any] = {
    "pages": "book",
    "snippets": None,  # <pages>/snippets
    "allowlist": None,  # <pages>/allowlist.toml
    "topics": [],
    "data": "data",
    "hardware": "hardware",
    "results": "results",
    "plots": None,
    "offline": False,
    "local_results": None,
    "plausible": None,
    "elsewhere": [],
    "backends": [],
}


def read_config(root: Path) -> BookConfig:
    """The `book.toml` of the book at `root`, with defaults filled in."""
    root = Path(root).resolve()
    path = root / FILE_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no {FILE_NAME}; a book's root holds one that says where its pages, claims and data are"
        ) from None
    try:
        table = tomllib.loads(text).get("book", {})
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(str(unparsable(str(path), e))) from None
    unknown = sorted(set(table) - set(DEFAULTS))
    if unknown:
        raise ConfigError(
            f"{path}: [book] has unknown key(s) {', '.join(unknown)}; expected some of {', '.join(DEFAULTS)}"
        )
    values = {**DEFAULTS, **table}
    for key in ("pages", "data", "hardware", "results", "local_results", "plausible", "plots"):
        if key in table and not isinstance(table[key], str):
            raise ConfigError(f"{path}: [book] {key} must be a string, found {table[key]!r}")
    for key in ("pages", "data", "hardware", "results"):
        if not isinstance(values[key], str):
            raise ConfigError(f"{path}: [book] {key} must be a path as a string, found {values[key]!r}")
    topics = values["topics"]
    if isinstance(topics, str):
        topics = [topics]
    if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
        raise ConfigError(f"{path}: [book] topics must be a list of package names, found {topics!r}")
    elsewhere = values["elsewhere"]
    if not isinstance(elsewhere, list) or not all(isinstance(a, str) and a for a in elsewhere):
        raise ConfigError(f"{path}: [book] elsewhere must be a list of machine names, found {elsewhere!r}")
    declared = values["backends"]
    if not isinstance(declared, list) or not all(isinstance(b, str) and b for b in declared):
        raise ConfigError(
            f'{path}: [book] backends must be a list of libraries or backends ("numpy", "torch:cpu"), '
            f"found {declared!r}"
        )
    pages = root / values["pages"]
    return BookConfig(
        root=root,
        pages=pages,
        snippets=root / values["snippets"] if values["snippets"] else pages / "snippets",
        allowlist=root / values["allowlist"] if values["allowlist"] else pages / "allowlist.toml",
        topics=tuple(topics),
        data=root / values["data"],
        hardware=values["hardware"].strip("/"),
        results=root / values["results"],
        plots=values["plots"],
        offline=bool(values["offline"]),
        local_results=root / values["local_results"] if values["local_results"] else None,
        plausible=values["plausible"],
        elsewhere=tuple(elsewhere),
        backends=tuple(declared),
    )


def find_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` that holds a `book.toml`."""
    start = Path(start).resolve()
    for folder in (start, *start.parents):
        if (folder / FILE_NAME).is_file():
            return folder
    return None


class OpenBook(BookState):
    """One book opened: its layout (`config`), its claims, its inputs, its hardware profiles and the figures
    its snippets printed. `with book.opened():` makes it the book every authoring function and engine lookup
    reads (`current_book`); opening another book, after it or inside it, sees nothing of this one's."""

    def __init__(self, config: BookConfig) -> None:
        from verified_book.authoring.inputs import Inputs
        from verified_book.authoring.registry import Registry
        from verified_book.engine.snippet_figures import SnippetFigures

        super().__init__(config.root, Registry(), Inputs(config.data, config.shown(config.data)))
        self.config = config
        self.load_errors: list[Problem] = []  # the topics' load errors and the names they declare that nothing defines
        self._profiles: dict[str, Profile] | None = None
        self.snippets = SnippetFigures(config.root, config.pages, config.snippets)
        self.fingerprints = KeptFingerprints(config.root, (topic.split(".")[0] for topic in config.topics))

    @contextlib.contextmanager
    def opened(self) -> Iterator[OpenBook]:
        """The book current for the block, its root on `sys.path` so its content imports (claims, plots,
        plausibility); the book current before is again after, and `sys.path` as it was."""
        root = str(self.root)
        added = root not in sys.path
        if added:
            sys.path.insert(0, root)
        try:
            with super().opened():
                yield self
        finally:
            self.fingerprints.save()  # what the block read of the claims' code, for the next process
            if added and root in sys.path:
                sys.path.remove(root)

    def profiles(self) -> dict[str, Profile]:
        """The book's hardware profiles by marker, read once from its data folder."""
        if self._profiles is None:
            from verified_book.engine.machine import read_profiles

            with self.opened():
                self._profiles = read_profiles(self.config.hardware)
        return self._profiles


def current_book() -> OpenBook:
    """The book open in this context (`NoBookOpen` where none is)."""
    book = current()
    if not isinstance(book, OpenBook):
        raise NoBookOpen(f"the book open is not one `open_book` opened: {book!r}")
    return book


def open_book(config: BookConfig) -> OpenBook:
    """Open the book at `config`: a fresh registry filled by its topics, its inputs, profiles and snippet figures.

    Its topics load inside `book.opened()` (the book's root on `sys.path`), so their claims go to this
    book's registry; a topic module another book imported already gives this one the claims it declared
    then. The topics' load errors are `book.load_errors`. The caller enters `with book.opened():` for the work it does.
    """
    from verified_book.authoring import registry
    from verified_book.backends import NAMES
    from verified_book.engine.snippet_run import forget_shared_runs

    book = OpenBook(config)
    forget_shared_runs()
    errors: list[Problem] = []
    with book.opened():
        for package in config.topics:
            try:
                errors += registry.load_topics(package)
            except registry.RegistryError as e:
                errors.append(e.problem or Problem(FILE_NAME, str(e)))
        profiles = {marker: profile.backends for marker, profile in book.profiles().items()}
        errors += registry.undeclared_names(book.registry, NAMES, profiles, config.elsewhere)
    book.load_errors = errors
    return book
