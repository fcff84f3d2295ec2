"""Background cells: after ``exec`` answered ``running``, the cell runs leg after leg on its own.

A background cell's leg ends as soon as its guest blocks on host work (the cell parks and holds no
worker process and no running slot meanwhile); its ``BackgroundRun`` waits for a reply and runs the
next leg, until the cell completes, fails, or needs the API caller (a client tool,
``yield_control``, an approval).  Then it stops, and a ``wait`` (with the caller's answers) starts
it again.  Each leg is bounded by the cell's ``timeout_ms``; each stretch of running on its own by
``cell_ttl_seconds`` from the exec or wait that started it (past it the cell is ended as expired).

A background cell holds one parked-cell slot (``TenantQuotas.hold``) from its exec until its final
envelope is collected (by a wait, a cancel, or an event stream that wrote the envelope event), so it
can always park between its legs and its finished result stays bounded like a parked cell; a result
nobody collects is dropped ``cell_ttl_seconds`` after the cell ended.  Each leg counts as one of the
tenant's running calls (admitted at exec, so a later leg is counted, never refused) and, like any
leg, holds one of the pool's running slots while it runs guest code.

Output of every leg goes to the cell's event log as undelivered: a ``wait`` answers what no event
stream reader was shown and no earlier answer carried.  What waits to be collected (that output, the
final value) is held encoded and charged to the tenant's held-bytes quota; a cell whose output takes
its tenant over the quota is ended (``aborted``, naming ``tenant_held_bytes``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager

from bridge import jsoncodec
from service.errors import InvalidRequest, WaitInProgress
from service.tracing import Tracing

from . import envelopes
from .cell import Cell, guarded
from .envelopes import Envelope
from .events import EventLog, EventLogs
from .finished import FinishedCells
from .quotas import TenantQuotas
from .spec import EndReason

log = logging.getLogger("codemode.cells")

#: Starts one leg with a budget in milliseconds and answers its envelope.
LegStart = Callable[[int], Awaitable[Envelope]]

EXPIRED_MESSAGE = (
    "cell expired: a background cell runs on its own for at most cell_ttl_seconds ({ttl}s) after the "
    "exec or wait that started it; wait on it sooner or split the work into shorter cells"
)
SERVICE_FAILED = "the service failed while running this cell in the background; start it again"
HELD_OVER_QUOTA = (
    "cell aborted: the output it left uncollected takes its tenant over the held-bytes quota "
    "(tenant_held_bytes); read output sooner (wait or the event stream), emit less, or cancel other waiting cells"
)


class BackgroundRun:
    """Drives one background cell; remembers how far its output was delivered."""

    def __init__(
        self,
        cell: Cell,
        events: EventLog,
        first_slot: contextlib.ExitStack,
        *,
        ttl_seconds: int,
        clock: Callable[[], float],
        quotas: TenantQuotas,
        tracing: Tracing,
    ) -> None:
        self.cell = cell
        self.events = events
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._quotas = quotas
        self._tracing = tracing
        # The exec's running-call count, held by the first leg (later legs are counted anew).
        self.first_slot: contextlib.ExitStack | None = first_slot
        self.deadline = 0.0
        self.active = False  # legs run on their own; False: stopped for the caller, or ended
        self.waiter = False  # a wait call is attached (one at a time)
        self.ended_at: float | None = None
        self._stopped = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._value: bytes | None = None  # the final value's JSON, held encoded until collected

    @property
    def tenant(self) -> str:
        return self.cell.spec.tenant

    def start(self, first: LegStart) -> None:
        """Run legs from ``first`` on, until the cell ends or needs the caller."""
        assert not self.active
        self.deadline = self._clock() + self.ttl_seconds
        self.active = True
        self._stopped.clear()
        self.events.status("running")
        self._task = asyncio.ensure_future(self._drive(first))

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def until_stopped(self, timeout_s: float) -> None:
        """Return when the run stops (cell ended or needs the caller) or after ``timeout_s``."""
        if self.active:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), timeout_s)

    # ---- the driver ------------------------------------------------------------------------------

    async def _drive(self, start: LegStart) -> None:
        cell = self.cell
        try:
            while True:
                budget_ms = min(cell.spec.limits.timeout_ms, int((self.deadline - self._clock()) * 1000))
                if budget_ms < 1:
                    await self._expire()
                    return
                envelope = await self._leg(start, budget_ms)
                if envelope is None or cell.done:
                    return  # the registry published the end
                self.events.output(list(envelope.get("output") or []), undelivered=True)
                del envelope  # its output is held encoded in the events now: nothing else while the cell waits
                if self.events.over_quota:
                    await cell.cancel(HELD_OVER_QUOTA)
                    return
                if not await self._until_ready():
                    return
                start = self._next_leg
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a fault here must end the cell, never leave it orphaned
            log.exception("background cell %s: the service failed between its legs", cell.id)
            if not cell.done:
                await cell.cancel(SERVICE_FAILED)
        finally:
            self.active = False
            self._stopped.set()

    async def _leg(self, start: LegStart, budget_ms: int) -> Envelope | None:
        """One leg under the cell's wait lock; None when the cell had already ended."""
        cell = self.cell
        slot: AbstractContextManager[object] | None = self.first_slot
        self.first_slot = None
        with slot or self._quotas.counted(cell.spec.tenant):
            async with cell.wait_lock:
                if cell.done:
                    return None
                return await guarded(cell, start(budget_ms), self._tracing)

    def _next_leg(self, budget_ms: int) -> Awaitable[Envelope]:
        return self.cell.resume(budget_ms, [])

    async def _until_ready(self) -> bool:
        """Wait until a reply is ready (True) or the cell ended, expired or needs the caller (False)."""
        cell = self.cell
        requests = cell.requests
        while not cell.done:
            if requests.needs_caller:
                self.events.status("waiting")
                self.events.pending(requests.reason(), requests.public())
                return False
            if requests.has_ready:
                return True
            remaining = self.deadline - self._clock()
            if remaining <= 0:
                await self._expire()
                return False
            requests.wake.clear()  # set by every reply, a caller request, a cancel and the cell's end
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(requests.wake.wait(), remaining)
        return False

    async def _expire(self) -> None:
        await self.cell.cancel(EXPIRED_MESSAGE.format(ttl=self.ttl_seconds), EndReason.EXPIRED)

    # ---- answers ---------------------------------------------------------------------------------

    def snapshot(self) -> Envelope:
        """Status without output: ``running`` while legs run on their own, else the cell's own."""
        cell = self.cell
        if not self.active or cell.final is not None:
            return cell.snapshot()
        return envelopes.status_snapshot(
            cell.id,
            status="running",
            bridge_dispatch_started=cell.bridge_dispatch_started,
            replay_safe=cell.replay_safe,
            telemetry=cell.telemetry.public(0.0),
        )

    def hold_final(self) -> None:
        """The cell ended: keep its final value encoded (charged) until the result is collected."""
        final = self.cell.final
        if final is None or "value" not in final:
            return
        self._value = jsoncodec.dumps_kept(final["value"])  # it was encoded whole when the cell ended
        self.events.hold(len(self._value))
        kept = final.copy()  # a plain dict: the sealed envelope stays as it is
        del kept["value"]
        kept.pop("output", None)
        self.cell.final = kept

    def answer(self) -> Envelope:
        """The envelope for a wait or a cancel: the cell's state with the output nobody was shown yet."""
        output = self.events.take_undelivered()
        cell = self.cell
        if cell.final is not None:
            final = cell.final.copy()
            if self._value is not None:
                final["value"] = jsoncodec.fragment(self._value)
            final["output"] = output
            return final
        envelope = self.snapshot()
        envelope["output"] = output
        if cell.context.network_content:
            envelope["untrusted_content"] = True  # text entries were wrapped when their leg ended
        return envelope


