"""Serving the app with uvicorn (the only importer of uvicorn), with connection hygiene.

uvicorn has no timeout for reading a request: a peer that sends half a header holds its socket
forever, and a thousand such peers exhaust the file descriptors.  The protocol below gives every
request a deadline for its headers and then for its body, and caps open connections (a new one
over the cap evicts the oldest connection that is between requests, or is refused when there is
none).  Idle keep-alive connections are closed by uvicorn's own keep-alive timeout.

The write side has no timeout in uvicorn either: a peer that asks for a large answer and never
reads it keeps the unsent bytes in its transport's buffer for as long as it keeps the socket
(64 peers and a 9.6 MB cell status: +590 MiB, for good).  So response bodies are handed to the
transport in slices of ``max_unsent_bytes`` (``SlicedBodies``), each after the previous ones
drained below that mark, and a connection whose peer takes none of its unsent bytes for
``response_write_timeout_seconds`` is reset, which frees them (the kernel's queue too).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import signal
import socket
import struct
import sys
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import ClassVar

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from service.settings import Settings

from .joined_writes import JoinedWrites

log = logging.getLogger("codemode")
#: uvicorn's exit status for a server that never started (its own ``run`` exits with it too).
STARTUP_FAILURE = 3


class ConnectionGuard:
    """One server's read and write deadlines, its connection cap, and its connections between requests."""

    def __init__(self, settings: Settings) -> None:
        self.header_s = settings.header_read_timeout_seconds
        self.body_s = settings.body_read_timeout_seconds
        self.max_connections = settings.max_connections
        self.write_s = settings.response_write_timeout_seconds
        # Progress is sampled several times per timeout, so a stall is caught within a quarter of it.
        self.check_s = self.write_s / 4
        self.max_unsent = settings.max_unsent_bytes
        # Connections not inside a request (opened or kept alive, headers not complete), oldest first:
        # at the cap a new connection evicts the oldest of them, so peers that open sockets and send
        # nothing cannot lock everyone else out for a whole header timeout.
        self.between_requests: dict[HttpToolsProtocol, None] = {}

    def admit(self, protocol: HttpToolsProtocol, open_connections: int) -> bool:
        """Count in a new connection: over the cap, evict the oldest one between requests, or refuse this one."""
        if open_connections > self.max_connections:
            victim = next(iter(self.between_requests), None)
            if victim is None:  # every connection is inside a request: refuse this one
                log.warning("closing a new connection: %d are open (max_connections)", self.max_connections)
                return False
            self.between_requests.pop(victim)
            victim.transport.close()
        self.between_requests[protocol] = None
        return True


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol with the deadlines and the cap of its class's ``_guard``."""

    _guard: ClassVar[ConnectionGuard]
    _read_deadline: asyncio.TimerHandle | None = None
    _write_check: asyncio.TimerHandle | None = None
    _last_progress = 0.0  # loop time the peer last took response bytes (or the watch began)
    _acked_seen: int | None = None
    _unsent_seen = 0
    _drained_since_check = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # A response's head and body leave in one write (JoinedWrites), not two.
        super().connection_made(JoinedWrites(transport, self.loop))  # type: ignore[arg-type]
        # Writers wait (uvicorn's flow control) once this much is unsent; SlicedBodies keeps
        # each write to that size, so the buffer holds at most twice it.
        transport.set_write_buffer_limits(high=self._guard.max_unsent)
        if not self._guard.admit(self, len(self.connections)):
            transport.abort()
            return
        # The first request's headers are due this long after the connection opens.
        self._arm(self._guard.header_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard.between_requests.pop(self, None)
        self._disarm()
        if self._write_check is not None:
            self._write_check.cancel()
            self._write_check = None
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._read_deadline is None:
            self._arm(self._guard.header_s)

    def on_headers_complete(self) -> None:
        self._guard.between_requests.pop(self, None)
        super().on_headers_complete()
        self._arm(self._guard.body_s)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._guard.between_requests[self] = None
        # The last slice may still be unsent; a close waits for it, so it must drain or time out.
        if self.transport.get_write_buffer_size():
            self._watch_writes()

    def pause_writing(self) -> None:
        super().pause_writing()
        self._watch_writes()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._drained_since_check = True

    def _watch_writes(self) -> None:
        """Start watching a connection with unsent bytes (unless it is watched already)."""
        if self._write_check is None:
            self._last_progress = self.loop.time()
            self._note_progress()
            self._write_check = self.loop.call_later(self._guard.check_s, self._check_writes)

    def _note_progress(self) -> None:
        self._acked_seen = _acked(self.transport)
        self._unsent_seen = self.transport.get_write_buffer_size()
        self._drained_since_check = False

    def _check_writes(self) -> None:
        """While bytes are unsent: abort the connection once the peer took none for ``write_s``."""
        self._write_check = None
        unsent = self.transport.get_write_buffer_size()
        if not unsent:
            return
        acked = _acked(self.transport)
        if acked is not None and self._acked_seen is not None:
            progressed = acked > self._acked_seen
        else:  # without the kernel's count: the buffer shrank, or drained enough to take more
            progressed = self._drained_since_check or unsent < self._unsent_seen
        now = self.loop.time()
        write_s = self._guard.write_s
        if progressed:
            self._last_progress = now
            self._note_progress()
        elif now - self._last_progress >= write_s:
            log.warning(
                "aborting a connection: %d response bytes unsent for %ss (response_write_timeout_seconds)",
                unsent,
                write_s,
            )
            _reset(self.transport)
            return
        self._write_check = self.loop.call_later(self._guard.check_s, self._check_writes)

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


def guarded_protocol(settings: Settings) -> type[GuardedHttpToolsProtocol]:
    """The protocol class uvicorn is given: one guard (deadlines, cap, idle connections) per server."""
    return type("GuardedHttpToolsProtocol", (GuardedHttpToolsProtocol,), {"_guard": ConnectionGuard(settings)})


#: ``struct tcp_info`` (Linux 4.1+): ``tcpi_bytes_acked``, a u64 at this offset, counts what the peer took.
_BYTES_ACKED = slice(120, 128)


def _acked(transport: asyncio.Transport) -> int | None:
    """Bytes of this connection the peer has acknowledged, or None where the kernel does not say.

    A slow reader's progress shows here first: the kernel's send queue (megabytes on loopback)
    drains as it reads, long before the socket is writable again and the transport's buffer moves.
    """
    sock = transport.get_extra_info("socket")
    if sock is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _BYTES_ACKED.stop)
    except (OSError, AttributeError):  # not TCP, or no TCP_INFO on this platform
        return None
    if len(info) < _BYTES_ACKED.stop:
        return None
    return int.from_bytes(info[_BYTES_ACKED], sys.byteorder)


