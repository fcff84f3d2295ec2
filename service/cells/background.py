"""Background cells: after ``exec`` answered ``running``, the cell runs leg after leg on its own.

A background cell's leg ends as soon as its guest blocks on host work (the cell parks and holds no
worker process and no running slot meanwhile); the driver here waits for a reply and runs the next
leg, until the cell completes, fails, or needs the API caller (a client tool, ``yield_control``,
an approval).  Then it stops, and a ``wait`` (with the caller's answers) starts it again.  Each leg
is bounded by the cell's ``timeout_ms``; each stretch of running on its own by ``cell_ttl_seconds``
from the exec or wait that started it (past it the cell is ended as expired).

Output of every leg goes to the cell's event log as undelivered: a ``wait`` answers what no event
stream reader was shown and no earlier answer carried.  What waits to be collected (that output, the
final value) is held encoded and charged to the tenant's held-bytes quota; a cell whose output takes
its tenant over the quota is ended (``aborted``, naming ``tenant_held_bytes``).  Only the registry changes quotas; it runs
each leg (``LegRunner``, service/cells/background_cells.py) and collects the final envelope.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bridge import jsoncodec

from . import envelopes
from .cell import Cell
from .events import EventLog
from .spec import EndReason

log = logging.getLogger("codemode.cells")

#: Starts one leg with a budget in milliseconds and answers its envelope.
LegStart = Callable[[int], Awaitable[dict[str, Any]]]
#: Runs one leg of the run's cell under its wait lock; None when the cell had already ended.
LegRunner = Callable[["BackgroundRun", LegStart, int], Awaitable["dict[str, Any] | None"]]

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

    def __init__(self, cell: Cell, events: EventLog, ttl_seconds: int, run_leg: LegRunner) -> None:
        self.cell = cell
        self.events = events
        self.ttl_seconds = ttl_seconds
        self.deadline = 0.0
        self.active = False  # legs run on their own; False: stopped for the caller, or ended
        self.waiter = False  # a wait call is attached (one at a time)
        self.ended_at: float | None = None
        self._run_leg = run_leg
        self._stopped = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._value: bytes | None = None  # the final value's JSON, held encoded until collected

    @property
    def tenant(self) -> str:
        return self.cell.spec.tenant

    def start(self, first: LegStart) -> None:
        """Run legs from ``first`` on, until the cell ends or needs the caller."""
        assert not self.active
        self.deadline = time.monotonic() + self.ttl_seconds
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
                budget_ms = min(cell.spec.limits.timeout_ms, int((self.deadline - time.monotonic()) * 1000))
                if budget_ms < 1:
                    await self._expire()
                    return
                envelope = await self._run_leg(self, start, budget_ms)
                if envelope is None or cell.done:
                    return  # the registry published the end
                self.events.output(list(envelope.get("output") or []), undelivered=True)
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

    def _next_leg(self, budget_ms: int) -> Awaitable[dict[str, Any]]:
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
            remaining = self.deadline - time.monotonic()
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

    def snapshot(self) -> dict[str, Any]:
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
        self.cell.final = {key: value for key, value in final.items() if key not in ("value", "output")}

    def answer(self) -> dict[str, Any]:
        """The envelope for a wait or a cancel: the cell's state with the output nobody was shown yet."""
        output = self.events.take_undelivered()
        cell = self.cell
        if cell.final is not None:
            value = {} if self._value is None else {"value": jsoncodec.fragment(self._value)}
            return {**cell.final, **value, "output": output}
        envelope = self.snapshot()
        envelope["output"] = output
        if cell.network_content:
            envelope["untrusted_content"] = True  # text entries were wrapped when their leg ended
        return envelope


def running_envelope(run: BackgroundRun) -> dict[str, Any]:
    """What ``exec`` answers for a background cell: its id, at once."""
    envelope = run.snapshot()
    envelope["output"] = []
    return envelope
