"""The engine docs' facts, read from the code when the docs are built, so no page restates them by hand.

A page asks for a fact with a line `<!-- vb:NAME -->`; `on_page_markdown` puts the table in its place.
The facts come from where the code keeps them: the jobs from `verified-book --help`, the options from
`pytest --help`, the markers from `pytest --markers`, the extras and the layers from `pyproject.toml`,
the statuses and kinds from the engine's vocabulary, the results schema from
`docs/results.schema.json`, the hardware profiles from `claims/data/hardware/`, the generators' pins
from `requirements/`, the benchmark's figures from `benchmarks/results/`. A name no generator knows,
or a fact that cannot be read, fails the build.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER = re.compile(r"<!-- vb:([a-z-]+) -->")
#: the worker shim Material's offline plugin needs for search from `file://`, shipped once, with the book
SHIM = "assets/javascripts/iframe-worker/shim.js"


class FactMissing(Exception):
    """A fact the docs print could not be read from the code: the build stops and says where it looked."""


def cell(text: str) -> str:
    """Text safe in one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    """A Markdown table; an empty one is a fact not found."""
    if not rows:
        raise FactMissing(f"no rows for the table {header}")
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _command(name: str) -> str:
    """The console script `name` of this environment, else the first on PATH."""
    beside = Path(sys.executable).with_name(name)
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise FactMissing(f"`{name}` is not installed beside {sys.executable} nor on PATH")
    return found


