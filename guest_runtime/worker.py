"""The worker process: runs cells one slice at a time, each in a fresh engine of its language.

QuickJS runs JavaScript and TypeScript cells, Monty Python cells; the driver here (``CellRun``,
``Runtimes``) holds them through the engine contract alone (``engine.py``); only ``engine_makers`` and
``_python_engines`` name them.

Started by the service's pool as ``python -m guest_runtime.worker '<json options>'``.  It speaks
the ``bridge.messages`` protocol over its stdin/stdout (the real stdout is moved aside so a
stray print can never corrupt a frame).  Once its imports are done and its first engine is built,
it confines itself (``confinement.py``), and only then says ``ready`` and reads its first cell.
After each cell it builds the next engine while idle, so the next cell starts without paying for
the prelude (nor, while the tenant's configuration stays the same, for its tools' globals).  It
exits when told the cell broke a limit (the service then replaces it) or when its stdin closes.
"""

from __future__ import annotations

import enum
import os
import resource
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from bridge import jsoncodec
from bridge.errors import BridgeError, FrameTooLarge
from bridge.framing import HEADER_SIZE, decode_body, encode_frame, encode_raw, frame_length
from bridge.messages import (
    TEST_PAYLOAD_VARIABLE,
    GuestFailure,
    HostFrame,
    Language,
    Phase,
    RestoreFrame,
    RunFrame,
    SettleFrame,
    WorkerFrame,
    WorkerOptions,
    done_frame,
    failure_head,
    guest_failure,
    idle_frame,
    ready_frame,
    snapshot_frame,
)
from bridge.output import CAPTURE_SLACK_BYTES, OutputCapture, capture_value, shipped_value

from .confinement import confine
from .development_payload import development_payload
from .engine import Engine, Returned, SettledReply, Waiting
from .errors import (
    MEMORY_LIMIT_EXCEEDED,
    REQUEST_LIMIT_EXCEEDED,
    ConfinementError,
    EngineFault,
    GuestFault,
    GuestSyntaxError,
    GuestTimeout,
)
from .heap_trim import give_back_memory
from .python_cells import PythonCells
from .quickjs.engine import GuestEngine, check_engine

#: A fresh engine of one language, ready for ``prepare`` or ``configure``.
EngineMaker = Callable[[], Engine]


class SliceEnd(enum.Enum):
    """What became of a runtime after one of its slices, as the worker's table acts on it."""

    WAITING = "waiting"  # it waits on host work and stays in the table
    ENDED = "ended"  # its cell ended (done frame sent): it leaves the table
    RETIRE = "retire"  # its cell ended and this worker must be replaced: it takes no new cell


#: Heap bytes of freed runtimes, less what engines built since took again, after which the worker hands
#: memory back to the kernel (malloc_trim): often enough that dropped parked cells do not leave hundreds
#: of MiB, rarely enough to cost nothing per cell.
TRIM_AFTER_BYTES = 4 * 1024 * 1024

#: Share of the worker's RLIMIT_CPU after which it asks to be replaced.
CPU_RECYCLE_FRACTION = 0.8
#: Frames read ahead in one system call, and frames written per writev (IOV_MAX is 1024 on Linux).
READ_AHEAD = 64 * 1024
WRITEV_GROUP = 512

BURST_TOO_LARGE = (
    "host requests started in one synchronous burst do not fit one bridge frame ({exc}); "
    "await some before starting more, or pass less data per call"
)

NO_PYTHON = "this worker runs no Python cells (python_cells = false)"


