"""Fair admission of new cells to the running slots of one worker pool.

A running new cell holds one of ``size`` slots until its first leg ends (a parked cell gives its
slot back).  Callers that find no free slot wait in a queue per tenant, and a freed slot goes to
the waiting tenant that holds the fewest slots (ties: the one served longest ago).  So a tenant
flooding the pool holds at most its share while others wait, and another tenant's cell waits at
most for one running cell to end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable


class Admission:
    """Running slots per tenant, and the queues of callers waiting for one."""

    def __init__(self, size: int, refuse: Callable[[], Exception]) -> None:
        self.size = size
        self._refuse = refuse  # the error a caller gets when its wait runs out
        self._slots: dict[str, int] = {}  # tenant -> running slots held
        self._queues: dict[str, deque[asyncio.Future[None]]] = {}  # tenant -> callers waiting for a slot
        self._served: dict[str, int] = {}  # tenant -> when it last got a slot (grant counter)
        self._grants = 0
        self._cells: dict[str, str] = {}  # cell id -> tenant, for new cells whose first leg holds a slot

    def running_slots(self, tenant: str) -> int:
        return self._slots.get(tenant, 0)

    def queued(self, tenant: str) -> int:
        """Callers of ``tenant`` waiting for a running slot."""
        return len(self._queues.get(tenant, ()))

    async def admit(self, tenant: str, timeout: float) -> None:
        """Take a slot for ``tenant``, waiting at most ``timeout`` seconds for one."""
        if not self._queues and sum(self._slots.values()) < self.size:
            self._grant_to(tenant)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(tenant, deque()).append(waiter)
        self._grant()
        try:
            async with asyncio.timeout(max(timeout, 0.001)):
                # A grant that lands as the wait is cancelled stands: ``_abandon`` sees the result.
                await waiter
        except TimeoutError:
            if not self._abandon(tenant, waiter):
                raise self._refuse() from None
        except BaseException:
            if self._abandon(tenant, waiter):
                self.give_back(tenant)
            raise

    def hold_for(self, cell_id: str, tenant: str) -> None:
        """The slot just taken for ``tenant`` is held by ``cell_id`` until its first leg ends."""
        self._cells[cell_id] = tenant

    def vacate(self, cell_id: str) -> None:
        """``cell_id``'s first leg ended (parked or done): its slot, if it holds one, goes on."""
        tenant = self._cells.pop(cell_id, None)
        if tenant is not None:
            self.give_back(tenant)

    def give_back(self, tenant: str) -> None:
        held = self._slots.get(tenant, 0) - 1
        if held > 0:
            self._slots[tenant] = held
        else:
            self._slots.pop(tenant, None)
            if tenant not in self._queues:
                self._served.pop(tenant, None)  # keep the table bounded by active tenants
        self._grant()

    def _abandon(self, tenant: str, waiter: asyncio.Future[None]) -> bool:
        """Stop waiting; return whether the slot was granted meanwhile (the caller then holds it)."""
        if waiter.done() and not waiter.cancelled():
            return True
        waiter.cancel()
        queue = self._queues.get(tenant)
        if queue is not None:
            with contextlib.suppress(ValueError):
                queue.remove(waiter)
            if not queue:
                del self._queues[tenant]
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