def _output(argv: list[str]) -> str:
    env = dict(os.environ, COLUMNS="400", NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env, timeout=120, check=False)
    if done.returncode != 0:
        raise FactMissing(f"`{' '.join(argv)}` exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.stdout


def parse_jobs(help_text: str) -> list[tuple[str, str]]:
    """Each job's call and what it does, as `verified-book --help` lists them."""
    jobs: list[tuple[str, list[str]]] = []
    for line in help_text.splitlines():
        if line.startswith("  verified-book "):
            jobs.append((line.strip().removeprefix("verified-book "), []))
        elif jobs and line.startswith("      ") and line.strip():
            jobs[-1][1].append(line.strip())
        elif jobs and not line.strip():
            break
    return [(call, " ".join(what)) for call, what in jobs]


def jobs() -> str:
    rows = [(f"`{call}`", what) for call, what in parse_jobs(_output([_command("verified-book"), "--help"]))]
    return table(("job", "what it does"), rows)


def parse_options(help_text: str, group: str = "verified book") -> list[tuple[str, str]]:
    """The options of one group of `pytest --help`, each with its help text."""
    lines = help_text.splitlines()
    try:
        start = lines.index(f"{group}:") + 1
    except ValueError:
        raise FactMissing(f"`pytest --help` has no group {group!r}") from None
    options: list[tuple[str, list[str]]] = []
    for line in lines[start:]:
        if not line.strip():
            break
        if line.startswith("  -"):
            name, _, what = line.strip().partition("  ")
            options.append((name.strip(), [what.strip()] if what.strip() else []))
        elif options:
            options[-1][1].append(line.strip())
    return [(name, " ".join(what)) for name, what in options]


def options() -> str:
    rows = [(f"`{name}`", what) for name, what in parse_options(_output([sys.executable, "-m", "pytest", "--help"]))]
    return table(("option", "what it does"), rows)


MARKER = re.compile(r"^@pytest\.mark\.(\w+)(?:\([^)]*\))?: (.*)$")


def parse_markers(help_text: str) -> dict[str, str]:
    """Each marker of `pytest --markers` with its description, the first description where one repeats."""
    found: dict[str, str] = {}
    for line in help_text.splitlines():
        marker = MARKER.match(line)
        if marker:
            found.setdefault(marker[1], marker[2].strip())
    return found


def book_markers(root: Path = ROOT) -> dict[str, str]:
    """The markers the book's plugin registers: those pytest lists in the book and not in an empty folder
    (pytest's own and its installed plugins'), less the test suite's own (`markers` in pyproject.toml)."""
    command = [sys.executable, "-m", "pytest", "--markers", "-p", "no:cacheprovider"]
    here = parse_markers(_output(command))
    with tempfile.TemporaryDirectory() as empty:
        done = subprocess.run(command, cwd=empty, capture_output=True, text=True, timeout=120, check=False)
    elsewhere = parse_markers(done.stdout)
    ini = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    own = {line.split(":", 1)[0].strip() for line in ini.get("markers", [])}
    return {name: what for name, what in here.items() if name not in elsewhere and name not in own}


def markers() -> str:
    return table(("marker", "selects what"), [(f"`-m {name}`", what) for name, what in book_markers().items()])


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def extras() -> str:
    rows = []
    for name, requirements in pyproject()["project"]["optional-dependencies"].items():
        brings = []
        for requirement in requirements:
            nested = re.fullmatch(r"verified-book\[([\w,-]+)\]", requirement.strip())
            if nested:
                brings += [f"the `{extra}` extra" for extra in nested[1].split(",")]
            else:
                brings.append(f"`{requirement.split(';')[0].strip()}`")
        rows.append((f"`{name}`", ", ".join(brings)))
    return table(("extra", "what it installs"), rows)


def statuses() -> str:
    from verified_book.vocabulary import WORDS

    rows = [(f"{w.glyph} {w.shape}", f"**{w.label}**", w.meaning) for w in WORDS.values()]
    return table(("mark", "status", "means"), rows)


def kinds() -> str:
    from verified_book.vocabulary import KIND_MEANINGS

    return table(("kind", "its value is"), [(f"`{kind}`", meaning) for kind, meaning in KIND_MEANINGS.items()])


def _summary(path: Path) -> str:
    """The first paragraph of a module's docstring: what the module says it is for."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.split("\n\n", 1)[0]


def layer_rows(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """One row per layer of the import-linter `layers` contract, top first: its packages, their modules,
    and what their docstrings say they are."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    contracts = [c for c in config["contracts"] if c.get("type") == "layers"]
    if not contracts:
        raise FactMissing("pyproject.toml: [tool.importlinter] has no `layers` contract")
    rows = []
    for layer in contracts[0]["layers"]:
        names, modules, says = [], [], []
        for dotted in (part.strip() for part in layer.split("|")):
            path = root.joinpath(*dotted.split("."))
            if path.is_dir():
                names.append(f"`{path.name}/`")
                modules += sorted(
                    f"`{p.stem}`" if p.is_file() else f"`{p.name}/`"
                    for p in path.iterdir()
                    if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
                )
                says.append(_summary(path / "__init__.py"))
            elif path.with_suffix(".py").is_file():
                names.append(f"`{path.name}`")
                says.append(_summary(path.with_suffix(".py")))
            else:
                raise FactMissing(f"pyproject.toml: the layer {dotted!r} is neither a package nor a module")
        rows.append((", ".join(names), ", ".join(modules) or "—", " ".join(says)))
    return rows


def layers() -> str:
    return table(("layer", "modules", "what it is"), layer_rows())


def _type(spec: dict[str, Any]) -> str:
    if "$ref" in spec:
        name = spec["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "const" in spec:
        return f"`{json.dumps(spec['const'])}`"
    if "enum" in spec:
        return " or ".join(f"`{json.dumps(v)}`" for v in spec["enum"])
    for union in ("anyOf", "oneOf"):
        if union in spec:
            return " or ".join(_type(s) for s in spec[union])
    kind = spec.get("type", "any")
    if kind == "array":
        return f"array of {_type(spec.get('items', {}))}"
    if kind == "object":
        patterns = spec.get("patternProperties") or {}
        value = next(iter(patterns.values()), spec.get("additionalProperties"))
        if isinstance(value, dict):
            names = spec.get("propertyNames", {}).get("enum")
            key = (
                f"`{next(iter(patterns))}`"
                if patterns
                else "one of " + ", ".join(f"`{n}`" for n in names)
                if names
                else "a name"
            )
            return f"object: {key} → {_type(value)}"
    return str(kind)


def schema_version(schema: dict[str, Any]) -> int:
    version = schema.get("properties", {}).get("schema_version", {}).get("const")
    if not isinstance(version, int):
        raise FactMissing("docs/results.schema.json: `schema_version` has no const")
    return version


def _fields(spec: dict[str, Any]) -> str:
    required = set(spec.get("required", ()))
    fields = spec.get("properties", {})
    rows: list[tuple[str, ...]] = [
        (f"`{name}`", _type(field), "yes" if name in required else "") for name, field in fields.items()
    ]
    if any(field.get("description") for field in fields.values()):
        rows = [row + (field.get("description", ""),) for row, field in zip(rows, fields.values(), strict=True)]
        return table(("field", "type", "required", "what it holds"), rows)
    return table(("field", "type", "required"), rows)


def schema() -> str:
    loaded = json.loads((ROOT / "docs" / "results.schema.json").read_text(encoding="utf-8"))
    parts = [
        f"The current schema version is **{schema_version(loaded)}**.",
        f"## {loaded.get('title', 'Results file')}",
        _fields(loaded),
    ]
    for name, spec in sorted(loaded.get("$defs", {}).items()):
        parts.append(f"## {name}")
        if spec.get("description"):
            parts.append(" ".join(spec["description"].split()))
        if "properties" in spec:
            parts.append(_fields(spec))
        else:
            parts.append(f"One of: {_type(spec)}.")
    return "\n\n".join(parts)


def hardware_markers() -> str:
    rows = []
    for path in sorted((ROOT / "claims" / "data" / "hardware").glob("*.toml")):
        profile = tomllib.loads(path.read_text(encoding="utf-8"))
        rows.append((f"`{profile.get('marker', path.stem)}`", profile.get("name", ""), ", ".join(profile["backends"])))
    return table(("marker", "machine", "backends it can have"), rows)


def generator_pins() -> str:
    rows = []
    for name in ("properdocs", "zensical"):
        path = ROOT / "requirements" / f"{name}.txt"
        pins = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if "==" in line]
        if not pins:
            raise FactMissing(f"requirements/{name}.txt pins nothing")
        rows.append((f"`requirements/{name}.txt`", ", ".join(f"`{pin}`" for pin in pins)))
    return table(("file", "pins"), rows)


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 10 else f"{value:.0f} s"


def benchmark_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """What a benchmark's results file says a reader and an author wait for."""
    rows = []
    if "suite" in result:
        rows.append((f"the default run, `{result['suite']['command']}`", _seconds(result["suite"]["seconds"])))
    if "verify" in result:
        verify = result["verify"]
        rows.append(
            (f"`{verify['command']}`", f"{_seconds(verify['seconds'])}, {verify['over_snippets']}× the snippets alone")
        )
    if "one_page" in result:
        page = result["one_page"]
        rows.append(
            (
                f"a cold check of `{page['page']}`",
                f"{_seconds(page['seconds'])}, of which importing its libraries "
                f"{_seconds(page['libraries']['seconds'])}",
            )
        )
    for key, what in (("page_edit", "a wrong figure on a page"), ("data_edit", "a data edit in the whole book")):
        if key in result:
            rows.append((f"{what}, `{result[key]['command']}`", _seconds(result[key]["seconds"])))
    if "serve" in result:
        serve = result["serve"]
        rows.append(("`verified-book serve`: start, the claims computed once", _seconds(serve["start_s"])))
        rows.append(("`serve`: a saved figure to its new mark", _seconds(serve["page_edit"]["seconds"])))
        touched = max(serve["data_edit"].get("figures_touched", [0]))
        rows.append((f"`serve`: a data edit touching {touched} figures", _seconds(serve["data_edit"]["seconds"])))
    if "site" in result:
        rows.append(("the site build", _seconds(result["site"]["seconds"])))
    return rows + first_verdict_rows(result)


def first_verdict_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """A fresh clone's first verdict (`benchmarks/run.py`'s `first_verdict`), with its own date and target."""
    first = result.get("first_verdict")
    if not first:
        return []
    verdict = "met" if first["met"] else "not met"
    rows = [
        (
            f"a fresh clone to its first verdict (`{first['command']}`), on {first['date'][:10]}, the machine shared",
            f"{_seconds(first['seconds'])}: set-up {_seconds(first['setup_s'])} with {first['installer']}, verdict "
            f"{_seconds(first['verdict_s'])}; target {_seconds(first['target_s'])} {verdict} "
            f"(goal {_seconds(first['goal_s'])})",
        )
    ]
    pip = first.get("with_pip")
    if pip:
        rows.append(
            (
                "the same with pip (`VERIFIED_BOOK_INSTALLER=pip`)",
                f"{_seconds(pip['seconds'])}: set-up {_seconds(pip['setup_s'])}, verdict {_seconds(pip['verdict_s'])}",
            )
        )
    return rows


#: the scale figures shown: what, the benchmark's name of the figure (`benchmarks/scale.py`'s GROWTH, which the
#: results file says where each is: `figures`), how it is written, and what the engine is held to as a book grows
SCALE_ROWS: tuple[tuple[str, str, Callable[[Any], str], str], ...] = (
    ("collection, `pytest --collect-only`", "collection_s", _seconds, ""),
    ("the full run, `pytest`", "full_run_s", _seconds, "growth ≤ 1.1"),
    ("its peak memory", "full_run_peak_mb", lambda v: f"{v:,.0f} MB", "≤ 2 GB at 64×, growth ≤ 1.1"),
    ("a second run, reading the first one's records", "second_run_s", _seconds, ""),
    ("`pytest --changed` after one figure edit", "changed_s", _seconds, "≤ 2 s at 64×"),
    ("`pytest --changed` after one data value edit", "changed_data_s", _seconds, "≤ 3 s at 64×"),
    ("`serve`: its start", "serve_start_s", _seconds, ""),
    ("`serve`: a figure saved wrong to its stale mark", "serve_to_stale_s", _seconds, "≤ 1 s at 64×"),
    ("`serve`: saved back to its verified mark", "serve_to_verified_s", _seconds, "≤ 1 s at 64×"),
    ("this machine's history (its store): read whole", "store_read_s", _seconds, ""),
    ("the store: one claim's run merged", "store_merge_one_s", _seconds, ""),
    ("the exported results file", "results_bytes", lambda v: f"{v / 1e6:,.1f} MB", ""),
    ("the site build, 1 machine", "site_1_machine_s", _seconds, ""),
    ("the site build, 10 machines", "site_10_machines_s", _seconds, ""),
    ("the site build, 50 machines", "site_50_machines_s", _seconds, "≤ 3× one machine at 16×"),
    ("its peak memory, 50 machines", "site_50_machines_peak_mb", lambda v: f"{v:,.0f} MB", "< 4 GB at 16×"),
    ("the site published, 1 machine", "site_1_machine_bytes", lambda v: f"{v / 1e6:,.0f} MB", ""),
    ("the site published, 50 machines", "site_50_machines_bytes", lambda v: f"{v / 1e6:,.0f} MB", ""),
    ("of it, the rows pages load, 50 machines", "site_50_machines_data_bytes", lambda v: f"{v / 1e6:,.0f} MB", ""),
    ("the site rebuilt (files checked before), 1 machine", "site_rebuild_1_machine_s", _seconds, ""),
    ("the site rebuilt, 50 machines", "site_rebuild_50_machines_s", _seconds, ""),
)


def scale_table(scale: dict[str, Any]) -> str:
    """The scale benchmark's figures (`benchmarks/scale.py`) by size, each size with its date (a step's figures kept
    from an earlier run of that size, where the last skipped it, with theirs), and each figure's growth exponent
    with the sizes it was fitted on; a figure a size did not measure is left blank."""
    sizes = sorted(scale.get("sizes", {}).items(), key=lambda item: int(item[0]))
    if not sizes:
        raise FactMissing("the benchmark's results hold no scale figures")
    header = (
        "what",
        *(f"{n}× ({entry['figures']:,} figures, {entry['date'][:10]})" for n, entry in sizes),
        "growth",
        "target",
    )
    rows = []
    for what, name, say, target in SCALE_ROWS:
        path = scale.get("figures", {}).get(name)
        if not path:
            raise FactMissing(f"the benchmark's results do not say where its figure {name!r} is (`figures`)")
        cells = []
        for _, entry in sizes:
            value: Any = entry
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            earlier = entry.get("earlier", {}).get(path[0])
            cells.append(
                (say(value) + (f" ({earlier[:10]})" if earlier else "")) if isinstance(value, (int, float)) else ""
            )
        fitted = scale.get("exponents", {}).get(name)
        growth = f"{fitted['exponent']} ({'–'.join(f'{n}×' for n in fitted['sizes'])})" if fitted else ""
        if any(cells):
            rows.append((what, *cells, growth, target))
    return table(header, rows)


def benchmarks() -> str:
    parts = []
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        cpu = result.get("cpu") or "a CPU"
        gpu = f", {result['gpu']}" if result.get("gpu") else ""
        parts.append(
            f"**{result['machine']}** ({cpu}, {result['cores']} cores{gpu}), on {result['date'][:10]}, "
            f"from `benchmarks/results/{path.name}`:"
        )
        parts.append(table(("what", "took"), benchmark_rows(result)))
        if "scale" in result:
            parts.append(
                "A synthetic book of 16 pages a unit of size, each claim trivially cheap on numpy, so that what is "
                "timed is the engine (`benchmarks/scale.py`); growth is the slope of log(time) over log(size):"
            )
            parts.append(scale_table(result["scale"]))
    if not parts:
        raise FactMissing("benchmarks/results/ holds no results file")
    return "\n\n".join(parts)


FACTS: dict[str, Callable[[], str]] = {
    "jobs": jobs,
    "options": options,
    "extras": extras,
    "statuses": statuses,
    "kinds": kinds,
    "layers": layers,
    "schema": schema,
    "markers": markers,
    "hardware-markers": hardware_markers,
    "generator-pins": generator_pins,
    "benchmarks": benchmarks,
}


def fill(markdown: str, where: str) -> str:
    """The page with every `<!-- vb:NAME -->` replaced by its fact; an unknown name fails with its line."""
    cache: dict[str, str] = {}

    def replace(match: re.Match[str]) -> str:
        name = match[1]
        if name not in FACTS:
            line = markdown.count("\n", 0, match.start()) + 1
            raise FactMissing(f"{where}:{line}: no fact named {name!r}; expected one of {', '.join(FACTS)}")
        if name not in cache:
            cache[name] = FACTS[name]()
        return cache[name]

    return PLACEHOLDER.sub(replace, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    from mkdocs.exceptions import PluginError

    try:
        return fill(markdown, f"docs/{page.file.src_uri}")
    except FactMissing as missing:
        raise PluginError(str(missing)) from None


def on_files(files: Any, config: Any) -> Any:
    """Ship the book's copy of the search worker shim, so search works from `file://` with no CDN."""
    from mkdocs.structure.files import File

    files.append(File(SHIM, src_dir=str(ROOT / "book"), dest_dir=config["site_dir"], use_directory_urls=False))
    return files
