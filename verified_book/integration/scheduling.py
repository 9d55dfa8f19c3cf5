"""Under pytest-xdist, the items that time the machine run last, on one worker, alone.

A measured claim reads a bandwidth or a matmul rate off the machine; a snippet records how
long it ran. Beside other workers' tests those figures describe a shared machine, and an
invariant such as "the matrix-vector product streams no faster than the copy" can fail
because the copy was measured under load. `QuietLastScheduling` is xdist's `load`
scheduling (chunks of the collection to whichever worker has room) for every other item;
once those have all been handed out, it shuts down every worker but one, waits until they
have finished, and only then sends that worker the timed items.

Items that compute on a CUDA device (`pinned`) all go to one worker, `gw0`, which also runs the
timed items: each process that touches the card makes a CUDA context of its own, hundreds of MB
of a 16 GB card's memory, so `-n auto` on a desktop GPU would otherwise spend the card on contexts.
"""

from __future__ import annotations

from itertools import cycle
from typing import Any, Callable

from xdist.scheduler import LoadScheduling

from verified_book.backends import CUDA_WORKER


class QuietLastScheduling(LoadScheduling):
    """xdist's load scheduling with the items `runs_alone` picks held back for a quiet end."""

    collection: list[str] | None  # LoadScheduling's own attributes, which it leaves untyped
    maxschedchunk: int | None

    def __init__(
        self,
        config: Any,
        log: Any = None,
        *,
        runs_alone: Callable[[str], bool],
        pinned: Callable[[str], bool] | None = None,
    ) -> None:
        super().__init__(config, log)
        self.runs_alone = runs_alone
        self.pinned = pinned or (lambda nodeid: False)
        self.quiet: list[int] = []  # indices into the collection, held until the others are done
        self.quiet_node: Any = None
        self.pin_node: Any = None  # the worker the pinned items (and then the timed ones) run on

    @property
    def tests_finished(self) -> bool:
        return not self.quiet and super().tests_finished

    @property
    def has_pending(self) -> bool:
        return bool(self.quiet) or super().has_pending

    def schedule(self) -> None:
        """The first call splits the collection; the rest is LoadScheduling's first distribution."""
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self.check_schedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        collection: list[str] = next(iter(self.node2collection.values()))
        self.collection = collection
        alone = [i for i, nodeid in enumerate(collection) if self.runs_alone(nodeid)]
        held = set(alone)
        self.quiet = alone
        self.pin_node = next((n for n in self.nodes if getattr(n.gateway, "id", None) == CUDA_WORKER), self.nodes[0])
        pinned = [i for i, nodeid in enumerate(collection) if i not in held and self.pinned(nodeid)]
        held.update(pinned)
        self.pending[:] = [i for i in range(len(collection)) if i not in held]
        if pinned:
            self.node2pending[self.pin_node].extend(pinned)
            self.pin_node.send_runtest_some(pinned)
        if self.maxschedchunk is None:
            self.maxschedchunk = len(collection)
        if len(self.pending) < 2 * len(self.nodes):
            nodes = cycle(self.nodes)
            for _ in range(len(self.pending)):
                self._send_tests(next(nodes), 1)
        else:
            chunk = max(2, min(len(self.pending) // len(self.nodes) // 4, self.maxschedchunk))
            for node in self.nodes:
                self._send_tests(node, chunk)
        if self.pending:
            return
        if self.quiet:
            self._quiet_phase(self.nodes[0])
        else:
            for node in self.nodes:
                node.shutdown()

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        if node.shutting_down:
            return
        if self.pending or (not self.quiet and self.quiet_node is None):
            super().check_schedule(node, duration)
            return
        self._quiet_phase(node)

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        super().mark_test_complete(node, item_index, duration)
        if self.quiet_node is not None:
            self._send_quiet_when_alone()

    def remove_node(self, node: Any) -> str | None:
        if node is self.quiet_node:
            # finished, or died: then LoadScheduling puts back what it held, for a worker that is alone by now
            self.quiet_node = None
        if node is self.pin_node:
            self.pin_node = None
        crashed: str | None = super().remove_node(node)
        if self.quiet_node is not None:
            self._send_quiet_when_alone()
        elif self.quiet and self.nodes and not self.pending:
            self._quiet_phase(self.nodes[0])
        return crashed

    def _quiet_phase(self, candidate: Any) -> None:
        """Everything else is handed out: keep `candidate` (or the worker already kept), stop the rest."""
        if self.quiet_node is None:
            pin = self.pin_node
            self.quiet_node = (
                pin if pin is not None and pin in self.node2pending and not pin.shutting_down else candidate
            )
        for node in self.nodes:
            if node is not self.quiet_node and not node.shutting_down:
                node.shutdown()
        self._send_quiet_when_alone()

    def _send_quiet_when_alone(self) -> None:
        """Send the held items once every other worker has finished: not only its items but its session's end,
        where it writes its records and judges their evidence, which computes too."""
        if not self.quiet or self.quiet_node is None or self.quiet_node not in self.node2pending:
            return
        if any(node is not self.quiet_node for node in self.node2pending):
            return
        indices, self.quiet = self.quiet, []
        self.node2pending[self.quiet_node].extend(indices)
        self.quiet_node.send_runtest_some(indices)
        self.quiet_node.shutdown()
