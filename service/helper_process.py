"""A confined helper process for pure-Python work on caller data that must not hold the event loop.

Building Python objects from a large body, or walking a caller's schema, takes the GIL for its whole
length, so a thread would not free the loop; a process does.  Such a helper reads hostile bytes, so it
is confined like a worker (``guest_runtime.confinement``) before its first job: its stdio goes to
/dev/null (not the service's log), every descriptor but its channel to the service is closed, and the
modules its jobs need are imported first (a confined process can open no file, so it can import none).
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar, TypeVarTuple, Unpack

from bridge.messages import SandboxOptions
from guest_runtime.confinement import confine, pipe_fds
from service.errors import Overloaded

Args = TypeVarTuple("Args")
Answer = TypeVar("Answer")


class ConfinedHelper:
    """One helper process (started on first use, or by ``start``), replaced when it dies."""

    def __init__(self, what: str, sandbox: SandboxOptions, modules: Sequence[str]) -> None:
        self.what = what  # for the error text: "the body decoder process stopped while ..."
        self._sandbox = sandbox
        self._modules = tuple(modules)  # every module a job of this helper runs code from
        self._pool: ProcessPoolExecutor | None = None

    @property
    def started(self) -> bool:
        return self._pool is not None

    async def pid(self) -> int:
        """The helper's process id, as the helper itself answers it (starting it if need be)."""
        pid: int = await self.run(os.getpid)
        return pid

    def start(self) -> None:
        """Start the process now, in the background, so no request waits for it to boot."""
        self._executor().submit(int)

    async def run(self, work: Callable[[Unpack[Args]], Answer], *args: *Args) -> Answer:
        """``work(*args)`` in the helper; its answer must be plain data (it crosses a process boundary)."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor(), work, *args)
        except BrokenProcessPool:
            self.close()  # the next job starts a fresh helper
            raise Overloaded(
                f"the {self.what} process stopped while working on this request; retry it", retry_after=1
            ) from None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # spawn: a fork of the service would copy its threads' locks and the worker pool's pipes.
            self._pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_enter_helper,
                initargs=(self._sandbox, self._modules),
            )
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            # wait=True: the helper is told to stop and joined (at most one job away); without waiting,
            # the service exits first and the helper is left running, orphaned.
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _enter_helper(sandbox: SandboxOptions, modules: Sequence[str]) -> None:
    """In the helper, before its first job: its modules imported, stdio to /dev/null, then confined.

    Its channel to the service is the pool's pipes, kept open; every other descriptor is closed.
    """
    for name in modules:
        importlib.import_module(name)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    confine(sandbox, keep_fds=pipe_fds() | {0, 1, 2})
