"""The claim registry: every checkable statement of the book, under a stable dotted id.

A claim computes; it never stores the answer. The book's printed figures are the
expected values, and they live in the book, not here.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import itertools
import pkgutil
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from verified_book.authoring.state import current
from verified_book.errors import BookError, Problem
from verified_book.vocabulary import ID_PATTERN, NO_BACKEND_NAME, Kind  # noqa: F401  (Kind re-exported for topic modules)


class NotOnBackend(BookError):
    """Raised by a claim when a backend cannot compute it (a missing dtype, say).

    The message says what is missing; the test shows as skipped with it.
    """


class InvariantFailed(BookError, AssertionError):
    """Raised by a claim whose computation contradicts a property it must have."""


class RegistryError(BookError):
    """A claim was declared wrongly: a bad or duplicated id, a bad family."""


@dataclass(frozen=True)
class Claim:
    """One checkable statement, and the function that computes its value."""

    id: str
    kind: Kind
    compute: Callable[..., Any]
    doc: str
    params: Mapping[str, Any] = field(default_factory=dict)
    backends: tuple[str, ...] | None = None
    hardware: str | None = None
    citation: str | None = None  # the source a quoted or given figure is taken from
    printed_on: str | None = None
    tolerance: float | None = None
    quote: str | None = None
    quote_at: str | None = None
    measured_here: str | None = None  # the measured claim of the same quantity, where one measures it here
    about: str | None = None  # the hardware profile a figure states a fact of, computed here from its vendor's lists
    assumes: str | None = None  # the book's assumption a figure holds under, which no input states
    #: the library versions the printed figure is stated for ({"torch": ">=2.13"}): a record from another is
    #: another version's answer, not the book failing
    stated_for: Mapping[str, str] = field(default_factory=dict)
    #: on a claim whose figure disputes its source: the helpers (`module.name`) and data entries (`file:key`) that
    #: carry the source's premise, through which the claims resting on it are found (`engine.premises`); named
    #: by `disputes_premise` at `premise_at`
    premise: tuple[str, ...] = ()
    premise_at: str = ""
    #: on a claim resting on a disputed premise: why its figure stands, by the disputed claim's id; given by
    #: `excuse`, each at its place in `excused_at`
    excused: Mapping[str, str] = field(default_factory=dict)
    excused_at: Mapping[str, str] = field(default_factory=dict)
    defined_in: str = ""  # the file of the function that computes it, relative to the book's root
    defined_line: int = 0

    @property
    def defined_at(self) -> str:
        """Where the claim's code is, `file:line`, for messages and the site's link to it."""
        return f"{self.defined_in}:{self.defined_line}"

    @property
    def topic(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def quoted_from(self) -> str:
        """The source's words a disputed figure contests, with their place, for messages."""
        if not self.quote:
            return ""
        return f"the source says \u201c{self.quote}\u201d ({self.quote_at or 'place not given'})"

    @property
    def needs_backend(self) -> bool:
        """Exact, given and quoted claims are arithmetic, computed once on no backend."""
        return self.kind in (Kind.LIBRARY, Kind.MEASURED)

    def runs_on(self, backend: str) -> bool:
        if not self.needs_backend:
            return backend == NO_BACKEND_NAME
        return self.backends is None or backend in self.backends

    def evaluate(self, backend: Any = None) -> Any:
        if self.needs_backend:
            return self.compute(backend, **self.params)
        return self.compute(**self.params)


