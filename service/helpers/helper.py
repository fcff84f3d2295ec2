"""One helper process as the service sees it: started like a worker, spoken to one job at a time.

``start_helper`` starts ``python -I -m service.helpers.process`` as every confined process is started
(``service.process_launch``: its own pipes, an allow-listed environment, ``/`` as its working
directory, only installed code importable) and waits for its ``ready`` frame, which comes once the
helper has imported its jobs' code and confined itself.  Its stderr is a pipe the service relays,
capped (``StderrRelay``), never the service's log file.

``Helper.run`` sends one job and reads its answer under the job's caps (``job.AnswerCaps``), within
``JOB_SECONDS``.  Whatever goes wrong on the helper's side (an answer out of shape, a frame over its
cap, bytes that are not JSON, an answer for another job, its death, its silence) stops the process
and raises ``HelperFailed``, which names what happened: the helper is never asked again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from typing import TypeVar

from bridge import jsoncodec
from bridge.framing import HEADER, HEADER_SIZE, encode_frame, encode_raw
from bridge.json_values import count_values
from service.errors import HelperFailed
from service.process_launch import WORKING_DIRECTORY, confined_command, confined_environment
from service.runtime.workers.stderr_relay import StderrRelay

from .job import Answer, AnswerCaps, HelperJob, is_int, refuse
from .protocol import MODULE, READY_CAP, READY_VALUES, TEST_PAYLOAD_VARIABLE, HelperOptions, job_frame

log = logging.getLogger("codemode.helpers")

Result = TypeVar("Result")

#: Start-up of a helper (interpreter, its jobs' imports, a warm-up run of each, confinement) must fit in this.
START_SECONDS = 30.0
#: One job, from the first byte sent to the last byte of its answer. The largest honest job (an
#: 11 MiB body of small values, or 128 schemas of 2,000 subschemas) takes about a second.
JOB_SECONDS = 60.0


class Helper:
    """One supervised helper process: started, ready, then one job at a time until it is stopped."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        # Its pipes, attached once it started (``_spawn``): jobs in, answers out, its stderr relayed.
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self._stdout_pipe: asyncio.ReadTransport | None = None
        self.stderr: StderrRelay | None = None
        self.jobs = 0  # jobs sent so far: the next job's id is one more
        self.dead = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def run(self, job: HelperJob[Result]) -> Result:
        """Send ``job``, read and check its answer; ``HelperFailed`` (the helper stopped) if anything
        the helper did is out of shape. A refusal of the job's own (a body that is not JSON) passes."""
        if self.dead:
            raise HelperFailed(f"the helper process that {job.purpose} was stopped before this request; retry it")
        self.jobs += 1
        try:
            async with asyncio.timeout(JOB_SECONDS):
                await self._send(job)
                answer = await self._answer(self.jobs, job.caps())
            return job.finish(answer)  # a refusal of the job's own (a body that is not JSON) passes
        except HelperFailed as exc:
            reason = exc.message
        except TimeoutError:
            reason = f"did not answer within {JOB_SECONDS:g} s"
        except asyncio.IncompleteReadError:
            reason = f"stopped while working on this request ({await self._exit_status()})"
        except ConnectionError:  # its job pipe broke (a drain after the process closed its end)
            reason = f"stopped reading its jobs ({await self._exit_status()})"
        except asyncio.CancelledError:  # its answer would be read as the next job's
            self.stop()
            raise
        self.stop()
        log.warning("helper %d %s; stopped", self.pid, reason)
        raise HelperFailed(
            f"the helper process that {job.purpose} {reason}; it was stopped and a fresh one serves the "
            "next request: retry this one"
        )

    async def _send(self, job: HelperJob[Result]) -> None:
        args, payload = job.request()
        assert self.stdin is not None
        self.stdin.write(encode_frame(job_frame(self.jobs, job.name, args, len(payload))))
        for data in payload:
            self.stdin.write(encode_raw(data))
        await self.stdin.drain()

    async def _answer(self, job_id: int, caps: AnswerCaps) -> Answer:
        """The answer to job ``job_id``: a control frame counted, decoded and checked, then its raw frames."""
        fields = await self.read_control(caps.control_bytes, caps.control_values)
        if fields.get("t") != "answer" or not all(is_int(fields.get(name)) for name in ("id", "frames")):
            refuse("wrote a frame that is not an answer")
        if fields["id"] != job_id:
            refuse(f"answered job {fields['id']} when asked job {job_id}")
        count = fields["frames"]
        assert isinstance(count, int)
        if not 0 <= count <= caps.frames:
            refuse(f"announced {count} raw frames, over the {caps.frames} this job's answer may hold")
        budget = caps.frame_bytes
        frames = []
        for _ in range(count):
            data = await self.read_frame(budget - HEADER_SIZE, "its answer's raw frames")
            budget -= HEADER_SIZE + len(data)
            frames.append(data)
        return Answer(fields, frames)

    async def read_control(self, cap: int, max_values: int) -> dict[str, object]:
        data = await self.read_frame(cap, "an answer frame")
        if count_values(data, max_values) > max_values:
            refuse(f"wrote a frame of more than {max_values} JSON values, more than its answer has")
        try:
            fields = jsoncodec.loads(data)
        except jsoncodec.JSONDecodeError:
            refuse("wrote a frame that is not JSON")
        if not isinstance(fields, dict):
            refuse("wrote a frame that is not a JSON object")
        return fields

    async def read_frame(self, cap: int, what: str) -> bytes:
        """One frame's body, refused from its header alone when it is over ``cap``."""
        assert self.stdout is not None
        (size,) = HEADER.unpack(await self.stdout.readexactly(HEADER_SIZE))
        if size > cap:
            refuse(f"announced a frame of {size} bytes, over the {max(cap, 0)} bytes left for {what}")
        return await self.stdout.readexactly(size)

    async def _exit_status(self) -> str:
        """How the process ended, once it has (``killed by SIGKILL``, ``exit status 2``)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 2.0)
        code = self.proc.returncode
        if code is None:
            return "still running"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-code).name}"
        return f"exit status {code}"

    def stop(self) -> None:
        """Kill the process and close our ends of its pipes (idempotent); ``wait`` reaps it.

        Closed here, not left to the transports' ``__del__``, which raises "Event loop is closed" when
        the garbage collector gets there after the loop has stopped.
        """
        self.dead = True
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        for pipe in (self.stdin, self._stdout_pipe, self.stderr):
            if pipe is not None:
                pipe.close()

    async def wait(self) -> None:
        """Until the stopped process has exited (it was killed: at once)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 5.0)


