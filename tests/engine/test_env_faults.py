"""Hardware and environment faults: a missing library, a device out of memory, Ctrl-C, the network.

Each is reported clearly, skips or fails only what it affects, and keeps every record
already made. The run itself is offline, and this session proves it.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from harness import faults

from verified_book.engine import offline


@pytest.mark.slow  # a pytest process per case
@pytest.mark.parametrize("package", ["torch", "mlx"])
def test_a_missing_library_skips_its_backends_only(tmp_path: Path, package: str) -> None:
    """A separate run in which the package looks uninstalled (an import blocker on PYTHONPATH)."""
    (tally,) = faults.absent_packages(tmp_path, (package,))
    assert tally.ok, str(tally)


@pytest.mark.slow  # a pytest process
def test_a_device_out_of_memory_fails_that_claim_alone(tmp_path: Path) -> None:
    tally = faults.out_of_memory(tmp_path)
    assert tally.ok and tally.tried == 2, str(tally)


@pytest.mark.slow  # a pytest process
def test_ctrl_c_stops_the_run_and_keeps_every_record_made(tmp_path: Path) -> None:
    tally = faults.keyboard_interrupt(tmp_path)
    assert tally.ok, str(tally)


def test_a_claim_reaching_for_the_network_fails_alone(tmp_path: Path) -> None:
    tally = faults.network(tmp_path)
    assert tally.ok, str(tally)


def test_this_run_refuses_connections_away_from_the_machine() -> None:
    assert offline.active()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        with pytest.raises(offline.NetworkRefused, match=r"192\.0\.2\.1"):
            sock.connect(("192.0.2.1", 443))
    with pytest.raises(OSError, match="network access is off"):
        socket.create_connection(("2001:db8::1", 443), timeout=5)


def test_this_run_still_reaches_its_own_machine() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass


def test_the_hub_is_offline_for_this_run() -> None:
    for name in offline.OFFLINE_VARIABLES:
        assert os.environ.get(name) == "1", name
    constants = pytest.importorskip("huggingface_hub.constants")
    assert constants.HF_HUB_OFFLINE is True
