"""Supervision of the worker processes that run guests.

A ``Worker`` is one ``python -m guest_runtime.worker`` child speaking frames over its pipes.
The ``WorkerPool`` keeps ``settings.workers`` of them for running cells, hands one to each
running cell, takes it back after a clean cell (reused only for the same tenant), and replaces it
at once after a limit hit, a crash, an abort or ``worker_max_cells`` cells.  Parked cells keep
their worker, so the pool holds ``workers + parked`` processes (never more than ``cap``); when
every worker is busy, ``acquire`` waits for one to come back instead of starting more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections import deque
from typing import Any

from bridge import jsoncodec
from bridge.errors import BridgeError
from bridge.framing import HEADER_SIZE, decode_body, encode_frame, encode_raw, frame_length

from .errors import Overloaded

log = logging.getLogger("codemode.workers")

#: Start-up of a worker (interpreter, quickjs import, engine self-check) must fit in this.
SPAWN_TIMEOUT_S = 20.0


class WorkerGone(Exception):
    """Raised when a worker's pipe closes or its frames cannot be read."""

    code = "runtime_unavailable"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Worker:
    """One supervised worker process."""

    def __init__(self, proc: asyncio.subprocess.Process, frame_cap: int) -> None:
        self.proc = proc
        self.frame_cap = frame_cap
        self.tenant: str | None = None
        self.cells_run = 0
        self.dead = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def send(self, message: dict[str, Any], attachments: list[bytes] | None = None) -> None:
        if self.dead or self.proc.stdin is None:
            raise WorkerGone("worker process is gone")
        try:
            self.proc.stdin.write(encode_frame(message, self.frame_cap))
            for data in attachments or ():
                self.proc.stdin.write(encode_raw(data, self.frame_cap))
            await self.proc.stdin.drain()
        except (ConnectionError, BrokenPipeError, RuntimeError) as exc:
            self.dead = True
            raise WorkerGone(f"worker process stopped reading ({exc})") from None

    async def recv(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        try:
            header = await self.proc.stdout.readexactly(HEADER_SIZE)
            body = await self.proc.stdout.readexactly(frame_length(header, self.frame_cap))
        except asyncio.IncompleteReadError:
            self.dead = True
            raise WorkerGone(await self._exit_reason()) from None
        except BridgeError as exc:
            self.kill()
            raise WorkerGone(f"worker sent a bad frame: {exc}") from None
        try:
            message = decode_body(body)
            message["frame_bytes"] = len(body)  # lets the cell skip re-measuring small requests
            return message  # type: ignore[no-any-return]
        except (BridgeError, TypeError) as exc:
            self.kill()
            raise WorkerGone(f"worker sent a bad frame: {exc}") from None

    async def _exit_reason(self) -> str:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 2.0)
        rc = self.proc.returncode
        if rc is not None and rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = str(-rc)
            return f"worker process was killed by {name}"
        return f"worker process exited unexpectedly (exit status {rc})"

    def kill(self) -> None:
        self.dead = True
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()


