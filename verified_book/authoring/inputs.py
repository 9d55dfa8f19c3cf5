"""Stated inputs (model configs, vendor figures) read with their provenance.

Every read is recorded against the claim being computed, so a stale figure's message
can name the inputs it came from, and a perturbed input can be traced to the claims
that depend on it. Files live in the book's data folder (`data` in `book.toml`); vendor
figures are TOML tables with a `value`, a `unit` and the `source` they were taken from.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import functools
import json
import re
import tomllib
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from verified_book.authoring import state as book_state
from verified_book.errors import BookError, Problem, unparsable
from verified_book.vocabulary import Status

GIVEN = "given.toml"  # a book's given inputs: values it states or chooses, with their source


class Inputs:
    """One open book's inputs: its data folder, how messages name it, its given file, what was read of it
    (each file parsed once) and the values a mutation test put in place of the data's."""

    def __init__(self, data_dir: Path, shown_as: str, given: str = GIVEN) -> None:
        self.data_dir = Path(data_dir)
        self.shown_as = shown_as  # relative to the book's root
        self.given = given
        self.read: dict[str, tuple[str, Any]] = {}
        self.overrides: dict[tuple[str, str], Any] = {}

    def forget_read(self) -> None:
        """Read every data file again from disk at its next use (a live preview, after a file was saved)."""
        self.read.clear()


def _inputs() -> Inputs:
    return book_state.current().inputs


def data_dir() -> Path:
    """The open book's data folder."""
    return _inputs().data_dir


def shown_as() -> str:
    """How messages name the open book's data folder: relative to the book's root."""
    return _inputs().shown_as


def forget_read() -> None:
    """Read the open book's data files again from disk at their next use."""
    _inputs().forget_read()


class InputError(BookError):
    """A data file is missing, malformed, or lacks the key a claim asked for."""


class MissingKey(InputError, KeyError):
    """A key a claim asked a data file for is not in it; a KeyError too, for code that asks whether it is."""

    def __str__(self) -> str:  # KeyError's own would print the message in quotes
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Input:
    """One value read from a data file: where it is and what it said."""

    file: str
    key: str
    value: Any
    line: int
    source: str | None = None
    measured_on: str | None = None  # the machine whose measurement this value is, where it is one
    whole: str | None = None  # the library that reads the whole file this key is part of (`model_config_all`)

    def __str__(self) -> str:
        cited = f" ({self.source})" if self.source else ""
        return f"{shown_as()}/{self.file}:{self.line} {self.key} = {self.value!r}{cited}"

    @property
    def place(self) -> str:
        """Where the value is written: the data file and line, as messages and panels name it."""
        return f"{shown_as()}/{self.file}:{self.line}"


@dataclass(frozen=True)
class Setting:
    """One setting of the machine a claim's answer depends on (an environment variable, a library's
    mode, the device's architecture), recorded beside the data it read so a result says what governed it."""

    name: str
    value: Any
    where: str

    def __str__(self) -> str:
        return f"{self.where}: {self.name} = {self.value!r}"


def setting(name: str, value: Any, where: str) -> Any:
    """Record a setting the current claim's answer depends on; returns the value."""
    _record(Setting(name, value, where))
    return value


@dataclass(frozen=True)
class SnippetFigure:
    """A figure a book snippet printed in this run, read where the book's output block shows it
    (`verified_book.engine.snippet_figures`): the snippet, a hash of its source, the book's line, the text read."""

    snippet: str  # relative to the book's root
    sha256: str
    where: str
    value: str

    def __str__(self) -> str:
        return f"{self.where}: {self.value} as {self.snippet} printed it"


#: what a claim's computation reads and its record keeps: data, the machine's settings, a snippet's print
Read = Input | Setting | SnippetFigure


def snippet_figure_read(item: SnippetFigure) -> None:
    """Record a figure read from a snippet's run as an input of the current claim."""
    _record(item)


_reads: contextvars.ContextVar[list[Read] | None] = contextvars.ContextVar("reads", default=None)


@contextlib.contextmanager
def recording() -> Iterator[list[Read]]:
    """Collect every input read inside the block, in order, without duplicates."""
    reads: list[Read] = []
    token = _reads.set(reads)
    try:
        yield reads
    finally:
        _reads.reset(token)


@contextlib.contextmanager
def overridden(file: str, key: str, value: Any) -> Iterator[None]:
    """Replace one input for the duration of the block (mutation tests use this)."""
    overrides = _inputs().overrides
    overrides[(file, key)] = value
    try:
        yield
    finally:
        del overrides[(file, key)]


def _record(item: Read) -> None:
    reads = _reads.get()
    if reads is not None and item not in reads:
        reads.append(item)


