"""A verification run reaches no network: the hub is set offline and outside connections are refused.

Claims compute from inputs in the repository (`claims/data/`) and libraries on the machine;
a claim that reached for a model hub or a web page would make the book depend on what a
server says today. The guard refuses every connection that is not to this machine, with
a message naming the address, so such a claim fails loudly instead of silently.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from typing import Any, Callable

from verified_book.errors import BookError

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


class NetworkRefused(BookError, ConnectionRefusedError):
    """A connection away from this machine, attempted during a verification run."""


_installed: list[tuple[Callable[..., Any], Callable[..., Any]]] = []


def set_hub_offline() -> None:
    """Tell Hugging Face libraries, now and in every child process, that there is no hub."""
    for name in OFFLINE_VARIABLES:
        os.environ[name] = "1"
    constants: Any = sys.modules.get("huggingface_hub.constants")
    if constants is not None:  # imported before the run started: its flag was read already
        constants.HF_HUB_OFFLINE = True


def is_local(family: int, address: Any) -> bool:
    """Whether a socket address stays on this machine (a Unix socket, loopback, localhost)."""
    if family not in (socket.AF_INET, socket.AF_INET6):
        return True
    host = address[0] if isinstance(address, tuple) and address else address
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _refuse(sock: socket.socket, address: Any) -> None:
    if not is_local(sock.family, address):
        raise NetworkRefused(
            f"network access is off during verification: connection to {address!r} refused; "
            "a claim reads its inputs from claims/data/ and the libraries on this machine"
        )


def install() -> None:
    """Refuse outside connections until `uninstall`; nested installs (a run inside a run) stack."""
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex
    _installed.append((connect, connect_ex))
    if len(_installed) > 1:
        return

    def guarded_connect(self: socket.socket, address: Any) -> None:
        _refuse(self, address)
        return connect(self, address)

    def guarded_connect_ex(self: socket.socket, address: Any) -> int:
        _refuse(self, address)
        return connect_ex(self, address)

    socket.socket.connect = guarded_connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = guarded_connect_ex  # type: ignore[method-assign,assignment]


def uninstall() -> None:
    if not _installed:
        return
    connect, connect_ex = _installed.pop()
    if not _installed:
        socket.socket.connect = connect  # type: ignore[method-assign]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]


def active() -> bool:
    return bool(_installed)