class Channel:
    """Blocking frame I/O over two file descriptors."""

    def __init__(self, fd_in: int, fd_out: int, cap: int) -> None:
        self.fd_in = fd_in
        self.fd_out = fd_out
        self.cap = cap
        self._buffer = bytearray()  # bytes read ahead of the frame being read

    def read(self) -> HostFrame | None:
        header = self._read_exact(HEADER_SIZE)
        if header is None:
            return None
        body = self._read_exact(frame_length(header, self.cap))
        if body is None:
            return None
        frame: HostFrame = decode_body(body)
        return frame

    def read_raw(self) -> str:
        """One raw frame (a reply payload) as text."""
        return self.read_raw_bytes().decode("utf-8")

    def read_raw_bytes(self) -> bytes:
        header = self._read_exact(HEADER_SIZE)
        body = None if header is None else self._read_exact(frame_length(header, self.cap))
        if body is None:
            raise SystemExit(0)  # the service went away mid-message
        return body

    def write(self, message: WorkerFrame, attachments: Sequence[bytes] = ()) -> None:
        """One frame, then ``attachments`` as raw frames (checked against the cap before anything is sent)."""
        frames = [encode_frame(message, self.cap)] + [encode_raw(data, self.cap) for data in attachments]
        # One writev for the frame and its attachments (in groups under the kernel's IOV_MAX): the
        # host wakes once, with the whole message.
        for start in range(0, len(frames), WRITEV_GROUP):
            group = frames[start : start + WRITEV_GROUP]
            n = os.writev(self.fd_out, group)
            for frame in group:
                if n >= len(frame):
                    n -= len(frame)
                    continue
                data = memoryview(frame)[n:]
                n = 0
                while data:
                    data = data[os.write(self.fd_out, data) :]

    def _read_exact(self, n: int) -> bytes | None:
        # Small reads fetch READ_AHEAD bytes at once, so a frame and the raw frames after it (a
        # settle and its payloads) usually take one system call; a large body is read to its size
        # exactly, never copied through the read-ahead buffer.
        buffered = self._buffer
        if len(buffered) >= n:
            data = bytes(buffered[:n])
            del buffered[:n]
            return data
        chunks = [bytes(buffered)]
        have = len(buffered)
        buffered.clear()
        while have < n:
            need = n - have
            chunk = os.read(self.fd_in, need if need >= READ_AHEAD else READ_AHEAD)
            if not chunk:
                return None
            if len(chunk) > need:  # only a read-ahead chunk, at most READ_AHEAD bytes
                buffered += chunk[need:]
                chunk = chunk[:need]
            chunks.append(chunk)
            have += len(chunk)
        return b"".join(chunks)


