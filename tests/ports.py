"""A free port on the loopback, for a server a test or benchmark starts in another process."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (closed again before the server binds it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
