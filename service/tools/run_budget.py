"""The failure budget of a run (the tool failure contract) and the transient-failure breaker of a tenant's tools.

A run is (tenant, session_id, run_id): an agent's turn, spanning several cells.  Its counters live
in the session store (SQLite or Redis), so every cell, replica and restart sees the same ones; each
process keeps its own view of them (``service.tools.run_book``), and a cell without a session is
its own run with counters of its own.

* a tool with ``tool_failures_per_run`` counted failures, or one non-retriable failure, is blocked
  for the rest of the run (``tool_blocked``);
* at ``failures_per_run`` counted failures every tool call rejects (``failure_budget_exhausted``).

Counted: non-recoverable failures (exceptions, error results, output-contract failures, MCP
``isError``).  Not counted: recoverable failures, input validation and guard refusals.

Under concurrency a call *reserves* its place before it runs (``RunLedger.take`` or ``hold``) and counts as
a failure until it settles: a run never has more calls of a tool in flight than that tool's failures
left, nor more calls in all than the run's failures left.  Further calls wait for a place (and are
refused once the budget is spent), so 100 concurrent calls of a failing tool run as often as the
budget allows, not 100 times.  The breaker reserves too: at most two calls of a tool per tenant
retry at once (``Breaker.start_retry``).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from service.stores.base import RunFailures, RunIncrement
from service.tools.errors import FailureBudgetError, ToolDisabledError

__all__ = [
    "Breaker",
    "FailureLimits",
    "Reservation",
    "RunLedger",
    "RunState",
    "block_reason",
    "run_report",
]

_MAX_BLOCK_REASON_CHARS = 300
RunKey = tuple[str, str, str]


@dataclass(frozen=True)
class FailureLimits:
    tool_failures_per_run: int = 4
    failures_per_run: int = 8


@dataclass(eq=False)
class RunState:
    """One run's counters as this process knows them: ``seen`` (the store's, as last read or written)
    plus the failures counted here since (``unwritten``; ``writing`` while a batch carries them), and
    the places calls in flight hold (``held``)."""

    key: RunKey | None = None  # None: a run kept only here (a session-less cell's own)
    seen: RunFailures = field(default_factory=RunFailures)
    unwritten: dict[str, int] = field(default_factory=dict)
    unwritten_blocks: dict[str, str] = field(default_factory=dict)
    writing: RunIncrement | None = None
    held: dict[str, int] = field(default_factory=dict)
    read_at: float | None = None  # when ``seen`` last came from the store (monotonic clock)
    version: int = 0  # bumped when a write starts: a read begun before then may miss it
    persist: bool = True  # False once the store refused the run's counters (tenant quota)
    _settled: asyncio.Event | None = None

    def view(self) -> RunFailures:
        """The run's counters: what the store said plus what this process counted since (``seen``
        itself while nothing was counted here: the common call reads it, nobody changes it in place)."""
        if not self.unwritten and not self.unwritten_blocks and self.writing is None:
            return self.seen
        failures = dict(self.seen.failures)
        blocked = dict(self.unwritten_blocks)
        parts = [self.unwritten] + ([self.writing.failures] if self.writing else [])
        if self.writing:
            blocked.update(self.writing.blocked)
        blocked.update(self.seen.blocked)  # the first reason wins, as in the store
        for part in parts:
            for tool, n in part.items():
                failures[tool] = failures.get(tool, 0) + n
        return RunFailures(failures, blocked)

    @property
    def busy(self) -> bool:
        """Calls hold places or failures wait to be written: the state must stay as it is."""
        return bool(self.held or self.unwritten or self.writing)

    def count(self, tool: str, block: str | None) -> None:
        self.unwritten[tool] = self.unwritten.get(tool, 0) + 1
        if block is not None:
            self.unwritten_blocks.setdefault(tool, block)

    def start_write(self) -> RunIncrement:
        """Hand the unwritten failures to a write (``written`` or ``write_failed`` ends it)."""
        assert self.key is not None and self.writing is None
        self.writing = RunIncrement(*self.key, self.unwritten, self.unwritten_blocks)
        self.unwritten, self.unwritten_blocks = {}, {}
        self.version += 1
        return self.writing

    def written(self, found: RunFailures | None, now: float) -> None:
        """The write is stored (``found``: the run's counters after it), or refused (None: the run's
        counters are kept here only from now on)."""
        if found is None:
            self.persist = False
            self.keep_here()
            return
        self.seen, self.writing, self.read_at = found, None, now

    def forget(self) -> None:
        """Drop every count (the run was ended, or its failures cannot be kept): a cell still holding
        this state goes on from zero."""
        self.seen, self.unwritten, self.unwritten_blocks = RunFailures(), {}, {}

    def keep_here(self) -> None:
        """Fold the failures counted here into ``seen``: nobody will write them (no store, or it refused)."""
        self.seen = self.view()
        self.writing, self.unwritten, self.unwritten_blocks = None, {}, {}

    def write_failed(self) -> None:
        """The write did not happen (or its answer was lost): its failures wait for the next one."""
        assert self.writing is not None
        for tool, n in self.writing.failures.items():
            self.unwritten[tool] = self.unwritten.get(tool, 0) + n
        self.unwritten_blocks = {**self.unwritten_blocks, **self.writing.blocked}
        self.writing = None

    async def settled(self) -> None:
        """Wait until a call of the run settles (a place frees, or a failure is counted)."""
        if self._settled is None:
            self._settled = asyncio.Event()
        await self._settled.wait()

    def wake(self) -> None:
        if self._settled is not None:
            self._settled.set()
            self._settled = None


class CounterSync(Protocol):
    """Where a ledger reports to (``RunBook``): failures to write, views to refresh."""

    def counted(self, state: RunState) -> None: ...

    def consulted(self, state: RunState) -> None: ...

    async def written(self, state: RunState) -> None: ...


class Reservation:
    """One call's place in its run's failure budget (``RunLedger.take`` or ``hold``); ``release`` (or
    leaving its ``with`` block) gives the place back, and ``fail()`` inside counts the call as a failure."""

    __slots__ = ("_ledger", "_tool", "block", "failed_call")

    def __init__(self, ledger: RunLedger, tool: str) -> None:
        self._ledger = ledger
        self._tool = tool
        self.block: str | None = None
        self.failed_call = False

    def fail(self, *, non_retriable: bool = False, reason: str = "") -> None:
        """Count this call as a failure of the run when its place is given back; a non-retriable
        failure blocks the tool for the rest of the run at once."""
        self.failed_call = True
        if non_retriable:
            short = reason if len(reason) <= _MAX_BLOCK_REASON_CHARS else reason[:_MAX_BLOCK_REASON_CHARS] + "…"
            short = short.encode("utf-8", "replace").decode("utf-8")  # stored as text: no lone surrogate
            self.block = f"it reported a failure that retrying cannot fix (non_retriable): {short}"

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._ledger.release(self._tool, self)


class RunLedger:
    """One cell's handle on its run's failure budget: ``check`` before a call, a held place around it.

    Nothing here waits for the store: the view is what the process knows (re-read in the background
    at most every second), and counted failures are written in batches by the ``RunBook``.
    """

    def __init__(self, state: RunState, limits: FailureLimits, sync: CounterSync | None = None) -> None:
        self.state = state
        self.limits = limits
        self._sync = sync
        self._open_without_failures = limits.failures_per_run > 0 and limits.tool_failures_per_run > 0

    async def written(self) -> None:
        """Wait until the failures counted so far are stored (at once without a store, or while it fails)."""
        if self._sync is not None:
            await self._sync.written(self.state)

    def blocked(self) -> set[str]:
        """Tools blocked for the run as last seen."""
        state = self.state.view()
        return {tool for tool in state.failures if block_reason(state, tool, self.limits) is not None}

    def check(self, tool: str) -> None:
        """Raise FailureBudgetError or ToolDisabledError when ``tool`` may not run now."""
        if self._sync is not None:
            self._sync.consulted(self.state)
        state = self.state.view()
        if not state.failures and not state.blocked and self._open_without_failures:
            return  # a run without failures: the common call, and nothing below can refuse it
        if state.total >= self.limits.failures_per_run:
            raise FailureBudgetError(
                f"{tool} was not called: this run already had {state.total} tool failures, its limit "
                f"({self.limits.failures_per_run}). Stop calling tools; report to the user what failed and why.",
                tool=tool,
            )
        reason = block_reason(state, tool, self.limits)
        if reason is not None:
            raise ToolDisabledError(
                f"{tool} is blocked for the rest of this run: {reason}. Do not call it again; use another "
                "tool or report the problem to the user.",
                tool=tool,
            )

    async def hold(self, tool: str) -> Reservation:
        """A place for one call of ``tool`` (``take``), waiting while calls in flight hold every place left
        (``with await ledger.hold(tool) as reservation:``); raises like ``check`` when the tool may not run."""
        while True:
            reservation = self.take(tool)
            if reservation is not None:
                return reservation
            await self.state.settled()

    def take(self, tool: str) -> Reservation | None:
        """A place for one call of ``tool`` now, or None while calls in flight hold every place left;
        raises like ``check`` when the tool may not run.  The caller must ``release`` it."""
        self.check(tool)
        state = self.state
        held = state.held
        if held:
            view = state.view()
            if (
                view.total + sum(held.values()) >= self.limits.failures_per_run
                or view.failures.get(tool, 0) + held.get(tool, 0) >= self.limits.tool_failures_per_run
            ):
                return None
        # With no call in flight, ``check`` passing is the same verdict: below both limits.
        held[tool] = held.get(tool, 0) + 1
        return Reservation(self, tool)

    def release(self, tool: str, reservation: Reservation) -> None:
        """Give back the place ``reservation`` held, counting its failure (if any)."""
        state = self.state
        left = state.held[tool] - 1
        if left:
            state.held[tool] = left
        else:
            del state.held[tool]
        if reservation.failed_call:
            state.count(tool, reservation.block)
            if self._sync is not None:
                self._sync.counted(state)
        state.wake()


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
    """Recent outcomes of each (tenant, tool) that has failed, kept per process for ``max_keys`` pairs
    (a pair whose last two calls succeeded is as good as none, so successes alone store nothing).

    A call whose attempt failed transiently may try again only while the tool's failed calls among
    its last two (within 30 minutes) plus the calls retrying now are fewer than two: after two
    failed calls an idempotent tool gets one attempt instead of three, and however many calls fail
    at once, at most two of them retry.
    """

    def __init__(self, max_keys: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._max_keys = max_keys
        self._recent: OrderedDict[tuple[str, str], deque[tuple[float, bool]]] = OrderedDict()
        self._retrying: dict[tuple[str, str], int] = {}  # calls that hold a retry now; only while they run

    def record(self, tenant: str, tool: str, ok: bool) -> None:
        key = (tenant, tool)
        outcomes = self._recent.get(key)
        if ok and (outcomes is None or all(ok for _, ok in outcomes)):
            # Only failures are counted: a success matters once it can push a failure out of the
            # last two, and a pair without failures acts as no pair at all.
            return
        if outcomes is None:
            outcomes = self._recent[key] = deque(maxlen=_BREAKER_CALLS)
        outcomes.append((self._clock(), ok))
        self._recent.move_to_end(key)
        while len(self._recent) > self._max_keys:
            self._recent.popitem(last=False)

    def start_retry(self, tenant: str, tool: str) -> bool:
        """Whether a call of ``tool`` whose attempt failed may try again; when True, the call counts
        as retrying until ``end_retry``."""
        key = (tenant, tool)
        since = self._clock() - _BREAKER_WINDOW_SECONDS
        failed = sum(1 for at, ok in self._recent.get(key, ()) if not ok and at >= since)
        retrying = self._retrying.get(key, 0)
        if failed + retrying >= _BREAKER_CALLS:
            return False
        self._retrying[key] = retrying + 1
        return True

    def end_retry(self, tenant: str, tool: str) -> None:
        """A call that ``start_retry`` let retry has ended (whatever its outcome)."""
        key = (tenant, tool)
        left = self._retrying.get(key, 0) - 1
        if left > 0:
            self._retrying[key] = left
        else:
            self._retrying.pop(key, None)