class Registry:
    """All claims by id. Topic modules fill it at import time through `claim`."""

    def __init__(self) -> None:
        self._claims: dict[str, Claim] = {}
        self._in_order: list[Claim] | None = None  # the claims by id, until the next one is added or amended
        self.errors: list[Problem] = []
        self.modules: set[str] = set()  # the modules whose declarations it holds

    def declare(self, item: Claim, module: str) -> None:
        """Add a claim a module declares: a bad or duplicated id is one error, the module's other claims add."""
        self.modules.add(module)
        try:
            self.add(item)
        except RegistryError as e:
            self.errors.append(e.problem or Problem(item.defined_at, str(e)))

    def add(self, item: Claim) -> None:
        if not ID_PATTERN.match(item.id):
            raise RegistryError(
                Problem(
                    f"{item.defined_at}",
                    f"claim id {item.id!r} is not a dotted "
                    "lower-case id (expected something like 'decode.ceiling.dgx_spark.bf16')",
                )
            )
        if item.id in self._claims:
            first = self._claims[item.id]
            raise RegistryError(
                Problem(f"{item.defined_at}", f"claim id {item.id!r} is declared twice; first at {first.defined_at}")
            )
        self._claims[item.id] = item
        self._in_order = None

    def amend(self, item: Claim) -> None:
        """Take what a declaration beside a claim's function adds to the claim (`excuse`, `disputes_premise`)."""
        held = self._claims.get(item.id)
        if held is not None and held.compute is item.compute:
            self._claims[item.id] = item
            self._in_order = None

    def __getitem__(self, claim_id: str) -> Claim:
        return self._claims[claim_id]

    def __contains__(self, claim_id: object) -> bool:
        return claim_id in self._claims

    def __iter__(self) -> Iterator[Claim]:
        if self._in_order is None:
            self._in_order = sorted(self._claims.values(), key=lambda c: c.id)
        return iter(self._in_order)

    def __len__(self) -> int:
        return len(self._claims)

    def get(self, claim_id: str) -> Claim | None:
        return self._claims.get(claim_id)

    def ids(self) -> list[str]:
        return sorted(self._claims)

    def near(self, claim_id: str, n: int = 3) -> list[str]:
        """Ids that look like a mistyped one, for error messages."""
        import difflib

        return difflib.get_close_matches(claim_id, self._claims, n=n, cutoff=0.6)


class OpenRegistry(Registry):
    """The registry of the book open when it is asked (`verified_book.authoring.state`): `REGISTRY` is one,
    holding no claims of its own, so a lookup never sees another book's claims."""

    def __init__(self) -> None:  # holds nothing: every question goes to the open book's registry
        pass

    @staticmethod
    def of_open_book() -> Registry:
        """The open book's own registry."""
        return current().registry

    def add(self, item: Claim) -> None:
        self.of_open_book().add(item)

    def declare(self, item: Claim, module: str) -> None:
        self.of_open_book().declare(item, module)

    def amend(self, item: Claim) -> None:
        self.of_open_book().amend(item)

    def __getitem__(self, claim_id: str) -> Claim:
        return self.of_open_book()[claim_id]

    def __contains__(self, claim_id: object) -> bool:
        return claim_id in self.of_open_book()

    def __iter__(self) -> Iterator[Claim]:
        return iter(self.of_open_book())

    def __len__(self) -> int:
        return len(self.of_open_book())

    def get(self, claim_id: str) -> Claim | None:
        return self.of_open_book().get(claim_id)

    def ids(self) -> list[str]:
        return self.of_open_book().ids()

    def near(self, claim_id: str, n: int = 3) -> list[str]:
        return self.of_open_book().near(claim_id, n)

    def __getattr__(self, name: str) -> Any:  # `errors`, `modules`: the open book's
        return getattr(self.of_open_book(), name)


#: the open book's claims, whichever book is open when it is asked
REGISTRY: Registry = OpenRegistry()

#: where a module keeps the claims it declared when it was imported, so that a book opened after it was
#: imported (a second book of the same claims in one process) registers them without importing it again
DECLARED = "__verified_book_claims__"


def _relative(path: str) -> str:
    return _relative_to(path, current().root)


@functools.cache  # a topic module declares dozens of claims; its path is resolved once
def _relative_to(path: str, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(root))
    except ValueError:
        return path


