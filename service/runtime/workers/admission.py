"""Fair admission to the running slots of one worker pool.

A leg holds a running slot exactly while it holds a worker process to run guest code: from its
admission until it parks, ends, or hands the process back to wait for host work (a tool call, a timer).
A resumed leg (a ``wait``, or a background cell's next leg) takes a slot again before it delivers
replies, so every leg that runs guest code is counted, whoever started it.

There are ``size`` slots (the ``running_slots`` setting) and ``burst`` more.  Below ``size`` a caller is
admitted at once.  Above it, up to ``size + burst``, a caller is admitted at once if another tenant
holds more slots than its own: nobody waits behind a tenant holding more than it, so one tenant's
long cells never make another's wait, and the tenant holding the most grows again only once the
bursts have drained below ``size``.  Otherwise (every slot held, or no tenant holds more) a
caller waits in its tenant's queue, and a freed slot goes to the waiting tenant that holds the
fewest slots (ties: the one served longest ago).

While several tenants hold or wait for slots, each one's *share* is ``ceil(size / tenants)``.  A
tenant holding more than its share is told (``on_share``), and the pool lowers the CPU priority of
its processes until it is back within it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable
from typing import Any


class Admission:
    """Running slots per tenant, and the queues of callers waiting for one."""

    def __init__(
        self,
        size: int,
        refuse: Callable[[], Exception],
        *,
        burst: int = 0,
        on_share: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.size = size
        self.burst = burst
        self._refuse = refuse  # the error a caller gets when its wait runs out
        self._on_share = on_share  # (tenant, over its share?) whenever that changes
        self._held = 0  # slots held in all
        self._slots: dict[str, int] = {}  # tenant -> running slots held
        self._queues: dict[str, deque[asyncio.Future[None]]] = {}  # tenant -> callers waiting for a slot
        self._served: dict[str, int] = {}  # tenant -> when it last got a slot (grant counter)
        self._grants = 0
        self._over: set[str] = set()  # tenants holding more than their share
        self.peak = 0  # the most slots ever held at once

    @property
    def held(self) -> int:
        return self._held

    def running_slots(self, tenant: str) -> int:
        return self._slots.get(tenant, 0)

    @property
    def waiting(self) -> int:
        """Callers of every tenant waiting for a running slot (read at scrape time: the autoscaler's signal)."""
        return sum(len(queue) for queue in self._queues.values())

    def queued(self, tenant: str) -> int:
        """Callers of ``tenant`` waiting for a running slot."""
        return len(self._queues.get(tenant, ()))

    def over_share(self, tenant: str) -> bool:
        return tenant in self._over

    # -- taking and giving back -------------------------------------------------------------------

    def take_now(self, tenant: str) -> bool:
        """Take a slot for ``tenant`` if it may have one without waiting (nobody of it waits first)."""
        if tenant in self._queues or not self._room_for(tenant):
            return False
        self._grant_to(tenant)
        self._reshare()
        return True

    def enqueue(self, tenant: str) -> asyncio.Future[None]:
        """Wait in ``tenant``'s queue; the future is done when a slot was granted to it."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(tenant, deque()).append(waiter)
        self._grant()
        return waiter

    def withdraw(self, tenant: str, waiter: asyncio.Future[None]) -> bool:
        """Stop waiting; return whether the slot was granted meanwhile (the caller then holds it)."""
        if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
            return True
        waiter.cancel()
        queue = self._queues.get(tenant)
        if queue is not None:
            with contextlib.suppress(ValueError):
                queue.remove(waiter)
            if not queue:
                del self._queues[tenant]
                self._reshare()  # one tenant fewer competing: the others' shares grow
        return False

    async def take_by(self, tenant: str, deadline: float, abort: asyncio.Event) -> bool:
        """Take a slot for ``tenant`` by ``deadline`` (loop time) unless ``abort`` is set first."""
        if self.take_now(tenant):
            return True
        waiter = self.enqueue(tenant)
        try:
            await first_of(waiter, abort, deadline - asyncio.get_running_loop().time())
        except BaseException:
            if self.withdraw(tenant, waiter):
                self.give_back(tenant)
            raise
        return self.withdraw(tenant, waiter)

    async def admit(self, tenant: str, timeout: float) -> None:
        """Take a slot for ``tenant``, waiting at most ``timeout`` seconds for one."""
        if self.take_now(tenant):
            return
        waiter = self.enqueue(tenant)
        # A timer that fails the waiter, not asyncio.timeout(): no Timeout object, task lookup and
        # rescheduling per queued caller.  A grant that lands first stands (the timer then does nothing).
        timer = waiter.get_loop().call_later(max(timeout, 0.001), _expire, waiter)
        try:
            await waiter
        except TimeoutError:  # set on the waiter by the timer: nothing else completes it with an error
            self.withdraw(tenant, waiter)  # leaves the queue; nothing was granted
            raise self._refuse() from None
        except BaseException:
            # A grant that lands as the wait is cancelled stands: ``withdraw`` sees the result.
            if self.withdraw(tenant, waiter):
                self.give_back(tenant)
            raise
        finally:
            timer.cancel()

    def give_back(self, tenant: str) -> None:
        held = self._slots.get(tenant, 0) - 1
        self._held -= 1
        if held > 0:
            self._slots[tenant] = held
        else:
            self._slots.pop(tenant, None)
            if tenant not in self._queues:
                self._served.pop(tenant, None)  # keep the table bounded by active tenants
        self._grant()

    # -- the rules --------------------------------------------------------------------------------

    def _room_for(self, tenant: str) -> bool:
        if self._held < self.size:
            return True
        if self._held >= self.size + self.burst:
            return False
        mine = self._slots.get(tenant, 0)
        return any(n > mine for n in self._slots.values())  # a loop over the (few) holding tenants

    def _grant_to(self, tenant: str) -> None:
        self._slots[tenant] = self._slots.get(tenant, 0) + 1
        self._held += 1
        self.peak = max(self.peak, self._held)
        self._grants += 1
        self._served[tenant] = self._grants

    def _grant(self) -> None:
        """Hand free slots to waiting tenants, fewest slots held first, then least recently served.

        If the first in that order has no room, nobody has: it holds the fewest slots, and a
        tenant's room only shrinks with the slots it holds.
        """
        while self._queues:
            queues = self._queues
            # One tenant waiting (the common case under load) needs no ordering.
            tenant = next(iter(queues)) if len(queues) == 1 else min(queues, key=self._grant_order)
            if not self._room_for(tenant):
                break
            queue = self._queues[tenant]
            waiter = queue.popleft()
            if not queue:
                del self._queues[tenant]
            if waiter.done():
                continue  # gave up already
            self._grant_to(tenant)
            waiter.set_result(None)
        self._reshare()

    def _grant_order(self, tenant: str) -> tuple[int, int]:
        return self._slots.get(tenant, 0), self._served.get(tenant, 0)

    def _reshare(self) -> None:
        """Tell the pool which tenants now hold more than their share (a loop over holding tenants)."""
        slots, queues = self._slots, self._queues
        if self._on_share is None or (
            not self._over and len(slots) <= 1 and len(queues) <= 1 and (not slots or queues.keys() <= slots.keys())
        ):
            return  # one tenant alone (holding, waiting or both) is never over its share: the common case costs nothing
        competing = len(self._slots.keys() | self._queues.keys())
        share = -(-self.size // max(competing, 1))
        over = {t for t, n in self._slots.items() if n > share} if competing > 1 else set()
        if over == self._over:
            return
        changed = over ^ self._over
        self._over = over
        for tenant in changed:
            self._on_share(tenant, tenant in over)


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())  # the queued caller's wait for a slot ran out


async def first_of(waiter: asyncio.Future[None], abort: asyncio.Event, timeout: float) -> None:
    """Wait until ``waiter`` is done, ``abort`` is set, or ``timeout`` seconds passed."""
    if abort.is_set():
        return
    aborted: asyncio.Future[Any] = asyncio.ensure_future(abort.wait())  # beside a Future[None] in one set
    try:
        await asyncio.wait({waiter, aborted}, timeout=max(timeout, 0.001), return_when=asyncio.FIRST_COMPLETED)
    finally:
        aborted.cancel()
