"""Where a book keeps its parts: `book.toml` at the book's root, read here for both plugins.

The engine knows no book. The pytest plugin and the MkDocs plugin each call `open_book`
with the folder they run from; it reads `book.toml`, points the input reader at the
book's data, makes the book's content importable and loads its topic modules. A book
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

import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from verified_book.errors import BookError, Problem, unparsable

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


def snapshot() -> Callable[[], None]:
    """Remember which book this process has open; the returned function reopens it.

    A run inside a run (pytester, a sample book) opens its own book; on its way out it
    gives the outer run its book back, data folder, root and profiles alike.
    """
    from verified_book.authoring import inputs, registry
    from verified_book.engine import machine, snippet_figures

    saved = (
        inputs.DATA_DIR,
        inputs.SHOWN_AS,
        registry.ROOT,
        machine.HARDWARE_DIR,
        list(sys.path),
        snippet_figures.book(),
    )

    def restore() -> None:
        data, shown, root, hardware, path, snippets = saved
        inputs.use_data_dir(data, shown)
        registry.use_root(root)
        machine.use_hardware_dir(hardware)
        sys.path[:] = path
        snippet_figures.use_book(*snippets)

    return restore


def open_book(config: BookConfig) -> list[Problem]:
    """Make `config` the book this process verifies or renders; return its topics' load errors.

    Points `inputs` at the book's data, `registry` at its root (for file:line in
    messages) and `snippet_figures` at its pages and snippets, puts the root on `sys.path`
    so its content imports, and loads its topics.
    """
    from verified_book.authoring import inputs, registry
    from verified_book.engine import machine, snippet_figures

    inputs.use_data_dir(config.data, config.shown(config.data))
    machine.use_hardware_dir(config.hardware)
    registry.use_root(config.root)
    snippet_figures.use_book(config.root, config.pages, config.snippets)
    if str(config.root) not in sys.path:
        sys.path.insert(0, str(config.root))
    errors: list[Problem] = []
    for package in config.topics:
        try:
            errors += registry.load_topics(package)
        except registry.RegistryError as e:
            errors.append(e.problem or Problem(FILE_NAME, str(e)))
    from verified_book.backends import NAMES

    profiles = {marker: profile.backends for marker, profile in machine.profiles().items()}
    return errors + registry.undeclared_names(registry.REGISTRY, NAMES, profiles, config.elsewhere)
