"""The background cells of one registry: start, wait, cancel, status, and letting go of results.

A background cell holds one parked-cell slot from its exec until its final envelope is collected
(by a wait, a cancel, or an event stream that wrote the envelope event), so it can always park
between its legs and its finished result stays bounded like a parked cell; a result nobody collects
is dropped ``cell_ttl_seconds`` after the cell ended.  Each leg counts as one of the tenant's running
calls (admitted at exec, so a later leg is counted, never refused) and, like any leg, holds one of
the pool's running slots while it runs guest code (it queues for one fairly, ``admission.py``).  The
registry lends its quota bookkeeping through the callables given here; this module changes no quota
of its own.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any

from service.errors import InvalidRequest, WaitInProgress
from service.settings import Settings

from .background import BackgroundRun, LegStart, running_envelope
from .cell import Cell
from .events import EventLogs

Guard = Callable[[Cell, Awaitable[dict[str, Any]]], Awaitable[dict[str, Any]]]


class BackgroundCells:
    """Background runs by cell id, until their result is collected."""

    def __init__(
        self,
        settings: Settings,
        events: EventLogs,
        *,
        hold: Callable[[Cell], None],
        release: Callable[[Cell], None],
        running: Callable[[str], AbstractContextManager[Any]],
        guarded: Guard,
        expired: Callable[[str, str], None],
    ) -> None:
        self.settings = settings
        self.events = events
        self._hold = hold
        self._release = release
        self._running = running
        self._guarded = guarded
        self._expired = expired
        self._runs: dict[str, BackgroundRun] = {}
        self._first_slots: dict[str, contextlib.ExitStack] = {}

    def get(self, cell_id: str, tenant: str) -> BackgroundRun | None:
        run = self._runs.get(cell_id)
        return run if run is not None and run.tenant == tenant else None

    def start(self, cell: Cell, slot: contextlib.ExitStack) -> dict[str, Any]:
        """Hold a parked slot for the cell, start its legs (the first holds the exec's ``slot``), answer ``running``."""
        events = self.events.live(cell.id)
        assert events is not None
        cell.park_when_blocked = True
        self._hold(cell)
        run = BackgroundRun(cell, events, self.settings.cell_ttl_seconds, self._leg)
        self._runs[cell.id] = run
        self._first_slots[cell.id] = slot
        run.start(cell.start)
        return running_envelope(run)

    async def _leg(self, run: BackgroundRun, start: LegStart, budget_ms: int) -> dict[str, Any] | None:
        cell = run.cell
        slot = self._first_slots.pop(cell.id, None) or self._running(cell.spec.tenant)
        with slot:
            async with cell.wait_lock:
                if cell.done:
                    return None
                return await self._guarded(cell, start(budget_ms))

    async def wait(
        self, run: BackgroundRun, timeout_ms: int, tool_results: list[dict[str, Any]], approvals: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Until the cell ends or needs the caller, or ``timeout_ms``; resumes a cell stopped for the caller."""
        if run.waiter:
            raise WaitInProgress("cell is already being waited on by another wait; retry when it returns")
        run.waiter = True
        try:
            cell = run.cell
            if not run.active and cell.final is None:  # stopped for the caller: go on with the answers
                async with cell.wait_lock:
                    if not cell.done and not run.active:
                        problem = cell.check_tool_results(tool_results)
                        if problem is not None:
                            raise InvalidRequest(problem, need_param="tool_results")
                        problem = cell.requests.check_approvals(approvals)
                        if problem is not None:
                            raise InvalidRequest(problem, need_param="approvals")
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
        run.ended_at = time.monotonic()
        run.hold_final()
        cell.requests.wake.set()  # a driver waiting for host work sees the end at once
        return True

    def collect(self, run: BackgroundRun) -> dict[str, Any]:
        """The ended cell's final envelope, handed over once: its slot and event log are let go."""
        answer = run.answer()
        self._drop(run)
        return answer

    def _drop(self, run: BackgroundRun) -> None:
        if self._runs.pop(run.cell.id, None) is not None:
            slot = self._first_slots.pop(run.cell.id, None)
            if slot is not None:  # ended before its first leg ran: the exec's running-call count goes back
                slot.close()
            self._release(run.cell)
            self.events.retire(run.cell.id)

    def sweep(self) -> None:
        """Let go of finished cells whose envelope a stream wrote, or that nobody collected in time."""
        now = time.monotonic()
        for run in list(self._runs.values()):
            if run.ended_at is None:
                continue
            if run.events.envelope_delivered:
                self._drop(run)
            elif now - run.ended_at > self.settings.cell_ttl_seconds:
                self._expired(run.tenant, run.cell.id)
                self._drop(run)

    def close(self) -> None:
        for run in self._runs.values():
            run.stop()
