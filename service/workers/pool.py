"""Supervision of the worker processes that run guests.

A ``Worker`` (``worker_process.py``) is one ``python -m guest_runtime.worker`` child.  It belongs to
one tenant from its first cell on and holds up to ``max_runtimes`` of that tenant's QuickJS runtimes
(frames name the runtime: ``rt``), but runs one guest at a time: a leg holds the process (``busy``)
while it sends work and reads the answer; while the leg waits for host work it *lends* the process,
and parking gives it back, so other legs of the same tenant, new or resumed, run there meanwhile.
Parking never starts a process.  A leg that needs its process while another leg holds it waits
(FIFO, within its own budget) and never moves to another process: the runtime cannot move.

The pool keeps ``size`` fresh (never used) workers ready, and starts a replacement in the
background whenever one is taken or retired, so no request waits for a process start while the
machine keeps up.  A worker is retired after a timeout, a crash, an abort or ``worker_max_cells``
cells; while it still holds other cells' parked runtimes it only *drains* (takes no new cell) and
is stopped when the last one leaves.  When a worker process dies (crash, SIGKILL at a cell's
deadline + grace), every cell whose runtime it held is told, and each fails on its own with
``runtime_unavailable``.

Every leg that holds a process to run guest code holds a running slot (``admission.py``): new
cells take one before their process, resumed legs after theirs (the process is their tenant's
own, the slot is what tenants compete for).  Lending the process, parking or ending gives the
slot back.  The processes of a tenant over its share of slots run at the lowest CPU priority
(``cpu_priority.py``), and the processes a tenant's cells retire are rate-limited per tenant
(``worker_replacements.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections import deque
from typing import TYPE_CHECKING, Any

from bridge.messages import SandboxReport, WorkerOptions
from service.errors import Overloaded, TooManyRequests, WorkerGone

from .admission import Admission
from .cpu_priority import Priorities
from .worker_process import Worker, start_worker
from .worker_replacements import WorkerReplacements

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger("codemode.workers")


class WorkerPool:
    """Warm workers, each holding one tenant's runtimes; fresh replacements started ahead of need."""

    def __init__(
        self,
        *,
        size: int,
        cap: int,
        max_cells: int,
        frame_cap: int,
        options: WorkerOptions,
        acquire_timeout_s: float,
        max_runtimes: int = 64,
        max_parked_bytes: int = 256 << 20,
        snapshot_bytes: int = 10 << 20,
        nice: int = 0,
        burst: int = 0,
        replacements_per_minute: int = 1_000_000,
    ) -> None:
        self.size = size
        self.burst = burst
        self.nice = nice
        self.cap = max(cap, size)
        self.max_cells = max_cells
        self.max_runtimes = max_runtimes
        self.max_parked_bytes = max_parked_bytes
        self.snapshot_bytes = snapshot_bytes
        self.frame_cap = frame_cap
        self.options: WorkerOptions = {**options, "frame_cap": frame_cap}
        self.acquire_timeout_s = acquire_timeout_s
        self._fresh: deque[Worker] = deque()
        self._assigned: dict[str, list[Worker]] = {}  # tenant -> its live workers
        self._parked = 0
        self._spawning = 0
        self._changed = asyncio.Condition()
        self._hungry = 0  # callers blocked in _worker_for (the only listeners on _changed)
        self.admission = Admission(size, self._no_worker, burst=burst, on_share=self._share_changed)
        self.priorities = Priorities(nice)
        self._lowered: set[Worker] = set()  # processes at the lowered niceness
        self._idle_since: dict[Worker, int] = {}  # assigned process -> when it last went idle (a counter)
        self._idle_clock = 0
        self.replacements = WorkerReplacements(replacements_per_minute)
        self.replacements_refused = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._alive: set[Worker] = set()  # every process started and not yet seen to end
        self._closed = False
        self.spawned = 0
        # The confinement layers the first worker reported (kept: that worker may be retired at once).
        self.sandbox: SandboxReport | None = None
        self.recycled = 0
        self.retired_by_cells = 0  # of them, retired because of a cell (a limit hit, a crash, a kill)
        self.starved = 0  # new cells that found no warm process and waited for one

    # -- life cycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.gather(*(self._spawn_into_fresh() for _ in range(self.size)))

    async def close(self) -> None:
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        workers = list(self._alive)  # retired ones too: their watchers were just cancelled
        self._fresh.clear()
        self._assigned.clear()
        for w in workers:
            w.kill()
        for w in workers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(w.proc.wait(), 2.0)

    def workers(self) -> list[Worker]:
        """Every live worker process (fresh and assigned)."""
        return list(self._fresh) + [w for ws in self._assigned.values() for w in ws]

    def stats(self) -> dict[str, int]:
        assigned = [w for ws in self._assigned.values() for w in ws]
        return {
            "fresh": len(self._fresh),
            "idle": sum(1 for w in assigned if not w.busy and not w.cells),
            "holding": sum(1 for w in assigned if not w.busy and w.cells),
            "busy": sum(1 for w in assigned if w.busy),
            "spawning": self._spawning,
            "spawned": self.spawned,
            "recycled": self.recycled,
            "retired_by_cells": self.retired_by_cells,
            "runtimes": sum(len(w.cells) for w in assigned),
            "starved": self.starved,
            "slots": self.admission.held,
            "slots_peak": self.admission.peak,
            "lowered": len(self._lowered),
            "replacements_refused": self.replacements_refused,
        }

    @property
    def ready(self) -> bool:
        return not self._closed and (len(self._fresh) > 0 or any(self._assigned.values()))

    # -- hand-out ---------------------------------------------------------------------------------

    async def acquire(self, tenant: str) -> Worker:
        """A running slot (fair across tenants), then a process for a new cell, held with the slot."""
        if not any(self._takes_new_cells(w) for w in self._assigned.get(tenant, ())):
            self._check_replacements(tenant)  # refused before it queues for a slot it could not use
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.acquire_timeout_s
        await self.admission.admit(tenant, deadline - loop.time())
        try:
            worker = await self._worker_for(tenant, deadline)
        except BaseException:
            self.admission.give_back(tenant)
            raise
        self._prioritise(worker)
        return worker

    async def _worker_for(self, tenant: str, deadline: float) -> Worker:
        loop = asyncio.get_running_loop()
        starved = False
        async with self._changed:
            while True:
                worker = self._take(tenant)
                if worker is not None:
                    worker.busy = True
                    self.starved += starved
                    self._top_up()
                    return worker
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise self._no_worker(started=True)
                starved = True
                self._hungry += 1
                try:
                    await asyncio.wait_for(self._changed.wait(), remaining)
                except asyncio.TimeoutError:
                    pass
                finally:
                    self._hungry -= 1

    def _no_worker(self, started: bool = False) -> Overloaded:
        what = "no worker process became ready" if started else "no running slot became free"
        return Overloaded(
            f"{what} within {self.acquire_timeout_s:.1f}s (acquire_timeout_ms); retry shortly "
            "or lower the number of concurrent cells",
            retry_after=1,
        )

    def _takes_new_cells(self, w: Worker) -> bool:
        return (
            not w.dead
            and not w.retiring
            and not w.busy
            and not w.waiters
            and len(w.cells) < self.max_runtimes
            and w.parked_bytes + self.snapshot_bytes <= self.max_parked_bytes
        )

    def _take(self, tenant: str) -> Worker | None:
        # Pack: the process of this tenant that already holds the most runtimes, so parked cells
        # gather in few processes and emptied ones can retire.
        usable = [w for w in self._assigned.get(tenant, ()) if self._takes_new_cells(w)]
        if usable:
            return max(usable, key=lambda w: len(w.cells))
        self._check_replacements(tenant)
        while self._fresh:
            w = self._fresh.popleft()
            if not w.dead:
                w.tenant = tenant
                self._assigned.setdefault(tenant, []).append(w)
                return w
        # At the cap, an idle empty process of another tenant makes room for a fresh one.
        if self._total() >= self.cap:
            for other, ws in self._assigned.items():
                idle = [w for w in ws if other != tenant and not w.busy and not w.cells and not w.waiters]
                if idle:
                    self._retire(idle[0])
                    break
        self._top_up()
        return None

    # -- legs of cells already in a process -------------------------------------------------------

    def attach(self, worker: Worker, cell_id: str, on_lost: Callable[[str], None]) -> None:
        """Record that ``cell_id``'s runtime lives in ``worker``; ``on_lost`` hears if the process dies."""
        worker.cells[cell_id] = on_lost

    async def reserve(self, worker: Worker, cell_id: str, timeout: float, abort: asyncio.Event) -> bool:
        """Hold ``worker`` and a running slot for a resumed cell's leg.

        The process first (at once if free, else after the legs before it: only its own tenant's
        legs wait there), then a slot (fair across tenants).  Answers False when ``timeout``
        passed or ``abort`` was set first; raises WorkerGone when the process died (also while
        waiting).
        """
        if worker.dead:
            raise WorkerGone(await worker.exit_reason())
        deadline = asyncio.get_running_loop().time() + timeout
        if not worker.busy and not worker.waiters:
            worker.busy = True
        else:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            worker.waiters.append(waiter)
            try:
                await _first_of(waiter, abort, timeout)
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._pass_on(worker)  # granted just as the caller went away: pass it on
                raise
            finally:
                if not waiter.done():
                    waiter.cancel()
                    with contextlib.suppress(ValueError):
                        worker.waiters.remove(waiter)
            if waiter.cancelled():
                return False
        if worker.dead:
            self._pass_on(worker)
            raise WorkerGone(await worker.exit_reason())
        if not await self._slot_for(worker, deadline, abort):
            self._pass_on(worker)
            return False
        if worker.dead:
            self._unhold(worker)
            raise WorkerGone(await worker.exit_reason())
        worker.parked_heaps.pop(cell_id, None)
        self._prioritise(worker)
        return True

    async def _slot_for(self, worker: Worker, deadline: float, abort: asyncio.Event) -> bool:
        """A running slot for the leg holding ``worker``, by ``deadline`` and unless ``abort`` is set."""
        tenant = worker.tenant or ""
        if self.admission.take_now(tenant):
            return True
        waiter = self.admission.enqueue(tenant)
        try:
            await _first_of(waiter, abort, deadline - asyncio.get_running_loop().time())
        except BaseException:
            if self.admission.withdraw(tenant, waiter):
                self.admission.give_back(tenant)
            raise
        return self.admission.withdraw(tenant, waiter)

    def park(self, worker: Worker, cell_id: str, heap_bytes: int, *, holding: bool) -> None:
        """The cell's leg ended with its runtime parked in ``worker``: the process serves others."""
        worker.parked_heaps[cell_id] = heap_bytes
        if holding:
            self._unhold(worker)

    def lend(self, worker: Worker) -> None:
        """The holding cell waits for host work: its process and its slot serve other legs meanwhile.

        The cell takes both back with ``reserve`` before it delivers replies (its runtime stays put).
        """
        self._unhold(worker)

    def _unhold(self, worker: Worker) -> None:
        """The leg holding ``worker`` and a running slot lets both go."""
        self.admission.give_back(worker.tenant or "")
        self._pass_on(worker)

    def _pass_on(self, worker: Worker) -> None:
        """``worker`` goes straight to the next resume waiting for it (no new cell slips in between)."""
        worker.busy = False
        while worker.waiters:
            waiter = worker.waiters.popleft()
            if not waiter.done():
                worker.busy = True  # handed straight to the next resume: no new cell slips in between
                waiter.set_result(None)
                return
        self._notify()

    # -- fair admission (admission.py), priorities and replacements ------------------------------

    def running_slots(self, tenant: str) -> int:
        return self.admission.running_slots(tenant)

    def queued(self, tenant: str) -> int:
        return self.admission.queued(tenant)

    def _share_changed(self, tenant: str, over: bool) -> None:
        """``tenant`` went over its share of slots (lower its busy processes) or back within it."""
        for worker in self._assigned.get(tenant, ()):
            if worker.busy or worker in self._lowered:
                self._prioritise(worker)

    def _prioritise(self, worker: Worker) -> None:
        """Give ``worker`` the niceness its tenant's share calls for (a system call only on a change)."""
        lowered = self.admission.over_share(worker.tenant or "")
        if lowered != (worker in self._lowered) and self.priorities.enabled:
            self.priorities.apply(worker.pid, lowered)
            if lowered:
                self._lowered.add(worker)
            else:
                self._lowered.discard(worker)

    def _check_replacements(self, tenant: str) -> None:
        wait = self.replacements.wait_s(tenant)
        if wait > 0:
            self.replacements_refused += 1
            per_minute = self.replacements.per_minute
            raise TooManyRequests(
                f"worker-replacements quota reached: cells of tenant {tenant!r} retired {per_minute} worker "
                f"processes in the last minute (cap tenant_worker_replacements_per_minute={per_minute}; a cell "
                "that times out, is killed or crashes retires its process); retry later, or stop cells that "
                "run into their timeout",
                retry_after=max(1, math.ceil(wait)),
            )

    def set_parked(self, parked: int) -> None:
        """How many cells are parked (reported only: parking never starts a process)."""
        self._parked = parked

    def release(self, worker: Worker, *, recycle: bool, cell_id: str, holding: bool = True, drop: bool = False) -> None:
        """A cell whose runtime lived in ``worker`` ended.

        ``holding``: its leg held the process; ``drop``: its runtime is still in the worker's table
        (the host ended the cell: cancel, expiry, a refused park), so the worker frees it.
        """
        worker.cells.pop(cell_id, None)
        worker.parked_heaps.pop(cell_id, None)
        if drop:
            worker.drop(cell_id)
        worker.cells_run += 1
        if (recycle or worker.dead) and not worker.retiring and not self._closed:
            self.replacements.charge(worker.tenant or "")  # this cell's end costs a process start
            self.retired_by_cells += 1
        if recycle or worker.dead or worker.cells_run >= worker.max_cells or self._closed:
            worker.retiring = True
        if holding:
            self._unhold(worker)  # notifies, or hands the process straight to a waiting resume
        else:
            self._notify()
        self._tidy(worker)
        self._top_up()

    def _tidy(self, worker: Worker) -> None:
        """Stop a worker nobody needs: retiring and empty, dead, or one idle empty process too many."""
        if worker.busy or worker.waiters or worker.cells:
            if worker.dead:
                self._forget(worker)
            return
        if worker.retiring or worker.dead:
            self._retire(worker)
            return
        self._idle_since[worker] = self._idle_clock = self._idle_clock + 1
        idle_empty = [w for ws in self._assigned.values() for w in ws if not w.busy and not w.cells and not w.waiters]
        if len(idle_empty) > self.size + self.burst:  # as many as the slots can keep busy at once
            # The one idle longest goes: a tenant that just used its process is likely to use it again.
            self._retire(min(idle_empty, key=lambda w: self._idle_since.get(w, 0)))

    def _retire(self, worker: Worker) -> None:
        if worker.retired:
            return
        worker.retired = True
        self.recycled += 1
        worker.kill()
        self._forget(worker)

    def _forget(self, worker: Worker) -> None:
        self._lowered.discard(worker)
        self._idle_since.pop(worker, None)
        ws = self._assigned.get(worker.tenant or "")
        if ws is not None and worker in ws:
            ws.remove(worker)
            if not ws:
                del self._assigned[worker.tenant or ""]
        with contextlib.suppress(ValueError):
            self._fresh.remove(worker)

    async def _watch(self, worker: Worker) -> None:
        """Notice a worker process's death, whoever caused it, and tell every cell it held."""
        await worker.proc.wait()
        worker.dead = True
        worker.close_input()
        self._alive.discard(worker)
        self._forget(worker)
        reason = await worker.exit_reason()
        while worker.waiters:
            waiter = worker.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the resume sees the process is dead
        for on_lost in list(worker.cells.values()):
            on_lost(reason)
        self._top_up()
        self._notify()

    def _total(self) -> int:
        return len(self._fresh) + sum(len(ws) for ws in self._assigned.values()) + self._spawning

    def _top_up(self) -> None:
        """Keep ``size`` fresh workers ready (started in the background, never on a request's path)."""
        if self._closed:
            return
        while len(self._fresh) + self._spawning < self.size and self._total() < self.cap:
            self._spawning += 1
            self._background(self._spawn_into_fresh(counted=True))

    def _background(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _notify(self) -> None:
        # A task only when someone listens: releases are per cell, hungry callers are rare.
        if self._hungry:
            self._background(self._wake())

    async def _wake(self) -> None:
        async with self._changed:
            self._changed.notify_all()

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
        self._background(self._watch(worker))
        if not self.priorities.probed:  # the first spare process tells whether priorities can be used
            self.priorities.probe(worker.pid)
            if self.priorities.stranded:  # left at the lowest priority: a fresh one replaces it
                self._retire(worker)
                self._top_up()
        await self._wake()

    async def spawn(self) -> Worker:
        """Start one worker process and wait for its ``ready`` frame."""
        worker = await start_worker(self.options, self.frame_cap, nice=self.nice)
        self._alive.add(worker)
        # Each process draws its own cell budget (80-100% of max_cells): processes started together
        # are then not all replaced at once, a burst of process starts in the middle of serving.
        worker.max_cells = random.randint(max(1, self.max_cells * 4 // 5), self.max_cells)
        self.spawned += 1
        if self.sandbox is None:
            self.sandbox = worker.sandbox
        return worker


async def _first_of(waiter: asyncio.Future[None], abort: asyncio.Event, timeout: float) -> None:
    """Wait until ``waiter`` is done, ``abort`` is set, or ``timeout`` seconds passed."""
    if abort.is_set():
        return
    aborted: asyncio.Future[Any] = asyncio.ensure_future(abort.wait())
    try:
        await asyncio.wait({waiter, aborted}, timeout=max(timeout, 0.001), return_when=asyncio.FIRST_COMPLETED)
    finally:
        aborted.cancel()
