"""How many worker processes each tenant's cells may retire: a token bucket per tenant.

A cell that times out, is killed or crashes retires its worker process, and every retired process
is replaced by a process start (about 80 ms of CPU on the reference machine).  So a tenant whose
cells keep failing that way would have the service spend its CPU starting processes.  Each tenant
is charged one token per process its cells retire and may be charged ``per_minute`` in any minute
(the bucket starts full and refills evenly).  While its bucket is empty, its new cells that would
need a fresh process are refused (429 naming the setting) until a token is back; its own warm
processes keep serving it, and no other tenant is touched.  Processes the pool retires for its own
reasons (a process's cell budget, idle processes beyond what it keeps) are charged to nobody.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from service.errors import TooManyRequests

#: How often full buckets are dropped (a full bucket is the same as no entry).
_SWEEP_EVERY_S = 60.0


class WorkerReplacements:
    """A per-tenant budget of worker processes retired by the tenant's cells."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._rate = per_minute / 60.0  # tokens per second
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # tenant -> (tokens, when counted)
        self._swept_at = clock()
        self.refused = 0  # new cells refused because their tenant's bucket was empty

    def _tokens(self, tenant: str, now: float) -> float:
        entry = self._buckets.get(tenant)
        if entry is None:
            return float(self.per_minute)
        tokens, then = entry
        return min(float(self.per_minute), tokens + (now - then) * self._rate)

    def wait_s(self, tenant: str) -> float:
        """Seconds until ``tenant`` may have a fresh process again (0: now)."""
        tokens = self._tokens(tenant, self._clock())
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self._rate

    def check(self, tenant: str) -> None:
        """Raise TooManyRequests (naming the setting) while ``tenant`` may not have a fresh process."""
        wait = self.wait_s(tenant)
        if wait > 0:
            self.refused += 1
            raise TooManyRequests(
                f"worker-replacements quota reached: cells of tenant {tenant!r} retired {self.per_minute} worker "
                f"processes in the last minute (cap tenant_worker_replacements_per_minute={self.per_minute}; a "
                "cell that times out, is killed or crashes retires its process); retry later, or stop cells that "
                "run into their timeout",
                retry_after=max(1, math.ceil(wait)),
            )

    def charge(self, tenant: str) -> None:
        """A cell of ``tenant`` retired its process (the bucket may go below zero: it then refills longer)."""
        now = self._clock()
        self._buckets[tenant] = (self._tokens(tenant, now) - 1.0, now)
        if now - self._swept_at >= _SWEEP_EVERY_S:
            # Once a minute at most: the table holds the tenants charged lately.
            self._swept_at = now
            for name in [t for t in self._buckets if self._tokens(t, now) >= self.per_minute]:
                del self._buckets[name]