class CellRun:
    """Drives one cell's runtime from ``run`` to ``done``, one slice at a time.

    A slice runs the guest until it ends or blocks on host work.  A blocked runtime stays in the
    worker's table (parked or waiting inline, the worker cannot tell) while the worker serves
    slices of other runtimes of the same tenant; a ``settle`` naming it starts its next slice.
    Every slice answers what became of the runtime (``SliceEnd``).
    """

    def __init__(
        self, engine: Engine, channel: Channel, msg: RunFrame | RestoreFrame, config_json: str, cpu_limit_s: float
    ) -> None:
        self.engine = engine
        self.channel = channel
        self.msg = msg
        self.config_json = config_json  # the JSON text of msg["config"]
        self.cpu_limit_s = cpu_limit_s
        self.rt = msg["cell_id"]  # the runtime's name in later frames
        self.heap = 0  # the runtime's heap at its last stop: what freeing it gives back
        self.capture = OutputCapture(msg["max_output_bytes"])
        self.cpu_ms = 0.0  # this runtime's own CPU; other runtimes' slices are not charged to it
        self._slice_cpu = 0.0  # process CPU time when the current slice began (each slice sets it)
        self.deadline = time.monotonic() + (msg["budget_ms"] / 1000 if msg["t"] == "run" else 0)

    def run(self) -> SliceEnd:
        """The first slice: configure, compile and start the cell."""
        self._slice_cpu = time.process_time()
        engine = self.engine
        msg = self.msg
        assert msg["t"] == "run"
        try:
            engine.configure(self.config_json, msg["memory_limit_bytes"])
            engine.compile(msg["code"], self.deadline - time.monotonic())
        except GuestSyntaxError as exc:
            return self.fail(str(exc), "input", "invalid_input")
        except GuestTimeout:
            return self.fail("cell timeout exceeded", "guest", "timeout", recycle=True)
        return self._guarded(None)

    def resume(self, reply: SettleFrame, *, clock_read: bool = False) -> SliceEnd:
        """A later slice: settle the host's replies, then run until the next stop.

        ``clock_read``: the worker has done nothing but wait and read this frame since this runtime's
        last slice ended, so that slice's last reading of the CPU clock starts this one (a system call
        less per tool call; reading the frame is the cell's CPU either way).
        """
        if not clock_read:
            self._slice_cpu = time.process_time()
        # Payload frames follow the settle frame; read them all before anything can fail.
        settles: list[SettledReply] = [
            (r["id"], True, self.channel.read_raw())
            if r["ok"]
            else (r["id"], False, jsoncodec.dumps_text(r.get("error") or {}))
            for r in reply["replies"]
        ]
        self.deadline = time.monotonic() + reply["budget_ms"] / 1000
        return self._guarded(settles)

    def restore(self, state: bytes) -> SliceEnd:
        """Take up a cell another process dumped: it waits, as when dumped, on the requests it awaited."""
        self._slice_cpu = time.process_time()
        try:
            self.engine.configure(self.config_json, self.msg["memory_limit_bytes"])
            outstanding = self.engine.restore(state)
        except EngineFault as exc:
            return self.fail(f"the parked cell could not be taken up: {exc}", "host", "runtime_unavailable")
        return self.wait(Waiting([], [], outstanding, []))

    def dump(self) -> None:
        """Send this waiting runtime's state (a ``snapshot`` frame and the bytes), or why it cannot be sent."""
        try:
            state = self.engine.dump()
            self.channel.write(snapshot_frame(self.rt, len(state)), [state])
        except (EngineFault, FrameTooLarge) as exc:  # a frame too large is refused before anything is sent
            self.channel.write(snapshot_frame(self.rt, 0, str(exc)), [b""])

    def _guarded(self, replies: list[SettledReply] | None) -> SliceEnd:
        """Run one slice (the first when ``replies`` is None) and act on what it came to; a fault of the
        engine fails the cell."""
        try:
            outcome = (
                self.engine.start(self.deadline) if replies is None else self.engine.resume(replies, self.deadline)
            )
            for entry in outcome.output:
                self.capture.add(entry)
            if isinstance(outcome, Waiting):
                return self.wait(outcome)
            if isinstance(outcome, Returned):
                return self.finish(outcome.cancels)
            return self.fail(outcome.text, outcome.phase, outcome.code, cancels=outcome.cancels)
        except GuestTimeout:
            return self.fail("cell timeout exceeded", "guest", "timeout", recycle=True)
        except GuestFault as exc:
            # The engine is thrown away after every cell, so the worker itself is still sound.
            return self.fail(str(exc), "guest", exc.code)
        except EngineFault as exc:
            if "out of memory" in str(exc) or str(exc) == "null":
                # The engine's own heap cap refused an allocation: QuickJS unwinds it as an ordinary
                # exception and the runtime is freed after the cell, so the process stays sound.
                return self.fail("memory limit exceeded", "guest", MEMORY_LIMIT_EXCEEDED)
            return self.fail(f"guest runtime fault: {exc}", "host", "runtime_unavailable", recycle=True)
        except MemoryError:
            # The process itself ran out (RLIMIT_AS), not the engine's cap: replace it.
            return self.fail("memory limit exceeded", "guest", MEMORY_LIMIT_EXCEEDED, recycle=True)
        except Exception as exc:  # noqa: BLE001 - whatever an engine raises fails its cell, not the worker
            # Unforeseen, so the process takes no new cell; its other runtimes (separate engines) finish.
            return self.fail(
                f"guest runtime fault: {type(exc).__name__}: {exc}", "host", "runtime_unavailable", recycle=True
            )

    def _spent_ms(self, now: float) -> float:
        """This runtime's CPU in ms, counting the current slice up to ``now`` (a ``time.process_time()``)."""
        self.cpu_ms += (now - self._slice_cpu) * 1000
        self._slice_cpu = now
        return round(self.cpu_ms, 3)

    def wait(self, waiting: Waiting) -> SliceEnd:
        """Send the idle frame of a cell that waits on host work: its new requests, cancels and output."""
        engine = self.engine
        requests = waiting.requests
        try:
            # Each request's arguments stay the text the guest wrote: one raw frame each, after the idle
            # frame, then the output's raw frames.
            args = [engine.request_args(i).encode("utf-8", "replace") for i in range(len(requests))]
            output, texts = self.capture.ship()
            self.heap = engine.heap_bytes()
            self.channel.write(
                idle_frame(
                    rt=self.rt,
                    requests=requests,
                    cancels=waiting.cancels,
                    output=output,
                    outstanding=waiting.outstanding,
                    cpu_ms=self._spent_ms(time.process_time()),
                    heap_bytes=self.heap,
                ),
                args + texts,
            )
        except FrameTooLarge as exc:
            return self.fail(BURST_TOO_LARGE.format(exc=exc), "guest", REQUEST_LIMIT_EXCEEDED)
        except BridgeError as exc:  # only a guest that got around the engine's caps gets here
            return self.fail(f"guest requests could not be sent to the host: {exc}", "guest", REQUEST_LIMIT_EXCEEDED)
        return SliceEnd.WAITING

    def finish(self, cancels: list[int]) -> SliceEnd:
        """Send the done frame of a cell that returned, with its value."""
        # The JSON text of a value may be as large as the capture allowance; the copies it
        # takes are the host's cost, not the cell's heap budget.
        text = self.engine.final_value(3 * self.msg["value_capture_bytes"] + 16 * 1024 * 1024, self.deadline)
        self.send_done(value=capture_value(text, self.msg["value_capture_bytes"]), cancels=cancels)
        return SliceEnd.ENDED

    def fail(
        self, text: str, phase: Phase, code: str, *, recycle: bool = False, cancels: list[int] | None = None
    ) -> SliceEnd:
        # The host shows at most max_output_bytes of an error (longer ones end "[error truncated]"),
        # so a longer cut keeps that marker honest while the frame stays small.
        text = text[: self.msg["max_output_bytes"] + CAPTURE_SLACK_BYTES]
        self.send_done(error=guest_failure(text, phase, code), recycle=recycle, cancels=cancels or [])
        return SliceEnd.RETIRE if recycle else SliceEnd.ENDED

    def send_done(
        self,
        *,
        value: dict[str, Any] | None = None,
        error: GuestFailure | None = None,
        recycle: bool = False,
        cancels: list[int],
    ) -> None:
        try:
            heap = self.heap = self.engine.heap_bytes()
        except Exception:  # noqa: BLE001 - a dying engine must still let us report the cell
            heap = 0
        now = time.process_time()  # one reading (a system call) for the cell's figure and the worker's wear
        # Retire the worker well before its RLIMIT_CPU could kill it in the middle of a later cell.
        worn_out = now > CPU_RECYCLE_FRACTION * self.cpu_limit_s
        output, texts = self.capture.ship()
        # The value's JSON or the error's text follows the output as the last raw frame.
        if error is None:
            assert value is not None
            size, last = shipped_value(value)
        else:
            size, last = None, error["text"].encode("utf-8", "replace")
        self.channel.write(
            done_frame(
                rt=self.rt,
                value=size,
                error=None if error is None else failure_head(error),
                output=output,
                cancels=cancels,
                cpu_ms=self._spent_ms(now),
                heap_bytes=heap,
                recycle=recycle or worn_out,
            ),
            [*texts, last],
        )