def _load(file: str) -> tuple[str, Any]:
    state = _inputs()
    if file not in state.read:
        path = state.data_dir / file
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"{state.shown_as}/{file}: no such data file") from None
        try:
            parsed = tomllib.loads(text) if file.endswith(".toml") else json.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
            raise InputError(str(unparsable(f"{state.shown_as}/{file}", e))) from None
        state.read[file] = (text, parsed)
    return state.read[file]


_HEADER = re.compile(r"\s*\[([^\]]*)\]")  # a table's header: `[name]`
_NAME = re.compile(r'\s*"?([^"\s=:\[]+)"?\s*[=:]')  # a key, quoted or not, before its `=` (or a JSON `:`)


def _line_of(text: str, key: str) -> int:
    """The line of a data file's text where `key` is stated: its table's `value` line (`[key]`), else the first
    line assigning its last part, else its first part's table; 1 where none is found."""
    lines, headers, names = _places(text)
    leaf, table = key.split(".")[-1], key.split(".")[0]
    if key in headers:
        return _value_line(lines, headers[key])
    if leaf in names:
        return names[leaf]
    if table in headers:
        return _value_line(lines, headers[table])
    return 1


@functools.lru_cache(maxsize=256)
def _places(text: str) -> tuple[list[str], dict[str, int], dict[str, int]]:
    """A data file's lines, and where each table header and each assigned key first stands: read once per text,
    so a book's reads cost one pass over each file, not one a key."""
    lines = text.splitlines()
    headers: dict[str, int] = {}
    names: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if found := _HEADER.match(line):
            headers.setdefault(found[1], number)
        elif found := _NAME.match(line):
            names.setdefault(found[1], number)
    return lines, headers, names


def _value_line(lines: list[str], header: int) -> int:
    """The line of a TOML table's `value`, from its header's line: where an author edits the figure."""
    for number in range(header + 1, len(lines) + 1):
        line = lines[number - 1].lstrip()
        if line.startswith("["):
            break
        if re.match(r"value\s*=", line):
            return number
    return header


def data_files() -> list[str]:
    """Every data file a claim can read, relative to the data folder."""
    folder = data_dir()
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.suffix in (".toml", ".json"))


def table(file: str) -> dict[str, Any]:
    """The parsed contents of a data file, unrecorded (for listings and profiles)."""
    parsed: dict[str, Any] = _load(file)[1]
    return parsed


def vendor(file: str, key: str) -> Any:
    """A stated figure from a TOML data file, recorded as an input of the current claim.

    `key` names a table that holds `value` (and `unit`, `source`), dotted for nesting:
    `vendor("hardware/dgx_spark.toml", "memory_bandwidth")`.
    """
    text, node = _stated(file, key)
    value = _inputs().overrides.get((file, key), node["value"])
    _record(Input(file, key, value, _line_of(text, key), node.get("source"), _measured_on(node)))
    return value


def _measured_on(node: Mapping[str, Any]) -> str | None:
    measured_on = node.get("measured_on")
    return str(measured_on) if measured_on else None


def measured_on(file: str, key: str) -> str | None:
    """The machine whose measurement a data entry is (its `measured_on`), or None for a stated value.

    A figure computed from such a value is that machine's evidence, not this one's: it shows as
    reference. Unrecorded; a file or key that is gone counts as no measurement."""
    try:
        return _measured_on(_stated(file, key)[1])
    except InputError:
        return None


#: what backs a data entry (its `basis`): an outside source a reader can follow (the default, and then its
#: `source` names the document and the words), the book's own choice or example input, or nothing in hand
SOURCE, PREMISE, UNSOURCED = "source", Status.PREMISE.value, Status.UNSOURCED.value
BASES: tuple[str, ...] = (SOURCE, PREMISE, UNSOURCED)


def basis_of(file: str, key: str) -> str:
    """What backs a data entry (`BASES`): its `basis`, else a source where it names one, else unsourced;
    a config.json key is the model's published file, a source. Unrecorded; a file or key that is gone is
    unsourced."""
    if file.endswith(".json"):
        return SOURCE
    try:
        node = _stated(file, key)[1]
    except InputError:
        return UNSOURCED
    basis = node.get("basis")
    if basis in BASES:
        return str(basis)
    return SOURCE if node.get("source") else UNSOURCED


