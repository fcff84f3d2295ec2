"""Wall clocks of tool calls: each native tool's limit, resolved at load, and the refusal past it.

A native tool declares ``timeout_s`` (``define_tool(..., timeout_s=...)``); one that declares none
runs on ``tool_timeout_seconds``.  No tool may declare more than ``tool_timeout_cap_seconds``: such a
plugin is refused at load (``ToolConfigError`` naming the plugin, the tool and the cap) rather than
clamped, because a clamp would silently cut a tool its author expected to run longer.

The clock is per call, not per attempt: the guest waits for the call, so the retries of an
idempotent tool share it (a retry starts only while time is left).  It covers the tool's execute()
and nothing else: before-hooks, approvals (a person's wait, bounded by the cell's TTL) and client
tools (the API caller's work) are not on it.  MCP servers declare theirs in their config
(``timeout_ms``, ``tool_timeouts_ms``), checked against the same cap by the settings.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from service.tools.errors import ToolConfigError, ToolTimeoutError
from service.tools.plugin import ToolSpec

__all__ = ["CANCEL_GRACE_S", "CallClock", "ToolClocks", "timed_out"]

#: How long a cancelled call may take to unwind (clean up) before the guest's promise rejects anyway
#: and the call's task is left behind; a handler that swallows cancellation cannot hold the cell.
CANCEL_GRACE_S = 1.0


@dataclass(frozen=True)
class ToolClocks:
    """The default wall clock of a native tool call and the cap no tool may declare more than (seconds)."""

    default_s: float = 600.0
    cap_s: float = 1800.0

    def of(self, spec: ToolSpec) -> float:
        """The wall clock of one call of ``spec``; a ``ToolConfigError`` when it declares more than the cap."""
        if spec.timeout_s is None:
            return min(self.default_s, self.cap_s)
        if spec.timeout_s > self.cap_s:
            owner = f'plugin "{spec.plugin_id}" ' if spec.plugin_id else ""
            raise ToolConfigError(
                f'{owner}tool "{spec.name}": timeout_s = {spec.timeout_s:g} is above the cap of '
                f"{self.cap_s:g} s (tool_timeout_cap_seconds); lower the tool's timeout_s or raise the cap"
            )
        return float(spec.timeout_s)


class CallClock:
    """One call's wall clock around the awaits of its own task (``with CallClock(...): await ...``).

    No timer and no task of its own: the calls on a clock share their event loop's one timer
    (``_ClockWheel``).  At the limit it cancels the task (the tool sees ``CancelledError`` and may
    clean up), and the block then raises ``tool_timeout``, also when the tool turned the
    cancellation into an error of its own or swallowed it and returned.  ``CANCEL_GRACE_S`` after the
    limit a timer of its own tells ``overdue`` (if given) the rejection, for a tool that has not
    unwound by then.  A cancellation from elsewhere (the cell ended) still propagates as a cancellation.
    """

    __slots__ = ("_expired", "_grace", "_limit_s", "_name", "_overdue", "_task", "_wheel", "done")

    def __init__(self, limit_s: float, name: str, overdue: Callable[[ToolTimeoutError], None] | None = None) -> None:
        self._limit_s = limit_s
        self._name = name
        self._overdue = overdue
        self._expired = False
        self.done = False  # its block has exited: the wheel drops it
        self._grace: asyncio.TimerHandle | None = None

    def __enter__(self) -> CallClock:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        assert task is not None, "a CallClock runs inside a task"
        self._task = task
        self._wheel = _wheel_of(loop)
        self._wheel.add(self, loop.time() + self._limit_s)
        return self

    def expire(self) -> None:
        """The limit has passed (the wheel's timer): cancel the call's task."""
        self._expired = True
        self._task.cancel()
        if self._overdue is not None:
            self._grace = asyncio.get_running_loop().call_later(CANCEL_GRACE_S, self._tell_overdue)

    def _tell_overdue(self) -> None:
        assert self._overdue is not None
        self._overdue(timed_out(self._name, self._limit_s))

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.done = True
        if self._grace is not None:
            self._grace.cancel()
        if not self._expired:
            self._wheel.ended()
            return
        # Take back our own cancellation; one requested by someone else (the cell ended) still stands.
        if self._task.uncancel() > 0 and exc_type is not None and issubclass(exc_type, asyncio.CancelledError):
            return
        raise timed_out(self._name, self._limit_s) from None


#: The wheel's timer may fire up to a libuv tick (1 ms) before a deadline; a clock due by then expires.
_EARLY_S = 0.001
#: Ended clocks the wheel's heap may hold beyond twice the running ones before it is rebuilt.
_SLACK = 64


class _ClockWheel:
    """The running ``CallClock``s of one event loop, in a heap by deadline, behind one timer.

    The timer is armed for the earliest deadline and left armed when that call ends: a cell's
    sequential calls then cost a heap push and pop each instead of a timer set and cancelled
    (~3 µs under uvloop).  When it fires, it expires the clocks that are due, drops the ended ones
    and re-arms for the next.  Ended clocks leave the heap at its head at once and from anywhere
    else when they outnumber the running ones by ``_SLACK`` (a rebuild, linear, at most once per that
    many ends): the heap stays within twice the running clocks.  It holds its timer weakly (the
    loop holds it while armed), so nothing here keeps a closed loop alive.
    """

    __slots__ = ("__weakref__", "_armed_at", "_handle", "_heap", "_order", "_running")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, CallClock]] = []
        self._order = itertools.count()  # ties in deadline never compare clocks
        self._running = 0
        self._handle: weakref.ref[asyncio.TimerHandle] | None = None
        self._armed_at = math.inf

    def add(self, clock: CallClock, deadline: float) -> None:
        heapq.heappush(self._heap, (deadline, next(self._order), clock))
        self._running += 1
        if deadline < self._armed_at:
            self._arm(deadline)

    def ended(self) -> None:
        """A clock that did not expire has ended (``CallClock.done`` is set)."""
        self._running -= 1
        heap = self._heap
        while heap and heap[0][2].done:
            heapq.heappop(heap)
        if len(heap) > 2 * self._running + _SLACK:
            self._heap = [item for item in heap if not item[2].done]
            heapq.heapify(self._heap)

    def _arm(self, when: float) -> None:
        armed = self._handle() if self._handle is not None else None
        if armed is not None:
            armed.cancel()
        self._armed_at = when
        self._handle = weakref.ref(asyncio.get_running_loop().call_at(when, self._fire))

    def _fire(self) -> None:
        self._handle, self._armed_at = None, math.inf
        due = asyncio.get_running_loop().time() + _EARLY_S
        heap = self._heap
        try:
            while heap and (heap[0][0] <= due or heap[0][2].done):
                _, _, clock = heapq.heappop(heap)
                if not clock.done:
                    self._running -= 1  # an expired clock ends off the wheel
                    clock.expire()
        finally:  # whatever happened to one clock, the others stay on a timer
            if heap:
                self._arm(heap[0][0])


_WHEELS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _ClockWheel] = weakref.WeakKeyDictionary()


class _LastWheel:
    """The wheel of the loop asked for last (a service runs one loop): found without a weak-key lookup.

    One tuple, read and replaced whole: a loop in another thread never sees half of another's pair."""

    pair: tuple[weakref.ref[asyncio.AbstractEventLoop], _ClockWheel] | None = None


def _wheel_of(loop: asyncio.AbstractEventLoop) -> _ClockWheel:
    last = _LastWheel.pair
    if last is not None and last[0]() is loop:
        return last[1]
    wheel = _WHEELS.get(loop)
    if wheel is None:
        wheel = _WHEELS[loop] = _ClockWheel()
    _LastWheel.pair = (weakref.ref(loop), wheel)
    return wheel


def timed_out(name: str, limit_s: float) -> ToolTimeoutError:
    """The rejection of a call of ``name`` that ran past its ``limit_s`` wall clock."""
    return ToolTimeoutError(
        f"{name} did not finish within its wall clock of {limit_s:g} s and was cancelled; "
        "it may have had side effects. Call it with less work, or report the timeout to the user.",
        tool=name,
        limit_s=limit_s,
    )