def _first_line(fn: Callable[..., Any]) -> int:
    """The line a claim's definition starts on, its first decorator's: what `inspect.getsourcelines` says,
    read off the code object rather than by tokenizing the source again for each of hundreds of claims."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return code.co_firstlineno if code is not None else inspect.getsourcelines(fn)[1]


def claim(
    claim_id: str,
    *,
    kind: Kind | str,
    over: Mapping[str, Sequence[Any]] | None = None,
    backends: Iterable[str] | None = None,
    hardware: str | None = None,
    citation: str | None = None,
    printed_on: str | None = None,
    tolerance: float | None = None,
    quote: str | None = None,
    quote_at: str | None = None,
    measured_here: str | None = None,
    about: str | None = None,
    assumes: str | None = None,
    stated_for: Mapping[str, str] | None = None,
    registry: Registry | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a claim, or a family of claims when `over` names parameters.

    `claim_id` may hold `{name}` fields filled from each combination of `over`, so
    one function gives `formats.finfo.float16.eps`, `formats.finfo.bfloat16.eps`, ...
    Library and measured claims take the backend as their first argument.
    `printed_on` is the hardware marker a measured figure was printed for, and
    `tolerance` the relative margin it is checked with there. `quote` is the exact
    words of a source that a disputed figure contests and `quote_at` their place,
    `file:line` in the source texts (`../shared/sources/` beside the repository): the
    claim computes what that sentence asserts. `measured_here` names the measured claim of
    the same quantity, for a figure computed from another machine's measurement: its
    panel shows what each machine measured beside it. `about` names the hardware profile a
    figure computed from vendor lists states a fact of (it is cited, not verified, until the
    device itself answers in a measured claim); `assumes` is the book's assumption a figure
    holds under that no input states (its panel says it beside what was computed: a computed figure is
    verified, never premise); `stated_for` the library versions its printed figure holds for, as pip
    specifiers by distribution (`{"torch": ">=2.13"}`). A premise a figure disputes, and the reasons a
    figure resting on one stands, are declared beside the function (`disputes_premise`, `excuse`). The
    claims go to the open book's registry, or to `registry` where one is given.
    """
    kind = Kind(kind)
    if kind is Kind.MEASURED and printed_on is not None and tolerance is None:
        raise RegistryError(f"measured claim {claim_id!r} printed on {printed_on} needs a tolerance")
    if (quote is None) != (quote_at is None) or (quote_at is not None and not re.fullmatch(r"[^:\s]+:\d+", quote_at)):
        raise RegistryError(
            f"claim {claim_id!r}: `quote` needs `quote_at` as 'file:line' in the sources, and the other way round"
        )

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        file = _relative(inspect.getsourcefile(fn) or "?")
        line = _first_line(fn)
        doc = inspect.cleandoc(fn.__doc__ or "").split("\n\n")[0].replace("\n", " ")
        names = list(over or {})
        module = sys.modules.get(fn.__module__)
        declared: list[Claim] | None = None
        if registry is None and module is not None:
            declared = vars(module).setdefault(DECLARED, [])
        into = registry if registry is not None else current().registry
        first: Claim | None = None
        for combo in itertools.product(*(over or {}).values()):
            params = dict(zip(names, combo, strict=True))
            try:
                cid = claim_id.format(**{k: _id_part(v) for k, v in params.items()})
            except KeyError as e:
                raise RegistryError(
                    Problem(f"{file}:{line}", f"claim id {claim_id!r} names {e}, not in `over`")
                ) from None
            if first is None:
                item = first = Claim(
                    id=cid,
                    kind=kind,
                    compute=fn,
                    doc=doc,
                    params=params,
                    backends=tuple(backends) if backends is not None else None,
                    hardware=hardware,
                    citation=citation,
                    printed_on=printed_on,
                    tolerance=tolerance,
                    quote=quote,
                    quote_at=quote_at,
                    measured_here=measured_here,
                    about=about,
                    assumes=assumes,
                    stated_for=dict(stated_for or {}),
                    defined_in=file,
                    defined_line=line,
                )
            else:
                item = _member(first, cid, params)
            if declared is not None:
                declared.append(item)
            into.declare(item, fn.__module__)
        return fn

    return register


def _member(family: Claim, claim_id: str, params: dict[str, Any]) -> Claim:
    """A claim of `family`'s family, the same in all but its id and parameters: made as a copy of the first's fields
    rather than by the frozen dataclass's __init__ (a call for each of its twenty fields), as a large book's families
    make tens of thousands of claims at import."""
    member = object.__new__(Claim)
    member.__dict__.update(family.__dict__, id=claim_id, params=params)
    return member


