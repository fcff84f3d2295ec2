"""The clocks of a cell: its legs' two moments, and its time waiting on host work.

**A leg's moments** (``LegClock``).  At ``park_at`` (the leg's deadline less its margin) the leg stops waiting for host work: ``due`` is
set and the leg is woken, so it parks at its next stop.  At ``kill_at`` (the deadline plus
``kill_grace_ms``) a guest still running is killed (a native operation that ignores the engine's
interrupt): ``kill`` is told, and says whether it killed; ``overran`` then tells the leg that its
worker died of that.  Two timers per leg instead of a timeout around every frame read and every
wait for host work, which a leg of many tool calls would set and cancel once per call.

**Waiting on host work** (``WaitClock``).  Telemetry reports it beside ``wall_ms`` and ``guest_cpu_ms`` so "how long did my code run" can be
told apart from "how long did I wait for tools".  A request counts from its dispatch until its
handler ends (settled, dropped, abandoned or cancelled): tool and MCP calls, store and results
requests, and an approval's wait for its answer while the handler awaits it.  Timers
(``setTimeout``) are the guest's own choice to wait, and requests handed to the API caller (client
tools, ``yield_control``) wait for the caller, not for host work: neither counts.  Overlapping
requests count once: ten calls in parallel for one second are one second of waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import TracebackType

__all__ = ["UNTIMED_METHODS", "LegClock", "WaitClock"]


class LegClock:
    """``with LegClock(park_at, kill_at, wake, kill) as clock:`` around one leg (event-loop times)."""

    __slots__ = ("_kill", "_kill_at", "_timers", "_wake", "due", "overran", "park_at")

    def __init__(self, park_at: float, kill_at: float, wake: Callable[[], None], kill: Callable[[], bool]) -> None:
        self.park_at = park_at  # the rule (``step.py``) reads it: due from then, even before the timer ran
        self._kill_at = kill_at
        self._wake = wake
        self._kill = kill
        self._timers: tuple[asyncio.TimerHandle, ...] = ()
        self.due = False
        self.overran = False

    def __enter__(self) -> LegClock:
        loop = asyncio.get_running_loop()
        self._timers = (loop.call_at(self.park_at, self._on_due), loop.call_at(self._kill_at, self._on_kill))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for timer in self._timers:
            timer.cancel()

    def _on_due(self) -> None:
        self.due = True
        self._wake()

    def _on_kill(self) -> None:
        self.overran = self._kill()


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
