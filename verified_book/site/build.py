"""What every site generator's build of a book does, whichever runs it: one page's step, the results it
reads, and the generated pages written ahead of a build for a generator that runs no plugin.

The MkDocs plugin (`verified_book.integration.mkdocs_plugin`) and the Markdown extension
(`verified_book.integration.markdown_ext`, which renders the marks under Zensical) both call `render_page` on each
page's Markdown and `read_results` for the machines' files, so a figure is marked the same under either.
`verified-book pages` drives the MkDocs plugin to the Machines, Plots and legend pages and writes them,
with the marks' stylesheet and script, into the book's pages folder (`write_pages`): a generator that
runs no plugin builds them as any page, and the extension fills their blocks from `PAGES_FILE`.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from markupsafe import Markup

from verified_book.book.bindings import GENERATED, Page, read_page
from verified_book.book.bindings import generated as marked
from verified_book.engine import verdicts as verdicts_mod
from verified_book.engine.config import BookConfig
from verified_book.engine.long_lived import long_lived
from verified_book.errors import Problem
from verified_book.records import store
from verified_book.records.fleet import read_all
from verified_book.records.results import CHECKED_RESULTS, SLUG_PATTERN, ResultsError, ResultsFile
from verified_book.site import machines as site_machines
from verified_book.site import render, transform
from verified_book.vocabulary import fingerprint

#: where `verified-book pages` keeps the generated pages' blocks and what they were written from,
#: relative to the book's root (outside the pages folder, so no generator publishes it)
PAGES_FILE = Path(".cache") / "verified-book" / "pages.json"
#: what to run when the generated pages are missing or older than the results
PAGES_COMMAND = "verified-book pages"


def with_mark(relative: str, text: str) -> str:
    """A generated file's text, its first line saying so in the file's own comment syntax."""
    if relative.endswith(".css") or relative.endswith(".js"):
        return f"/* {GENERATED} */\n{text}"
    return f"<!-- {GENERATED} -->\n{text}"


def without_mark(text: str) -> str:
    first, newline, rest = text.partition("\n")
    return rest if GENERATED in first else text


def render_page(
    markdown: str,
    path: Path,
    root: Path,
    pages: Mapping[Path, Page],
    context: transform.Context,
    verdicts: verdicts_mod.Verdicts,
    rows: render.PanelRows | None = None,
) -> transform.RenderedPage:
    """One page's step: its Markdown with a placeholder for each bound figure, and the HTML each stands for.

    `path` is the page's file; its bindings (file:line) come from the book's pages read once (`pages`,
    by resolved path), or from the file itself. The Markdown may lack the file's front matter: the
    lines it lacks are counted, so every binding finds its line. Given `rows`, the panels leave the machines
    that do not decide their figure there, for the page's data file (`panel_rows_script`).
    """
    path = path.resolve()
    book_page = pages.get(path) or read_page(path, root)
    source = path.read_text(encoding="utf-8")
    offset = source[: len(source) - len(markdown)].count("\n") if markdown and source.endswith(markdown) else 0
    with verdicts_mod.judged_once(verdicts):
        return transform.render_markdown(markdown, book_page, context, offset, rows)


#: the function a page's data file calls with its panels' rows (verified_book/assets/javascripts/claims.js)
ROWS_FUNCTION = "vbPanelRows"


def packed(value: Any) -> str:
    """`value` as a data file hands it to the page's script: JSON, compressed with gzip, in base64 (plain ASCII, safe
    in a script's string), which the script unpacks with the browser's own `DecompressionStream`. A fleet's rows
    repeat the same markup for every machine and figure: packed, they take a twentieth of their size or less, and a
    course's site stays within what a host publishes (GitHub Pages: 1 GB)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)).decode("ascii")


def unpacked(text: str) -> Any:
    """What `packed` packed."""
    return json.loads(gzip.decompress(base64.b64decode(text, validate=True)).decode("utf-8"))


def write_data_file(site_dir: Path, dest_uri: str, suffix: str, function: str, *keys: str, data: Any) -> str:
    """Write a script beside the page (`p/index.html`: `p/index{suffix}`) that makes one call, `function(*keys,
    packed(data))`, handing the page's script rows it loads when a reader asks for them (a page opened from disk may
    load a script, not fetch a file). The file's address relative to the page, with its digest, so a browser never
    shows an earlier one's."""
    text = f"{function}({', '.join(json.dumps(x) for x in (*keys, packed(data)))});\n"
    name = dest_uri.rsplit("/", 1)[-1].removesuffix(".html") + suffix
    path = site_dir / dest_uri.rsplit("/", 1)[0] / name if "/" in dest_uri else site_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return f"{name}?v={digest(text)[:12]}"


