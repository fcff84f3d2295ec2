"""The drain: what this process does between SIGTERM and stopping (``codemode serve``; the server calls
``Drain.run`` and stops listening once it returns).

1. It stops admitting: ``/readyz`` answers 503 (``checks.drain``), so load balancers and Kubernetes take
   it out of rotation, and a new cell is refused with 503 ``replica_draining`` (transient, Retry-After)
   wherever it comes from (the HTTP API or the MCP facade).  Everything else is still served: a wait
   on one of its cells (relayed from a peer or not) resumes it, and its heartbeat goes on, so peers
   still relay to it.
2. It lets running legs finish: until no cell runs a leg, or ``drain_seconds`` have passed.
3. It decides each cell it still holds a fate (today every such cell is ``dropped``: its guest heap is in
   a worker process; a cell that can move would be handed over here, see ``cluster/drained.py``), and
   with a shared store records those fates and leaves the membership.  From then on any replica answers
   a request for such a cell with 404 ``cell_drained``: start it again.  Then it ends those cells (a
   leg still running answers its request with a failed envelope, "the service is shutting down").

The process then stops as before (open requests get ``timeout_graceful_shutdown``, the remaining
cells are cancelled).  A single process without a shared store keeps no record: after it restarts,
its old cells are simply unknown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from .cluster.drained import DROPPED, Fate
from .cluster.replica import Replica
from .errors import ReplicaDraining
from .runtime.registry import CellRegistry, held_cells

log = logging.getLogger("codemode")

#: How often the drain looks whether running legs are done (a leg's end is not an event it can await).
_LOOK_SECONDS = 0.1


class Drain:
    """One process's drain (see the module text); ``state`` is ``serving``, ``draining`` or ``drained``."""

    def __init__(
        self,
        cells: CellRegistry,
        replica: Replica | None,
        *,
        seconds: float,
        keep_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cells = cells
        self.replica = replica
        self.seconds = seconds
        self.keep_seconds = keep_seconds  # how long the fates are kept: a parked cell's idle lifetime
        self.state = "serving"
        self.fates: dict[str, Fate] = {}
        self._clock = clock

    async def run(self) -> None:
        """Drain (once; a second call returns at once)."""
        if self.state != "serving":
            return
        self.state = "draining"
        self.cells.refuse_new = refuse_new_cell
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.seconds
        running = sum(held_cells(self.cells).values())
        log.info("draining: no new cells; %d running legs have %g s to finish", running, self.seconds)
        while running and loop.time() < deadline:
            await asyncio.sleep(_LOOK_SECONDS)
            running = sum(held_cells(self.cells).values())
        if running:
            log.warning(
                "drain_seconds (%g s) passed with %d legs still running; they are stopped", self.seconds, running
            )
        self.fates = self.settle(list(held_cells(self.cells)))
        if self.replica is not None:
            await self.replica.membership.leave(self.fates, self.keep_seconds)
        # Legs still running end now with a failed envelope ("the service is shutting down"), which their
        # open requests answer, rather than with a dropped connection when the server stops.
        await self.cells.close()
        self.state = "drained"
        log.info("drained: %d cells dropped (their later requests answer cell_drained)", len(self.fates))

    def settle(self, cell_ids: list[str]) -> dict[str, Fate]:
        """The fate of each cell still held when the drain ends; the place a movable cell would be handed over."""
        now = self._clock()
        return {cell_id: Fate(DROPPED, now) for cell_id in cell_ids}


def refuse_new_cell() -> None:
    """What a draining replica answers a new cell (or a new /v1/monty connection)."""
    raise ReplicaDraining(
        "this replica is shutting down (draining) and starts no new cells; retry: another replica takes it "
        "(behind a load balancer, the next try goes elsewhere)",
        retry_after=1,
    )
