"""The warm book's values held, indexed by what each read: the index answers as a scan of every value would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from verified_book.engine.held_values import NO_VALUE, Held, HeldValues
from verified_book.records.record import Check, ClaimMeta, DataInput, Record, SnippetInput

FILES = ["a.toml", "b.json", "c.toml"]
SNIPPETS = ["pages/snippets/s.py", "pages/snippets/t.py"]
KEYS = st.tuples(st.sampled_from(["x.one", "x.two", "y.three"]), st.sampled_from(["numpy", "torch"]))
INPUTS = st.lists(
    st.sampled_from(FILES).map(lambda f: DataInput(file=f, key="k", value=1))
    | st.sampled_from(SNIPPETS).map(lambda s: SnippetInput(snippet=s, sha256="0" * 64, where="w", value="1")),
    max_size=3,
)
HELD = st.builds(
    lambda status, inputs: Held(
        Record(status=status, value=None if status != "verified" else 1, inputs=inputs), ClaimMeta()
    ),
    st.sampled_from(["verified", "failed"]),
    INPUTS,
)


def scanned(held: dict[Check, Held], data: set[str], snippets: set[str]) -> set[Check]:
    """What a save of `data` and `snippets` can move, by looking at every value held."""
    return {
        key
        for key, value in held.items()
        if value.record.status in NO_VALUE
        or any(
            (isinstance(e, DataInput) and e.file in data) or (isinstance(e, SnippetInput) and e.snippet in snippets)
            for e in value.record.inputs or ()
        )
    }


@settings(max_examples=80, deadline=None)
@given(
    steps=st.lists(st.tuples(KEYS, st.none() | HELD), max_size=12),
    data=st.sets(st.sampled_from(FILES)),
    snippets=st.sets(st.sampled_from(SNIPPETS)),
)
def test_the_index_names_what_a_scan_of_every_value_would(
    steps: list[tuple[tuple[str, str], Held | None]], data: set[str], snippets: set[str]
) -> None:
    held, plain = HeldValues(), dict[Check, Held]()
    for (claim, backend), value in steps:
        key = Check(claim, backend)
        if value is None:
            if key in plain:
                del held[key], plain[key]
        else:
            held[key] = plain[key] = value
        assert held.reading(data, snippets) == scanned(plain, data, snippets)
        assert held.claims() == {k[0] for k in plain}
        assert all(held.of_claim(c) == {k for k in plain if k[0] == c} for c in ("x.one", "x.two", "y.three"))
    assert dict(held) == plain
