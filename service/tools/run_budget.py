"""The failure budget of a run (seed 001) and the transient-failure breaker of a tenant's tools.

A run is (tenant, session_id, run_id): an agent's turn, spanning several cells.  Its counters live
in the session store (SQLite or Redis), so every cell, replica and restart sees the same ones; a
server without a store keeps them in ``MemoryRunCounters``, and a cell without a session is its
own run with counters of its own.

* a tool with ``tool_failures_per_run`` counted failures, or one non-retriable failure, is blocked
  for the rest of the run (``tool_blocked``);
* at ``failures_per_run`` counted failures every tool call rejects (``failure_budget_exhausted``).

Counted: non-recoverable failures (exceptions, error results, output-contract failures, MCP
``isError``).  Not counted: recoverable failures, input validation and guard refusals.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from service.stores.base import RunFailures
from service.stores.errors import StoreError
from service.tools.errors import FailureBudgetError, ToolDisabledError

__all__ = ["Breaker", "FailureLimits", "MemoryRunCounters", "RunCounters", "RunLedger", "block_reason", "run_report"]

log = logging.getLogger(__name__)

#: A cached view of the run's counters is re-read from the store at most this often (seconds):
#: a tool call should not cost a store round trip, yet a block made by another cell shows soon.
_REFRESH_SECONDS = 1.0
_MAX_BLOCK_REASON_CHARS = 300


class RunCounters(Protocol):
    """Where a run's counters live: the session store or ``MemoryRunCounters``."""

    async def add_run_failure(
        self, tenant: str, session_id: str, run_id: str, tool: str, block_reason: str | None = None
    ) -> RunFailures: ...

    async def run_failures(self, tenant: str, session_id: str, run_id: str) -> RunFailures: ...

    async def delete_run_failures(self, tenant: str, session_id: str, run_id: str) -> None: ...


@dataclass(frozen=True)
class FailureLimits:
    tool_failures_per_run: int = 4
    failures_per_run: int = 8


