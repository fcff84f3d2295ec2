"""A scripted event-stream server on a real socket: each connection gets its own canned bytes.

Lets the client's reconnection be tested against what a network really does: a connection closed
in the middle of an event, one that goes silent, one that answers an error.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: In a script: keep the connection open, silent, until the server stops.
HANG = object()
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n"

Script = Callable[[int, dict[str, str]], list[object]]


def event(event_id: int, name: str, data: str) -> bytes:
    return f"id: {event_id}\nevent: {name}\ndata: {data}\n\n".encode()


@dataclass
class Recorded:
    """What the server saw: each connection's request line and headers (lower-case names)."""

    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)


@contextmanager
def sse_server(script: Script) -> Iterator[tuple[str, Recorded]]:
    """Serve ``script(n, headers)`` (bytes to send in order, or HANG) to the n-th connection (from 0)."""
    seen = Recorded()
    lock = threading.Lock()

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            request_line = self.rfile.readline().decode("latin-1").strip()
            headers: dict[str, str] = {}
            while (line := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            with lock:
                n = len(seen.requests)
                seen.requests.append((request_line, headers))
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for part in script(n, headers):
                if part is HANG:
                    seen.stop.wait()
                    return
                assert isinstance(part, bytes)
                self.wfile.write(part)
                self.wfile.flush()

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        seen.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
