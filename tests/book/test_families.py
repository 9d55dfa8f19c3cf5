"""A family of claims (`claim(..., over=...)`): each member is the claim its parameters make, the rest as declared."""

from __future__ import annotations

import dataclasses
from typing import Any

from verified_book.authoring.registry import Claim, Registry, claim


def test_each_member_is_the_claim_its_parameters_make() -> None:
    registry = Registry()

    @claim(
        "t.family.{n}.{dtype}",
        kind="library",
        over={"n": [1, 2, 3], "dtype": ["float16", "bfloat16"]},
        backends=["numpy"],
        stated_for={"numpy": ">=1.26"},
        registry=registry,
    )
    def family(backend: Any, n: int, dtype: str) -> int:
        """A family's doc, for every member."""
        return n

    members = list(registry)
    assert [c.id for c in members] == sorted(f"t.family.{n}.{d}" for n in (1, 2, 3) for d in ("float16", "bfloat16"))
    first = members[0]
    for member in members:
        n, dtype = member.id.split(".")[2:]
        assert member.params == {"n": int(n), "dtype": dtype}
        # what the dataclass would make of the first with this member's id and parameters, field for field
        assert member == dataclasses.replace(first, id=member.id, params=member.params)
        assert (
            isinstance(member, Claim) and member.compute is family and member.doc == "A family's doc, for every member."
        )
    assert len({id(c.params) for c in members}) == len(members)  # each member's parameters its own
