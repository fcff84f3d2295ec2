"""Free loopback ports: the one helper the tests, the fixtures and the bench share."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback TCP port nobody listened on a moment ago (the OS picks it; a caller binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
