"""Serving the app with uvicorn (the only importer of uvicorn), with connection hygiene.

uvicorn has no timeout for reading a request: a peer that sends half a header holds its socket
forever, and a thousand such peers exhaust the file descriptors.  The protocol below gives every
request a deadline for its headers and then for its body, and caps open connections (a new one
over the cap evicts the oldest connection that is between requests, or is refused when there is
none).  Idle keep-alive connections are closed by uvicorn's own keep-alive timeout.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from service.settings import Settings

log = logging.getLogger("codemode")


def guarded_protocol(settings: Settings) -> type[asyncio.Protocol]:
    """An HTTP protocol class with the read deadlines and the connection cap of ``settings``."""
    header_s = settings.header_read_timeout_seconds
    body_s = settings.body_read_timeout_seconds
    max_connections = settings.max_connections
    # Connections not inside a request (opened or kept alive, headers not complete), oldest first:
    # at the cap a new connection evicts the oldest of them, so peers that open sockets and send
    # nothing cannot lock everyone else out for a whole header timeout.
    between_requests: dict[GuardedHttpToolsProtocol, None] = {}

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        _read_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                victim = next(iter(between_requests), None)
                if victim is None:  # every connection is inside a request: refuse this one
                    log.warning("closing a new connection: %d are open (max_connections)", max_connections)
                    transport.abort()
                    return
                between_requests.pop(victim)
                victim.transport.close()
            between_requests[self] = None
            # The first request's headers are due this long after the connection opens.
            self._arm(header_s)

        def connection_lost(self, exc: Exception | None) -> None:
            between_requests.pop(self, None)
            self._disarm()
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._read_deadline is None:
                self._arm(header_s)

        def on_headers_complete(self) -> None:
            between_requests.pop(self, None)
            super().on_headers_complete()
            self._arm(body_s)

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                between_requests[self] = None

        def _arm(self, seconds: float) -> None:
            self._disarm()
            self._read_deadline = self.loop.call_later(seconds, self._read_timed_out)

        def _disarm(self) -> None:
            if self._read_deadline is not None:
                self._read_deadline.cancel()
                self._read_deadline = None

        def _read_timed_out(self) -> None:
            self._read_deadline = None
            if not self.transport.is_closing():
                self.transport.close()

    return GuardedHttpToolsProtocol


# Descriptors the service needs besides client connections (worker pipes, store, logs).
FD_RESERVE = 512


def ensure_descriptors(max_connections: int) -> None:
    """Raise the soft descriptor limit to fit ``max_connections`` (up to the hard limit), or warn."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = max_connections + FD_RESERVE
    if soft >= need:
        return
    target = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < need:
        log.warning(
            "max_connections=%d needs %d file descriptors but the hard limit is %d; "
            "lower max_connections or raise the limit",
            max_connections,
            need,
            hard,
        )


def serve(app: Any, settings: Settings) -> None:
    """Run ``app`` on the configured host and port until interrupted."""
    ensure_descriptors(settings.max_connections)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        http=guarded_protocol(settings),
        timeout_keep_alive=settings.keep_alive_timeout_seconds,
    )