class MemoryRunCounters:
    """Run counters of one process (a server without a session store, or one session-less cell).

    At most ``max_runs`` runs are kept (the least recently failed go first), each for ``ttl_seconds``.
    """

    def __init__(self, ttl_seconds: float, max_runs: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl_seconds
        self._max_runs = max_runs
        self._clock = clock
        self._runs: OrderedDict[tuple[str, str, str], tuple[float, dict[str, int], dict[str, str]]] = OrderedDict()

    async def add_run_failure(
        self, tenant: str, session_id: str, run_id: str, tool: str, block_reason: str | None = None
    ) -> RunFailures:
        key = (tenant, session_id, run_id)
        _, failures, blocked = self._live(key) or (0.0, {}, {})
        failures[tool] = failures.get(tool, 0) + 1
        if block_reason is not None:
            blocked.setdefault(tool, block_reason)
        self._runs[key] = (self._clock() + self._ttl, failures, blocked)
        self._runs.move_to_end(key)
        while len(self._runs) > self._max_runs:
            self._runs.popitem(last=False)
        return RunFailures(dict(failures), dict(blocked))

    async def run_failures(self, tenant: str, session_id: str, run_id: str) -> RunFailures:
        found = self._live((tenant, session_id, run_id))
        return RunFailures(dict(found[1]), dict(found[2])) if found else RunFailures()

    async def delete_run_failures(self, tenant: str, session_id: str, run_id: str) -> None:
        self._runs.pop((tenant, session_id, run_id), None)

    def _live(self, key: tuple[str, str, str]) -> tuple[float, dict[str, int], dict[str, str]] | None:
        found = self._runs.get(key)
        if found is not None and found[0] <= self._clock():
            del self._runs[key]
            return None
        return found


class RunLedger:
    """One cell's view of its run's failure budget: checks before a call, counts after a failure.

    When the store cannot be reached the ledger goes on with what it last saw (and its own counts):
    a store outage must not stop every tool call.
    """

    def __init__(
        self,
        counters: RunCounters,
        tenant: str,
        session_id: str,
        run_id: str,
        limits: FailureLimits,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._counters = counters
        self._run = (tenant, session_id, run_id)
        self.limits = limits
        self._clock = clock
        self._state = RunFailures()
        self._read_at: float | None = None

    async def refresh(self) -> RunFailures:
        """Re-read the run's counters (a cached view younger than a second is used as is)."""
        now = self._clock()
        if self._read_at is not None and now - self._read_at < _REFRESH_SECONDS:
            return self._state
        try:
            self._state = await self._counters.run_failures(*self._run)
        except StoreError as exc:
            log.warning("run failure counters unavailable, using the last ones seen: %s", exc)
        self._read_at = now
        return self._state

    def blocked(self) -> set[str]:
        """Tools blocked for the run as last seen."""
        return {tool for tool in self._state.failures if self._block_reason(tool) is not None}

    async def check(self, tool: str) -> None:
        """Raise FailureBudgetError or ToolDisabledError when ``tool`` may not run now."""
        state = await self.refresh()
        if state.total >= self.limits.failures_per_run:
            raise FailureBudgetError(
                f"{tool} was not called: this run already had {state.total} tool failures, its limit "
                f"({self.limits.failures_per_run}). Stop calling tools; report to the user what failed and why.",
                tool=tool,
            )
        reason = self._block_reason(tool)
        if reason is not None:
            raise ToolDisabledError(
                f"{tool} is blocked for the rest of this run: {reason}. Do not call it again; use another "
                "tool or report the problem to the user.",
                tool=tool,
            )

    async def record(self, tool: str, *, non_retriable: bool = False, reason: str = "") -> None:
        """Count one failure of ``tool``; a non-retriable one blocks it at once."""
        block = None
        if non_retriable:
            short = reason if len(reason) <= _MAX_BLOCK_REASON_CHARS else reason[:_MAX_BLOCK_REASON_CHARS] + "…"
            block = f"it reported a failure that retrying cannot fix (non_retriable): {short}"
        try:
            self._state = await self._counters.add_run_failure(*self._run, tool, block)
        except StoreError as exc:
            log.warning("could not record a tool failure in the run counters: %s", exc)
            failures = {**self._state.failures, tool: self._state.failures.get(tool, 0) + 1}
            blocked = {**self._state.blocked, **({tool: block} if block and tool not in self._state.blocked else {})}
            self._state = RunFailures(failures, blocked)
        self._read_at = self._clock()

    def _block_reason(self, tool: str) -> str | None:
        return block_reason(self._state, tool, self.limits)


def block_reason(state: RunFailures, tool: str, limits: FailureLimits) -> str | None:
    """Why ``tool`` is blocked in a run with these counters, or None when it is not."""
    if tool in state.blocked:
        return state.blocked[tool]
    count = state.failures.get(tool, 0)
    if count >= limits.tool_failures_per_run:
        return f"it failed {count} times in this run (limit {limits.tool_failures_per_run} per tool per run)"
    return None


def run_report(state: RunFailures, limits: FailureLimits) -> dict[str, object]:
    """The run's counters as ``GET /v1/sessions/{session_id}/runs/{run_id}`` shows them."""
    blocked = {
        tool: reason
        for tool in sorted(set(state.failures) | set(state.blocked))
        if (reason := block_reason(state, tool, limits)) is not None
    }
    return {
        "failures": dict(sorted(state.failures.items())),
        "total_failures": state.total,
        "blocked": [{"tool": tool, "reason": reason} for tool, reason in blocked.items()],
        "budget_exhausted": state.total >= limits.failures_per_run,
        "limits": {"tool_failures_per_run": limits.tool_failures_per_run, "failures_per_run": limits.failures_per_run},
    }


#: The breaker looks at a tool's last this-many calls for a tenant...
_BREAKER_CALLS = 2
#: ...made within this many seconds.
_BREAKER_WINDOW_SECONDS = 30 * 60


class Breaker:
    """Recent outcomes of each (tenant, tool): when the last two calls within 30 minutes failed, an
    idempotent tool gets one attempt instead of three.  Kept per process, for ``max_keys`` pairs."""

    def __init__(self, max_keys: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._max_keys = max_keys
        self._recent: OrderedDict[tuple[str, str], deque[tuple[float, bool]]] = OrderedDict()

    def record(self, tenant: str, tool: str, ok: bool) -> None:
        key = (tenant, tool)
        outcomes = self._recent.get(key)
        if outcomes is None:
            outcomes = self._recent[key] = deque(maxlen=_BREAKER_CALLS)
        outcomes.append((self._clock(), ok))
        self._recent.move_to_end(key)
        while len(self._recent) > self._max_keys:
            self._recent.popitem(last=False)

    def open(self, tenant: str, tool: str) -> bool:
        """Whether the tool's last two calls for this tenant, both within 30 minutes, failed."""
        outcomes = self._recent.get((tenant, tool))
        if outcomes is None or len(outcomes) < _BREAKER_CALLS:
            return False
        since = self._clock() - _BREAKER_WINDOW_SECONDS
        return all(not ok and at >= since for at, ok in outcomes)
