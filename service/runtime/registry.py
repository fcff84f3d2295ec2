"""The cells of one service process: exec, wait, cancel, status, expiry, per-tenant caps.

Cells live in memory in the process that runs them (their guest is a live worker process).
Parked cells are capped (``max_parked_cells``) and expire after ``cell_ttl_seconds`` idle.
Finished cells leave a small, bounded summary (no value, no output, the error's first 2 KiB) so
``GET /v1/cells/{id}`` can still say how they ended; the last ``tenant_finished_kept`` summaries of
each tenant are kept.  Expiry reads the registry's ``clock`` and is checked every ``sweep_seconds``
(tests move the clock instead of waiting).
Per-tenant quotas (``quotas.py``) keep one tenant from taking every parked slot, wait, running call
or held byte; each refusal is a 429 naming the setting that raises it.
A background cell (``background.py``) has an event log (``events.py``) from its exec on; any
other cell gets one when a reader first asks for its events (its output already went out in its
envelopes), so cells nobody watches pay nothing for the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable

from bridge.inbox import HeldAccount
from service.errors import CellNotFound, Forbidden, WaitInProgress
from service.runtime.workers.pool import WorkerPool
from service.runtime.workers.process import Worker
from service.settings import Settings
from service.tracing import NO_TRACING, TraceParent, Tracing

from .background import BackgroundCells, check_answers
from .cell import ABORT_MESSAGE, Cell, guarded
from .dispatch import CellContext, Dispatcher
from .ending import Retainer
from .envelopes import Envelope, finished_summary, input_refusal
from .events import EventLog, EventLogs
from .finished import FinishedCell, FinishedCells
from .json_texts import INLINE, JsonTexts
from .life_bounds import LifeBounds
from .parked_cells import ParkedCells
from .parked_seal import OpenedRecord
from .quotas import QuotaCaps, TenantQuotas
from .source_checks import OFF_LOOP_CHARS, check_source, source_problem
from .spec import CellLimits, CellSpec, CellStatus, EndReason, check_range, check_runs, limits_from

log = logging.getLogger("codemode.cells")
NOT_FOUND = "cell is unavailable or expired"
#: Builds per-cell handler state (tool session, store buffer, guest config) before the cell takes a
#: worker; what it waits for (store reads, MCP connects) comes out of the cell's first leg.
Preparer = Callable[[CellContext], Awaitable[None]]


class CellRegistry:
    """Owns every cell of this process."""

    def __init__(
        self,
        settings: Settings,
        pool: WorkerPool,
        dispatcher: Dispatcher,
        prepare: Preparer | None = None,
        retainer: Retainer | None = None,
        tracing: Tracing = NO_TRACING,
        *,
        clock: Callable[[], float] = time.monotonic,
        sweep_seconds: float = 1.0,
        json_texts: JsonTexts = INLINE,
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.dispatcher = dispatcher
        self.prepare = prepare
        self.retainer = retainer
        self.tracing = tracing
        self.clock = clock  # dates idleness and expiry (seconds); tests move their own
        self.sweep_seconds = sweep_seconds
        self.json_texts = json_texts
        self._cells: dict[str, Cell] = {}
        self._finished = FinishedCells(settings.tenant_finished_kept, settings.max_tenants_tracked)
        self.quotas = TenantQuotas(
            QuotaCaps(
                max_parked_cells=settings.max_parked_cells,
                tenant_max_parked_cells=settings.tenant_max_parked_cells,
                tenant_max_concurrency=settings.tenant_max_concurrency,
                tenant_max_waits=settings.tenant_max_waits,
                tenant_held_bytes=settings.tenant_held_bytes,
            )
        )
        self._sweeper: asyncio.Task[None] | None = None
        self._watched: set[Cell] = set()  # live cells whose end is not recorded yet
        self.counts: dict[str, int] = {"completed": 0, "failed": 0}
        self.sweepers: list[Callable[[], object]] = []  # other periodic expiry (saved results)
        self.events = EventLogs(
            buffer_bytes=settings.events_buffer_bytes,
            retain_seconds=settings.events_retain_seconds,
            retained_bytes=settings.events_retained_bytes,
            tenant_max_streams=settings.tenant_max_event_streams,
        )
        self.background = BackgroundCells(
            self.events,
            self.quotas,
            self._finished,
            ttl_seconds=settings.cell_ttl_seconds,
            clock=clock,
            tracing=tracing,
        )
        self.cell_id_prefix = "cell_"  # replicas put their id in it (service/cluster/identity.py)
        self._bounds = LifeBounds(settings.max_legs_per_cell, settings.max_cell_lifetime_seconds)
        self.refuse_new: Callable[[], None] | None = None  # set by the drain (service/drain.py): raises
        # Where parked Python cells are written out and taken up from (parked_cells.py); None: nowhere.
        self.parked_cells: ParkedCells | None = None

    # ---- life cycle --------------------------------------------------------------------------------

    def start(self) -> None:
        self._sweeper = asyncio.ensure_future(self._sweep())

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for cell in list(self._cells.values()):
            # A parked cell written out stays in the store: this service, started again, or a peer takes it up.
            cell.written_out = False
            with contextlib.suppress(Exception):
                await cell.cancel("the service is shutting down")
        self.background.close()
        # The ends of the cells just cancelled are recorded now; a cell whose cancel failed never ends.
        for cell in [cell for cell in self._watched if cell.final is not None]:
            self._record_end(cell)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_seconds)
            await self.expire_idle()
            self.background.sweep()
            self.events.sweep()
            for sweep in self.sweepers:
                sweep()

    async def expire_idle(self) -> int:
        """End the parked cells idle longer than ``cell_ttl_seconds`` (by the clock); how many."""
        now = self.clock()
        ttl = self.settings.cell_ttl_seconds
        idle = [self._cells[i] for i in self.quotas.parked_ids() if i in self._cells]
        # A background cell is bounded by its own run (BackgroundCells: cell_ttl_seconds since the exec
        # or wait that started it), which names that limit; idle expiry is for cells a caller drives.
        expired = [
            cell
            for cell in idle
            if now - cell.last_active > ttl
            and not cell.wait_lock.locked()
            and self.background.get(cell.id, cell.spec.tenant) is None
        ]
        for cell in expired:
            await self._stop(cell, f"cell expired after {ttl}s idle; start a new cell", EndReason.EXPIRED)
        return len(expired)

    # ---- limits ----------------------------------------------------------------------------------

    def limits(
        self, *, timeout_ms: int | None, memory_limit_bytes: int | None, max_output_bytes: int | None
    ) -> CellLimits:
        if timeout_ms is None and memory_limit_bytes is None and max_output_bytes is None:
            return self._default_limits
        return limits_from(self.settings, timeout_ms, memory_limit_bytes, max_output_bytes)

    @functools.cached_property
    def _default_limits(self) -> CellLimits:
        """The limits of a request that sets none (most requests): built once, shared (immutable)."""
        return limits_from(self.settings, None, None, None)

    # ---- operations ------------------------------------------------------------------------------

    async def exec(self, spec: CellSpec, trace_parent: TraceParent = None) -> Envelope:
        """Start a cell and run its first leg (traced as a child of ``trace_parent``, from its admission)."""
        if self.refuse_new is not None:
            self.refuse_new()  # this replica is draining: no new cell
        started_ns = time.time_ns() if self.tracing.enabled else None
        # The source pre-checks know JavaScript; Monty reports a Python cell's own syntax errors.
        code = spec.code
        if spec.language == "python":
            check_runs(self.settings, spec.language)
            problem = None
        elif len(code) <= OFF_LOOP_CHARS:  # checked here: no coroutine for the common short source
            problem = check_source(code)
        else:
            problem = await source_problem(code)
        if problem is not None:
            return input_refusal(problem)
        account = self.quotas.check_new_cell(spec.tenant)
        slot = contextlib.ExitStack()
        with slot:
            slot.enter_context(self.quotas.running(spec.tenant))
            context = CellContext(self.cell_id_prefix + random_uuid(), spec)
            budget_ms = spec.limits.timeout_ms
            if self.prepare is not None:
                prepared_from = time.monotonic()
                await self.prepare(context)  # before the worker: it may wait on stores and MCP servers
                budget_ms = max(1, budget_ms - int((time.monotonic() - prepared_from) * 1000))
            worker = await self.pool.acquire(spec.tenant, spec.principal, python=spec.language == "python")
            cell = self._new_cell(spec, worker, context, account)
            self._cells[cell.id] = cell
            self._watch(cell)
            async with cell.wait_lock:
                if spec.background:
                    self.events.open(cell.id, spec.tenant, account)
                    return self.background.start(cell, slot.pop_all())
                leg = guarded(cell, cell.start(budget_ms), self.tracing, trace_parent, started_ns)
                return self._published(cell, await leg)

    def _new_cell(self, spec: CellSpec, worker: Worker, context: CellContext, account: HeldAccount) -> Cell:
        # Only a Python cell a caller drives can be written out when it parks (its engine dumps it).
        parked_cells = self.parked_cells if spec.language == "python" and not spec.background else None
        return Cell(
            spec,
            worker,
            self.pool,
            self.dispatcher,
            self.quotas,
            self.retainer,
            self.cell_id_prefix,
            context=context,
            account=account,
            clock=self.clock,
            json_texts=self.json_texts,
            bounds=self._bounds,
            parked_cells=parked_cells,
        )

    def holds(self, cell_id: str) -> bool:
        """Whether this process holds the cell (running or parked here)."""
        return cell_id in self._cells

    async def take_up(self, cell_id: str, spec: CellSpec, opened: OpenedRecord) -> Envelope | None:
        """Hold here the parked cell ``opened`` (its record, claimed by the caller) describes: a worker of its
        principal loads its dump and it waits as it waited where it parked (None), or it ended on the way
        (its final envelope)."""
        account = self.quotas.check_new_cell(spec.tenant)
        with self.quotas.running(spec.tenant):
            context = CellContext(cell_id, spec)
            if self.prepare is not None:
                await self.prepare(context)
            worker = await self.pool.acquire(spec.tenant, spec.principal, python=spec.language == "python")
            cell = self._new_cell(spec, worker, context, account)
            cell.carry_on(opened.state)
            self._cells[cell.id] = cell
            self._watch(cell)
            async with cell.wait_lock:
                try:
                    return await cell.take_up(opened.dump)
                except BaseException:
                    if not cell.done:  # a service fault on the way: the cell ends, its worker is freed
                        await cell.abandon()
                    raise

    async def wait(
        self,
        cell_id: str,
        tenant: str,
        *,
        timeout_ms: int | None,
        tool_results: list[dict[str, object]],
        session_id: str | None = None,
        approvals: list[dict[str, object]] | None = None,
        trace_parent: TraceParent = None,
    ) -> Envelope:
        run = self.background.get(cell_id, tenant)
        cell = run.cell if run is not None else self._get(cell_id, tenant)
        if session_id is not None and cell.spec.session_id != session_id:
            raise Forbidden("this cell belongs to a different session; wait with its own session_id")
        if cell.wait_lock.locked() and run is None:
            raise WaitInProgress("cell is already being resumed by another wait; retry when it returns")
        timeout = cell.spec.limits.timeout_ms if timeout_ms is None else timeout_ms
        check_range("timeout_ms", timeout, 100, self.settings.max_timeout_ms)
        incoming = sum(_result_bytes(result) for result in tool_results)
        if incoming:  # a wait that only collects or approves lets go of bytes: never refused for them
            self.quotas.check_held(tenant, incoming)
        if run is not None:
            with self.quotas.waiting(tenant):
                return await self.background.wait(run, timeout, tool_results, approvals or [])
        with self.quotas.running(tenant), self.quotas.waiting(tenant):
            async with cell.wait_lock:
                if cell.done:
                    raise CellNotFound(self._gone_message(cell.id, tenant))
                check_answers(cell, tool_results, approvals or [])
                self.quotas.unpark(cell.id)
                events = self.events.live(cell.id)
                if events is not None:
                    events.status("running")
                leg = guarded(cell, cell.resume(timeout, tool_results, approvals), self.tracing, trace_parent)
                return self._published(cell, await leg)

    def event_log(self, tenant: str, cell_id: str) -> EventLog:
        """The event log of a live or recently finished cell of ``tenant``; a live cell's starts with its status."""
        events = self.events.find(tenant, cell_id)
        if events is not None:
            return events
        cell = self._cells.get(cell_id)
        if cell is None or cell.spec.tenant != tenant or cell.done:
            raise CellNotFound(NOT_FOUND + " (or its events are no longer kept)")
        events = self.events.open(cell_id, tenant)
        snapshot = cell.snapshot()
        events.status(snapshot["status"])
        if snapshot["status"] == "waiting":
            events.pending(snapshot["reason"], snapshot["pending_tool_calls"])
        return events

    def _published(self, cell: Cell, envelope: Envelope) -> Envelope:
        """Put a leg's stop on the cell's event stream (its end is published by ``_end``, once it ended)."""
        events = self.events.live(cell.id)
        if events is not None and envelope.get("status") == "waiting":
            events.output(list(envelope["output"]))
            events.status("waiting")
            events.pending(envelope["reason"], envelope["pending_tool_calls"])
        return envelope

    async def cancel(self, cell_id: str, tenant: str, trace_parent: TraceParent = None) -> Envelope:
        run = self.background.get(cell_id, tenant)
        cell = run.cell if run is not None else self._get(cell_id, tenant)
        final = await self._stop(cell, ABORT_MESSAGE, EndReason.CANCELLED, trace_parent)
        return self.background.collect(run) if run is not None else final

    async def _stop(self, cell: Cell, message: str, reason: EndReason, trace_parent: TraceParent = None) -> Envelope:
        """Cancel or expire a cell.  One that is parked ends here, outside any leg: traced, this gets a
        ``codemode.cell`` span of its own, so the cell's trace shows how it ended."""
        if self.tracing.enabled and not cell.done and not cell.wait_lock.locked():
            return await guarded(cell, cell.cancel(message, reason), self.tracing, trace_parent)
        return await cell.cancel(message, reason)

    def status(self, cell_id: str, tenant: str) -> Envelope:
        run = self.background.get(cell_id, tenant)
        if run is not None and run.cell.final is None:
            return run.snapshot()
        cell = self._cells.get(cell_id)
        if cell is not None and cell.spec.tenant == tenant:
            return cell.snapshot()
        summary = self._finished.get(tenant, cell_id)
        if summary is not None:
            return summary.snapshot
        raise CellNotFound(NOT_FOUND)

    def stats(self) -> dict[str, int]:
        return {"live": len(self._cells), **self.quotas.stats(), "waiting": self.quotas.parks, **self.counts}

    # ---- lookups and the end of a cell -----------------------------------------------------------

    def _get(self, cell_id: str, tenant: str) -> Cell:
        cell = self._cells.get(cell_id)
        if cell is None or cell.spec.tenant != tenant:
            if self._finished.get(tenant, cell_id) is not None:
                raise CellNotFound(self._gone_message(cell_id, tenant))
            raise CellNotFound(NOT_FOUND)
        return cell

    def _gone_message(self, cell_id: str, tenant: str) -> str:
        summary = self._finished.get(tenant, cell_id)
        if summary is not None and summary.expired:
            return (
                f"{NOT_FOUND}: it expired after {self.settings.cell_ttl_seconds}s idle and its pending work "
                "was discarded; start a new cell"
            )
        return NOT_FOUND + ": it already finished and its result was delivered"

    def _watch(self, cell: Cell) -> None:
        """Record the cell's end once it ends, however it ends (a leg, a cancel, the loss of its process)."""
        self._watched.add(cell)
        # A done callback, not a task per cell: it runs in the loop turn after the cell ended, ahead of
        # any task that waits for the leg or the background run that ended it (their wakeups are queued
        # after it), so a background wait collects an end already recorded.
        cell.ended.add_done_callback(lambda _: self._record_end(cell))

    def _record_end(self, cell: Cell) -> None:
        if cell not in self._watched:
            return  # recorded already (by close)
        self._watched.remove(cell)
        assert cell.final is not None
        self._end(cell, cell.final)

    def _end(self, cell: Cell, final: Envelope) -> None:
        """The cell ended with ``final``: publish it, let go of its slots, keep its summary."""
        background = self.background.get(cell.id, cell.spec.tenant) is not None
        events = self.events.live(cell.id)
        if events is not None:
            events.final(final, undelivered=background)
        if not self.background.ended(cell):  # a background cell keeps its parked slot until collected
            self.quotas.unpark(cell.id)
            self.events.retire(cell.id)
        if log.isEnabledFor(logging.INFO):
            log.info(
                "cell %s tenant=%s title=%r status=%s code=%s legs=%d calls=%d",
                cell.id,
                cell.spec.tenant,
                cell.spec.title,
                final.get("status"),
                final.get("code", "-"),
                cell.telemetry.legs,
                cell.telemetry.call_count,
            )
        self._cells.pop(cell.id, None)
        self.counts["completed" if cell.status is CellStatus.COMPLETED else "failed"] += 1
        self._finished.add(
            cell.spec.tenant,
            cell.id,
            FinishedCell(finished_summary(final), expired=cell.end_reason is EndReason.EXPIRED),
        )


def held_cells(registry: CellRegistry) -> dict[str, bool]:
    """Every cell of ``registry`` a later request could still reach, and whether it runs a leg now (live and
    not parked): what a drain (service/drain.py) waits for, then records.  Background cells whose end was
    not collected yet are held too."""
    parked = set(registry.quotas.parked_ids())
    held = {cell_id: cell_id not in parked for cell_id in registry._cells}
    for cell_id in registry.background.cell_ids():
        held.setdefault(cell_id, False)
    return held


def random_uuid() -> str:
    """``str(uuid.uuid4())`` without the ``UUID`` object (a third of the time): 16 random bytes with the
    version 4 and RFC 4122 variant bits set, as 8-4-4-4-12 lower-case hex."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _result_bytes(result: dict[str, object]) -> int:
    """The bytes a client tool result will hold once settled (its value's JSON, or its error)."""
    value = result.get("value")
    data = getattr(value, "data", None)  # RawJson: the value as the caller sent it
    if isinstance(data, bytes):
        return len(data)
    return len(str(result.get("error") or ""))
