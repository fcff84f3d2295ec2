"""A worker's stdout as the service reads it (``WorkerOutput``), over a real pipe written by the test.

On both event loops the service may run on: asyncio's own and uvloop (what uvicorn picks).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bench import loops
from bridge.framing import encode_frame, encode_raw
from bridge.messages import CONTROL_FRAME_BYTES, CONTROL_FRAME_VALUES, GuestRequest, WorkerFrame, done_frame, idle_frame
from service.errors import WorkerGone
from service.runtime.workers.pipe import OPEN_CAPS, QUEUED_HIGH_BYTES, WorkerOutput

RUNNERS = {"asyncio": asyncio.run, "uvloop": loops.run}


class Writer:
    """The worker's end of the pipe."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd

    def write(self, data: bytes | memoryview) -> int:
        assert self.fd is not None
        return os.write(self.fd, data)

    async def send(self, data: bytes) -> None:
        """All of ``data``, from a thread: a write larger than the pipe's buffer waits for the reader,
        which runs on this loop; a reader that stopped reading makes the rest go nowhere."""

        def write_all() -> None:
            view = memoryview(data)
            with contextlib.suppress(BrokenPipeError):
                while view:
                    view = view[self.write(view) :]

        await asyncio.to_thread(write_all)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@pytest.fixture(params=sorted(RUNNERS))
