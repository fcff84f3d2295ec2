"""One worker process as the service sees it: frames over its pipes, the cells it holds, its death.

``start_worker`` starts ``python -I -m guest_runtime.worker`` as every confined process is started
(``service.process_launch``: its own pipes, an allow-listed environment, ``/`` as its working
directory, only installed code importable) and waits for its ``ready`` frame, which comes once the
worker has confined itself and says which sandbox layers are in force; the pool (``pool.py``) decides which cell runs where.  A worker's stderr is a pipe of
its own that the service reads (``StderrRelay``), never the service's log file.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import signal
import sys
from collections import deque
from typing import TYPE_CHECKING

from bridge import jsoncodec
from bridge.framing import encode_frame, encode_raw
from bridge.messages import TEST_PAYLOAD_VARIABLE, HostFrame, SandboxReport, WorkerFrame, WorkerOptions, drop_frame
from service.errors import WorkerGone
from service.process_launch import WORKING_DIRECTORY, confined_command, confined_environment

from .cpu import worker_niceness
from .pipe import Early, WorkerOutput
from .stderr_relay import StderrRelay

if TYPE_CHECKING:
    from collections.abc import Callable

#: Start-up of a worker (interpreter, quickjs import, engine self-check) must fit in this.
SPAWN_TIMEOUT_S = 20.0
#: Messages up to this size (a settle frame and its payloads) go to the pipe in one write.
JOIN_WRITES_BELOW = 256 * 1024
#: What writing to (or draining) a worker's pipe raises once the worker no longer reads it.
_PIPE_ERRORS = (ConnectionError, RuntimeError)  # BrokenPipeError is a ConnectionError


class WorkerState(enum.Enum):
    """Where a worker is in the pool's life cycle (``pool.py`` moves it; nothing moves it back)."""

    FRESH = "fresh"  # started and ready; belongs to no tenant yet
    SERVING = "serving"  # one principal's (of one tenant); takes that principal's new cells
    DRAINING = "draining"  # takes no new cell; stopped once its last cell leaves
    RETIRED = "retired"  # stopped by the pool and let go


class Worker:
    """One supervised worker process and the cells whose runtimes it holds.

    Beside its ``state``, two facts change on their own: ``busy`` (a leg holds the process now) and
    ``dead`` (its process is gone or unusable).  A worker in any state can be busy or die, so they
    are not states of their own.  Cells are known here only by id and the callback that tells a
    cell its process was lost.
    """

    def __init__(self, proc: asyncio.subprocess.Process, frame_cap: int, output: WorkerOutput) -> None:
        self.proc = proc
        self.frame_cap = frame_cap
        self.output = output  # its stdout: the frames it writes
        self.tenant: str | None = None
        self.principal: str | None = None  # who it serves once assigned (None then: one cell alone)
        self.cells_run = 0
        self.max_cells = sys.maxsize  # cells it runs before it is retired (the pool draws it)
        self.dead = False
        self.busy = False  # a cell's leg runs here
        self.python = False  # it runs Python cells (its own confinement profile, a Monty child): supply.py
        self.monty_cpu: int | None = None  # the CPU its Monty child runs on (supply.py)
        self.waiters: deque[asyncio.Future[None]] = deque()  # resumes waiting for the process
        self.cells: dict[str, Callable[[str], None]] = {}  # cell id -> told when the process is lost
        self.parked_heaps: dict[str, int] = {}  # cell id -> its heap at its last park
        self.state = WorkerState.FRESH
        self.stop_reason: str | None = None
        self.sandbox: SandboxReport | None = None  # the layers its ready frame reported
        self.stderr: StderrRelay | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def holds_only(self, cell_id: str) -> bool:
        """Whether no other cell's runtime lives here (then killing the process costs no other cell)."""
        return set(self.cells) <= {cell_id}

    @property
    def parked_bytes(self) -> int:
        return sum(self.parked_heaps.values())

    async def send(self, message: HostFrame, attachments: list[bytes] | None = None) -> None:
        """``write`` the message, then ``drain``."""
        self.write(message, attachments)
        await self.drain()

    @property
    def pipe_empty(self) -> bool:
        """Whether everything written so far is in the pipe: a message written now waits for nothing."""
        stdin = self.proc.stdin
        return stdin is not None and not stdin.transport.get_write_buffer_size()

    async def drain(self) -> None:
        """Wait while the transport holds more than its high-water mark of what was written (at once
        when the pipe took it all): what a worker that stops reading makes the service hold is bounded."""
        stdin = self.proc.stdin
        if stdin is None:
            raise WorkerGone("worker process is gone")
        # The pipe takes a small message at once: wait only when it kept some (or is closing, and
        # then drain() raises why); awaiting drain() every time costs a coroutine per message.
        if stdin.transport.get_write_buffer_size() or stdin.transport.is_closing():
            try:
                await stdin.drain()
            except _PIPE_ERRORS as exc:
                raise self._stopped_reading(str(exc)) from None

    def write(self, message: HostFrame, attachments: list[bytes] | None = None) -> None:
        """Hand one message (a frame and its raw attachments) to the pipe without waiting: what the
        pipe does not take at once stays in the transport's buffer until it does."""
        stdin = self.proc.stdin
        if self.dead or stdin is None:
            raise WorkerGone("worker process is gone")
        if stdin.transport.is_closing():
            raise self._stopped_reading("its pipe is closed")
        frames = [encode_frame(message, self.frame_cap)]
        frames.extend(encode_raw(data, self.frame_cap) for data in attachments or ())
        # One pipe write for the whole message, so the worker wakes once (framing a payload
        # copies it already; joining small ones costs little, large ones are written as they are).
        if len(frames) > 1 and sum(map(len, frames)) <= JOIN_WRITES_BELOW:
            frames = [b"".join(frames)]
        try:
            for frame in frames:
                stdin.write(frame)
        except _PIPE_ERRORS as exc:
            raise self._stopped_reading(str(exc)) from None

    def _stopped_reading(self, why: str) -> WorkerGone:
        """Mark the process dead because its pipe refused what was written; the error to raise."""
        self.dead = True
        return WorkerGone(f"worker process stopped reading ({why})")

    def drop(self, rt: str) -> None:
        """Tell the worker to free a blocked runtime; queued without waiting (the pipe buffer takes it)."""
        if self.dead or self.proc.stdin is None:
            return
        try:
            self.proc.stdin.write(encode_frame(drop_frame(rt), self.frame_cap))
        except _PIPE_ERRORS:
            self.dead = True

    async def recv(self, early: Early | None = None) -> WorkerFrame:
        """The next message (an ``idle`` frame's requests carry their arguments, still encoded) that
        ``early`` did not answer; it ran on each as soon as it was whole (``WorkerOutput.next``)."""
        try:
            return await self.output.next(early)
        except EOFError:
            self.dead = True
            raise WorkerGone(await self.exit_reason()) from None
        except WorkerGone:  # it wrote what is not a message: the stream is unusable
            self.kill()
            raise

    async def exit_reason(self) -> str:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 2.0)
        if self.stop_reason:
            return self.stop_reason
        rc = self.proc.returncode
        if rc is not None and rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = str(-rc)
            return f"worker process was killed by {name}"
        return f"worker process exited unexpectedly (exit status {rc})"

    async def last_words(self) -> str:
        """``; it wrote: <its last stderr lines>`` once it is gone (empty if it wrote nothing).

        For the service's own messages only (start failures): the lines can hold host paths, so they
        never go into a cell's error.
        """
        if self.stderr is None:
            return ""
        await self.stderr.wait_closed(0.5)  # its last lines may still be in the pipe
        words = self.stderr.last_lines()
        return f"; it wrote: {words}" if words else ""

    def kill(self, reason: str | None = None) -> None:
        self.dead = True
        if reason and self.stop_reason is None:
            self.stop_reason = reason
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        self.close_input()
        self.output.close()  # nothing more is read from it either: a leg reading it ends at once

    def close_input(self) -> None:
        """Close our end of the process's stdin; nothing more is sent to it.

        Left open, the transport closes it from ``__del__``, which raises "Event loop is closed" when
        the garbage collector gets there after the loop has stopped.
        """
        if self.proc.stdin is not None:
            self.proc.stdin.close()