def running_envelope(run: BackgroundRun) -> Envelope:
    """What ``exec`` answers for a background cell: its id, at once."""
    envelope = run.snapshot()
    envelope["output"] = []
    return envelope


class BackgroundCells:
    """Background runs by cell id, until their result is collected."""

    def __init__(
        self,
        events: EventLogs,
        quotas: TenantQuotas,
        finished: FinishedCells,
        *,
        ttl_seconds: int,
        clock: Callable[[], float],
        tracing: Tracing,
    ) -> None:
        self.events = events
        self.quotas = quotas
        self.finished = finished
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        self.tracing = tracing
        self._runs: dict[str, BackgroundRun] = {}

    def cell_ids(self) -> list[str]:
        """The cells of every run not collected yet (running, or ended with its envelope held)."""
        return list(self._runs)

    def get(self, cell_id: str, tenant: str) -> BackgroundRun | None:
        run = self._runs.get(cell_id)
        return run if run is not None and run.tenant == tenant else None

    def start(self, cell: Cell, slot: contextlib.ExitStack) -> Envelope:
        """Hold a parked slot for the cell, start its legs (the first holds the exec's ``slot``), answer ``running``."""
        events = self.events.live(cell.id)
        assert events is not None
        cell.park_at_once()
        self.quotas.hold(cell.id, cell.spec.tenant)
        run = BackgroundRun(
            cell,
            events,
            slot,
            ttl_seconds=self.ttl_seconds,
            clock=self.clock,
            quotas=self.quotas,
            tracing=self.tracing,
        )
        self._runs[cell.id] = run
        run.start(cell.start)
        return running_envelope(run)

    async def wait(
        self,
        run: BackgroundRun,
        timeout_ms: int,
        tool_results: list[dict[str, object]],
        approvals: list[dict[str, object]],
    ) -> Envelope:
        """Until the cell ends or needs the caller, or ``timeout_ms``; resumes a cell stopped for the caller."""
        if run.waiter:
            raise WaitInProgress("cell is already being waited on by another wait; retry when it returns")
        run.waiter = True
        try:
            cell = run.cell
            if not run.active and cell.final is None:  # stopped for the caller: go on with the answers
                async with cell.wait_lock:
                    if not cell.done and not run.active:
                        check_answers(cell, tool_results, approvals)
                        run.start(lambda budget_ms: cell.resume(budget_ms, tool_results, approvals))
            elif (tool_results or approvals) and cell.final is None:
                field = "tool_results" if tool_results else "approvals"
                raise InvalidRequest(
                    f"{field}: this background cell is running and asks nothing of the "
                    f"caller now; wait without {field}",
                    need_param=field,
                )
            await run.until_stopped(timeout_ms / 1000)
            return self.collect(run) if cell.final is not None else run.answer()
        finally:
            run.waiter = False

    def ended(self, cell: Cell) -> bool:
        """The cell ended; True if it is a background cell (its slot stays held until collected)."""
        run = self._runs.get(cell.id)
        if run is None:
            return False
        run.ended_at = self.clock()
        run.hold_final()
        cell.requests.wake.set()  # a driver waiting for host work sees the end at once
        return True

    def collect(self, run: BackgroundRun) -> Envelope:
        """The ended cell's final envelope, handed over once: its slot and event log are let go."""
        answer = run.answer()
        self._drop(run)
        return answer

    def _drop(self, run: BackgroundRun) -> None:
        if self._runs.pop(run.cell.id, None) is not None:
            if run.first_slot is not None:  # ended before its first leg ran: the exec's running-call count goes back
                run.first_slot.close()
                run.first_slot = None
            self.quotas.unpark(run.cell.id)
            self.events.retire(run.cell.id)

    def sweep(self) -> None:
        """Let go of finished cells whose envelope a stream wrote, or that nobody collected in time."""
        now = self.clock()
        for run in list(self._runs.values()):
            if run.ended_at is None:
                continue
            if run.events.envelope_delivered:
                self._drop(run)
            elif now - run.ended_at > self.ttl_seconds:
                self.finished.mark_expired(run.tenant, run.cell.id)
                self._drop(run)

    def close(self) -> None:
        for run in self._runs.values():
            run.stop()


def check_answers(cell: Cell, tool_results: list[dict[str, object]], approvals: list[dict[str, object]]) -> None:
    """Refuse caller answers that do not apply to what the cell waits for (InvalidRequest naming the field)."""
    problem = cell.requests.check_answers(tool_results, approvals)
    if problem is not None:
        raise InvalidRequest(problem[0], need_param=problem[1])
