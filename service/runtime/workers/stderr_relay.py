"""A worker's stderr as the service reads it: logged line by line under the worker's name, and capped.

A worker never writes to the service's own log file (it could forge log lines there).  Its stderr
is a pipe whose other end this relay reads: each line is logged as ``worker <pid>: <line>`` at
warning level (a healthy worker writes nothing), lines are cut at ``MAX_LINE_BYTES``, and after
``MAX_BYTES`` the relay closes its end, so a worker that floods its stderr costs the event loop
at most that much; the worker's next write then fails (EPIPE).  The last few lines are kept for the
message of a worker that failed to start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from typing import cast

log = logging.getLogger("codemode.workers")

#: Bytes of one logged line; the rest of the line is dropped.
MAX_LINE_BYTES = 1024
#: Bytes read from one worker over its whole life; then the pipe is closed.
MAX_BYTES = 64 * 1024
#: Lines kept for ``last_lines``.
KEPT_LINES = 3


class StderrRelay(asyncio.Protocol):
    """Reads one process's stderr pipe on the event loop (bounded work per process)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.read = 0
        self._partial = b""
        self._last: deque[str] = deque(maxlen=KEPT_LINES)
        self._transport: asyncio.ReadTransport | None = None
        self._closed = asyncio.Event()

    @classmethod
    async def attach(cls, fd: int, name: str) -> StderrRelay:
        """Start reading the pipe's read end ``fd`` (the relay owns it from now on)."""
        relay = cls(name)
        pipe = os.fdopen(fd, "rb", buffering=0)
        try:
            await asyncio.get_running_loop().connect_read_pipe(lambda: relay, pipe)
        except BaseException:
            pipe.close()
            raise
        return relay

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.ReadTransport, transport)

    def data_received(self, data: bytes) -> None:
        room = MAX_BYTES - self.read
        if room <= 0:
            return
        self.read += len(data)
        lines = (self._partial + data[:room]).split(b"\n")
        self._partial = lines.pop()[:MAX_LINE_BYTES]
        for line in lines:
            self._emit(line)
        if self.read >= MAX_BYTES:
            self._emit(self._partial)
            self._partial = b""
            log.warning("%s: stderr passed %d bytes; the rest is dropped", self.name, MAX_BYTES)
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._emit(self._partial)
        self._partial = b""
        self._closed.set()

    def _emit(self, line: bytes) -> None:
        text = line[:MAX_LINE_BYTES].decode("utf-8", "replace").rstrip()
        if text:
            self._last.append(text)
            log.warning("%s: %s", self.name, text)

    def last_lines(self) -> str:
        """The last lines the process wrote, joined by `` | ``; empty if it wrote none."""
        return " | ".join(self._last)

    async def wait_closed(self, timeout: float) -> None:
        """Until the process's end of the pipe is closed (it exited) or ``timeout`` seconds passed."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._closed.wait(), timeout)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