def _apply_rlimits(options: WorkerOptions) -> None:
    address_space = int(options.get("rlimit_as_bytes", 0))
    if address_space > 0:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    cpu = int(options.get("rlimit_cpu_seconds", 0))
    if cpu > 0:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # a guest has no business writing files


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    options: WorkerOptions = jsoncodec.loads(args[0]) if args else {}
    # Frames go to a private copy of stdout; fd 1 itself now points at stderr.
    fd_out = os.dup(1)
    os.dup2(2, 1)
    channel = Channel(0, fd_out, int(options.get("frame_cap", 264 * 1024 * 1024)))
    _apply_rlimits(options)
    cpu_limit = float(options.get("rlimit_cpu_seconds", 0)) or float("inf")
    # Guests see UTC dates whatever zone the host runs in.
    os.environ["TZ"] = "UTC"
    time.tzset()
    check_engine()
    sandbox = options.get("sandbox", {})
    python = PythonCells(sandbox.get("monty_binary"), options.get("monty_cpu")) if options.get("python", True) else None
    stack = int(options.get("stack_bytes", 1024 * 1024))
    runtimes = (
        Runtimes(channel, stack, cpu_limit)
        if python is None
        else Runtimes(channel, stack, cpu_limit, python.make, python.idle)
    )
    payload = _test_payload()
    # Everything the job loop needs is imported and built: from here on it opens nothing (but for a worker
    # that runs Python cells, its Monty child's binary and libraries).
    try:
        keep = (0, 1, 2, fd_out)
        report = confine(sandbox, keep_fds=keep) if python is None else python.confine(sandbox, keep)
    except ConfinementError as exc:
        print(f"codemode worker refuses to start: {exc}", file=sys.stderr, flush=True)
        return 2
    channel.write(ready_frame(os.getpid(), report))
    if payload is not None:
        return payload(fd_out)
    return runtimes.serve()


