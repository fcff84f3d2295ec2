"""How many fresh worker processes each tenant may take: a token bucket per tenant.

Every process a tenant takes from the pool's warm spares is replaced by a process start (about
80 ms of CPU on the reference machine), and a cell that times out or crashes retires its
process.  So a tenant whose cells keep failing that way would have the service spend its CPU on
starting processes.  Each tenant may take ``per_minute`` fresh processes in any minute (the bucket
starts full and refills evenly); past that its new cells are refused (429 naming the setting)
until a token is back, while its own warm processes keep serving it and other tenants are not
touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: How often full buckets are dropped (a full bucket is the same as no entry).
_SWEEP_EVERY_S = 60.0


class WorkerStarts:
    """A per-tenant budget of fresh worker processes."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self._rate = per_minute / 60.0  # tokens per second
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # tenant -> (tokens, when counted)
        self._swept_at = clock()

    def _tokens(self, tenant: str, now: float) -> float:
        entry = self._buckets.get(tenant)
        if entry is None:
            return float(self.per_minute)
        tokens, then = entry
        return min(float(self.per_minute), tokens + (now - then) * self._rate)

    def wait_s(self, tenant: str) -> float:
        """Seconds until ``tenant`` may take a fresh process (0: now)."""
        tokens = self._tokens(tenant, self._clock())
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self._rate

    def take(self, tenant: str) -> None:
        """``tenant`` took a fresh process (the caller checked ``wait_s`` first)."""
        now = self._clock()
        self._buckets[tenant] = (self._tokens(tenant, now) - 1.0, now)
        if now - self._swept_at >= _SWEEP_EVERY_S:
            # Once a minute at most: the table holds the tenants that took a process lately.
            self._swept_at = now
            for name in [t for t in self._buckets if self._tokens(t, now) >= self.per_minute]:
                del self._buckets[name]