def basis_problems() -> list[Problem]:
    """Every data entry whose `basis` is not one of `BASES`, or that claims an outside source and names none."""
    problems: list[Problem] = []
    for file, text, key, node in _entries():
        if "value" not in node:
            continue
        basis = node.get("basis", SOURCE)
        where = f"{shown_as()}/{file}:{_line_of(text, key)}"
        if basis not in BASES:
            problems.append(Problem(where, f"{key}: basis = {basis!r}", f"one of {', '.join(BASES)}"))
        elif basis == SOURCE and not str(node.get("source") or "").strip():
            problems.append(Problem(where, f"{key}: no `source`", 'the document and its words, or basis = "premise"'))
    return sorted(problems, key=str)


#: how a cited entry's `source` reads: where a reader finds it (a document and its section, or a URL), then, after
#: the first QUOTED_AFTER, the words or the table row it quotes; an entry whose source's words are not in hand to
#: quote says why in its `unquoted`
QUOTED_AFTER = ": "
_QUOTES = re.compile(r"'([^']+)'")


def citation_of(source: str) -> tuple[str, str]:
    """A cited entry's `source` as (locator, quoted words), each "" where it names none (`QUOTED_AFTER`)."""
    locator, _, quoted = source.partition(QUOTED_AFTER)
    return locator.strip(), quoted.strip()


def citation_problems(*folders: Path) -> list[Problem]:
    """Every cited data entry (basis "source") that names no locator, or quotes no words and says not why
    (`unquoted`), or names a document in one of `folders` (the book's root, the source texts beside it; a
    locator's document is its text before the first comma, less a `:line`) that does not hold the words it
    quotes, whitespace aside: the words in single quotes where it marks some, else all it quotes."""
    problems: list[Problem] = []
    for file, text, key, node in _entries():
        if "value" not in node or node.get("basis", SOURCE) != SOURCE:
            continue
        where = f"{shown_as()}/{file}:{_line_of(text, key)}"
        locator, quoted = citation_of(str(node.get("source") or ""))
        if not locator:
            problems.append(Problem(where, f"{key}: `source` names no document", "'document, section: quoted words'"))
        elif not quoted and not str(node.get("unquoted") or "").strip():
            problems.append(
                Problem(where, f"{key}: `source` quotes no words", "the words after ': ', or why in `unquoted`")
            )
        document = re.sub(r":\d+$", "", locator.split(",")[0].strip())
        for folder in folders if document and quoted else ():
            shipped = folder / document
            if not shipped.is_file() or not shipped.resolve().is_relative_to(folder.resolve()):
                continue
            held = " ".join(shipped.read_text(encoding="utf-8").split())
            missing = [w for w in (_QUOTES.findall(quoted) or [quoted]) if " ".join(w.split()) not in held]
            if missing:
                lacks = f"{key}: {document} does not hold {missing[0]!r}"
                problems.append(Problem(where, lacks, "the words it quotes"))
    return sorted(problems, key=str)


def _entries(files: Iterable[str] | None = None) -> Iterator[tuple[str, str, str, Mapping[str, Any]]]:
    """Every table of the data folder's TOML files (those of `files`, relative to it, or all), nested ones
    included: its file, the file's text, its dotted key and the table. A file that does not read is left to the
    claims that read it, which report it."""
    for file in data_files() if files is None else files:
        if not file.endswith(".toml"):
            continue
        try:
            text, parsed = _load(file)
        except InputError:
            continue
        stack: list[tuple[str, Any]] = list(parsed.items()) if isinstance(parsed, dict) else []
        while stack:
            key, node = stack.pop()
            if isinstance(node, Mapping):
                stack += [(f"{key}.{k}", v) for k, v in node.items()]
                yield file, text, key, node


def source_of(file: str, key: str) -> str | None:
    """The `source` a data entry names, or None; unrecorded, and None for a file or key that is gone."""
    try:
        source = _stated(file, key)[1].get("source")
    except InputError:
        return None
    return str(source) if source else None


def _stated(file: str, key: str) -> tuple[str, Mapping[str, Any]]:
    """The file's text and the table a dotted `key` names in it, which must hold a `value`."""
    text, parsed = _load(file)
    node: Any = parsed
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise InputError(
                f"{shown_as()}/{file}: no entry {key!r} (found: "
                f"{', '.join(sorted(node)) if isinstance(node, Mapping) else type(node).__name__})"
            )
        node = node[part]
    if not isinstance(node, Mapping) or "value" not in node:
        raise InputError(f"{shown_as()}/{file}:{_line_of(text, key)}: entry {key!r} has no `value`")
    return text, node


def current(file: str, key: str) -> Any:
    """What the data says now for an input a record names, unrecorded (for provenance checks).

    A key of a JSON config is looked up as it is; a TOML key names a table whose `value` it is.
    """
    if file.endswith(".json"):
        parsed = _load(file)[1]
        if not isinstance(parsed, Mapping) or key not in parsed:
            raise InputError(f"{shown_as()}/{file}: no key {key!r}")
        return parsed[key]
    return _stated(file, key)[1]["value"]


