"""JoinedWrites: a head and its body leave in one write; nothing is held past the loop turn or reordered."""

from __future__ import annotations

import asyncio

from service.http.joined_writes import HOLD_BYTES, JOIN_BYTES, JoinedWrites


class Recorded(asyncio.Transport):
    """The wrapped transport: records each write it is given (what would be one ``send`` each)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_write_buffer_size(self) -> int:
        return 0


async def _next_turn() -> None:
    await asyncio.sleep(0)


def test_a_head_and_its_body_leave_in_one_write() -> None:
    async def scenario() -> list[bytes]:
        raw = Recorded()
        joined = JoinedWrites(raw, asyncio.get_running_loop())
        joined.write(b"HTTP/1.1 200 OK\r\n\r\n")
        joined.write(memoryview(b'{"status":"completed"}'))
        await _next_turn()
        return raw.writes

    assert asyncio.run(scenario()) == [b'HTTP/1.1 200 OK\r\n\r\n{"status":"completed"}']


def test_a_lone_write_leaves_when_the_turn_ends() -> None:
    """A head-only answer (or a 100 Continue) is not kept waiting for a write that never comes."""

    async def scenario() -> tuple[list[bytes], int, list[bytes]]:
        raw = Recorded()
        joined = JoinedWrites(raw, asyncio.get_running_loop())
        joined.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        during, held = list(raw.writes), joined.get_write_buffer_size()
        await _next_turn()
        return during, held, raw.writes

    during, held, after = asyncio.run(scenario())
    assert during == [] and held == len(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert after == [b"HTTP/1.1 100 Continue\r\n\r\n"]


def test_large_writes_are_neither_held_nor_copied_into_a_join() -> None:
    async def scenario() -> list[bytes]:
        raw = Recorded()
        joined = JoinedWrites(raw, asyncio.get_running_loop())
        joined.write(b"x" * (HOLD_BYTES + 1))  # sent at once
        joined.write(b"head")
        joined.write(b"y" * JOIN_BYTES)  # too large to join: the head first, then it
        await _next_turn()
        return raw.writes

    assert asyncio.run(scenario()) == [b"x" * (HOLD_BYTES + 1), b"head", b"y" * JOIN_BYTES]


def test_close_sends_what_is_held_first_and_abort_drops_it() -> None:
    async def scenario() -> tuple[Recorded, Recorded]:
        loop = asyncio.get_running_loop()
        closed, aborted = Recorded(), Recorded()
        closing = JoinedWrites(closed, loop)
        closing.write(b"last words")
        closing.close()
        assert closed.writes == [b"last words"]  # sent before the transport closed, not after
        dropping = JoinedWrites(aborted, loop)
        dropping.write(b"never")
        dropping.abort()
        await _next_turn()
        return closed, aborted

    closed, aborted = asyncio.run(scenario())
    assert closed.closed and closed.writes == [b"last words"]
    assert aborted.aborted and aborted.writes == []