class WorkerPool:
    """Warm workers for running cells, with tenant affinity and immediate replacement."""

    def __init__(self, *, size: int, cap: int, max_cells: int, frame_cap: int, options: dict[str, Any],
                 acquire_timeout_s: float) -> None:
        self.size = size
        self.cap = max(cap, size)
        self.max_cells = max_cells
        self.frame_cap = frame_cap
        self.options = {**options, "frame_cap": frame_cap}
        self.acquire_timeout_s = acquire_timeout_s
        self._fresh: deque[Worker] = deque()
        self._idle: dict[str, deque[Worker]] = {}
        self._busy = 0  # workers handed out (running or parked)
        self._parked = 0  # of those, held by parked cells
        self._spawning = 0
        self._changed = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self.spawned = 0
        self.recycled = 0

    # -- life cycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.gather(*(self._spawn_into_fresh() for _ in range(self.size)))

    async def close(self) -> None:
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        workers = list(self._fresh) + [w for q in self._idle.values() for w in q]
        self._fresh.clear()
        self._idle.clear()
        for w in workers:
            w.kill()
        for w in workers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(w.proc.wait(), 2.0)

    def stats(self) -> dict[str, int]:
        idle = sum(len(q) for q in self._idle.values())
        return {"fresh": len(self._fresh), "idle": idle, "busy": self._busy, "spawning": self._spawning,
                "spawned": self.spawned, "recycled": self.recycled}

    @property
    def ready(self) -> bool:
        return not self._closed and (len(self._fresh) > 0 or any(self._idle.values()) or self._busy > 0)

    # -- hand-out ---------------------------------------------------------------------------------

    async def acquire(self, tenant: str) -> Worker:
        """A worker for ``tenant``: an idle one it used before, else a fresh one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.acquire_timeout_s
        async with self._changed:
            while True:
                worker = self._take(tenant)
                if worker is not None:
                    self._busy += 1
                    worker.tenant = tenant
                    self._top_up()
                    return worker
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise Overloaded(
                        f"no worker became free within {self.acquire_timeout_s:.1f}s; retry shortly "
                        "or lower the number of concurrent cells",
                        retry_after=1,
                    )
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), remaining)

    def set_parked(self, parked: int) -> None:
        """Tell the pool how many cells hold a worker while parked (they do not count as running)."""
        self._parked = parked
        self._top_up()

    def _take(self, tenant: str) -> Worker | None:
        idle = self._idle.get(tenant)
        while idle:
            w = idle.popleft()
            if not w.dead:
                return w
        while self._fresh:
            w = self._fresh.popleft()
            if not w.dead:
                return w
        # Nothing this tenant may use.  Another tenant's idle worker can never serve it: retire
        # one, and a fresh worker takes its place.
        if not self._spawning:
            for other, queue in self._idle.items():
                if other != tenant and queue:
                    self._retire(queue.popleft())
                    break
        self._top_up()
        return None

    def release(self, worker: Worker, *, recycle: bool) -> None:
        """Take a worker back after its cell ended."""
        self._busy -= 1
        worker.cells_run += 1
        surplus = self._total() >= min(self.size + self._parked, self.cap) + 1  # a parked cell resumed
        if recycle or worker.dead or worker.cells_run >= self.max_cells or self._closed or surplus:
            self._retire(worker)
        else:
            self._idle.setdefault(worker.tenant or "", deque()).append(worker)
        self._top_up()
        self._notify()

    def _retire(self, worker: Worker) -> None:
        self.recycled += 1
        worker.kill()
        self._background(self._reap(worker))

    async def _reap(self, worker: Worker) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(worker.proc.wait(), 5.0)

    def _total(self) -> int:
        return len(self._fresh) + sum(len(q) for q in self._idle.values()) + self._busy + self._spawning

    def _top_up(self) -> None:
        """Start workers until the pool holds ``size`` for running cells plus one per parked cell."""
        if self._closed:
            return
        target = min(self.size + self._parked, self.cap)
        while self._total() < target:
            self._spawning += 1
            self._background(self._spawn_into_fresh(counted=True))

    def _background(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _notify(self) -> None:
        async def notify() -> None:
            async with self._changed:
                self._changed.notify_all()

        self._background(notify())

    async def _spawn_into_fresh(self, counted: bool = False) -> None:
        if not counted:
            self._spawning += 1
        try:
            worker = await self.spawn()
        except Exception as exc:  # noqa: BLE001 - a failed spawn is logged and retried on demand
            log.error("could not start a worker process: %s", exc)
            await asyncio.sleep(0.5)
            return
        finally:
            self._spawning -= 1
        if self._closed:
            worker.kill()
            return
        self._fresh.append(worker)
        async with self._changed:
            self._changed.notify_all()

    async def spawn(self) -> Worker:
        """Start one worker process and wait for its ``ready`` frame."""
        # Workers get a minimal environment: nothing of the service's secrets reaches a guest process.
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "PYTHONPATH", "HOME", "TZ")}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "guest_runtime.worker", jsoncodec.dumps_text(self.options),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=None, env=env,
            limit=1 << 20,
        )
        worker = Worker(proc, self.frame_cap)
        try:
            msg = await asyncio.wait_for(worker.recv(), SPAWN_TIMEOUT_S)
        except (WorkerGone, asyncio.TimeoutError) as exc:
            worker.kill()
            raise WorkerGone(f"worker failed to start: {exc}") from None
        except asyncio.CancelledError:
            worker.kill()  # the pool is closing: never leave a half-started child behind
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), 2.0)
            raise
        if msg.get("t") != "ready":
            worker.kill()
            raise WorkerGone(f"worker sent {msg.get('t')!r} instead of ready")
        self.spawned += 1
        return worker
