"""The values a warm book holds, indexed by what each read, so that a save asks only about the values it can
have moved: a data file's readers, a snippet's, and those that computed nothing to go by."""

from __future__ import annotations

from typing import Iterable, NamedTuple

from verified_book.records.record import Check, ClaimMeta, DataInput, Record, SnippetInput
from verified_book.vocabulary import Shown, Status

Key = Check
#: statuses of a value that computed nothing to go by
NO_VALUE = (Status.FAILED, Shown.BROKEN_ENVIRONMENT)


class Held(NamedTuple):
    """What one value held was computed from: the record a run would write of it, and its claim's metadata
    (the code fingerprint) when it was computed."""

    record: Record
    meta: ClaimMeta


class HeldValues(dict[Key, Held]):
    """Each (claim, backend) held and what it was computed from, with the index a save is answered by: the
    values of each claim, the readers of each data file and snippet, and the values that computed nothing."""

    def __init__(self) -> None:
        super().__init__()
        self._of_claim: dict[str, set[Key]] = {}
        self._readers: dict[tuple[str, str], set[Key]] = {}
        self._no_value: set[Key] = set()

    @staticmethod
    def _read(held: Held) -> set[tuple[str, str]]:
        out: set[tuple[str, str]] = set()
        for entry in held.record.inputs or ():
            if isinstance(entry, DataInput):
                out.add(("data", entry.file))
            elif isinstance(entry, SnippetInput):
                out.add(("snippet", entry.snippet))
        return out

    def __setitem__(self, key: Key, held: Held) -> None:
        if key in self:
            del self[key]
        super().__setitem__(key, held)
        self._of_claim.setdefault(key[0], set()).add(key)
        for source in self._read(held):
            self._readers.setdefault(source, set()).add(key)
        if held.record.status in NO_VALUE:
            self._no_value.add(key)

    def __delitem__(self, key: Key) -> None:
        held = self[key]
        super().__delitem__(key)
        self._of_claim[key[0]].discard(key)
        if not self._of_claim[key[0]]:
            del self._of_claim[key[0]]
        for source in self._read(held):
            self._readers[source].discard(key)
        self._no_value.discard(key)

    def of_claim(self, claim_id: str) -> set[Key]:
        """The values held of one claim, on each backend."""
        return set(self._of_claim.get(claim_id, ()))

    def claims(self) -> set[str]:
        """The claims with a value held."""
        return set(self._of_claim)

    def reading(self, data: Iterable[str] = (), snippets: Iterable[str] = ()) -> set[Key]:
        """The values whose records read one of the `data` files (relative to the data folder) or a figure one of
        the `snippets` (relative to the book's root) printed, and those that failed: the only values a save of
        them can invalidate, since the rule compares each record's inputs alone."""
        found = set(self._no_value)
        for source in [("data", file) for file in data] + [("snippet", name) for name in snippets]:
            found |= self._readers.get(source, set())
        return found