def disputes_premise(
    fn: Callable[..., Any], *carriers: Callable[..., Any] | str, registry: Registry | None = None
) -> None:
    """Say that the claims `fn` computes dispute a premise of their source, and name what carries it: the book's
    helpers (the functions themselves) and data entries (`"file:key"` in the data folder). Every other claim bound
    in the book whose code calls such a helper or reads such an entry rests on the premise, and is disputed too
    or excused (`excuse`); the book's check finds them (`verified_book.engine.premises`).

    Called beside the claim, after it, not in its decorator: a claim's code fingerprint reads its decorator,
    and what carries a premise decides no value."""
    at = _caller()
    names = tuple(c if isinstance(c, str) else f"{c.__module__}.{c.__qualname__}" for c in carriers)

    def add(item: Claim) -> Claim | Problem:
        if not names:
            return Problem(at, f"claim {item.id!r}: disputes_premise names nothing that carries the premise")
        if item.premise:
            return Problem(at, f"claim {item.id!r} names the premise it disputes twice; first at {item.premise_at}")
        return replace(item, premise=names, premise_at=at)

    _amend(fn, add, "disputes_premise", at, registry)


def excuse(fn: Callable[..., Any], reasons: Mapping[str, str], *, registry: Registry | None = None) -> None:
    """Say why the figures of the claims `fn` computes stand though they rest on a premise the book disputes:
    a sentence a reader sees in each figure's panel, by the id of the claim disputing the premise.

    Called beside the claim, after it, not in its decorator: a claim's code fingerprint reads its decorator,
    and a reason given to a reader decides no value."""
    at = _caller()

    def add(item: Claim) -> Claim | Problem:
        blank = sorted(d for d, reason in reasons.items() if not reason.strip())
        if not reasons or blank:
            return Problem(at, f"claim {item.id!r}: an excuse needs a reason a reader sees, by the disputed claim's id")
        twice = sorted(set(reasons) & set(item.excused))
        if twice:
            return Problem(
                at, f"claim {item.id!r} is excused from {twice[0]!r} twice; first at {item.excused_at[twice[0]]}"
            )
        return replace(
            item, excused={**item.excused, **reasons}, excused_at={**item.excused_at, **dict.fromkeys(reasons, at)}
        )

    _amend(fn, add, "excuse", at, registry)


def _caller() -> str:
    """The place, `file:line`, of the call to the public function that calls this."""
    frame = sys._getframe(2)
    return f"{_relative(frame.f_code.co_filename)}:{frame.f_lineno}"


