"""What asking one claim for its value on one backend gave: the value, or why there is none.

Its own module so that what computes outcomes (verified_book.engine.check) and what reads them back from
a machine's records (verified_book.engine.recorded) both use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verified_book.authoring import inputs
from verified_book.authoring.registry import Claim
from verified_book.backends import NO_BACKEND
from verified_book.engine import environment
from verified_book.vocabulary import OutcomeStatus


@dataclass
class Outcome:
    """What one claim computed on one backend, with the inputs it read."""

    claim: Claim
    backend: str
    status: OutcomeStatus
    value: Any = None
    message: str = ""
    inputs: list[inputs.Read] = field(default_factory=list)
    seconds: float = 0.0
    broken: environment.Broken | None = None  # what the environment lost, where the status is BROKEN
    version: str | None = None  # the backend's library version, where it computed the value
    recorded: str | None = None  # the date of the record the value was taken from, where this run did not compute it

    @property
    def computed_on(self) -> str:
        """Where the value was computed, for a message: "exact arithmetic", or the backend and its library's version."""
        if self.backend == NO_BACKEND.name:
            return "exact arithmetic"
        library = self.backend.split(":")[0]
        version = f" {self.version}" if self.version else ""
        return f"{self.backend}{version}" if library == self.backend else f"{self.backend} ({library}{version})"
