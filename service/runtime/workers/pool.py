"""Supervision of the worker processes that run guests.

A ``Worker`` (``worker_process.py``) is one ``python -m guest_runtime.worker`` child.  It belongs to
one principal (``service.principals``: a tenant, a key's policy, a session, by ``worker_isolation``)
from its first cell on, for good (``assigned_workers.py``), and holds up to ``max_runtimes`` of that
principal's QuickJS runtimes (frames name the runtime: ``rt``), but runs one guest at a time: a leg
holds the process (``busy``) while it sends work and reads the answer; while the leg waits for host
work it *hands back* the process (parking does too), so other legs of the same principal, new or
resumed, run there meanwhile.  A cell whose principal is None gets a fresh process of its own, retired
when the cell ends.
Parking never starts a process.  A leg that needs its process while another leg holds it waits
(FIFO, within its own budget) and never moves to another process: the runtime cannot move.

The pool keeps ``size`` fresh (never used) workers ready, and starts a replacement in the
background whenever one is taken or retired, so no request waits for a process start while the
machine keeps up.  A worker is retired after a timeout, a crash, an abort or ``worker_max_cells``
cells; while it still holds other cells' parked runtimes it only *drains* (takes no new cell) and
is stopped when the last one leaves.  When a worker process dies (crash, SIGKILL at a cell's
deadline + grace), every cell whose runtime it held is told, and each fails on its own with
``runtime_unavailable``.

Every leg that holds a process to run guest code holds a running slot (``admission.py``: ``slots``
of them, by default ``size``, and ``burst`` more; the service gives one per CPU): new
cells take one before their process, resumed legs after theirs (the process is their principal's
own, the slot is what tenants compete for).  Lending the process, parking or ending gives the
slot back.  The processes of a tenant over its share of slots run at the lowest CPU priority
(``cpu_priority.py``), and the processes a tenant's cells retire are rate-limited per tenant
(``worker_replacements.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from bridge.messages import WorkerOptions
from service.errors import Overloaded, WorkerGone

from .admission import Admission, first_of
from .assigned_workers import AssignedWorkers
from .cpu import Lowering, Priorities
from .process import Worker, WorkerState
from .replacements import WorkerReplacements
from .supply import WorkerSupply

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger("codemode.workers")


class WorkerPool:
    """Warm workers, each holding one principal's runtimes; fresh replacements started ahead of need.

    The occupancy verbs, from a cell's side: ``acquire`` (a new cell's slot and process),
    ``attach`` (its runtime lives there), ``reacquire`` (a resumed leg takes both back),
    ``hand_back`` (a leg lets both go while its runtime stays), ``park`` (hand back at a park, with
    the runtime's heap), ``release`` (the cell ended).
    """

    def __init__(
        self,
        *,
        size: int,
        cap: int,
        slots: int = 0,
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
        # Warm processes kept of each kind (``supply.py``): ``size`` for JavaScript cells, one for Python
        # cells when the service runs them (they are fewer; the next is started as one is taken).
        self.spares = {False: size, True: min(1, size) if options.get("python", False) else 0}
        self.burst = burst
        self.cap = max(cap, size)
        self.acquire_timeout_s = acquire_timeout_s
        self.supply = WorkerSupply(options, frame_cap, nice=nice, max_cells=max_cells)
        self.assigned = AssignedWorkers(
            max_runtimes=max_runtimes, max_parked_bytes=max_parked_bytes, snapshot_bytes=snapshot_bytes
        )
        self._vacancies = _Vacancies(self.supply)
        self.admission = Admission(
            slots or size,
            lambda: no_worker(acquire_timeout_s, started=False),
            burst=burst,
            on_share=lambda tenant, _over: self.lowering.reconsider(self.assigned.of(tenant)),
        )
        self.priorities = Priorities(nice)
        self.lowering = Lowering(self.priorities, self.admission.over_share)
        self.replacements = WorkerReplacements(replacements_per_minute)
        self._closed = False
        self.recycled = 0
        self.retired_by_cells = 0  # of them, retired because of a cell (a limit hit, a crash, a kill)
        self.starved = 0  # new cells that found no warm process and waited for one

    # -- life cycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        kinds = [python for python, count in self.spares.items() for _ in range(count)]
        for python in kinds:
            self.supply.starting[python] += 1
        await asyncio.gather(*(self._spawn_into_fresh(python) for python in kinds))

    async def close(self) -> None:
        self._closed = True
        workers = await self.supply.close()  # retired ones too: their watchers were just cancelled
        self.assigned.clear()
        for w in workers:
            w.kill()
        for w in workers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(w.proc.wait(), 2.0)

    def workers(self) -> list[Worker]:
        """Every live worker process (fresh and assigned)."""
        return list(self.supply.fresh) + self.assigned.all()

    def stats(self) -> dict[str, int]:
        return {
            "fresh": len(self.supply.fresh),
            **self.assigned.stats(),
            "spawning": sum(self.supply.starting.values()),
            "spawned": self.supply.started,
            "recycled": self.recycled,
            "retired_by_cells": self.retired_by_cells,
            "starved": self.starved,
            "slots": self.admission.held,
            "slots_size": self.admission.size,
            "slots_waiting": self.admission.waiting,
            "slots_peak": self.admission.peak,
            "lowered": len(self.lowering.lowered),
            "replacements_refused": self.replacements.refused,
        }

    @property
    def ready(self) -> bool:
        return not self._closed and (len(self.supply.fresh) > 0 or self.assigned.count() > 0)

    # -- hand-out ---------------------------------------------------------------------------------

    async def acquire(self, tenant: str, principal: str | None, *, python: bool = False) -> Worker:
        """A running slot (fair across tenants), then a process for a new cell of ``principal`` (one
        that served only that principal, else a fresh one), held with the slot; ``python``: a process
        of the kind that runs Python cells (a principal's two kinds are two bindings)."""
        if python and principal is not None:
            principal = f"{principal}\x00python"
        if self.assigned.pick(principal) is None:
            self.replacements.check(tenant)  # refused before it queues for a slot it could not use
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.acquire_timeout_s
        await self.admission.admit(tenant, deadline - loop.time())
        try:
            worker = await self._worker_for(tenant, principal, deadline, python)
        except BaseException:
            self.admission.give_back(tenant)
            raise
        self.lowering.apply(worker)
        return worker

    async def _worker_for(self, tenant: str, principal: str | None, deadline: float, python: bool) -> Worker:
        def ready(starved: bool) -> Worker | None:
            """The principal's process a new cell packs into, else a fresh one for it, held (None: none is ready)."""
            worker = self.assigned.pick(principal)
            if worker is None:
                self.replacements.check(tenant)
                worker = self.supply.take(python)
                if worker is not None:
                    self.assigned.assign(worker, tenant, principal)
            if worker is not None:
                worker.busy = True
                self.starved += starved
                self._top_up()
            return worker

        # Nobody waits for a vacancy: nobody holds or waits for the lock either, so taking it (no wait)
        # changes nothing for a caller whose process is ready.
        if self._vacancies.quiet and (worker := ready(False)) is not None:
            return worker
        loop = asyncio.get_running_loop()
        starved = False
        async with self._vacancies.changed:
            while True:
                if (worker := ready(starved)) is not None:
                    return worker
                # At the cap, an idle empty process of another principal makes room for a fresh one,
                # unless the processes already starting are enough for this caller and the others waiting
                # (else each wake-up while one starts would retire one more of others' warm processes).
                at_cap = self.assigned.count() + self.supply.count() >= self.cap
                short = self.supply.count(python) <= self._vacancies.hungry
                if at_cap and short and (idle := self.assigned.idle_of_another(principal)) is not None:
                    self._retire(idle)
                self._top_up(python)
                remaining = deadline - loop.time()
                if remaining <= 0:
                    holding = self.assigned.stats()["holding"]
                    raise no_worker(
                        self.acquire_timeout_s, started=True, cap=self.cap if at_cap else 0, holding=holding
                    )
                starved = True
                await self._vacancies.wait(remaining)

    # -- legs of cells already in a process -------------------------------------------------------

    def attach(self, worker: Worker, cell_id: str, on_lost: Callable[[str], None]) -> None:
        """Record that ``cell_id``'s runtime lives in ``worker``; ``on_lost`` hears if the process dies."""
        worker.cells[cell_id] = on_lost

    async def reacquire(self, worker: Worker, cell_id: str, timeout: float, abort: asyncio.Event) -> bool:
        """Hold ``worker`` and a running slot again for a resumed cell's leg.

        The process first (at once if free, else after the legs before it: only its own principal's
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
                await first_of(waiter, abort, timeout)
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
        if not await self.admission.take_by(worker.tenant or "", deadline, abort):
            self._pass_on(worker)
            return False
        if worker.dead:
            self.hand_back(worker)
            raise WorkerGone(await worker.exit_reason())
        worker.parked_heaps.pop(cell_id, None)
        self.lowering.apply(worker)
        return True

    def park(self, worker: Worker, cell_id: str, heap_bytes: int, *, holding: bool) -> None:
        """The cell's leg ended with its runtime parked in ``worker``: the process serves others."""
        worker.parked_heaps[cell_id] = heap_bytes
        if holding:
            self.hand_back(worker)

    def hand_back(self, worker: Worker) -> None:
        """The leg holding ``worker`` and a running slot lets both go; its runtime stays in the process.

        A leg waiting for host work does this, so other legs run there meanwhile; it takes both back
        with ``reacquire`` before it delivers replies.
        """
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
        self._vacancies.notify()

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
        if (recycle or worker.dead) and worker.state is WorkerState.SERVING and not self._closed:
            self.replacements.charge(worker.tenant or "")  # this cell's end costs a process start
            self.retired_by_cells += 1
        single_use = worker.principal is None  # a process of no principal served its one cell: never reused
        worn = recycle or worker.dead or single_use or worker.cells_run >= worker.max_cells or self._closed
        if worn and worker.state is WorkerState.SERVING:
            worker.state = WorkerState.DRAINING
        if holding:
            self.hand_back(worker)  # notifies, or hands the process straight to a waiting resume
        else:
            self._vacancies.notify()
        self._tidy(worker)
        self._top_up()

    # -- upkeep -----------------------------------------------------------------------------------

    def _tidy(self, worker: Worker) -> None:
        """Stop a worker nobody needs: draining and empty, dead, or one idle empty process too many."""
        if worker.busy or worker.waiters or worker.cells:
            if worker.dead:
                self._forget(worker)
            return
        if worker.state is not WorkerState.SERVING or worker.dead:
            self._retire(worker)
            return
        surplus = self.assigned.went_idle(worker, keep=self.size + self.burst)  # the warm count plus the bursts
        if surplus is not None:
            self._retire(surplus)

    def _retire(self, worker: Worker) -> None:
        if worker.state is WorkerState.RETIRED:
            return
        worker.state = WorkerState.RETIRED
        self.recycled += 1
        worker.kill()
        self._forget(worker)

    def _forget(self, worker: Worker) -> None:
        self.lowering.forget(worker)
        self.assigned.forget(worker)
        with contextlib.suppress(ValueError):
            self.supply.fresh.remove(worker)

    async def _watch(self, worker: Worker) -> None:
        """Notice a worker process's death, whoever caused it, and tell every cell it held."""
        await worker.proc.wait()
        worker.dead = True
        worker.close_input()
        self.supply.alive.discard(worker)
        self._forget(worker)
        reason = await worker.exit_reason()
        while worker.waiters:
            waiter = worker.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the resume sees the process is dead
        for on_lost in list(worker.cells.values()):
            on_lost(reason)
        self._top_up()
        self._vacancies.notify()

    def _top_up(self, wanted: bool | None = None) -> None:
        """Keep ``spares`` fresh workers of each kind ready (started in the background, never on a
        request's path); ``wanted``: a kind a caller waits for, started even past its spares."""
        if self._closed:
            return
        for python, spares in self.spares.items():
            spares = max(spares, 1) if python == wanted else spares
            while self.supply.count(python) < spares and self.assigned.count() + self.supply.count() < self.cap:
                self.supply.starting[python] += 1
                self.supply.background(self._spawn_into_fresh(python))

    async def _spawn_into_fresh(self, python: bool) -> None:
        """Start one process of the kind (counted in ``supply.starting`` by the caller) and keep it fresh."""
        try:
            worker = await self.supply.spawn(python)
        except Exception as exc:  # noqa: BLE001 - a failed spawn is logged and retried on demand
            log.error("could not start a worker process: %s", exc)
            await asyncio.sleep(0.5)
            return
        finally:
            self.supply.starting[python] -= 1
        if self._closed:
            worker.kill()
            return
        self.supply.fresh.append(worker)
        self.supply.background(self._watch(worker))
        if not self.priorities.probed:  # the first spare process tells whether priorities can be used
            self.priorities.probe(worker.pid)
            if self.priorities.stranded:  # left at the lowest priority: a fresh one replaces it
                self._retire(worker)
                self._top_up()
        await self._vacancies.wake()


class _Vacancies:
    """New cells waiting for a process to free up or start; woken only when one listens."""

    def __init__(self, supply: WorkerSupply) -> None:
        self.changed = asyncio.Condition()
        self._supply = supply
        self._hungry = 0  # callers blocked in ``wait`` (the only listeners on ``changed``)

    async def wait(self, timeout: float) -> None:
        """Wait (holding ``changed``) until woken or ``timeout`` seconds passed."""
        self._hungry += 1
        try:
            await asyncio.wait_for(self.changed.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            self._hungry -= 1

    @property
    def hungry(self) -> int:
        """Callers blocked in ``wait``."""
        return self._hungry

    @property
    def quiet(self) -> bool:
        """Nobody waits for a vacancy (so nobody holds or queues for ``changed`` across a wait)."""
        return not self._hungry and not self.changed.locked()

    def notify(self) -> None:
        # A task only when someone listens: releases are per cell, hungry callers are rare.
        if self._hungry:
            self._supply.background(self.wake())

    async def wake(self) -> None:
        async with self.changed:
            self.changed.notify_all()


def no_worker(timeout_s: float, *, started: bool, cap: int = 0, holding: int = 0) -> Overloaded:
    """The error of a new cell that got no running slot, or no process, within ``acquire_timeout_ms``.

    ``cap``: the pool was at its process cap (``max_workers``), ``holding`` of its processes holding
    parked cells; under a narrow ``worker_isolation`` parked cells are what fills it.
    """
    what = "no worker process became ready" if started else "no running slot became free"
    if cap:
        return Overloaded(
            f"{what} within {timeout_s:.1f}s (acquire_timeout_ms): all {cap} worker processes (max_workers) "
            f"are in use, {holding} of them holding parked cells, and cells of different principals never "
            "share a process (worker_isolation); retry shortly, end or resume parked cells, raise max_workers, "
            "or choose a wider worker_isolation",
            retry_after=1,
        )
    return Overloaded(
        f"{what} within {timeout_s:.1f}s (acquire_timeout_ms); retry shortly or lower the number of concurrent cells",
        retry_after=1,
    )