def given(key: str) -> Any:
    """A value the book states or chooses, from `claims/data/given.toml`, recorded as an input.

    An example's batch, a prompt length, a layout from a standard: `given("intensity.batches")`.
    A claim of kind `given` returns one of these; an `exact` claim derives from them.
    """
    return vendor(_inputs().given, key)


def exact(value: Any) -> Fraction:
    """A stated decimal as an exact fraction, so `273 / 16.4` is not a float's guess."""
    if isinstance(value, Fraction):
        return value
    result = Fraction(str(value))
    seen = _conversions.get()
    if seen is not None:
        seen.append((value, result))
    return result


_conversions: contextvars.ContextVar[list[tuple[Any, Fraction]] | None] = contextvars.ContextVar(
    "conversions", default=None
)


@contextlib.contextmanager
def conversions() -> Iterator[list[tuple[Any, Fraction]]]:
    """Collect each (stated value, its exact fraction) `exact` makes inside the block: the same figure in
    another type, so a value read through `exact` is still known for the input it was
    (verified_book.engine.evidence.passed_through)."""
    seen: list[tuple[Any, Fraction]] = []
    token = _conversions.set(seen)
    try:
        yield seen
    finally:
        _conversions.reset(token)


class _TrackedConfig(dict[str, Any]):
    """A model's config.json whose every key lookup is recorded as an input."""

    def __init__(self, file: str, text: str, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        self._file, self._text = file, text

    def __getitem__(self, key: str) -> Any:
        if not super().__contains__(key):
            near = difflib.get_close_matches(str(key), [str(k) for k in self], n=3)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise MissingKey(f"{shown_as()}/{self._file}: no key {key!r} in the model's config{hint}")
        value = _inputs().overrides.get((self._file, key), super().__getitem__(key))
        _record(Input(self._file, key, value, _line_of(self._text, key)))
        return value

    def get(self, key: str, default: Any = None) -> Any:
        """A key that may be absent: read and recorded like `config[key]` where present, else `default`."""
        return self[key] if super().__contains__(key) else default


def model_config(model: str) -> dict[str, Any]:
    """The shipped `config.json` of a model, with every key read recorded."""
    file = f"models/{model}/config.json"
    text, parsed = _load(file)
    merged = {k: _inputs().overrides.get((file, k), v) for k, v in parsed.items()}
    return _TrackedConfig(file, text, merged)


def model_config_all(model: str, reader: str = "transformers") -> dict[str, Any]:
    """The whole config, every key recorded, for a library that reads every key (`reader`): a record
    made from it says so where a key changes ("transformers reads all of config.json; rope_theta changed"),
    since a key no figure depends on still makes the record outdated."""
    file = f"models/{model}/config.json"
    text, _ = _load(file)
    config = model_config(model)
    for key in config:
        value = _inputs().overrides.get((file, key), dict.__getitem__(config, key))
        _record(Input(file, key, value, _line_of(text, key), whole=reader))
    return dict(config)


#: numbers stated with a unit in a `source` text: "273 GB/s", "1,792 GB/s", "64 or 128 GB", "24 to 512 GB"
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
_STATED = r"(?<![\w.])((?:" + _NUMBER + r"\s*(?:,|or|to|and|–|-)\s*)*" + _NUMBER + r")\s*{unit}(?![\w/])"


def source_disagreements(files: Iterable[str] | None = None) -> list[Problem]:
    """Every entry of the data folder (of its `files`, or all) whose `source` text states, in the entry's own
    unit, a number other than its `value` (`source` says "273 GB/s" beside `value = 280`): file:line, key, both
    numbers."""
    problems: list[Problem] = []
    for file, text, key, node in _entries(files):
        value, unit, source = node.get("value"), node.get("unit"), node.get("source")
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not isinstance(unit, str)
            or not unit
            or not isinstance(source, str)
        ):
            continue
        stated = [
            n
            for m in re.finditer(_STATED.format(unit=re.escape(unit)), source)
            for n in re.findall(_NUMBER, m.group(1))
        ]
        numbers = [Fraction(n.replace(",", "")) for n in stated]
        if numbers and exact(value) not in numbers:
            problems.append(
                Problem(
                    f"{shown_as()}/{file}:{_line_of(text, key)}",
                    f"{key}: value = {value!r}, but its source says "
                    f"{', '.join(f'{n} {unit}' for n in stated)} ({source!r})",
                    "correct one of them",
                )
            )
    return sorted(problems, key=str)
