"""Time a cell spends waiting on host work: how long at least one host request was in flight.

Telemetry reports it beside ``wall_ms`` and ``guest_cpu_ms`` so "how long did my code run" can be
told apart from "how long did I wait for tools".  A request counts from its dispatch until its
handler ends (settled, dropped, abandoned or cancelled): tool and MCP calls, store and results
requests, and an approval's wait for its answer while the handler awaits it.  Timers
(``setTimeout``) are the guest's own choice to wait, and requests handed to the API caller (client
tools, ``yield_control``) wait for the caller, not for host work: neither counts.  Overlapping
requests count once: ten calls in parallel for one second are one second of waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["UNTIMED_METHODS", "WaitClock"]

#: Host methods whose time in flight is not waiting on host work.
UNTIMED_METHODS = frozenset({"sleep"})


class WaitClock:
    """Milliseconds with at least one timed request open; two clock reads per busy period."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._open: set[int] = set()
        self._since = 0.0
        self._total_s = 0.0
        self._leg_start_ms = 0.0  # total_ms() when the current leg began

    def start(self, request_id: int) -> None:
        """A request began to wait on host work."""
        if not self._open:
            self._since = self._clock()
        self._open.add(request_id)

    def stop(self, request_id: int) -> None:
        """The request stopped waiting (a request never started is ignored)."""
        if request_id not in self._open:
            return
        self._open.discard(request_id)
        if not self._open:
            self._total_s += self._clock() - self._since

    def stop_all(self) -> None:
        """Every request stopped waiting (the cell ended)."""
        if self._open:
            self._open.clear()
            self._total_s += self._clock() - self._since

    def total_ms(self) -> float:
        """The waiting so far, the open busy period included."""
        total = self._total_s + (self._clock() - self._since if self._open else 0.0)
        return total * 1000

    def start_leg(self) -> None:
        """A leg (exec or wait call) begins: its share of the waiting counts from here."""
        self._leg_start_ms = self.total_ms()

    def split(self, leg_wall_ms: float) -> tuple[float, float]:
        """``(this leg's waiting, the cell's waiting so far)`` in ms; the leg's share is within its
        wall time (a snapshot of a parked cell, wall 0, shows none)."""
        total = self.total_ms()
        return min(total - self._leg_start_ms, leg_wall_ms), total
