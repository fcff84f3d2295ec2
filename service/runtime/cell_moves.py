"""What a cell does to leave its process parked and to be taken up in another (``parked_cells.py``).

``CellMoves`` is part of ``Cell`` (``cell.py``), kept here so the cell's own module stays about its legs:
at a park, ``_write_out`` asks its worker for a dump and keeps the sealed record; ``take_up`` is the first
leg of a cell made again from its record, whose ``carry_on`` restored what the service held of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from bridge.messages import GuestCaps, GuestConfig, WorkerFrame, dump_frame, restore_frame
from guest_runtime.guest_config import MAX_QUEUED_REQUESTS
from service.errors import WorkerGone

from .ending import Failed
from .state import Phase

if TYPE_CHECKING:
    from bridge.messages import DoneFrame
    from service.runtime.workers.pool import WorkerPool
    from service.runtime.workers.process import Worker

    from .dispatch import CellContext
    from .ending import Outcome
    from .envelopes import Envelope
    from .movable_requests import MovableRequests
    from .parked_cells import ParkedCells
    from .quotas import TenantQuotas
    from .spec import CellLimits, CellSpec, Telemetry
    from .state import CellState

#: How long a park waits for its process (another cell's leg runs there) to write the cell out.
WRITE_OUT_WAIT_S = 2.0
#: Telemetry counters a cell taken up goes on from.
COUNTERS = ("legs", "call_count", "search_count", "describe_count", "retries", "host_requests", "heap_bytes")


class CellMoves:
    """A cell written out when it parks, and taken up again (a part of ``Cell``)."""

    if TYPE_CHECKING:  # what Cell holds and does, used here
        id: str
        spec: CellSpec
        worker: Worker | None
        pool: WorkerPool
        state: CellState
        requests: MovableRequests
        context: CellContext
        telemetry: Telemetry
        born: float
        last_active: float
        written_out: bool
        _born_at: float
        _parked_cells: ParkedCells | None
        _abort_event: asyncio.Event
        _quotas: TenantQuotas
        _clock: Callable[[], float]

        def _stopped(self, msg: WorkerFrame, may_answer: bool) -> bool: ...

        async def _end(self, outcome: Outcome, *, recycle: bool) -> Envelope: ...

        async def _lost(self, reason: str) -> Envelope: ...

        async def _on_done(self, msg: DoneFrame) -> Envelope: ...

    async def _write_out(self) -> None:
        """Write this parked cell out (``parked_cells.py``) when it can move: every request it waits on
        waits for the API caller, and its engine can dump it.  A cell that cannot stays in this process
        only, as every parked cell did before; nothing here fails the cell."""
        keeper, worker, state = self._parked_cells, self.worker, self.state
        carried = self.requests.carried()
        if keeper is None or worker is None or carried is None or not keeper.can_carry(self.context):
            return
        if not state.holding:  # its leg lent the process while it waited: take it back to ask
            try:
                state.holding = await self.pool.reacquire(worker, self.id, WRITE_OUT_WAIT_S, self._abort_event)
            except WorkerGone:
                return  # the process is gone: the cell learns it from the pool
            if not state.holding:
                return
        try:
            await worker.send(dump_frame(self.id))
            msg = await worker.recv(self._stopped)
        except WorkerGone:
            return
        if msg["t"] != "snapshot" or msg["rt"] != self.id:
            worker.kill(f"it answered a dump with a {msg['t']!r} frame")
            return
        dump = msg.get("state", b"")
        if "refused" in msg or not dump or len(dump) > self.spec.limits.max_snapshot_bytes:
            return
        self.written_out = await keeper.keep(self.id, self.spec, self._written_state(carried), dump)

    async def take_up(self, dump: bytes) -> Envelope | None:
        """The first leg of a cell taken up from its record (``parked_cells.py``): its process loads the
        dump and the cell is parked here as it was there (None), or it ends (its final envelope)."""
        assert self.worker is not None
        limits = self.spec.limits
        frame = restore_frame(
            cell_id=self.id,
            memory_limit_bytes=limits.memory_limit_bytes,
            max_output_bytes=limits.max_output_bytes,
            value_capture_bytes=limits.max_output_bytes,
            config=guest_config(self.context, limits),
            language=self.spec.language,
        )
        try:
            await self.worker.send(frame, [dump])
        except WorkerGone as exc:
            return await self._end(Failed(exc.message, "host", "runtime_unavailable"), recycle=True)
        self.state.move(Phase.RUNNING)
        try:
            msg = await self.worker.recv(self._stopped)
        except WorkerGone as exc:
            return await self._lost(exc.message)
        if msg["t"] == "done" and msg["rt"] == self.id:
            return await self._on_done(msg)
        if msg["t"] != "idle" or msg["rt"] != self.id:
            self.worker.kill()
            unexpected = f"worker sent an unexpected {msg['t']!r} frame; the cell was lost, start it again"
            return await self._end(Failed(unexpected, "host", "runtime_unavailable"), recycle=True)
        if not self._quotas.park(self.id, self.spec.tenant):
            return await self._end(
                Failed("too many parked cells on this server to take this one up", "host", "runtime_unavailable"),
                recycle=False,
            )
        self.pool.park(self.worker, self.id, self.telemetry.heap_bytes, holding=self.state.holding)
        self.state.holding = False
        self.state.move(Phase.PARKED)
        self.last_active = self._clock()
        return None

    def age_s(self) -> float:
        """Seconds since the cell's exec, by the clock its lifetime bound reads."""
        return self._clock() - self.born

    def carry_on(self, state: dict[str, object]) -> None:
        """Go on from a written-out cell's ``state`` (``parked_cells.py``): its age, counters and the calls
        it waits on, which wait for the API caller again here."""
        age = state.get("age_s")
        if isinstance(age, int | float) and age > 0:
            self.born -= age
            self._born_at -= age
        counters = state.get("counters")
        if isinstance(counters, dict):
            for name, value in counters.items():
                if isinstance(value, int) and hasattr(self.telemetry, name):
                    setattr(self.telemetry, name, value)
        cpu = state.get("cpu_ms")
        if isinstance(cpu, int | float):
            self.telemetry.guest_cpu_ms = float(cpu)
        self.context.network_content = bool(state.get("network"))
        pending = state.get("pending")
        self.requests.take_up(pending if isinstance(pending, list) else [], bool(state.get("effects_started")))

    def _written_state(self, carried: list[dict[str, object]]) -> dict[str, object]:
        """What the service holds of this cell, for its record: the calls it waits on and its counters."""
        return {
            "pending": carried,
            "effects_started": self.requests.side_effects_may_have_started(),
            "network": self.context.network_content,
            "counters": {name: getattr(self.telemetry, name) for name in COUNTERS},
            "cpu_ms": self.telemetry.guest_cpu_ms,
            "age_s": self.age_s(),
        }


def guest_config(context: CellContext, limits: CellLimits) -> GuestConfig:
    # The guest refuses requests over these caps before they exist; HostRequests enforces them again.
    caps: GuestCaps = {
        "maxRequestBytes": limits.max_request_bytes,
        "maxQueuedRequests": MAX_QUEUED_REQUESTS,
        "maxPendingRequests": limits.max_pending_requests,
        "maxQueuedBytes": max(limits.inbox_bytes, limits.max_request_bytes),
        "maxRequestValues": limits.max_request_values,
    }
    return {**(context.guest_config or {"tools": [], "mcp": []}), **caps}  # tools and servers: the cell-tools handler's