async def _spawn(
    options: WorkerOptions, env: dict[str, str], frame_cap: int
) -> tuple[asyncio.subprocess.Process, WorkerOutput, int]:
    """The worker process, the reader of its stdout, and the read end of its stderr pipe."""
    stderr_read, stderr_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *confined_command("guest_runtime.worker", jsoncodec.dumps_text(options)),
            stdin=asyncio.subprocess.PIPE,
            stdout=stdout_write,
            stderr=stderr_write,
            env=env,
            cwd=WORKING_DIRECTORY,
        )
    except BaseException:
        os.close(stderr_read)
        os.close(stdout_read)
        raise
    finally:  # the child has its copies: ours would keep the pipes open after it exits
        os.close(stderr_write)
        os.close(stdout_write)
    try:
        output = await WorkerOutput.attach(stdout_read, frame_cap)
    except BaseException:
        proc.kill()
        os.close(stderr_read)
        raise
    return proc, output, stderr_read


async def start_worker(
    options: WorkerOptions, frame_cap: int, *, nice: int = 0, test_payload: str | None = None
) -> Worker:
    """Start one worker process and wait for its ``ready`` frame; it runs ``nice`` steps below the service.

    ``test_payload`` is for the tests alone (the confinement tests' stand-in for an attacker's code).
    """
    # Nothing of the service's environment (its secrets, its PYTHONPATH) reaches a guest process.
    env = confined_environment(None if test_payload is None else {TEST_PAYLOAD_VARIABLE: test_payload})
    proc, output, stderr_read = await _spawn(options, env, frame_cap)
    if nice > 0:
        # Set here, before the child's start-up work (imports, prelude compile), not by the child
        # itself once that is done.  Guest code then yields the CPU to the event loop: at equal
        # priority the kernel often ran a worker the loop had just woken on the loop's own CPU,
        # preempting it for the length of a cell.  A process cannot raise its own priority back.
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, proc.pid, worker_niceness(nice))
    worker = Worker(proc, frame_cap, output)
    try:
        worker.stderr = await StderrRelay.attach(stderr_read, f"worker {proc.pid}")
        msg = await asyncio.wait_for(worker.recv(), SPAWN_TIMEOUT_S)
    except (TimeoutError, WorkerGone) as exc:
        worker.kill()
        # A TimeoutError has no words of its own: say which wait ran out (on a machine busy with
        # processes of higher priority, a worker's start-up at its lowered niceness can starve).
        reason = exc if isinstance(exc, WorkerGone) else f"it did not report ready within {SPAWN_TIMEOUT_S:g} s"
        raise WorkerGone(f"worker failed to start: {reason}{await worker.last_words()}") from None
    except asyncio.CancelledError:
        worker.kill()  # the pool is closing: never leave a half-started child behind
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 2.0)
        raise
    if msg["t"] != "ready":
        worker.kill()
        raise WorkerGone(f"worker sent {msg['t']!r} instead of ready")
    worker.sandbox = msg["sandbox"]
    return worker