def _test_payload() -> Callable[[int], int] | None:
    """The tests' stand-in for an attacker with native code in a confined worker, if asked for: a development
    checkout's ``tests/support/compromised_worker.py`` (``development_payload``)."""
    loaded = development_payload(TEST_PAYLOAD_VARIABLE, "compromised_worker")
    if loaded is None:
        return None
    module, plan = loaded
    return lambda fd_out: int(module.run(fd_out, plan))


def engine_makers(stack_bytes: int, python: EngineMaker | None) -> dict[Language, EngineMaker]:
    """The engine of each language this worker runs: QuickJS always, Monty when it was loaded (``python``);
    the one place the driver's table learns which engines exist."""
    makers: dict[Language, EngineMaker] = {"javascript": partial(GuestEngine, stack_bytes=stack_bytes)}
    if python is not None:
        makers["python"] = python
    return makers


class _Spare:
    """One language's engine built while the worker was idle, and the configuration it is built for.

    The configuration text of the language's last cell, and the same text while two cells in a row had
    it: the spare built while idle is then prepared for it (a tenant's tools rarely change).
    """

    def __init__(self, make: EngineMaker) -> None:
        self.make = make
        self.engine: Engine | None = None
        self.last_config: str | None = None
        self.steady_config: str | None = None


class Runtimes:
    """The worker's table of live runtimes (one tenant's cells), served one slice at a time.

    Frames name their runtime (``rt``).  A runtime leaves the table when its cell ends here
    (``done``) or when the host drops it (cancel, expiry, a refused park).  After a cell that asks
    for a recycle the worker takes no new cell: it exits as soon as the table is empty, so the
    other cells' parked heaps are not lost to one cell's limit hit.
    """

    def __init__(
        self,
        channel: Channel,
        stack_bytes: int,
        cpu_limit: float,
        python: EngineMaker | None = None,
        idle: Callable[[], None] = lambda: None,
    ) -> None:
        """``python`` makes a Python cell's engine; None: this worker runs no Python cells.  ``idle`` runs
        whenever the worker has answered and waits (``PythonCells.idle``)."""
        self.channel = channel
        self.idle = idle
        self.cpu_limit = cpu_limit
        self.table: dict[str, CellRun] = {}
        self.draining = False
        self.freed = 0  # heap bytes of runtimes freed since the last trim and not taken by a new engine
        self.spares: Mapping[Language, _Spare] = {
            language: _Spare(make) for language, make in engine_makers(stack_bytes, python).items()
        }
        for spare in self.spares.values():
            spare.engine = self._new_engine(spare)
        #: The spare whose engine the last cell took, until the worker builds the next one while idle.
        self.spent: _Spare | None = None
        #: The runtime whose slice ended at the worker's last reading of the CPU clock, while the worker
        #: has done nothing since (``CellRun.resume``'s ``clock_read``).
        self.clock_owner: CellRun | None = None

    def serve(self) -> int:
        while True:
            msg = self.channel.read()
            if msg is None:
                return 0
            owner, self.clock_owner = self.clock_owner, None
            if msg["t"] == "run":
                self._run(msg)
            elif msg["t"] == "settle":
                self._settle(msg, owner)
            elif msg["t"] == "drop":
                self._forget(msg["rt"])
            elif msg["t"] == "dump" and msg["rt"] in self.table:
                self.table[msg["rt"]].dump()
            elif msg["t"] == "dump":
                self.channel.write(snapshot_frame(msg["rt"], 0, "no such waiting cell here"), [b""])
            elif msg["t"] == "restore":
                self._restore(msg)
            if self._trim():
                self.clock_owner = None
            if self.draining and not self.table:
                return 0
            if self.spent is not None and not self.draining:
                spare, self.spent = self.spent, None
                self.clock_owner = None
                spare.engine = self._next_engine(spare)  # built while idle
            self.idle()

    def _new_engine(self, spare: _Spare) -> Engine:
        """A fresh engine.  Its heap is mostly the pages a freed runtime left, so they no longer count as
        freed: trimming them made every new engine fault them back in (a worker running ``return 1``
        cells in a row trimmed every ~20 cells, for 3 page faults and ~6 us of CPU a cell)."""
        engine = spare.make()
        self.freed = max(0, self.freed - engine.heap_bytes())
        return engine

    def _next_engine(self, spare: _Spare) -> Engine:
        engine = self._new_engine(spare)
        if spare.steady_config is not None:
            engine.prepare(spare.steady_config)
        return engine

    def _run(self, msg: RunFrame) -> None:
        config = jsoncodec.dumps_text(msg["config"])
        language = msg.get("language", "javascript")
        spare = self.spares.get(language, self.spares["javascript"])
        run = CellRun(self._engine_for(spare, config), self.channel, msg, config, self.cpu_limit)
        self.table[run.rt] = run
        if language not in self.spares:  # a Python cell here: the service refuses those before they get here
            self._after(run, run.fail(NO_PYTHON, "host", "runtime_unavailable"))
            return
        self._after(run, run.run())

    def _restore(self, msg: RestoreFrame) -> None:
        """A dumped cell, taken up in a fresh engine of its language (never one prepared for another's config)."""
        state = self.channel.read_raw_bytes()  # read before anything can fail
        spare = self.spares.get(msg["language"]) or self.spares["javascript"]
        run = CellRun(spare.make(), self.channel, msg, jsoncodec.dumps_text(msg["config"]), self.cpu_limit)
        self.table[run.rt] = run
        ran = msg["language"] in self.spares  # JavaScript's engine refuses to restore: it cannot dump
        self._after(run, run.restore(state) if ran else run.fail(NO_PYTHON, "host", "runtime_unavailable"))

    def _engine_for(self, spare: _Spare, config: str) -> Engine:
        """The engine built while idle if it suits ``config``, else a new one (a new tool list, say)."""
        engine, spare.engine = spare.engine, None
        self.spent = spare
        if engine is None or not engine.prepared_for(config):
            if engine is not None:  # dropped like a finished cell's engine (``_forget``)
                self.freed += engine.heap_bytes()
                engine.close()
            engine = self._new_engine(spare)
        spare.steady_config = config if config == spare.last_config else None
        spare.last_config = config
        return engine

    def _settle(self, msg: SettleFrame, clock_owner: CellRun | None) -> None:
        run = self.table.get(msg["rt"])
        if run is None:
            # A late settle for a runtime that already ended: its payload frames still follow.
            for r in msg["replies"]:
                if r["ok"]:
                    self.channel.read_raw()
            return
        self._after(run, run.resume(msg, clock_read=run is clock_owner))

    def _after(self, run: CellRun, end: SliceEnd) -> None:
        if end is SliceEnd.WAITING:
            self.clock_owner = run  # its idle frame took the last reading
            return
        self._forget(run.rt)
        if end is SliceEnd.RETIRE:
            self.draining = True

    def _forget(self, rt: str) -> None:
        run = self.table.pop(rt, None)
        if run is not None:
            run.engine.close()
            self.freed += run.heap

    def _trim(self) -> bool:
        """Give freed runtimes' memory back to the kernel once enough of it piled up; whether it did."""
        if self.freed < TRIM_AFTER_BYTES:
            return False
        self.freed = 0
        give_back_memory()
        return True


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except (BrokenPipeError, KeyboardInterrupt):
        raise SystemExit(0) from None  # the service closed our pipes: nothing left to report
