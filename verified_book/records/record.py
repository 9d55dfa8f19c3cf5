"""The shape of a results file, as types: one model per part, strict, every limit a constraint.

A results file (`results/<machine>.json`, see verified_book.records.results) may come from anyone, so
every part of it is a model that forbids fields it does not name, takes no value of the wrong
type (no `"3"` for a line, no `true` for a number), and says what is wrong where in the words of
the place: `records['a.one']['numpy']: figures[0]: line -4 is not a positive integer`. The engine
builds records with these constructors and the site reads their attributes, so the file a run
writes and the file a contributor sends are checked by the same types. `ResultsDocument` is the
whole file as it lies on disk; its JSON Schema (`docs/results.schema.json`, written by
`scripts/results-schema`) is what contributors validate against.

What must be checked before a file can be parsed at all (its size, NaN literals, nesting depth,
integers too long to read) stays in verified_book.records.results, and so do the migrations of older
schema versions: these models describe the current version only.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import sys
from typing import Annotated, Any, Callable, Literal, NamedTuple, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError
from typing_extensions import Self, TypeAliasType

from verified_book import vocabulary
from verified_book.backends import NAMES
from verified_book.book.snippet_output import STATUSES as OUTPUT_STATUSES
from verified_book.records import identity
from verified_book.records.errors import show as _show
from verified_book.vocabulary import ID_PATTERN, KINDS, RECORDED

SCHEMA_VERSION = 7
BACKEND_NAMES = (vocabulary.NO_BACKEND_NAME, *NAMES)

SLUG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,80}$")
SLUG_WORDS = "a safe machine name (lower-case letters, digits, '-', '_')"  # what SLUG_PATTERN admits, said
MARKER_PATTERN = re.compile(r"^[a-z0-9_]{1,60}$")
OUTPUT_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,120}$")
BOOK_PATH_PATTERN = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.(?:/|$))[A-Za-z0-9_][A-Za-z0-9_./-]{0,300}$")
EXACT_PATTERN = re.compile(r"^-?\d{1,1300}/\d{1,1300}$")
COMMIT_PATTERN = re.compile(r"^[0-9a-f]{7,64}$")

MAX_KEY_CHARS = 200
MAX_STRING_CHARS = 10_000
MAX_MESSAGE_CHARS = 100_000
MAX_TEXT_CHARS = 1_000_000
MAX_LINE = 1_000_000
MAX_SECONDS = 7 * 24 * 3600
MAX_LOAD = 1e6

#: the statuses a record or a figure verdict may carry: the vocabulary's recorded ones, no other
RecordedStatus = Literal[RECORDED]  # type: ignore[valid-type]
KindName = Literal[KINDS]  # type: ignore[valid-type]
OutputStatus = Literal[OUTPUT_STATUSES]  # type: ignore[valid-type]
How = Literal["script", "in process"]


# ------------------------------------------------------------------ messages that name the place
#
# A check's message comes in one of three forms, told apart by the error's type, so that the place
# is said once, the way the hand-written checks said it: `line -4 is not a positive integer` (the
# field, its value, what is wrong), `inputs must be a list of ...` (the field, what is wrong), and
# `status is 'verified' while a figure of it is stale` (what is wrong, after the place).

VALUE, FIELD, AT = "vb_value", "vb_field", "vb_at"


def _fail(kind: str, text: str) -> PydanticCustomError:
    return PydanticCustomError(kind, text.replace("{", "{{").replace("}", "}}"))


def _wrapped(kind: str, text: str, check: Callable[[Any], bool] = lambda _: True, whole: bool = True) -> WrapValidator:
    """A field's own message for any value its type refuses, or `check` refuses after it; with
    `whole` false, only for a value of the wrong type itself (its parts' problems are their own)."""

    def validate(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            out = handler(value)
        except ValidationError as e:
            if not whole and any(err["loc"] for err in e.errors()):
                raise
            raise _fail(kind, text) from None
        if not check(out):
            raise _fail(kind, text)
        return out

    return WrapValidator(validate)


def _is(text: str, check: Callable[[Any], bool] = lambda _: True) -> WrapValidator:
    """`<field> <value> <text>` for a value of the wrong type, or one `check` refuses."""
    return _wrapped(VALUE, text, check)


def _must(text: str, check: Callable[[Any], bool] = lambda _: True, whole: bool = True) -> WrapValidator:
    """`<field> <text>` for a value of the wrong type, or one `check` refuses."""
    return _wrapped(FIELD, text, check, whole)


def _matches(pattern: re.Pattern[str]) -> Callable[[Any], bool]:
    return lambda v: pattern.match(v) is not None


def iso_date_problem(value: Any) -> str | None:
    """Why `value` is not an ISO date or date-time of a plausible moment; None when it is one."""
    if not isinstance(value, str) or len(value) > 40:
        return "is not an ISO date (expected like 2026-11-29T13:22:18+00:00)"
    try:
        when = _dt.datetime.fromisoformat(value)
    except ValueError:
        return "is not an ISO date (expected like 2026-11-29T13:22:18+00:00)"
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    latest = _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(days=2)
    if not (_dt.datetime(2000, 1, 1, tzinfo=_dt.timezone.utc) <= when <= latest):
        return "is not a plausible date (before 2000 or in the future)"
    return None


def _date(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    problem = iso_date_problem(value)
    if problem:
        raise _fail(VALUE, problem)
    return sys.intern(handler(value))  # a run's records share its date, and the site holds every machine's


def _finite(value: float) -> bool:
    return math.isfinite(value)


Text = Annotated[str, Field(max_length=MAX_STRING_CHARS), _must("must be a string")]
Message = Annotated[str, Field(max_length=MAX_MESSAGE_CHARS), _must("must be a string")]
Date = Annotated[str, Field(max_length=40, json_schema_extra={"format": "date-time"}), WrapValidator(_date)]
Number = int | float
Seconds = Annotated[
    int | float,
    Field(ge=0, le=MAX_SECONDS),
    _is("is not a plausible duration", lambda v: _finite(v) and 0 <= v <= MAX_SECONDS),
]
Line = Annotated[int, Field(ge=1, le=MAX_LINE), _is("is not a positive integer", lambda v: 1 <= v <= MAX_LINE)]
BookPath = Annotated[
    str,
    Field(pattern=BOOK_PATH_PATTERN.pattern),
    _is("is not a relative path inside the book", _matches(BOOK_PATH_PATTERN)),
]
Slug = Annotated[
    str,
    Field(pattern=SLUG_PATTERN.pattern),
    _is(f"is not {SLUG_WORDS}", _matches(SLUG_PATTERN)),
]
Status = Annotated[RecordedStatus, _is(f"is not one of {', '.join(RECORDED)}")]


def _key(text: str, check: Callable[[str], bool]) -> AfterValidator:
    """A dict key's check: its message follows the place, which the key itself ends."""

    def validate(key: str) -> str:
        if not check(key):
            raise _fail(AT, text)
        return key

    return AfterValidator(validate)


ClaimId = Annotated[
    str,
    Field(max_length=MAX_KEY_CHARS, json_schema_extra={"pattern": ID_PATTERN.pattern}),
    _key("is not a claim id", lambda k: ID_PATTERN.match(k) is not None),
]
BackendName = Annotated[
    str,
    Field(json_schema_extra={"enum": list(BACKEND_NAMES)}),
    _key(f"unknown backend (expected one of {', '.join(BACKEND_NAMES)})", lambda k: k in BACKEND_NAMES),
]
OutputName = Annotated[
    str,
    Field(json_schema_extra={"pattern": OUTPUT_NAME_PATTERN.pattern}),
    _key("not a snippet file name", lambda k: OUTPUT_NAME_PATTERN.match(k) is not None),
]
Key = Annotated[str, Field(max_length=MAX_KEY_CHARS)]


class Check(NamedTuple):
    """What one record answers: a claim on a backend. The results file keys its records by the two, in this order."""

    claim: str
    backend: str


class Strict(BaseModel):
    """A part of a results file: no field it does not name, no value of another type."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, regex_engine="python-re")


StrictT = TypeVar("StrictT", bound=Strict)

#: each set of fields a sealed part was given, made once (`Sealed`)
_FIELDS_GIVEN: dict[frozenset[str], set[str]] = {}


class Sealed(Strict):
    """A part a results file holds by the thousand, never changed once made (`revised` makes another): its
    instances share one set of the fields each was given, where pydantic makes a set for each, which was half a
    record's memory, and each short text (a page, a printed figure, a status) is held once however many parts and
    machines' files name it: the site holds every machine's records at once. Frozen, so no assignment adds to the
    set they share; a copy gets a set of its own."""

    model_config = ConfigDict(frozen=True)

    @model_validator(mode="after")
    def _fields_given_once(self) -> Self:
        given = self.__pydantic_fields_set__
        object.__setattr__(self, "__pydantic_fields_set__", _FIELDS_GIVEN.setdefault(frozenset(given), given))
        fields = self.__dict__
        for name, value in fields.items():
            if type(value) is str and len(value) <= 200:
                fields[name] = sys.intern(value)
        return self


def revised(model: StrictT, **changes: Any) -> StrictT:
    """`model` with `changes`, built and validated as a new one: pydantic's `model_copy(update=...)` takes the
    changes unchecked, and a record no file could hold would be written. The fields set stay those set, and the
    changed ones, so what is written is what `model_copy` would have written."""
    return type(model).model_validate({**model.model_dump(exclude_unset=True), **changes})


# ------------------------------------------------------------------ values


class Exact(Sealed):
    """An exact fraction, kept as its text beside its float (JSON has no fractions)."""

    exact: Annotated[str, Field(pattern=EXACT_PATTERN.pattern)]
    float: float


#: a claim's value as JSON: a number, a string, a truth value, nothing, an exact fraction, or a list of them
Value = TypeAliasType("Value", "bool | int | float | str | None | Exact | list[Value]")


def value_problem(value: Any) -> str | None:
    """Why a record's value is not one: not finite, a fraction whose parts disagree, an object of other fields."""
    if isinstance(value, dict):
        exact, approx = value.get("exact"), value.get("float")
        if (
            set(value) != {"exact", "float"}
            or not isinstance(exact, str)
            or not EXACT_PATTERN.match(exact)
            or isinstance(approx, bool)
            or not isinstance(approx, (int, float))
            or not math.isfinite(approx)
        ):
            return "value must be a number, a string, a list, or {'exact': 'p/q', 'float': x}"
        numerator, denominator = (int(part) for part in exact.split("/"))
        if denominator == 0:
            return f"exact value {exact!r} divides by zero"
        try:
            expected = numerator / denominator
        except OverflowError:
            expected = math.copysign(math.inf, numerator)
        if not math.isclose(expected, approx, rel_tol=1e-9, abs_tol=1e-300):
            return f"exact value {exact} and float {approx!r} disagree"
    elif isinstance(value, list):
        for i, item in enumerate(value):
            problem = value_problem(item)
            if problem:
                return f"[{i}]: {problem}" if not problem.startswith("[") else f"[{i}]{problem}"
    elif isinstance(value, float) and not math.isfinite(value):
        return "value is not finite"
    return None


def _value(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    if isinstance(value, Exact):
        value = value.model_dump()
    problem = value_problem(value)
    if problem is None:
        try:
            return handler(value)
        except ValidationError:
            problem = "value must be a number, a string, a list, or {'exact': 'p/q', 'float': x}"
    raise _fail(AT, problem)


RecordValue = Annotated[Value, WrapValidator(_value)]


# ------------------------------------------------------------------ the parts of a record


class FigureVerdict(Sealed):
    """How one printed figure (its page, line and text) compared with the value on one backend."""

    line: Line
    file: BookPath
    printed: Text | None = None
    stated: Text | None = None
    status: Status | None = None


class DataInput(Sealed):
    """A value read from the book's data files: enough to look it up again and compare."""

    file: BookPath
    key: Text
    value: Any = None
    line: Annotated[int, Field(ge=0, le=MAX_LINE)] | None = None
    whole: Text | None = None  # what read every key of the file (transformers reads all of a config.json)


class SettingInput(Sealed):
    """A machine's setting (an environment variable, a library's mode) as it was during the run."""

    setting: Text
    value: Any = None
    where: Text


class SnippetInput(Sealed):
    """A figure a snippet printed, with a hash of the snippet's source to tell when it changed."""

    snippet: BookPath
    sha256: Text
    where: Text
    value: Text


#: one input a record read; a plain string is a migrated file's (schema 1 kept inputs as text)
def _input_kind(entry: Any) -> str:
    """Which kind of input an entry is, by the field only that kind has: each entry is checked as that kind alone,
    not tried as each in turn (a record's inputs number in the tens of thousands in a file)."""
    if isinstance(entry, Strict):
        entry = entry.model_fields_set
    elif not isinstance(entry, dict):
        return "text"
    return "setting" if "setting" in entry else "snippet" if "snippet" in entry else "file"


InputEntry = Annotated[
    Annotated[SettingInput, Tag("setting")]
    | Annotated[SnippetInput, Tag("snippet")]
    | Annotated[DataInput, Tag("file")]
    | Annotated[Text, Tag("text")],
    Discriminator(_input_kind),
]
Inputs = Annotated[
    list[InputEntry],
    _must(
        "must be a list of {file, key, value, line}, {setting, value, where} or {snippet, sha256, where, value} "
        "(or, migrated, strings)"
    ),
]


class Conditions(Strict):
    """What the machine was doing while a measured claim was timed (verified_book.records.conditions)."""

    load_before: Annotated[Number, Field(ge=0, lt=MAX_LOAD)] | None = None
    load_after: Annotated[Number, Field(ge=0, lt=MAX_LOAD)] | None = None
    cores: Annotated[int, Field(gt=0)] | None = None
    beside: Text | None = None


CONDITIONS_WORDS = (
    "is not an object of load_before and load_after (load averages or null), cores (a positive "
    "integer) and beside (text or null)"
)


Versions = Annotated[dict[Key, Text | None], _must("must be an object of version strings")]


class Record(Sealed):
    """One claim on one backend of one machine: its status, its value, and each printed figure's verdict."""

    status: Status
    value: RecordValue = None
    figures: list[FigureVerdict] | None = None
    message: Message | None = None
    inputs: Inputs | None = None
    version: Text | None = None
    #: the versions of the other libraries its value was computed with (`provenance.uses_of`: those its claim's
    #: code uses, and its backend's companions), each as installed then; a library absent then is left out
    uses: Versions | None = None
    conditions: Annotated[Conditions, _is(CONDITIONS_WORDS)] | None = None

    @model_validator(mode="after")
    def _verified_figures_hold(self) -> "Record":
        wrong = {f.status for f in self.figures or ()} & {vocabulary.Status.STALE.value, vocabulary.Status.FAILED.value}
        if self.status == vocabulary.Status.VERIFIED and wrong:
            raise _fail(AT, f"status is 'verified' while a figure of it is {', '.join(sorted(str(w) for w in wrong))}")
        return self


#: what a measured claim's record holds that a rerun changes: kept in the run header on disk
VOLATILE = ("value", "message", "conditions")


class Measured(Sealed):
    """A measured record's volatile part, as the run header keeps it on disk."""

    value: RecordValue = None
    message: Message | None = None
    conditions: Annotated[Conditions, _is(CONDITIONS_WORDS)] | None = None


class ClaimMeta(Sealed):
    """What a claim is, kept once per claim: its kind, where its code is, what it cites, its code's fingerprint."""

    kind: Annotated[KindName, _is(f"is not one of {', '.join(KINDS)}")] | None = None
    defined_at: Text | None = None  # where the claim's code is, `file:line`
    citation: Text | None = None  # the source a quoted or given figure is taken from
    hardware: Text | None = None
    code: Text | None = None
    skipped: Text | None = None


class OutputCheck(Sealed):
    """How one of the book's output blocks showing a snippet compared with what this run printed."""

    file: BookPath
    line: Line
    status: Annotated[OutputStatus, _is(f"is not one of {', '.join(OUTPUT_STATUSES)}")]
    message: Text | None = None
    sha256: Text | None = None  # the block's text as compared (verified_book.book.snippet_output.block_hash)


class SnippetOutput(Strict):
    """What one snippet printed on this machine, when, how long it took, and how the book's blocks compared."""

    text: Annotated[str, Field(max_length=MAX_TEXT_CHARS), _must("must be a string")] = ""
    date: Date | None = None
    seconds: Seconds | None = None
    how: Annotated[How, _is("is not 'script' or 'in process'")] | None = None
    #: a hash of the snippet's source that printed it (`snippet_figures.source_hash`): a run of an earlier
    #: version is told apart from one of the book's snippet now; None in a file from before schema 5
    sha256: Text | None = None
    checked: (
        Annotated[
            list[OutputCheck], _must("must be a list of the book's output blocks and how each compared", whole=False)
        ]
        | None
    ) = None


Fingerprint = Annotated[dict[Key, bool | int | float | Text | None], _must("must be an object of strings and numbers")]


class MachineRecord(Strict):
    """The machine a file holds: its name, its identity (verified_book.records.identity), markers and fingerprint."""

    slug: Text | None = None
    id: (
        Annotated[
            str,
            Field(pattern=identity.ID_PATTERN.pattern),
            _is("is not a machine id (4 to 64 lower-case letters, digits, '-')", _matches(identity.ID_PATTERN)),
        ]
        | None
    ) = None
    markers: Annotated[
        list[Annotated[str, Field(pattern=MARKER_PATTERN.pattern)]],
        _must("must be a list of lower-case marker names", lambda ms: all(MARKER_PATTERN.match(m) for m in ms)),
    ] = []
    fingerprint: Fingerprint = {}


class RunHeader(Strict):
    """The latest run: when, at which commit, on what software; per claim and backend, its timing and date."""

    date: Date | None = None
    commit: (
        Annotated[str, Field(pattern=COMMIT_PATTERN.pattern), _is("is not a commit hash", _matches(COMMIT_PATTERN))]
        | None
    ) = None
    dirty: Annotated[bool, _must("must be true or false")] | None = None
    os: Text | None = None
    driver: Text | None = None
    versions: Versions | None = None
    backends: Versions | None = None
    environment_errors: Annotated[list[Message], _must("must be a list of sentences")] | None = None
    seconds: Annotated[dict[Key, dict[Key, Seconds]], _must("must map claims to backends to durations")] = {}
    dates: dict[Key, dict[Key, Date]] = {}


class RunOnDisk(RunHeader):
    """The run header as the file holds it: what a rerun changes by its nature (measured values,
    what the snippets printed) sits here, so `git diff` of a rerun that changes nothing else shows it alone."""

    measured: Annotated[
        dict[Key, dict[Key, Measured]],
        _must("must map claims to backends to {value, message, conditions}", whole=False),
    ] = {}
    outputs: Annotated[dict[OutputName, SnippetOutput], _must("must be an object of snippets", whole=False)] = {}


class ResultsDocument(Strict):
    """One machine's results file, `results/<slug>.json`, as it lies on disk (schema version 3)."""

    model_config = ConfigDict(
        title="Results file of the verified book",
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        regex_engine="python-re",
    )

    schema_version: Literal[SCHEMA_VERSION]  # type: ignore[valid-type]
    slug: Slug
    machine: MachineRecord = MachineRecord()
    run: RunOnDisk = RunOnDisk()
    claims: dict[ClaimId, ClaimMeta] = {}
    records: dict[ClaimId, dict[BackendName, Record]] = {}
    #: schema 1 kept the snippets' outputs beside the records; a migrated file may still
    outputs: dict[OutputName, SnippetOutput] = {}

    @model_validator(mode="after")
    def _consistent(self) -> "ResultsDocument":
        problems = []
        if self.machine.slug not in (None, self.slug):
            problems.append(f"machine slug {_show(self.machine.slug)} differs from the file's slug {_show(self.slug)}")
        for claim_id, per_backend in self.run.measured.items():
            for backend in per_backend:
                if backend not in self.records.get(claim_id, {}):
                    problems.append(f"run measured[{_show(claim_id)}][{_show(backend)}] has no record")
        if problems:
            raise _fail(AT, "\n".join(problems))
        return self


#: where the schema is published for contributors (scripts/results-schema writes it)
SCHEMA_FILE = "docs/results.schema.json"


def schema_text() -> str:
    """The JSON Schema of a results file as `docs/results.schema.json` holds it."""
    import json

    return json.dumps(ResultsDocument.model_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
