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

    One timer per call, no task: at the limit it cancels the task (the tool sees ``CancelledError``
    and may clean up), and the block then raises ``tool_timeout``, also when the tool turned the
    cancellation into an error of its own or swallowed it and returned.  ``CANCEL_GRACE_S`` after the
    limit the same timer tells ``overdue`` (if given) the rejection, for a tool that has not unwound
    by then.  A cancellation from elsewhere (the cell ended) still propagates as a cancellation.
    """

    __slots__ = ("_expired", "_handle", "_limit_s", "_loop", "_name", "_overdue", "_task")

    def __init__(self, limit_s: float, name: str, overdue: Callable[[ToolTimeoutError], None] | None = None) -> None:
        self._limit_s = limit_s
        self._name = name
        self._overdue = overdue
        self._expired = False

    def __enter__(self) -> CallClock:
        self._loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None, "a CallClock runs inside a task"
        self._task = task
        self._handle = self._loop.call_later(self._limit_s, self._expire)
        return self

    def _expire(self) -> None:
        self._expired = True
        self._task.cancel()
        if self._overdue is not None:
            self._handle = self._loop.call_later(CANCEL_GRACE_S, self._tell_overdue)

    def _tell_overdue(self) -> None:
        assert self._overdue is not None
        self._overdue(timed_out(self._name, self._limit_s))

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._handle.cancel()
        if not self._expired:
            return
        # Take back our own cancellation; one requested by someone else (the cell ended) still stands.
        if self._task.uncancel() > 0 and exc_type is not None and issubclass(exc_type, asyncio.CancelledError):
            return
        raise timed_out(self._name, self._limit_s) from None


def timed_out(name: str, limit_s: float) -> ToolTimeoutError:
    """The rejection of a call of ``name`` that ran past its ``limit_s`` wall clock."""
    return ToolTimeoutError(
        f"{name} did not finish within its wall clock of {limit_s:g} s and was cancelled; "
        "it may have had side effects. Call it with less work, or report the timeout to the user.",
        tool=name,
        limit_s=limit_s,
    )
