"""Supervision of the worker processes that run guests.

A ``Worker`` is one ``python -m guest_runtime.worker`` child speaking frames over its pipes.
The ``WorkerPool`` keeps ``settings.workers`` of them for running cells, hands one to each
running cell, takes it back after a clean cell (reused only for the same tenant), and replaces it
at once after a limit hit, a crash, an abort or ``worker_max_cells`` cells.  Parked cells keep
their worker, so the pool holds ``workers + parked`` processes (never more than ``cap``); when
every worker is busy, ``acquire`` waits for one to come back instead of starting more.

Admission is fair across tenants: a running cell holds one of ``workers`` *slots* (a parked cell
gives its slot back), callers that find no free slot wait in a queue per tenant, and a freed slot
goes to the waiting tenant that holds the fewest slots (ties: the one served longest ago).  So a
tenant flooding the pool holds at most its share while others wait, and another tenant's cell
waits at most for one running cell to end.
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
from bridge.messages import HostFrame, WorkerFrame, WorkerOptions
from service.errors import Overloaded, WorkerGone

log = logging.getLogger("codemode.workers")

#: Start-up of a worker (interpreter, quickjs import, engine self-check) must fit in this.
SPAWN_TIMEOUT_S = 20.0


class Worker:
    """One supervised worker process."""

    def __init__(self, proc: asyncio.subprocess.Process, frame_cap: int) -> None:
        self.proc = proc
        self.frame_cap = frame_cap
        self.tenant: str | None = None
        self.slot = False  # holds one of the pool's running slots (not while its cell is parked)
        self.cells_run = 0
        self.dead = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def send(self, message: HostFrame, attachments: list[bytes] | None = None) -> None:
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

    async def recv(self) -> WorkerFrame:
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
            frame: WorkerFrame = decode_body(body)
            return frame
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

    def __init__(self, *, size: int, cap: int, max_cells: int, frame_cap: int, options: WorkerOptions,
                 acquire_timeout_s: float) -> None:
        self.size = size
        self.cap = max(cap, size)
        self.max_cells = max_cells
        self.frame_cap = frame_cap
        self.options: WorkerOptions = {**options, "frame_cap": frame_cap}
        self.acquire_timeout_s = acquire_timeout_s
        self._fresh: deque[Worker] = deque()
        self._idle: dict[str, deque[Worker]] = {}
        self._busy = 0  # workers handed out (running or parked)
        self._parked = 0  # of those, held by parked cells
        self._spawning = 0
        self._changed = asyncio.Condition()
        self._slots: dict[str, int] = {}  # tenant -> running slots held
        self._queues: dict[str, deque[asyncio.Future[None]]] = {}  # tenant -> callers waiting for a slot
        self._served: dict[str, int] = {}  # tenant -> when it last got a slot (grant counter)
        self._grants = 0
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
        """A running slot (fair across tenants), then a worker: an idle one it used before, else a fresh one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.acquire_timeout_s
        await self._admit(tenant, deadline - loop.time())
        try:
            worker = await self._worker_for(tenant, deadline)
        except BaseException:
            self._give_back(tenant)
            raise
        worker.slot = True
        return worker

    async def _worker_for(self, tenant: str, deadline: float) -> Worker:
        loop = asyncio.get_running_loop()
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
                    raise self._no_worker()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), remaining)

    def _no_worker(self) -> Overloaded:
        return Overloaded(
            f"no worker became free within {self.acquire_timeout_s:.1f}s (acquire_timeout_ms); retry shortly "
            "or lower the number of concurrent cells", retry_after=1)

    # -- fair admission ---------------------------------------------------------------------------

    def running_slots(self, tenant: str) -> int:
        return self._slots.get(tenant, 0)

    def queued(self, tenant: str) -> int:
        """Callers of ``tenant`` waiting for a running slot."""
        return len(self._queues.get(tenant, ()))

    async def _admit(self, tenant: str, timeout: float) -> None:
        if not self._queues and sum(self._slots.values()) < self.size:
            self._grant_to(tenant)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(tenant, deque()).append(waiter)
        self._grant()
        try:
            await asyncio.wait_for(asyncio.shield(waiter), max(timeout, 0.001))
        except asyncio.TimeoutError:
            if not self._abandon(tenant, waiter):
                raise self._no_worker() from None
        except BaseException:
            if self._abandon(tenant, waiter):
                self._give_back(tenant)
            raise

    def _abandon(self, tenant: str, waiter: asyncio.Future[None]) -> bool:
        """Stop waiting; return whether the slot was granted meanwhile (the caller then holds it)."""
        if waiter.done() and not waiter.cancelled():
            return True
        waiter.cancel()
        self._drop_waiter(tenant, waiter)
        return False

    def _grant_to(self, tenant: str) -> None:
        self._slots[tenant] = self._slots.get(tenant, 0) + 1
        self._grants += 1
        self._served[tenant] = self._grants

    def _grant(self) -> None:
        """Hand free slots to waiting tenants, fewest slots held first, then least recently served."""
        while self._queues and sum(self._slots.values()) < self.size:
            tenant = min(self._queues, key=lambda t: (self._slots.get(t, 0), self._served.get(t, 0)))
            waiter = self._queues[tenant].popleft()
            if not self._queues[tenant]:
                del self._queues[tenant]
            if waiter.done():
                continue  # gave up already
            self._grant_to(tenant)
            waiter.set_result(None)

    def _drop_waiter(self, tenant: str, waiter: asyncio.Future[None]) -> None:
        queue = self._queues.get(tenant)
        if queue is None:
            return
        with contextlib.suppress(ValueError):
            queue.remove(waiter)
        if not queue:
            del self._queues[tenant]

    def _give_back(self, tenant: str) -> None:
        held = self._slots.get(tenant, 0) - 1
        if held > 0:
            self._slots[tenant] = held
        else:
            self._slots.pop(tenant, None)
            if tenant not in self._queues:
                self._served.pop(tenant, None)  # keep the table bounded by active tenants
        self._grant()

    def vacate(self, worker: Worker) -> None:
        """The worker's cell parked: its running slot goes to the next caller."""
        if worker.slot:
            worker.slot = False
            self._give_back(worker.tenant or "")

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
        # Nothing this tenant may use.  Another tenant's idle worker can never serve it: retire as
        # many as it takes for the pool to start a fresh worker (the pool may be over its target
        # while a resumed cell's extra worker is still idle).
        if not self._spawning:
            target = self._target()
            for other, queue in self._idle.items():
                while other != tenant and queue and self._total() >= target:
                    self._retire(queue.popleft())
        self._top_up()
        return None

    def release(self, worker: Worker, *, recycle: bool) -> None:
        """Take a worker back after its cell ended."""
        self.vacate(worker)
        self._busy -= 1
        worker.cells_run += 1
        # Kept, it would take the pool past its target: the worker of a parked cell that resumed.
        surplus = self._total() >= self._target()
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

    def _target(self) -> int:
        """Processes the pool keeps: ``size`` for running cells plus one per parked cell, within ``cap``."""
        return min(self.size + self._parked, self.cap)

    def _total(self) -> int:
        return len(self._fresh) + sum(len(q) for q in self._idle.values()) + self._busy + self._spawning

    def _top_up(self) -> None:
        """Start workers until the pool holds ``size`` for running cells plus one per parked cell."""
        if self._closed:
            return
        target = self._target()
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
        if msg["t"] != "ready":
            worker.kill()
            raise WorkerGone(f"worker sent {msg['t']!r} instead of ready")
        self.spawned += 1
        return worker
