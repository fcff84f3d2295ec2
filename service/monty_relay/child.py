"""One ``monty subprocess`` worker, started through the ``codemode-monty`` launcher, for one connection.

The launcher confines the process before it execs the real ``monty`` (guest_runtime/monty_launcher.py):
run by a service that is root, it switches to the worker user and puts every kernel layer in force.  The
worker is started like the service's own workers (service/process_launch.py): its own pipes only, the
allow-listed environment (plus the path of the real binary), ``/`` as its directory.  Its stdout is
hostile: each frame's length is checked against the cap before its body is read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sysconfig
from dataclasses import dataclass

from guest_runtime.errors import ConfinementError
from guest_runtime.monty_launcher import REAL_BIN_VARIABLE, runnable_monty
from service.errors import WorkerGone
from service.process_launch import WORKING_DIRECTORY, confined_environment

from .frames import LENGTH, FrameCaps, check_size

LAUNCHER_NAME = "codemode-monty"


@dataclass(frozen=True)
class MontyBinaries:
    """The launcher and the real ``monty`` it confines: the service's installed scripts (pydantic-monty's
    runtime puts ``monty`` beside ``codemode-monty``)."""

    launcher: str
    monty: str

    @classmethod
    def installed(cls) -> MontyBinaries:
        scripts = sysconfig.get_path("scripts")
        monty = os.path.join(scripts, "monty")
        with contextlib.suppress(ConfinementError, OSError):  # else problem() or the worker's start says why
            monty = runnable_monty(monty)  # the launcher execs it as the worker user
        return cls(os.path.join(scripts, LAUNCHER_NAME), monty)

    def problem(self) -> str | None:
        """Why no worker can start, or None."""
        for path in (self.launcher, self.monty):
            if not os.access(path, os.X_OK):
                return f"{path} is missing: reinstall codemode (pydantic-monty-runtime provides monty)"
        return None


class MontyChild:
    """A started worker: frames in, frames out, and its end (killed, never left behind)."""

    def __init__(self, process: asyncio.subprocess.Process, caps: FrameCaps) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._caps = caps

    @classmethod
    async def start(cls, binaries: MontyBinaries, caps: FrameCaps) -> MontyChild:
        process = await asyncio.create_subprocess_exec(
            binaries.launcher,
            "subprocess",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=confined_environment({REAL_BIN_VARIABLE: binaries.monty}),
            cwd=WORKING_DIRECTORY,
        )
        return cls(process, caps)

    @property
    def pid(self) -> int:
        return self._process.pid

    async def send(self, frame: bytes) -> None:
        try:
            self._stdin.write(LENGTH.pack(len(frame)) + frame)
            await self._stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise WorkerGone(f"the Monty worker closed its input: {exc}") from None

    async def receive(self) -> bytes:
        """The worker's next frame: its length checked first, then exactly that many bytes."""
        try:
            (size,) = LENGTH.unpack(await self._stdout.readexactly(LENGTH.size))
            check_size(size, self._caps, "worker")
            return await self._stdout.readexactly(size)
        except asyncio.IncompleteReadError:
            raise WorkerGone(f"the Monty worker ended ({await self._exit_text()})") from None

    async def _exit_text(self) -> str:
        with contextlib.suppress(asyncio.TimeoutError):
            code = await asyncio.wait_for(self._process.wait(), 1)
            return f"exit status {code}"
        return "its output closed"

    async def kill(self) -> None:
        """End the worker (SIGKILL: its state is worth nothing once its connection ends) and reap it."""
        if self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
        await self._process.wait()
