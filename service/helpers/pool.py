"""The helper processes of one service: spares started ahead, one helper per principal, fair turns.

A helper reads one principal's data (``service.principals.helper_principal``: the tenant, or the
tenant and its key's policy) for its whole life, so a helper an attacker took over through one body
sees only later bodies of the same principal; a job without a principal (``session`` and ``cell``
isolation) gets a helper of its own, stopped after it.  New helpers come from the spares, started
in the background before anyone needs them, so a job rarely waits for a process to start.

Bounds, so one tenant's large bodies cannot make another's wait behind them:

* at most ``max_jobs_per_tenant`` jobs of one tenant are in the pool at once (waiting or running);
  one more is refused at once (429, ``Retry-After``), or, when refusing it would lose work done
  already (a cell's MCP result to check: the call ran), waits until one of them is done;
* at most ``max_live`` helpers serve at once; to seat a new principal, the least recently used idle
  helper is stopped;
* a job waits for its turn in a rotation over tenants: whenever a helper can be had, the next tenant
  in the rotation with a job that can run gets it, then goes to the back. A tenant with a thousand
  bodies waiting therefore gets every other turn at most, not every turn before another tenant's.

A principal's jobs run one at a time, on its one helper.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, OrderedDict, deque
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from service.errors import HelperFailed, TooManyRequests
from service.principals import Isolation, helper_principal

from .helper import Helper, start_helper
from .job import HelperJob
from .protocol import HelperOptions

if TYPE_CHECKING:
    from service.settings import ApiKey

log = logging.getLogger("codemode.helpers")

Result = TypeVar("Result")

#: Helpers kept started and unused, for the next principal (or principal-less job) to take.
SPARES = 1
#: Jobs of one tenant in the pool at once, running or waiting; the next one is refused (429).
MAX_JOBS_PER_TENANT = 16


@dataclass(eq=False)
class _Seat:
    """A place for one helper: the principal it serves (None: one job), its process once it has one."""

    principal: str | None
    helper: Helper | None = None
    busy: bool = True  # a job holds it (a seat is made for the job that takes it)


@dataclass(eq=False)
class _Waiter:
    principal: str | None
    seat: asyncio.Future[_Seat] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class HelperPool:
    """Runs helper jobs for the service, each in a helper process of the caller's principal."""

    def __init__(
        self,
        options: HelperOptions,
        isolation: Isolation,
        *,
        max_live: int,
        spares: int = SPARES,
        max_jobs_per_tenant: int = MAX_JOBS_PER_TENANT,
    ) -> None:
        self.options = options
        self.isolation = isolation
        self.max_live = max_live
        self.spares_wanted = spares
        self.max_jobs_per_tenant = max_jobs_per_tenant
        #: The tests' stand-in for an attacker's code in every helper started from now on (never set in production).
        self.test_payload: str | None = None
        self.spares: deque[Helper] = deque()
        self.starting = 0  # spares being started
        self.started = 0  # helper processes started so far
        self.seats: OrderedDict[str, _Seat] = OrderedDict()  # principal -> its seat, least recently used first
        self.one_off: set[_Seat] = set()  # seats of jobs without a principal
        self.turns: OrderedDict[str, deque[_Waiter]] = OrderedDict()  # tenant -> its waiting jobs, in rotation
        self.jobs: Counter[str] = Counter()  # tenant -> its jobs in the pool
        self._room: dict[str, asyncio.Event] = {}  # tenant -> set when one of its jobs leaves (``run_for(wait=)``)
        self._starts: set[asyncio.Task[None]] = set()  # spares being started (cancelled at close)
        self._exits: set[asyncio.Task[None]] = set()  # stopped helpers being reaped (awaited at close)
        self._closed = False

    @property
    def live(self) -> int:
        """Helpers serving (or seated to serve) a principal or a job; spares not counted."""
        return len(self.seats) + len(self.one_off)

    def start(self) -> None:
        """Start the spares in the background (call with the event loop running)."""
        self._replenish()

    async def run(self, job: HelperJob[Result], key: ApiKey) -> Result:
        """``job`` done by a helper of ``key``'s principal (``helper_principal``), in the tenant's turn."""
        return await self.run_for(job, key.tenant, helper_principal(self.isolation, key))

    async def run_for(
        self, job: HelperJob[Result], tenant: str, principal: str | None, *, wait: bool = False
    ) -> Result:
        """``job`` done by a helper of ``principal`` (None: a helper for this job alone), in ``tenant``'s turn:
        for work whose principal is known already (a cell's: ``CellSpec.principal``).

        ``TooManyRequests`` when the tenant has ``max_jobs_per_tenant`` jobs in the pool already, or, with
        ``wait``, a wait until one of them is done (for work whose refusal would lose what is done already:
        a tool call that ran); ``HelperFailed`` when the helper answered out of shape (it is stopped) or none
        could be started.
        """
        while not self._closed and self.jobs[tenant] >= self.max_jobs_per_tenant:
            if not wait:
                raise TooManyRequests(
                    f"this tenant has {self.max_jobs_per_tenant} large request bodies or client tool schemas "
                    "in the helper processes already; retry when some are done, or send fewer at once",
                    retry_after=1,
                )
            await self._room.setdefault(tenant, asyncio.Event()).wait()
        if self._closed:
            raise HelperFailed("the service is stopping; retry the request in a moment")
        self.jobs[tenant] += 1
        try:
            seat = await self._turn(principal, tenant)
            try:
                if seat.helper is None:
                    seat.helper = await self._fresh()
                return await seat.helper.run(job)
            finally:
                self._leave(seat)
        finally:
            self.jobs[tenant] -= 1
            if not self.jobs[tenant]:
                del self.jobs[tenant]
            if (room := self._room.pop(tenant, None)) is not None:
                room.set()  # the jobs waiting for room look again: one of them takes this place

    # ---- turns -----------------------------------------------------------------------------------

    async def _turn(self, principal: str | None, tenant: str) -> _Seat:
        """Wait for the tenant's turn and a seat for ``principal``."""
        waiter = _Waiter(principal)
        self.turns.setdefault(tenant, deque()).append(waiter)
        self._grant()
        try:
            return await waiter.seat
        except BaseException:  # cancelled (its caller left), or the pool closed
            if waiter.seat.done() and not waiter.seat.cancelled() and waiter.seat.exception() is None:
                self._leave(waiter.seat.result())  # seated in the meantime: give the seat back
            else:
                self._forget(tenant, waiter)
            raise

    def _grant(self) -> None:
        """Seat waiting jobs, each turn going to the first tenant in the rotation whose next job can run."""
        while (turn := self._next_turn()) is not None:
            tenant, waiter, seat = turn
            waiting = self.turns[tenant]
            waiting.remove(waiter)
            if waiting:
                self.turns.move_to_end(tenant)
            else:
                del self.turns[tenant]
            waiter.seat.set_result(seat)

    def _next_turn(self) -> tuple[str, _Waiter, _Seat] | None:
        for tenant, waiting in self.turns.items():
            # A waiter whose caller left (its future cancelled) is still queued until it forgets itself.
            waiter = next((w for w in waiting if not w.seat.done()), None)
            if waiter is not None:
                seat = self._seat_for(waiter.principal)
                if seat is not None:
                    return tenant, waiter, seat
        return None

    def _forget(self, tenant: str, waiter: _Waiter) -> None:
        waiting = self.turns.get(tenant)
        if waiting is not None and waiter in waiting:
            waiting.remove(waiter)
            if not waiting:
                del self.turns[tenant]
        self._grant()  # it may have blocked the tenant's next job

    # ---- seats -----------------------------------------------------------------------------------

    def _seat_for(self, principal: str | None) -> _Seat | None:
        """The seat a job of ``principal`` can run on now (taken: busy), or None."""
        if principal is not None and principal in self.seats:
            seat = self.seats[principal]
            if seat.busy:
                return None  # its helper works for the principal's job before this one
            seat.busy = True
            self.seats.move_to_end(principal)
            return seat
        if self.live >= self.max_live and not self._retire_idle():
            return None
        seat = _Seat(principal)
        if principal is None:
            self.one_off.add(seat)
        else:
            self.seats[principal] = seat
        return seat

    def _retire_idle(self) -> bool:
        """Stop the least recently used idle helper to make room; whether there was one."""
        for seat in self.seats.values():
            if not seat.busy:
                self._retire(seat)
                return True
        return False

    def _leave(self, seat: _Seat) -> None:
        """A job is done with its seat: the helper stays its principal's, unless it was one job's or is dead."""
        seat.busy = False
        if seat.principal is None or seat.helper is None or seat.helper.dead:
            self._retire(seat)
        self._grant()

    def _retire(self, seat: _Seat) -> None:
        if seat.principal is None:
            self.one_off.discard(seat)
        elif self.seats.get(seat.principal) is seat:
            del self.seats[seat.principal]
        if seat.helper is not None:
            self._stop(seat.helper)

    # ---- processes -------------------------------------------------------------------------------

    async def _fresh(self) -> Helper:
        """A helper that never served anyone: a spare, the spare being started (rather than a second
        start beside it, competing for the CPU), or, when none is, one started now."""
        replenished = False
        while True:
            while self.spares:
                helper = self.spares.popleft()
                if not helper.dead and helper.proc.returncode is None:
                    self._replenish()
                    return helper
                self._stop(helper)
            if not self._starts and not replenished:
                self._replenish()
                replenished = True
            if not self._starts:  # no spares wanted, or the spare's start failed: this one says why
                return await self._start()
            await asyncio.wait(set(self._starts), return_when=asyncio.FIRST_COMPLETED)

    async def _start(self) -> Helper:
        helper = await start_helper(self.options, test_payload=self.test_payload)
        self.started += 1
        if self._closed:
            self._stop(helper)
            raise HelperFailed("the service is stopping; retry the request in a moment")
        return helper

    def _replenish(self) -> None:
        while not self._closed and len(self.spares) + self.starting < self.spares_wanted:
            self.starting += 1
            _keep(self._starts, self._start_spare())

    async def _start_spare(self) -> None:
        try:
            helper = await self._start()
        except HelperFailed:
            return  # logged; the next job that needs a helper starts one itself, and says why it could not
        finally:
            self.starting -= 1
        self.spares.append(helper)

    def _stop(self, helper: Helper) -> None:
        helper.stop()
        _keep(self._exits, helper.wait())

    async def close(self) -> None:
        """Refuse waiting jobs, stop every helper and wait for each to exit."""
        self._closed = True
        for room in self._room.values():
            room.set()
        for waiting in self.turns.values():
            for waiter in waiting:
                if not waiter.seat.done():
                    waiter.seat.set_exception(HelperFailed("the service is stopping; retry the request in a moment"))
        self.turns.clear()
        seats = [*self.seats.values(), *self.one_off]
        helpers = [*self.spares, *(seat.helper for seat in seats if seat.helper is not None)]
        self.spares.clear()
        for helper in helpers:
            self._stop(helper)
        for task in self._starts:
            task.cancel()
        # A start ending now stops its helper: one more exit to await.  The awaited tasks are dropped here,
        # not left to their done callbacks: a gather of finished tasks returns without yielding to the loop,
        # so a callback still queued would never run and this would spin.
        while self._starts or self._exits:
            tasks = [*self._starts, *self._exits]
            await asyncio.gather(*tasks, return_exceptions=True)
            self._starts.difference_update(tasks)
            self._exits.difference_update(tasks)


def _keep(tasks: set[asyncio.Task[None]], coro: Coroutine[object, None, None]) -> None:
    """Run ``coro`` as a task held in ``tasks`` until it is done."""
    task = asyncio.ensure_future(coro)
    tasks.add(task)
    task.add_done_callback(tasks.discard)
