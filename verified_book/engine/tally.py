"""What a run found, as one process counts it and hands its controller: the `Tally` of an xdist worker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from verified_book.vocabulary import worst


@dataclass
class Tally:
    """What a run found: the status of each (claim, backend) judged, the checks and figures it selected,
    each figure's status, why a selected claim was computed nowhere here, the results file written and
    the workers whose tallies were lost. An xdist worker sends its controller this and nothing else."""

    statuses: dict[tuple[str, str], str] = field(default_factory=dict)
    selected: set[tuple[str, str]] = field(default_factory=set)  # (claim, backend) pairs this run's items check
    figure_statuses: dict[str, str] = field(default_factory=dict)  # figure item's node id -> its status here
    figures_selected: set[str] = field(default_factory=set)
    not_here: dict[str, str] = field(default_factory=dict)  # claim id -> why no backend here computed it
    written: set[str] = field(default_factory=set)  # results files the run's processes wrote
    lost_workers: list[str] = field(default_factory=list)  # xdist workers whose tallies never arrived, and why

    def merge(self, other: Tally) -> None:
        """Take in another process's tally: a (claim, backend) judged by both keeps the worse status."""
        for key, status in other.statuses.items():
            self.statuses[key] = worst((status, self.statuses[key])) if key in self.statuses else status
        self.selected |= other.selected
        self.figure_statuses.update(other.figure_statuses)
        self.figures_selected |= other.figures_selected
        for claim_id, reason in other.not_here.items():
            self.not_here.setdefault(claim_id, reason)
        self.written |= other.written
        self.lost_workers += other.lost_workers

    def to_json(self) -> dict[str, Any]:
        """Plain strings, lists and dicts only: an xdist worker sends this through execnet, which takes no enum."""
        return {
            "statuses": [[str(c), str(b), str(s)] for (c, b), s in sorted(self.statuses.items())],
            "selected": sorted([str(c), str(b)] for c, b in self.selected),
            "figures": sorted([str(n), str(s)] for n, s in self.figure_statuses.items()),
            "figures_selected": sorted(self.figures_selected),
            "not_here": dict(sorted(self.not_here.items())),
            "written": sorted(self.written),
            "lost_workers": list(self.lost_workers),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Tally:
        return cls(
            statuses={(c, b): s for c, b, s in data.get("statuses", [])},
            selected={(c, b) for c, b in data.get("selected", [])},
            figure_statuses={n: s for n, s in data.get("figures", [])},
            figures_selected=set(data.get("figures_selected", [])),
            not_here=dict(data.get("not_here", {})),
            written=set(data.get("written", [])),
            lost_workers=list(data.get("lost_workers", [])),
        )
