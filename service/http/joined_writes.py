"""A connection's small writes of one event-loop turn leave in one ``send``: a response's head with its body.

uvicorn writes a response's status line and headers, then its body, as two transport writes: two
system calls and, with ``TCP_NODELAY``, two segments, so the peer is woken for the head alone and
then again for the body.  ``JoinedWrites`` holds a small write until the end of the loop turn: a
write that follows in the same turn (the body, right after its head) leaves together with it, and a
write that does not is sent as soon as the turn ends.  Nothing is held longer than that, bytes leave
in the order they were written, and only small writes are held or joined (a join copies).
"""

from __future__ import annotations

import asyncio
from typing import Any

#: Writes up to this size are held (a response head is a few hundred bytes).
HOLD_BYTES = 8 * 1024
#: A held write and the next one are joined when together they are no larger than this.
JOIN_BYTES = 64 * 1024


class JoinedWrites:
    """A transport whose small writes of one loop turn are joined into one write of the transport it wraps.

    Everything but writing and closing is the wrapped transport's own.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self.loop = loop
        self.held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self.held
        if held is None:
            if len(data) <= HOLD_BYTES:
                self.held = bytes(data)
                self.loop.call_soon(self.flush)
            else:
                self.transport.write(data)
            return
        self.held = None
        if len(held) + len(data) <= JOIN_BYTES:
            self.transport.write(held + data)
        else:
            self.transport.write(held)
            self.transport.write(data)

    def flush(self) -> None:
        """Send what is held (at the end of the turn that wrote it, or before a close)."""
        held, self.held = self.held, None
        if held is not None and not self.transport.is_closing():
            self.transport.write(held)

    def writelines(self, chunks: Any) -> None:
        self.flush()
        self.transport.writelines(chunks)

    def write_eof(self) -> None:
        self.flush()
        self.transport.write_eof()

    def get_write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + len(self.held or b"")

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def abort(self) -> None:
        self.held = None
        self.transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)
