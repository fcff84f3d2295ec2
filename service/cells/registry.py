"""The cells of one service process: exec, wait, cancel, status, expiry, per-tenant caps.

Cells live in memory in the process that runs them (their guest is a live worker process).
Parked cells are capped (``max_parked_cells``) and expire after ``cell_ttl_seconds`` idle.
Finished cells leave a small, bounded summary (no value, no output, the error's first 2 KiB) so
``GET /v1/cells/{id}`` can still say how they ended; the last ``tenant_finished_kept`` summaries of
each tenant are kept.
Per-tenant quotas (``tenant_max_parked_cells``, ``tenant_max_waits``) keep one tenant from taking
every parked slot or wait; each refusal is a 429 naming the setting that raises it.  Every byte held
for a tenant's live cells is charged to its ``HeldAccount`` (``tenant_held_bytes``): a tenant at its
quota gets 429 for a new exec, and for a wait whose tool results would not fit.
A background cell (``background_cells.py``) has an event log (``events.py``) from its exec on; any
other cell gets one when a reader first asks for its events (its output already went out in its
envelopes), so cells nobody watches pay nothing for the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bridge.inbox import HeldAccount
from service.errors import CellNotFound, Forbidden, InvalidRequest, TooManyRequests, WaitInProgress
from service.settings import Settings
from service.tracing import NO_TRACING, TraceParent, Tracing

from .background_cells import BackgroundCells
from .cell import ABORT_MESSAGE, Cell, Retainer
from .dispatch import CellContext, Dispatcher
from .envelopes import finished_summary, input_refusal
from .events import EventLog, EventLogs
from .finished import FinishedCells
from service.workers.pool import WorkerPool
from .source_checks import source_problem
from .spec import CellLimits, CellSpec, CellStatus, EndReason

log = logging.getLogger("codemode.cells")
NOT_FOUND = "cell is unavailable or expired"
#: Builds per-cell handler state (tool session, store buffer, guest config) before the cell takes a
#: worker; what it waits for (store reads, MCP connects) comes out of the cell's first leg.
Preparer = Callable[[CellContext], Awaitable[None]]


@dataclass
class _TenantGate:
    running: int = 0
    parked: int = 0
    waits: int = 0


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
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.dispatcher = dispatcher
        self.prepare = prepare
        self.retainer = retainer
        self.tracing = tracing
        self._cells: dict[str, Cell] = {}
        self._parked: set[str] = set()
        self._finished = FinishedCells(settings.tenant_finished_kept, settings.max_tenants_tracked)
        self._tenants: dict[str, _TenantGate] = {}
        self._held: dict[str, HeldAccount] = {}  # per tenant (one per API key tenant: a bounded table)
        self._sweeper: asyncio.Task[None] | None = None
        self.counts: dict[str, int] = {"completed": 0, "failed": 0, "waiting": 0}
        self.sweepers: list[Callable[[], Any]] = []  # other periodic expiry (saved results)
        self.events = EventLogs(
            buffer_bytes=settings.events_buffer_bytes,
            retain_seconds=settings.events_retain_seconds,
            retained_bytes=settings.events_retained_bytes,
            tenant_max_streams=settings.tenant_max_event_streams,
        )
        self.background = BackgroundCells(
            settings,
            self.events,
            hold=self._hold,
            release=self._unpark,
            running=self._counted,
            guarded=self._guarded,
            expired=self._expired,
        )
        self.cell_id_prefix = "cell_"  # replicas put their id in it (service/cluster/identity.py)

    # ---- life cycle --------------------------------------------------------------------------------

    def start(self) -> None:
        self._sweeper = asyncio.ensure_future(self._sweep())

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for cell in list(self._cells.values()):
            with contextlib.suppress(Exception):
                await cell.cancel("the service is shutting down")
        self.background.close()

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            await self.expire_idle()
            self.background.sweep()
            self.events.sweep()
            for sweep in self.sweepers:
                sweep()

    async def expire_idle(self) -> int:
        now = time.monotonic()
        ttl = self.settings.cell_ttl_seconds
        expired = [
            self._cells[i]
            for i in list(self._parked)
            if i in self._cells and now - self._cells[i].last_active > ttl and not self._cells[i].wait_lock.locked()
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
        return self._limits(timeout_ms, memory_limit_bytes, max_output_bytes)

    @functools.cached_property
    def _default_limits(self) -> CellLimits:
        """The limits of a request that sets none (most requests): built once, shared (immutable)."""
        return self._limits(None, None, None)

    def _limits(
        self, timeout_ms: int | None, memory_limit_bytes: int | None, max_output_bytes: int | None
    ) -> CellLimits:
        s = self.settings
        timeout = s.timeout_ms if timeout_ms is None else timeout_ms
        memory = s.memory_limit_bytes if memory_limit_bytes is None else memory_limit_bytes
        output = s.max_output_bytes if max_output_bytes is None else max_output_bytes
        _check_range("timeout_ms", timeout, 100, s.max_timeout_ms)
        _check_range("memory_limit_bytes", memory, 1024 * 1024, s.max_memory_limit_bytes)
        _check_range("max_output_bytes", output, 1024, 10 * 1024 * 1024)
        return CellLimits(
            timeout_ms=timeout,
            memory_limit_bytes=memory,
            max_output_bytes=output,
            max_snapshot_bytes=s.max_snapshot_bytes,
            kill_grace_ms=s.kill_grace_ms,
            max_pending_requests=s.max_pending_requests,
            max_request_bytes=s.max_request_bytes,
            max_request_values=s.max_request_values,
        )

    def _gate(self, tenant: str) -> _TenantGate:
        return self._tenants.setdefault(tenant, _TenantGate())

    def _forget_idle_gate(self, tenant: str) -> None:
        gate = self._tenants.get(tenant)
        if gate is not None and not (gate.running or gate.parked or gate.waits):
            del self._tenants[tenant]  # bounded by active tenants, not by every tenant ever seen

    @contextlib.contextmanager
    def _wait_slot(self, tenant: str):  # type: ignore[no-untyped-def]
        gate = self._gate(tenant)
        if gate.waits >= self.settings.tenant_max_waits:
            raise TooManyRequests(
                f"concurrent-waits quota reached: tenant {tenant!r} has {gate.waits} waits in progress (cap "
                f"tenant_max_waits={self.settings.tenant_max_waits}); retry after one returns",
                retry_after=1,
            )
        gate.waits += 1
        try:
            yield
        finally:
            gate.waits -= 1
            self._forget_idle_gate(tenant)

    @contextlib.contextmanager
    def _tenant_slot(self, tenant: str):  # type: ignore[no-untyped-def]
        gate = self._gate(tenant)
        if gate.running >= self.settings.tenant_max_concurrency:
            raise TooManyRequests(
                f"running-cells quota reached: tenant {tenant!r} already runs {gate.running} cells (cap "
                f"tenant_max_concurrency={self.settings.tenant_max_concurrency}); retry after one finishes",
                retry_after=1,
            )
        with self._counted(tenant):
            yield

    # ---- operations ------------------------------------------------------------------------------

    async def exec(self, spec: CellSpec, trace_parent: TraceParent = None) -> dict[str, Any]:
        """Start a cell and run its first leg (traced as a child of ``trace_parent``, from its admission)."""
        started_ns = time.time_ns() if self.tracing.enabled else None
        problem = await source_problem(spec.code)
        if problem is not None:
            return input_refusal(problem)
        if len(self._parked) >= self.settings.max_parked_cells:
            raise TooManyRequests(
                f"too many parked cells ({len(self._parked)}, cap max_parked_cells="
                f"{self.settings.max_parked_cells}): finish or cancel waiting cells first",
                retry_after=1,
            )
        parked = self._gate(spec.tenant).parked
        if parked >= self.settings.tenant_max_parked_cells:
            raise TooManyRequests(
                f"parked-cells quota reached: tenant {spec.tenant!r} has {parked} parked cells (cap "
                f"tenant_max_parked_cells={self.settings.tenant_max_parked_cells}); wait on, cancel or let "
                "them finish first",
                retry_after=1,
            )
        account = self._check_held(spec.tenant)
        slot = contextlib.ExitStack()
        with slot:
            slot.enter_context(self._tenant_slot(spec.tenant))
            context = CellContext(self.cell_id_prefix + str(uuid.uuid4()), spec)
            budget_ms = spec.limits.timeout_ms
            if self.prepare is not None:
                prepared_from = time.monotonic()
                await self.prepare(context)  # before the worker: it may wait on stores and MCP servers
                budget_ms = max(1, budget_ms - int((time.monotonic() - prepared_from) * 1000))
            worker = await self.pool.acquire(spec.tenant)
            cell = Cell(
                spec,
                worker,
                self.pool,
                self.dispatcher,
                self._park,
                self._end,
                self.retainer,
                self.cell_id_prefix,
                context=context,
                account=account,
            )
            self._cells[cell.id] = cell
            async with cell.wait_lock:
                if spec.background:
                    self.events.open(cell.id, spec.tenant, account)
                    return self.background.start(cell, slot.pop_all())
                leg = cell.start(budget_ms)
                return self._published(cell, await self._guarded(cell, leg, trace_parent, started_ns))

    async def wait(
        self,
        cell_id: str,
        tenant: str,
        *,
        timeout_ms: int | None,
        tool_results: list[dict[str, Any]],
        session_id: str | None = None,
        approvals: list[dict[str, Any]] | None = None,
        trace_parent: TraceParent = None,
    ) -> dict[str, Any]:
        run = self.background.get(cell_id, tenant)
        cell = run.cell if run is not None else self._get(cell_id, tenant)
        if session_id is not None and cell.spec.session_id != session_id:
            raise Forbidden("this cell belongs to a different session; wait with its own session_id")
        if cell.wait_lock.locked() and run is None:
            raise WaitInProgress("cell is already being resumed by another wait; retry when it returns")
        timeout = cell.spec.limits.timeout_ms if timeout_ms is None else timeout_ms
        _check_range("timeout_ms", timeout, 100, self.settings.max_timeout_ms)
        incoming = sum(_result_bytes(result) for result in tool_results)
        if incoming:  # a wait that only collects or approves lets go of bytes: never refused for them
            self._check_held(tenant, incoming)
        if run is not None:
            with self._wait_slot(tenant):
                return await self.background.wait(run, timeout, tool_results, approvals or [])
        with self._tenant_slot(tenant), self._wait_slot(tenant):
            async with cell.wait_lock:
                if cell.done:
                    raise CellNotFound(self._gone_message(cell.id, tenant))
                problem = cell.check_tool_results(tool_results)
                if problem is not None:
                    raise InvalidRequest(problem, need_param="tool_results")
                problem = cell.requests.check_approvals(approvals or [])
                if problem is not None:
                    raise InvalidRequest(problem, need_param="approvals")
                self._unpark(cell)
                events = self.events.live(cell.id)
                if events is not None:
                    events.status("running")
                leg = cell.resume(timeout, tool_results, approvals)
                return self._published(cell, await self._guarded(cell, leg, trace_parent))

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

    def _published(self, cell: Cell, envelope: dict[str, Any]) -> dict[str, Any]:
        """Put a leg's stop on the cell's event stream (its end is published by ``_end``)."""
        events = self.events.live(cell.id)
        if events is not None and envelope.get("status") == "waiting":
            events.output(list(envelope["output"]))
            events.status("waiting")
            events.pending(envelope["reason"], envelope["pending_tool_calls"])
        return envelope

    def _hold(self, cell: Cell) -> None:
        """A background cell holds a parked slot from its exec on (admitted by exec's checks)."""
        self._parked.add(cell.id)
        self._gate(cell.spec.tenant).parked += 1

    @contextlib.contextmanager
    def _counted(self, tenant: str):  # type: ignore[no-untyped-def]
        """One of the tenant's running calls, counted without a cap check (``_tenant_slot`` checks first;
        a background leg was admitted at its exec)."""
        gate = self._gate(tenant)
        gate.running += 1
        try:
            yield
        finally:
            gate.running -= 1
            self._forget_idle_gate(tenant)

    def _expired(self, tenant: str, cell_id: str) -> None:
        summary = self._finished.get(tenant, cell_id)
        if summary is not None:
            summary["expired"] = True

    async def _guarded(
        self, cell: Cell, leg: Any, trace_parent: TraceParent = None, started_ns: int | None = None
    ) -> dict[str, Any]:
        """Run a leg; if the service itself fails mid-leg, the cell ends instead of leaking its worker."""
        try:
            if self.tracing.enabled:
                leg = self.tracing.traced_leg(cell, leg, trace_parent, started_ns)
            return await leg  # type: ignore[no-any-return]
        except BaseException:
            if not cell.done:
                await cell.abandon()
            raise

    async def cancel(self, cell_id: str, tenant: str, trace_parent: TraceParent = None) -> dict[str, Any]:
        run = self.background.get(cell_id, tenant)
        cell = run.cell if run is not None else self._get(cell_id, tenant)
        final = await self._stop(cell, ABORT_MESSAGE, EndReason.CANCELLED, trace_parent)
        return self.background.collect(run) if run is not None else final

    async def _stop(
        self, cell: Cell, message: str, reason: EndReason, trace_parent: TraceParent = None
    ) -> dict[str, Any]:
        """Cancel or expire a cell.  One that is parked ends here, outside any leg: traced, this gets a
        ``codemode.cell`` span of its own, so the cell's trace shows how it ended."""
        if self.tracing.enabled and not cell.done and not cell.wait_lock.locked():
            return await self._guarded(cell, cell.cancel(message, reason), trace_parent)
        return await cell.cancel(message, reason)

    def status(self, cell_id: str, tenant: str) -> dict[str, Any]:
        run = self.background.get(cell_id, tenant)
        if run is not None and run.cell.final is None:
            return run.snapshot()
        cell = self._cells.get(cell_id)
        if cell is not None and cell.spec.tenant == tenant:
            return cell.snapshot()
        summary = self._finished.get(tenant, cell_id)
        if summary is not None:
            return summary["snapshot"]
        raise CellNotFound(NOT_FOUND)

    def stats(self) -> dict[str, int]:
        held = sum(account.used for account in self._held.values())
        return {"live": len(self._cells), "parked": len(self._parked), "held_bytes": held, **self.counts}

    def held_account(self, tenant: str) -> HeldAccount:
        """What the service holds for ``tenant``'s live cells, against ``tenant_held_bytes``."""
        account = self._held.get(tenant)
        if account is None:
            account = self._held[tenant] = HeldAccount(tenant, self.settings.tenant_held_bytes)
        return account

    def _check_held(self, tenant: str, incoming: int = 0) -> HeldAccount:
        """429 when ``tenant`` holds its whole quota, or ``incoming`` more bytes would not fit it."""
        account = self.held_account(tenant)
        if account.used + max(incoming, 1) > account.capacity:  # a new cell needs room for at least a byte
            raise TooManyRequests(
                f"held-bytes quota reached: the service holds {account.used} bytes for tenant {tenant!r}'s "
                f"live cells (cap tenant_held_bytes={account.capacity}: pending arguments, unconsumed replies, "
                f"uncollected output and results){f', and this request brings {incoming} more' if incoming else ''}; "
                "collect, answer or cancel waiting cells first",
                retry_after=1,
            )
        return account

    def tenant_load(self, tenant: str) -> dict[str, int]:
        """What ``tenant`` holds now against its quotas: running calls, parked cells, waits."""
        gate = self._tenants.get(tenant) or _TenantGate()
        return {"running": gate.running, "parked": gate.parked, "waits": gate.waits}

    # ---- callbacks from cells ------------------------------------------------------------------

    def _get(self, cell_id: str, tenant: str) -> Cell:
        cell = self._cells.get(cell_id)
        if cell is None or cell.spec.tenant != tenant:
            if self._finished.get(tenant, cell_id) is not None:
                raise CellNotFound(self._gone_message(cell_id, tenant))
            raise CellNotFound(NOT_FOUND)
        return cell

    def _gone_message(self, cell_id: str, tenant: str) -> str:
        summary = self._finished.get(tenant, cell_id) or {}
        if summary.get("expired"):
            return (
                f"{NOT_FOUND}: it expired after {self.settings.cell_ttl_seconds}s idle and its pending work "
                "was discarded; start a new cell"
            )
        return NOT_FOUND + ": it already finished and its result was delivered"

    def _park(self, cell: Cell) -> bool:
        gate = self._gate(cell.spec.tenant)
        if cell.id not in self._parked and (
            len(self._parked) >= self.settings.max_parked_cells or gate.parked >= self.settings.tenant_max_parked_cells
        ):
            return False
        if cell.id not in self._parked:
            gate.parked += 1
        self._parked.add(cell.id)
        self.counts["waiting"] += 1
        return True

    def _unpark(self, cell: Cell) -> None:
        if cell.id in self._parked:
            self._parked.discard(cell.id)
            self._gate(cell.spec.tenant).parked -= 1
            self._forget_idle_gate(cell.spec.tenant)

    def _end(self, cell: Cell) -> None:
        background = self.background.get(cell.id, cell.spec.tenant) is not None
        events = self.events.live(cell.id)
        if events is not None:
            events.final(cell.final or {}, undelivered=background)
        if not self.background.ended(cell):  # a background cell keeps its parked slot until collected
            self._unpark(cell)
            self.events.retire(cell.id)
        if log.isEnabledFor(logging.INFO):
            final = cell.final or {}
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
            {"snapshot": finished_summary(cell.final or {}), "expired": cell.end_reason is EndReason.EXPIRED},
        )


def _result_bytes(result: dict[str, Any]) -> int:
    """The bytes a client tool result will hold once settled (its value's JSON, or its error)."""
    value = result.get("value")
    data = getattr(value, "data", None)  # RawJson: the value as the caller sent it
    if isinstance(data, bytes):
        return len(data)
    return len(str(result.get("error") or ""))


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not (low <= value <= high):
        raise InvalidRequest(f"{name} must be between {low} and {high} (got {value})", need_param=name)