def _reset(transport: asyncio.Transport) -> None:
    """Drop the connection and everything queued for it: a reset, not a FIN behind megabytes the peer never reads
    (a plain close would leave the kernel holding its send queue, retrying, for minutes)."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class SlicedBodies:
    """ASGI middleware: response bodies go to the server in slices of at most ``slice_bytes``.

    uvicorn writes a body message whole into the transport's buffer, but waits for that buffer to
    drain before each message; sliced, a peer that reads slowly (or not at all) makes the sender
    wait instead of the service buffering a second copy of the whole answer.
    """

    def __init__(self, app: ASGIApp, slice_bytes: int) -> None:
        self.app = app
        self.slice_bytes = slice_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        size = self.slice_bytes

        async def sliced(message: Message) -> None:
            body = message.get("body", b"")
            if message["type"] != "http.response.body" or len(body) <= size:
                await send(message)
                return
            view = memoryview(body)  # slices share the body's memory
            more = message.get("more_body", False)
            for start in range(0, len(view), size):
                end = start + size
                await send(
                    {"type": "http.response.body", "body": view[start:end], "more_body": more or end < len(view)}
                )

        await self.app(scope, receive, sliced)


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


#: After the drain, open requests get this long before uvicorn cancels them (event streams, say).
GRACEFUL_SHUTDOWN_SECONDS = 5


class DrainingServer(uvicorn.Server):
    """uvicorn's server, which on SIGTERM first awaits ``drain`` (service/drain.py) while it still listens
    (peers relay waits for this process's cells to it until the drain ends), and only then stops as
    uvicorn does.  SIGINT stops at once, as before (a second one forces it)."""

    def __init__(self, config: uvicorn.Config, drain: Callable[[], Awaitable[None]] | None) -> None:
        super().__init__(config)
        self._drain = drain
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining: asyncio.Task[None] | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # A signal handler: it runs between two bytecodes of the loop's thread, so it only schedules.
        if sig != signal.SIGTERM or self._drain is None or self._loop is None or not self.started:
            super().handle_exit(sig, frame)
        elif self._draining is None and not self.should_exit:
            self._loop.call_soon_threadsafe(self._start_drain, sig)

    def _start_drain(self, sig: int) -> None:
        if self._draining is not None or self._drain is None:
            return
        log.info("SIGTERM: draining before the server stops")
        self._draining = asyncio.ensure_future(self._drain())
        self._draining.add_done_callback(lambda done: self._drained(done, sig))

    def _drained(self, done: asyncio.Task[None], sig: int) -> None:
        if not done.cancelled() and done.exception() is not None:
            log.error("the drain failed; stopping anyway", exc_info=done.exception())
        super().handle_exit(sig, None)  # now as uvicorn would have at the signal


def serve(app: ASGIApp, settings: Settings, drain: Callable[[], Awaitable[None]] | None = None) -> None:
    """Run ``app`` on the configured host and port until interrupted; on SIGTERM, ``drain`` first."""
    ensure_descriptors(settings.max_connections)
    config = uvicorn.Config(
        SlicedBodies(app, settings.max_unsent_bytes),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        http=guarded_protocol(settings),
        timeout_keep_alive=settings.keep_alive_timeout_seconds,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        # /v1/monty's frames: a larger WebSocket message is refused (close 1009) before it is assembled.
        ws_max_size=settings.monty_max_frame_bytes,
    )
    server = DrainingServer(config, drain)
    server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)