def run(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """Run ``body(output, writer)`` on a fresh loop: ``output`` reads the pipe ``writer`` writes to."""

    def go(body: Callable[[WorkerOutput, Writer], Awaitable[Any]], cap: int = 1 << 20) -> Any:
        async def main() -> Any:
            read_fd, write_fd = os.pipe()
            writer = Writer(write_fd)
            output = await WorkerOutput.attach(read_fd, cap)
            try:
                return await body(output, writer)
            finally:
                output.close()
                writer.close()

        return RUNNERS[request.param](main())

    return go


def idle(rt: str, *args: bytes) -> bytes:
    """An idle frame with one request per argument text, and the raw argument frames after it."""
    requests: list[GuestRequest] = [{"id": i, "method": "tool"} for i in range(len(args))]
    frame = idle_frame(
        rt=rt, requests=requests, cancels=[], output={"entries": 0}, outstanding=len(args), cpu_ms=0.0, heap_bytes=0
    )
    return encode_frame(frame) + b"".join(encode_raw(a) for a in args)


def done(rt: str, value: bytes = b"1", **extra: object) -> bytes:
    """A completed cell's done frame (with ``extra`` fields), and its value's raw frame."""
    frame = done_frame(
        rt=rt, value=len(value), output={"entries": 0}, cancels=[], cpu_ms=0.0, heap_bytes=0, recycle=False
    )
    return encode_frame({**frame, **extra}) + encode_raw(value)


def test_messages_split_anywhere_arrive_whole_with_their_arguments(run):
    """Frames written a byte at a time, and several in one write, come out as whole messages: an idle
    frame's requests carry their argument bytes, still encoded."""
    stream = idle("a", b'["nop",{"i":1}]', b"[]") + done("a", b'"fine"') + idle("b")

    async def body(output: WorkerOutput, pipe: Writer) -> list[WorkerFrame]:
        for i in range(len(stream) - 40):
            pipe.write(stream[i : i + 1])
            await asyncio.sleep(0)
        pipe.write(stream[len(stream) - 40 :])  # the rest, the end of one message and a whole one
        return [await output.next() for _ in range(3)]

    first, second, third = run(body)
    assert first["t"] == "idle" and [r.get("args") for r in first["requests"]] == [b'["nop",{"i":1}]', b"[]"]
    assert (second["t"], second["rt"], second["text"], second["shipped"]) == ("done", "a", '"fine"', [])
    assert third["t"] == "idle" and third["rt"] == "b" and third["requests"] == []


def test_early_runs_in_the_read_callback_before_the_reader_resumes(run):
    """``early`` sees the message as soon as it is whole, under the reader's context: what it schedules
    runs before the reader gets the message (so handlers it starts go first)."""
    seen = contextvars.ContextVar("seen", default="nobody")
    order: list[str] = []

    async def body(output: WorkerOutput, pipe: Writer) -> None:
        loop = asyncio.get_running_loop()

        def early(message: WorkerFrame, may_answer: bool) -> bool:
            order.append(f"early {message['t']} as {seen.get()}")
            loop.call_soon(order.append, "scheduled by early")
            return False

        async def reader() -> None:
            message = await output.next(early)
            order.append(f"reader got {message['t']}")  # in the step that resumed it

        seen.set("the reader")
        reading = asyncio.ensure_future(reader())
        await asyncio.sleep(0)  # the reader now waits
        pipe.write(done("a"))
        await reading

    run(body)
    assert order == ["early done as the reader", "scheduled by early", "reader got done"]


def test_early_runs_once_on_a_message_that_was_waiting(run):
    """A message that arrived before anyone read is handed to ``early`` when it is taken, once."""

    async def body(output: WorkerOutput, pipe: Writer) -> list[str]:
        pipe.write(done("a") + done("b"))
        await asyncio.sleep(0.05)  # both arrive before anyone reads
        calls: list[str] = []

        def early(message: WorkerFrame, may_answer: bool) -> bool:
            calls.append(message["rt"])
            return False

        first = await output.next(early)
        second = await output.next()
        assert (first["rt"], second["rt"]) == ("a", "b")
        return calls

    assert run(body) == ["a"]


def test_early_answers_the_first_message_of_a_read_and_the_reader_sleeps_on(run):
    """``early`` may answer the first message of each read itself (it returns True): the reader is not
    woken and waits on. Later messages of the same read, and messages that piled up before anyone
    read, it may not answer: the reader gets them, those that piled up one per turn of the loop."""

    async def body(output: WorkerOutput, pipe: Writer) -> dict[str, Any]:
        seen: list[tuple[str, bool]] = []

        def early(message: WorkerFrame, may_answer: bool) -> bool:
            seen.append((message["rt"], may_answer))
            return may_answer and message["rt"].startswith("answer")

        reading = asyncio.ensure_future(output.next(early))
        await asyncio.sleep(0)  # the reader now waits
        pipe.write(done("answer 1"))
        await asyncio.sleep(0.05)
        asleep = not reading.done()
        one_read = [done(rt) for rt in ("answer 2", "answer 3", "kept 1", "kept 2")]
        pipe.write(b"".join(one_read))  # one read: only its first may be answered
        first = await reading
        await asyncio.sleep(0.05)  # the rest piled up meanwhile
        turns = 0

        async def count_turns() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        counter = asyncio.ensure_future(count_turns())
        piled = [await output.next(early) for _ in range(2)]
        counter.cancel()
        return {"asleep": asleep, "seen": seen, "got": [first["rt"]] + [m["rt"] for m in piled], "turns": turns}

    out = run(body)
    assert out["asleep"], "the reader was woken for a message early answered"
    assert out["got"] == ["answer 3", "kept 1", "kept 2"], out
    assert out["seen"] == [
        ("answer 1", True),
        ("answer 2", True),
        ("answer 3", False),
        ("kept 1", False),
        ("kept 2", False),
    ], out["seen"]
    assert out["turns"] >= 2, "messages that piled up were handed over without a turn of the loop between them"


def test_what_early_raises_is_raised_to_the_reader(run):
    async def body(output: WorkerOutput, pipe: Writer) -> None:
        def early(message: WorkerFrame, may_answer: bool) -> bool:
            raise LookupError("from early")

        reading = asyncio.ensure_future(output.next(early))
        await asyncio.sleep(0)
        pipe.write(done("a"))
        with pytest.raises(LookupError, match="from early"):
            await reading

    run(body)


def _done_head() -> dict[str, Any]:
    return dict(done_frame(rt="a", value=0, output={"entries": 0}, cancels=[], cpu_ms=0.0, heap_bytes=0, recycle=False))


def _idle_with(**changes: object) -> bytes:
    frame = idle_frame(rt="a", requests=[], cancels=[], output={"entries": 0}, outstanding=0, cpu_ms=0.0, heap_bytes=0)
    return encode_frame({**frame, **changes})


BAD_FRAMES = {
    "over the frame cap": ((1 << 20).to_bytes(4, "big"), str(1 << 20)),
    "not JSON": (encode_raw(b"{not json"), "not JSON"),
    "not an object": (encode_frame([1, 2]), "not an object with a type"),
    "no type": (encode_frame({"rt": "a"}), "not an object with a type"),
    "a request that is not an object": (_idle_with(requests=[7]), "requests that are not {id, method} objects"),
    "a heap that is not a count": (_idle_with(heap_bytes="big"), "no CPU or heap figure"),
    "a bool for a count": (_idle_with(outstanding=True), "no count of outstanding requests"),
    "too many output entries": (_idle_with(output={"entries": 10**9}), "an output entry count out of range"),
    "a value size that is not a count": (
        encode_frame({**_done_head(), "value": -1}) + encode_raw(b"1"),
        "no value size",
    ),
    "a failure of no known phase": (
        encode_frame({**_done_head(), "ok": False, "error": {"phase": "nowhere", "code": "x"}}) + encode_raw(b"e"),
        "no failure phase and code",
    ),
    "a value longer than its size": (
        encode_frame({**_done_head(), "value": 1}) + encode_raw(b"12"),
        "longer than the size",
    ),
    "guest text that is not UTF-8": (encode_frame({**_done_head(), "value": 2}) + encode_raw(b"\xff\xfe"), "not UTF-8"),
    "too many values": (
        encode_frame({"t": "done", "pad": [0] * (CONTROL_FRAME_VALUES + 1)}),
        f"more than {CONTROL_FRAME_VALUES} JSON values",
    ),
    "too many bytes": (encode_frame({"t": "done", "pad": "x" * CONTROL_FRAME_BYTES}), "over the"),
}


@pytest.mark.parametrize("case", sorted(BAD_FRAMES))
def test_a_bad_frame_makes_the_stream_unusable(run, case):
    """Whatever is not a message of the protocol ends reading for good: the reader and every later one
    get ``WorkerGone`` naming the problem (a worker may be owned by an attacker: its frames are counted
    before they are decoded, checked for shape after, and its guest text must be UTF-8)."""
    written, why = BAD_FRAMES[case]

    async def body(output: WorkerOutput, pipe: Writer) -> None:
        reading = asyncio.ensure_future(output.next())
        await asyncio.sleep(0)
        await pipe.send(written)
        for waiting in (reading, output.next()):
            with pytest.raises(WorkerGone, match="worker sent a bad frame") as caught:
                await waiting
            assert why in str(caught.value)

    run(body, cap=1 << 19)


def test_the_end_of_the_stream_comes_after_the_messages_before_it(run):
    """A worker that exits mid-message: the whole messages before are read, then ``EOFError``."""

    async def body(output: WorkerOutput, pipe: Writer) -> None:
        pipe.write(done("a") + idle("b", b"[1]")[:9])
        pipe.close()
        assert (await output.next())["rt"] == "a"
        for _ in range(2):
            with pytest.raises(EOFError):
                await output.next()
        assert output.ended

    run(body)


def test_reading_pauses_while_untaken_messages_pile_up(run):
    """A worker that writes on its own (broken or compromised) cannot make the service hold much more than
    ``QUEUED_HIGH_BYTES`` of its messages: reading pauses until they are taken, then goes on."""
    message = done("a", b'"' + b"x" * 60_000 + b'"')
    offered = 200 * len(message)  # 12 MB

    async def body(output: WorkerOutput, pipe: Writer) -> int:
        assert pipe.fd is not None
        os.set_blocking(pipe.fd, False)
        written = stalls = 0
        while written < offered and stalls < 5:
            try:
                written += pipe.write(message[written % len(message) :])
                stalls = 0
            except BlockingIOError:
                stalls += 1
            await asyncio.sleep(0.002)  # the loop reads meanwhile, unless reading is paused
        for _ in range(written // len(message)):  # the whole ones: taking them resumes reading
            assert (await output.next())["rt"] == "a"
        return written

    written = run(body)
    pipe_room = 1 << 20  # a pipe's buffer, at most
    assert written <= QUEUED_HIGH_BYTES + len(message) + pipe_room, written


def test_an_idle_message_cannot_grow_past_what_one_burst_can_make(run):
    """A worker announcing many requests (compromised: a guest's burst is refused in the prelude long
    before) cannot make the service buffer argument frames without end: past ``OPEN_CAPS`` frame
    caps the stream is unusable, while a message just under that bound arrives whole."""
    cap = 1024
    argument = b'"' + b"x" * (cap - 6) + b'"'  # 1,020 bytes: one frame each, just under the cap

    async def body(output: WorkerOutput, pipe: Writer) -> None:
        fits = [argument] * OPEN_CAPS  # 8 x 1,020 bytes: under 8 caps
        reading = asyncio.ensure_future(output.next())
        await asyncio.sleep(0)
        pipe.write(idle("a", *fits))
        assert [r["args"] for r in (await reading)["requests"]] == fits
        pipe.write(idle("b", *[argument] * (2 * OPEN_CAPS)))  # twice that
        with pytest.raises(WorkerGone, match="worker sent a bad frame: a frame and its raw frames"):
            await output.next()
        assert output.failure is not None

    run(body, cap=cap)
