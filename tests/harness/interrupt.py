"""Ctrl-C as a terminal sends it, for the tests that interrupt a run they started."""

from __future__ import annotations

import signal


def reachable() -> None:
    """In a child about to start (`preexec_fn`): SIGINT at its default, so the child's Python turns it into
    KeyboardInterrupt. A shell that starts a suite in the background starts it with SIGINT ignored, every child
    inherits that, and Python then installs no handler: the test's Ctrl-C would never arrive, and the run it meant
    to stop would run on to the test's timeout."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