def read_data_file(path: Path) -> tuple[str, list[Any]]:
    """A data file `write_data_file` wrote, read back: the function it calls, and its keys and data (unpacked)."""
    function, _, call = path.read_text(encoding="utf-8").partition("(")
    *keys, data = json.loads(f"[{call.rstrip().removesuffix(');')}]")
    return function, [*keys, unpacked(data)]


def write_panel_rows(site_dir: Path, dest_uri: str, rows: Mapping[str, str]) -> str:
    """Write a page's panel data file (`p/index.panels.js`): each panel's rows of the machines that do not decide
    its figure, by panel id, which the page's script loads when a reader opens a panel. Its address (see
    `write_data_file`)."""
    return write_data_file(site_dir, dest_uri, ".panels.js", ROWS_FUNCTION, data={u: str(h) for u, h in rows.items()})


def with_matrix_rows(html: str, site_dir: Path, dest_uri: str, rows: site_machines.MatrixRows) -> str:
    """The machines page's HTML once its matrix rows are written, a file for each chapter key
    (`machines/index.matrix-c0.js`) which the page's script loads when a reader picks that chapter, and the
    table names each file's address in place of the placeholder (see `write_data_file`)."""
    addresses = {
        key: write_data_file(
            site_dir,
            dest_uri,
            f".matrix-{key}.js",
            site_machines.MATRIX_FUNCTION,
            key,
            data=str(Markup().join(chapter)),
        )
        for key, chapter in sorted(rows.files.items())
    }
    return html.replace(rows.url, site_machines.rows_addresses(addresses))


def with_line(where: str, what: str, root: Path) -> str:
    """`file:line` for a results-file problem: the line of the record it names, when it names one."""
    if ":" in Path(where).name or not what.startswith("records["):
        return where
    key = what.split("]", 1)[0][len("records[") :].strip("'\"")
    try:
        for number, line in enumerate((root / where).read_text(encoding="utf-8").splitlines(), 1):
            if f'"{key}"' in line:
                return f"{where}:{number}"
    except OSError:
        pass
    return where


@dataclass
class Results:
    """Every machine's results file the site shows, by the name it shows, and this clone's own among them."""

    files: dict[str, ResultsFile] = field(default_factory=dict)
    local: dict[str, str] = field(default_factory=dict)  # this clone's own runs: the file each is in
    read: list[Path] = field(default_factory=list)  # the files read, for `stamp`


@long_lived  # every machine's records, held for the whole build
def read_results(
    book: BookConfig,
    results_dir: Path | None,
    shown_dir: str,
    problem: Callable[[Problem], None],
    info: Callable[[str], None],
) -> Results:
    """Every machine's results file, committed and (unless the build is pointed at a results folder:
    `results_dir`, or CLAIMS_RESULTS_DIR as tests set) this clone's own. `shown_dir` names the folder in
    messages; each problem is handed to `problem` with its file:line."""
    out = Results()
    folder = results_dir or book.results

    def results_problem(text: str) -> None:
        for line in text.replace(str(book.root) + "/", "").splitlines():
            where, _, what = line.partition(": ")
            problem(Problem(with_line(where, what, book.root), what))

    if folder.is_dir():
        out.read += sorted(folder.glob("*.json"))
        for stem, results in read_all(folder, results_problem, kept_in=book.root / CHECKED_RESULTS).items():
            if SLUG_PATTERN.match(stem):
                out.files[stem] = results
            else:
                problem(
                    Problem(
                        f"{shown_dir}/{stem}.json",
                        "the file name is not a machine slug (lower-case letters, digits, '-', '_'); it is left out",
                    )
                )
    else:
        info(f"no results folder at {folder}: every figure shows as not yet verified")
    local = book.local_results
    if "CLAIMS_RESULTS_DIR" not in os.environ and local is not None and local.is_dir():
        stores = sorted(local.glob(f"*{store.SUFFIX}"))
        out.read += sorted(local.glob("*.json")) + [p for s in stores for p in (s, Path(f"{s}-wal")) if p.is_file()]
        _read_local(book, local, out, problem, info, results_problem)
    return out


