"""A worker's stdout as the service reads it: whole messages, parsed in the event loop's read callback.

A worker writes *messages*: one frame, and after an ``idle`` frame one raw frame per request (its
JSON arguments, kept encoded). ``WorkerOutput`` reads the pipe with the loop's own read callback
(not a pipe of the subprocess transport, which hands each chunk on through ``call_soon``, a turn of
the loop later), parses the frames as they arrive and hands each whole message to the one reader
waiting in ``next``.

That reader may pass ``early``: a synchronous function run on the message as soon as it is whole,
in the read callback, under a copy of the reader's context. A cell's leg starts the handlers of the
requests an ``idle`` frame carries there, so a tool call that finishes without waiting has settled
by the time the leg runs again: a turn of the loop less per call. ``early`` may also answer the
first message of a read there and then (it is told it may, and returns True): the reader is not
woken and goes on waiting for the next one, so a call that settles at once costs no turn of the loop
at all. An honest worker writes its next message only after it read that answer, so one answer per
read is all it can use; messages that pile up (a worker writing on its own) reach the reader one per
turn of the loop, and are never answered in place: such a worker holds the loop no longer than before.

The worker may be owned by an attacker, so what it writes is data whose cost is bounded before it is
paid (``bridge.received``): a control frame is counted on its bytes before it is decoded and checked
for shape after; guest data (arguments, output, the value, an error's text) comes in raw frames that
are kept encoded.  A frame over a cap, or one out of shape, makes the stream unusable: reading stops
and the reader is told why (``WorkerGone``); the worker is killed, and only its own cells fail.  A
worker answers only what it was sent, so messages nobody has taken yet are few; past
``QUEUED_HIGH_BYTES`` of them (a broken or compromised worker writing on its own) reading pauses until
the reader catches up.  One message is bounded too: its raw frames may hold ``OPEN_CAPS`` frame caps
in all, more than an honest worker sends with one frame, so a worker announcing many raw frames
cannot make the service buffer without end while the message is still open.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from collections import deque
from collections.abc import Callable
from typing import cast

from bridge.errors import BridgeError, FrameTooLarge, ProtocolError
from bridge.framing import HEADER, HEADER_SIZE
from bridge.messages import WorkerFrame
from bridge.received import completed, control_frame, raw_frames_after
from service.errors import WorkerGone

#: The reader's early step: ``early(message, may_answer)`` -> whether it answered the message itself.
Early = Callable[["WorkerFrame", bool], bool]
#: Bytes of queued, untaken messages past which reading pauses (it resumes below half of them).
QUEUED_HIGH_BYTES = 2 * 1024 * 1024
#: Frame caps the raw frames of one message may hold in all.  A guest's burst carries at most
#: ``max(inbox, max_request_bytes) + max_request_bytes`` UTF-16 units of arguments (the prelude refuses
#: the rest); each term is under one frame cap, and a unit is at most 3 bytes of UTF-8: 6 caps.  Its
#: output (``max_output_bytes`` and the capture's slack) and its value or error take one cap each.
OPEN_CAPS = 8


class WorkerOutput(asyncio.Protocol):
    """One worker's stdout, parsed into messages for one reader at a time."""

    def __init__(self, frame_cap: int, loop: asyncio.AbstractEventLoop) -> None:
        self.frame_cap = frame_cap
        self._loop = loop  # held: on Python 3.11 each get_running_loop() is a getpid() system call
        self.ended = False  # the worker's stdout closed
        self.failure: str | None = None  # why the stream is unusable
        self._transport: asyncio.ReadTransport | None = None
        self._buffer = bytearray()  # bytes not parsed yet: at most one frame and the next header
        self._open: WorkerFrame | None = None  # a frame still waiting for its raw frames
        self._raws: list[bytes] = []  # the raw frames it got so far
        self._raws_wanted = 0
        self._open_bytes = 0
        self._open_cap = 0  # bytes the open message may reach
        self._queued: deque[tuple[WorkerFrame, int]] = deque()  # untaken messages and their bytes
        self._queued_bytes = 0
        self._paused = False
        self._waiter: asyncio.Future[WorkerFrame] | None = None
        self._early: Early | None = None
        self._may_answer = False  # no message of the current read was answered in place yet
        self._early_context: contextvars.Context | None = None

    @classmethod
    async def attach(cls, fd: int, frame_cap: int) -> WorkerOutput:
        """Start reading the pipe's read end ``fd`` (owned from now on)."""
        loop = asyncio.get_running_loop()
        output = cls(frame_cap, loop)
        pipe = os.fdopen(fd, "rb", buffering=0)
        try:
            await loop.connect_read_pipe(lambda: output, pipe)
        except BaseException:
            pipe.close()
            raise
        return output

    async def next(self, early: Early | None = None) -> WorkerFrame:
        """The next message ``early`` did not answer (it ran on each as soon as it was whole, and
        returned True for one it answered itself); ``EOFError`` at the stream's end, ``WorkerGone`` if
        it is unusable. One reader at a time."""
        assert self._waiter is None, "one reader at a time"
        if self._queued:
            await asyncio.sleep(0)  # one untaken message per turn of the loop, however many piled up
            message = self._take()
            if early is not None:
                early(message, False)
            return message
        if self.failure is not None:
            raise WorkerGone(self.failure)
        if self.ended:
            raise EOFError
        self._waiter = self._loop.create_future()
        self._early = early
        self._early_context = None if early is None else contextvars.copy_context()
        try:
            return await self._waiter
        finally:
            self._waiter = self._early = self._early_context = None

    def close(self) -> None:
        """Stop reading: a reader waiting now, or later, sees the stream's end. Idempotent."""
        if self._transport is not None:
            self._transport.close()

    # ---- the event loop's callbacks --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast("asyncio.ReadTransport", transport)

    def data_received(self, data: bytes) -> None:
        if self.failure is not None:
            return
        self._may_answer = True
        buffer = self._buffer
        if buffer:  # the rest of a frame begun in an earlier read
            buffer += data
            self._parse(buffer)
            return
        # Most reads hold whole messages: their frames are cut from ``data`` itself, and only what is
        # left of an unfinished frame is kept.
        pos = self._parse(data)
        if pos < len(data) and self.failure is None:
            buffer += data[pos:]

    def _parse(self, source: bytes | bytearray) -> int:
        """Hand on the whole frames in ``source``; how many bytes they took (the buffer loses them)."""
        pos, end, cap = 0, len(source), self.frame_cap
        try:
            while end - pos >= HEADER_SIZE:
                size: int = HEADER.unpack_from(source, pos)[0]
                if size > cap:
                    raise FrameTooLarge(size, cap)
                start = pos + HEADER_SIZE
                if end - start < size:
                    break
                pos = start + size
                if isinstance(source, bytes):
                    self._frame(source[start:pos])
                else:
                    with memoryview(source) as view:  # one copy of the body, not two
                        body = bytes(view[start:pos])
                    self._frame(body)
        except (BridgeError, TypeError, KeyError, ValueError) as exc:
            self._fail(f"worker sent a bad frame: {exc}")
            return end
        finally:
            if source is self._buffer:
                del source[:pos]
        return pos

    def eof_received(self) -> bool | None:
        self._end()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    # ---- parsing ---------------------------------------------------------------------------------

    def _frame(self, body: bytes) -> None:
        opened = self._open
        if opened is not None:  # the open frame's next raw frame: kept as it is
            self._raws.append(body)
            self._open_bytes += HEADER_SIZE + len(body)
            if self._open_bytes > self._open_cap:
                raise ProtocolError(
                    f"a frame and its raw frames reached {self._open_bytes} bytes, over the "
                    f"{self._open_cap} bytes an honest worker sends with one frame"
                )
            if len(self._raws) == self._raws_wanted:
                raws, self._open, self._raws = self._raws, None, []
                self._arrived(completed(opened, raws), self._open_bytes)
            return
        frame = control_frame(body)  # counted, decoded and checked for shape
        wanted = raw_frames_after(frame)
        if not wanted:
            self._arrived(completed(frame, []), HEADER_SIZE + len(body))
            return
        self._open, self._raws_wanted = frame, wanted
        self._open_bytes = HEADER_SIZE + len(body)
        # The frame itself, its raw frames, and a header per raw frame.
        self._open_cap = self._open_bytes + OPEN_CAPS * self.frame_cap + HEADER_SIZE * wanted

    def _arrived(self, message: WorkerFrame, size: int) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done() or self._queued:
            self._queued.append((message, size))
            self._queued_bytes += size
            if self._queued_bytes > QUEUED_HIGH_BYTES:
                self._pause(True)
            return
        early, context = self._early, self._early_context
        try:
            if early is not None and context is not None and context.run(early, message, self._may_answer):
                self._may_answer = False
                return  # answered in place: the reader waits on for the next message
        except Exception as exc:  # noqa: BLE001 - the reader's own code: raised where it reads
            waiter.set_exception(exc)
        else:
            waiter.set_result(message)

    def _take(self) -> WorkerFrame:
        message, size = self._queued.popleft()
        self._queued_bytes -= size
        if self._paused and self._queued_bytes <= QUEUED_HIGH_BYTES // 2:
            self._pause(False)
        return message

    def _fail(self, reason: str) -> None:
        self.failure = reason
        self._buffer.clear()
        self._open, self._raws = None, []
        self.close()
        self._wake(WorkerGone(reason))

    def _end(self) -> None:
        if not self.ended:
            self.ended = True
            self._wake(EOFError() if self.failure is None else WorkerGone(self.failure))

    def _wake(self, exc: BaseException) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done() and not self._queued:
            waiter.set_exception(exc)

    def _pause(self, paused: bool) -> None:
        self._paused = paused
        transport = self._transport
        if transport is not None and not transport.is_closing():
            if paused:
                transport.pause_reading()
            else:
                transport.resume_reading()