def _amend(
    fn: Callable[..., Any], change: Callable[[Claim], Claim | Problem], what: str, at: str, registry: Registry | None
) -> None:
    """Apply `change` to every claim `fn` computes, where its module keeps them and in the registry; a problem it
    finds is the registry's, like a bad id's, and the module's other claims load."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    declared: list[Claim] | None = vars(module).get(DECLARED) if registry is None and module is not None else None
    into = registry if registry is not None else current().registry
    items = declared if declared is not None else list(into)
    found = False
    for i, item in enumerate(items):
        if item.compute is not fn:
            continue
        found = True
        changed = change(item)
        if isinstance(changed, Problem):
            into.errors.append(changed)
            return
        items[i] = changed
        into.amend(changed)
    if not found:
        name = getattr(fn, "__qualname__", repr(fn))
        into.errors.append(
            Problem(at, f"{what}({name}, ...) names no claim; expected a function declared with @claim above it")
        )


def undeclared_names(
    registry: Registry, backends: Sequence[str], profiles: Mapping[str, Sequence[str]], elsewhere: Sequence[str] = ()
) -> list[Problem]:
    """Every name a claim declares that nothing defines, one line each with the claim's place.

    `backends` are the engine's backend names, `profiles` each hardware marker with the backends its
    profile lists, `elsewhere` the machines a measured figure may be printed for that no profile
    describes (book.toml). A misspelt backend or marker would otherwise leave its claim skipped with no
    reason, or run nowhere and pass; a claim no backend of any profile could run is an error too."""
    import difflib

    def unknown(what: str, name: str, known: Iterable[str], claim: Claim) -> Problem:
        near = difflib.get_close_matches(name, list(known), n=2, cutoff=0.5)
        hint = (
            f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else f" (known: {', '.join(sorted(known))})"
        )
        return Problem(f"{claim.defined_at}", f"claim {claim.id!r} declares {what} {name!r}, which is not one{hint}")

    errors: list[Problem] = []
    anywhere = {b for listed in profiles.values() for b in listed}
    for item in registry:
        bad = [unknown("backend", b, backends, item) for b in item.backends or () if b not in backends]
        if item.hardware is not None and profiles and item.hardware not in profiles:
            bad.append(unknown("hardware profile", item.hardware, profiles, item))
        if item.printed_on is not None and profiles and item.printed_on not in {*profiles, *elsewhere}:
            bad.append(unknown("printed_on machine", item.printed_on, {*profiles, *elsewhere}, item))
        if item.measured_here is not None:
            other = registry.get(item.measured_here)
            if other is None or other.kind is not Kind.MEASURED:
                near = registry.near(item.measured_here)
                hint = f"; did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
                bad.append(
                    Problem(
                        f"{item.defined_at}",
                        f"claim {item.id!r} declares measured_here "
                        f"{item.measured_here!r}, which is not a measured claim{hint}",
                    )
                )
        errors += bad
        if bad or not item.needs_backend or item.backends is None or not profiles:
            continue
        own = profiles.get(item.hardware) if item.hardware is not None else None
        where = own if own is not None else anywhere
        if not set(item.backends) & set(where):
            place = f"the {item.hardware} profile" if own is not None else "any hardware profile"
            errors.append(
                Problem(
                    f"{item.defined_at}",
                    f"claim {item.id!r} runs on "
                    f"{', '.join(item.backends)}, and no backend of {place} is one of them: it could never be checked",
                )
            )
    return errors


def is_measured(claim_id: str) -> bool:
    """Whether a claim's value depends on the machine that computes it."""
    claim = REGISTRY.get(claim_id)
    return claim is not None and claim.kind is Kind.MEASURED


def _id_part(value: Any) -> str:
    """The id segment for a family parameter: its `id` attribute, else its text."""
    return _id_text(getattr(value, "id", None) or str(value))


@functools.lru_cache(maxsize=4096)
def _id_text(text: str) -> str:
    """`text` as an id segment; a family's values recur across its claims, so each is made once."""
    return re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")


def load_topics(package: str) -> list[Problem]:
    """Import every topic module once, subpackages' modules included, which fills the registry.

    A module that fails to import does not stop the others: its error comes back as
    one line naming the module, and the run reports it as a failure.
    """
    errors: list[Problem] = []
    registry = current().registry
    declared = len(registry.errors)
    try:
        pkg = importlib.import_module(package)
    except ImportError as e:
        return [Problem("book.toml", f"[book] topics names package {package!r}, which does not import: {e}")]
    _declare_again(pkg, registry)
    for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}.", onerror=lambda name: None):
        name = info.name
        try:
            _declare_again(importlib.import_module(name), registry)
        except Exception as e:  # any fault in one topic module is reported, not fatal
            import traceback

            frames = [f for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith("<")]
            where = (
                (e.filename, e.lineno)
                if isinstance(e, SyntaxError)
                else ((frames[-1].filename, frames[-1].lineno) if frames else (name, 0))
            )
            errors.append(
                Problem(f"{_relative(str(where[0]))}:{where[1]}", f"{name} does not import: {type(e).__name__}: {e}")
            )
    return registry.errors[declared:] + errors


def _declare_again(module: Any, registry: Registry) -> None:
    """Give `registry` the claims `module` declared when another book imported it (the module is not run again)."""
    if module.__name__ in registry.modules:
        return
    for item in vars(module).get(DECLARED, ()):
        registry.declare(item, module.__name__)