def _read_local(
    book: BookConfig,
    local: Path,
    out: Results,
    problem: Callable[[Problem], None],
    info: Callable[[str], None],
    results_problem: Callable[[str], None],
) -> None:
    """This clone's own runs (`local_results` in book.toml, git-ignored), shown beside the committed
    machines; where this machine also has a committed file, the local one, newer, is shown."""
    from verified_book.site import machines as site_machines

    shown = book.shown(local)
    found = {
        f"{stem}.json": results
        for stem, results in read_all(local, results_problem, kept_in=book.root / CHECKED_RESULTS, own=True).items()
    }
    for path in sorted(local.glob(f"*{store.SUFFIX}")):  # this machine's own history (verified_book.records.store)
        found.pop(f"{path.stem}.json", None)  # a JSON history beside it is taken in at the store's next write
        try:
            found[path.name] = store.Store(path).read(results_problem)
        except ResultsError as e:
            results_problem(str(e))
    for file, results in found.items():
        stem = Path(file).stem
        if not SLUG_PATTERN.match(stem):
            problem(
                Problem(
                    f"{shown}/{file}",
                    "the file name is not a machine slug (lower-case letters, digits, '-', '_'); it is left out",
                )
            )
            continue
        name = site_machines.local_name(stem) if stem in out.files else stem
        info(f"{shown}/{file} (this clone's run, not contributed) is shown as {name}, beside the committed machines")
        out.files[name] = results
        out.local[name] = f"{shown}/{file}"


def stamp(files: list[Path], pages: list[Path]) -> str:
    """What the generated pages were written from: the results files and the book's pages, by content."""
    return fingerprint(
        b"".join(
            path.name.encode() + b"\0" + path.read_bytes() + b"\0"
            for path in sorted({*files, *pages})
            if path.is_file() and not marked(path)
        )
    )


@dataclass
class Written:
    """What `verified-book pages` wrote: each generated page's Markdown and blocks, and what a build
    without the plugin needs to render the pages as the plugin would (the plugin's settings, the stamp
    of what the pages were written from, the assets' digests)."""

    settings: dict[str, Any]  # results_dir (relative to the root), today, report_within_days, legend_page
    stamp: str
    pages: dict[str, render.GeneratedPage]
    assets: dict[str, str] = field(default_factory=dict)  # each asset's path in the pages folder: its sha256

    def dump(self) -> str:
        return json.dumps(
            {
                "settings": self.settings,
                "stamp": self.stamp,
                "assets": self.assets,
                "pages": {src: {"markdown": p.markdown, "blocks": p.blocks} for src, p in self.pages.items()},
            },
            indent=1,
            sort_keys=True,
        )

    @classmethod
    def load(cls, text: str) -> Written:
        data: dict[str, Any] = json.loads(text)
        return cls(
            data["settings"],
            data["stamp"],
            {src: render.GeneratedPage(p["markdown"], p["blocks"]) for src, p in data["pages"].items()},
            data["assets"],
        )


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: the marks' stylesheet and script, shipped inside the engine: by their path in the site
ASSETS = Path(__file__).resolve().parents[1] / "assets"  # package data at the engine's root
ASSET_PATHS = ("assets/stylesheets/claims.css", "assets/javascripts/claims.js")


def engine_assets() -> dict[str, Path]:
    return {path: ASSETS.parent / path for path in ASSET_PATHS}


def write_pages(root: Path, docs: Path, written: Written, assets: Mapping[str, Path]) -> list[Path]:
    """Write the generated pages and the engine's assets into the pages folder, each marked as generated,
    and their blocks to `PAGES_FILE`; the files written. A file of the same name that is the book's own
    is left as it is, and nothing is written."""
    texts = {docs / src: with_mark(src, page.markdown) for src, page in written.pages.items()}
    for src, origin in assets.items():
        text = origin.read_text(encoding="utf-8")
        written.assets[src] = digest(text)
        texts[docs / src] = with_mark(src, text)
    own = [str(path) for path in texts if path.exists() and not marked(path)]
    if own:
        raise FileExistsError(
            f"{', '.join(own)}: the book's own file of the name of a page or asset the engine "
            f"generates; {PAGES_COMMAND} writes nothing over it (rename the book's file)"
        )
    texts[root / PAGES_FILE] = written.dump()
    for path, text in texts.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    return list(texts)


def stand_in(title: str, anchors: list[str]) -> str:
    """A page that is in the nav but not written yet, keeping the places other pages link to."""
    text = (
        f'# {title}\n\n!!! note "Being written"\n\n'
        "    This chapter is being written. Its figures appear here, each with what "
        "every machine computed, as soon as the page lands.\n"
    )
    if anchors:
        text += (
            "\nSections other chapters already point to: "
            + ", ".join(f'<span id="{a}">{a.replace("-", " ")}</span>' for a in anchors)
            + ".\n"
        )
    return text