async def start_helper(options: HelperOptions, *, test_payload: str | None = None) -> Helper:
    """Start one helper process and wait for its ``ready`` frame (``HelperFailed`` if it never comes).

    ``test_payload`` is for the tests alone: the compromise tests' stand-in for an attacker's code.
    """
    helper = await _spawn(options, test_payload)
    try:
        async with asyncio.timeout(START_SECONDS):
            ready = await helper.read_control(READY_CAP, READY_VALUES)
        if ready.get("t") != "ready" or ready.get("pid") != helper.pid:
            refuse("said something else than ready")
    except (HelperFailed, TimeoutError, asyncio.IncompleteReadError) as exc:
        assert helper.stderr is not None
        await helper.stderr.wait_closed(0.5)  # its last lines may still be in the pipe
        helper.stop()
        await helper.wait()
        what = exc.message if isinstance(exc, HelperFailed) else "did not get ready"
        reason = f"{what} ({await helper._exit_status()})"
        # Its last words can hold host paths: for the service's log, not for a caller.
        log.warning(
            "helper %d could not be started: it %s; it wrote: %s", helper.pid, reason, helper.stderr.last_lines()
        )
        raise HelperFailed(
            f"a helper process could not be started (it {reason}); retry the request, and see the service's "
            "log if it happens again"
        ) from None
    except BaseException:  # cancelled (the pool is closing): never leave a half-started child behind
        helper.stop()
        await helper.wait()
        raise
    return helper


async def _spawn(options: HelperOptions, test_payload: str | None) -> Helper:
    """The helper process, started as every confined process is, with its pipes attached."""
    env = confined_environment(None if test_payload is None else {TEST_PAYLOAD_VARIABLE: test_payload})
    # Real pipes, made here: the event loop's own ``PIPE`` may be a socket pair (uvloop's stdin).
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    stderr_read, stderr_write = os.pipe()
    ours = [stdin_write, stdout_read, stderr_read]
    try:
        proc = await asyncio.create_subprocess_exec(
            *confined_command(MODULE, jsoncodec.dumps_text(options)),
            stdin=stdin_read,
            stdout=stdout_write,
            stderr=stderr_write,
            env=env,
            cwd=WORKING_DIRECTORY,
        )
    except BaseException:
        _close(ours)
        raise
    finally:  # the child has its copies: ours would keep the pipes open after it exits
        _close([stdin_read, stdout_write, stderr_write])
    helper = Helper(proc)
    try:
        helper.stdin = await _writing(ours.pop(0))
        helper.stdout, helper._stdout_pipe = await _reading(ours.pop(0))
        helper.stderr = await StderrRelay.attach(ours.pop(0), f"helper {proc.pid}")
    except BaseException:
        _close(ours)
        helper.stop()
        raise
    return helper


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


async def _reading(fd: int) -> tuple[asyncio.StreamReader, asyncio.ReadTransport]:
    """Start reading the pipe's read end ``fd`` (owned from now on, closed if this fails)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(loop=loop)
    pipe = os.fdopen(fd, "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
    except BaseException:
        pipe.close()
        raise
    return reader, transport


async def _writing(fd: int) -> asyncio.StreamWriter:
    """A writer on the pipe's write end ``fd`` (owned from now on, closed if this fails)."""
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "wb", buffering=0)
    try:
        # StreamReaderProtocol is the stream protocol with flow control, which ``drain`` waits on.
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop), pipe
        )
    except BaseException:
        pipe.close()
        raise
    return asyncio.StreamWriter(transport, protocol, None, loop)
