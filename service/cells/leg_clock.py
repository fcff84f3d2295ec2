"""The two moments of one leg, a timer each, armed for the whole leg.

At ``park_at`` (the leg's deadline less its margin) the leg stops waiting for host work: ``due`` is
set and the leg is woken, so it parks at its next stop.  At ``kill_at`` (the deadline plus
``kill_grace_ms``) a guest still running is killed (a native operation that ignores the engine's
interrupt): ``kill`` is told, and says whether it killed; ``overran`` then tells the leg that its
worker died of that.  Two timers per leg instead of a timeout around every frame read and every
wait for host work, which a leg of many tool calls would set and cancel once per call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType


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
