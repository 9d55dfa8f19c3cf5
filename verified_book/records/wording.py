"""A validation's problems in the words of the place: `records['a.one']['numpy']: figures[0]: line -4 is not a
positive integer`. The models (verified_book.records.record) say what is wrong with a value in one of three forms,
told apart by the error's type (`VALUE`, `FIELD`, `AT`); this says where, as a results file's reader names it."""

from __future__ import annotations

from pydantic import ValidationError

from verified_book.records.errors import show as _show
from verified_book.records.record import AT, FIELD, VALUE

#: fields whose value is an object keyed by names (not fields): how many levels of keys follow each
_KEYED = {
    "records": 2,
    "claims": 1,
    "outputs": 1,
    "seconds": 2,
    "dates": 2,
    "measured": 2,
    "fingerprint": 1,
    "versions": 1,
    "backends": 1,
}


def _place(loc: tuple[int | str, ...]) -> list[str]:
    """A pydantic location as the file's places: `records['a.one']['numpy']`, `figures[0]`, `line`."""
    groups: list[str] = []
    keys = 0
    if loc[:2] == ("run", "outputs"):  # the snippets' outputs are told by their name, as readers see them
        loc = loc[1:]
    for part in loc:
        if part == "[key]":
            continue
        if isinstance(part, int):
            groups[-1] += f"[{part}]"
        elif keys:
            groups[-1] += f"[{part!r}]"
            keys -= 1
        else:
            groups.append(part)
            keys = _KEYED.get(part, 0)
    return groups


_GENERIC = {
    "string_type": "must be a string",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "list_type": "must be a list",
    "bool_type": "must be true or false",
    "missing": "is missing",
    "extra_forbidden": "is not a field of a results file here",
}


def problems(error: ValidationError, where: str) -> list[str]:
    """Each problem a validation found, as `where: place: what` lines, in the words of the place."""
    out: list[str] = []
    for e in error.errors(include_url=False):
        groups = _place(tuple(e["loc"]))
        text = e["msg"]
        if e["type"] == AT:
            joint = " " if "[key]" in e["loc"] else ": "
            lines = [joint.join([": ".join(groups), line]) if groups else line for line in text.split("\n")]
        else:
            field = groups.pop() if groups else "file"
            if e["type"] == VALUE:
                what = f"{field} {_show(e['input'])} {text}"
            elif e["type"] == FIELD:
                what = f"{field} {text}"
            elif e["type"] == "dict_type" and "[" not in field:
                what = f"{field!r} must be an object"
            elif e["type"] in _GENERIC:
                what = f"{field} {_GENERIC[e['type']]}"
            elif e["type"] == "string_too_long":
                what = f"{field}: a string of {len(e['input'])} characters (at most {e['ctx']['max_length']})"
            else:
                what = f"{field} {_show(e['input'])}: {text}"
            lines = [": ".join([*groups, what])]
        out += [f"{where}: {line}" for line in lines if f"{where}: {line}" not in out]
    return out
