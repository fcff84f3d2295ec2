"""Per-cell tool calls: the one call path (budgets, loop guard, approval, the run's failure budget) and the catalog.

``CallSession.run(target, ...)`` applies the steps every tool call shares once, for every kind of
target (``service.tools.call_contract``): native and client tools (``service.tools.native_calls``)
and MCP tools (``service.capabilities.mcp``).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING

from bridge import jsoncodec
from bridge.json_types import JsonObject, JsonValue
from service.tools.approvals import ApprovalRules, AskApproval, denial_message
from service.tools.call_contract import CallOutcome, CallTarget, Overdue
from service.tools.contracts import ValidationDeferred
from service.tools.errors import (
    ApprovalDeniedError,
    CallBudgetError,
    InputContractError,
    LoopGuardError,
    SearchBudgetError,
)
from service.tools.native_calls import INLINE_STEPS, MAX_ATTEMPTS, NativeCalls
from service.tools.plugin import ToolContext
from service.tools.run_budget import Breaker, FailureLimits, RunLedger, RunState

if TYPE_CHECKING:
    from service.tools.catalog import CatalogView

__all__ = ["DEFAULT_MAX_SEARCHES", "LOOP_GUARD_LIMIT", "MAX_ATTEMPTS", "CallOutcome", "CallSession", "Overdue"]

# The tool failure contract's loop guard: the 4th identical call (count > 3) is refused.
LOOP_GUARD_LIMIT = 3
DEFAULT_MAX_SEARCHES = 200
#: Loop-guard keys keep call arguments up to this many bytes of canonical JSON as they are, longer ones as a digest.
_MAX_KEPT_ARGUMENTS = 32


class CallSession:
    """Tool calls of one cell. Not thread-safe; use from the cell's event loop."""

    def __init__(
        self,
        view: CatalogView,
        *,
        max_calls: int,
        max_searches: int = DEFAULT_MAX_SEARCHES,
        ledger: RunLedger | None = None,
        breaker: Breaker | None = None,
        approvals: ApprovalRules | None = None,
    ) -> None:
        for name, cap in (("max_calls", max_calls), ("max_searches", max_searches)):
            if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
                raise ValueError(f"{name} must be a non-negative integer")
        self.view = view
        self.max_calls = max_calls
        self.max_searches = max_searches
        self.call_count = 0
        self.search_count = 0
        self.describe_count = 0
        self._repeats: dict[tuple[tuple[str, str], bytes | int], int] = {}
        # Without a run of its own (tests, embedding), the session is a run by itself.
        self.ledger = ledger or RunLedger(RunState(), FailureLimits())
        self.approvals = approvals or ApprovalRules()
        # The native and client tools' side: hooks, retries (``native.retries``), partial-success warnings.
        self.native = NativeCalls(view, breaker or Breaker(), self.approvals)

    def record_search(self) -> None:
        """Count one `catalog.search` (telemetry)."""
        self.search_count += 1

    def record_describe(self) -> None:
        """Count one `describe()` (telemetry)."""
        self.describe_count += 1

    def search(self, query: object, limit: object = None) -> list[JsonObject]:
        """`catalog.search` through the view, counted; SearchBudgetError past ``max_searches``."""
        if self.search_count >= self.max_searches:
            raise SearchBudgetError(
                f"catalog.search was refused: this cell already searched {self.search_count} times, its "
                "budget. Keep the handles you found (or use catalog.all()) instead of searching again."
            )
        self.record_search()
        found = self.view.search(query, limit)
        blocked = self.ledger.blocked()
        return [{**meta, "blocked": True} if meta.get("callableName") in blocked else meta for meta in found]

    def describe(self, callable_name: object) -> JsonObject:
        """`handle.describe()` through the view, counted (a name the cell cannot see is an unknown tool)."""
        self.record_describe()
        return self.view.describe(self.view.require(callable_name).callable_name)

    async def call(self, callable_name: str, params: JsonValue, ctx: ToolContext) -> JsonValue:
        """Run one call and return the JSON details; raises ToolCallError or ClientToolCall."""
        return (await self.call_detailed(callable_name, params, ctx)).details

    async def call_detailed(
        self,
        callable_name: object,
        params: JsonValue,
        ctx: ToolContext,
        *,
        deadline: float | None = None,
        ask: AskApproval | None = None,
        handed_over: bool = False,
        overdue: Overdue | None = None,
    ) -> CallOutcome:
        """Like `call`, but returns text, error flag and network provenance too (``run`` with the
        catalog's target for ``callable_name``)."""
        target = self.native.target(callable_name)
        return await self.run(target, params, ctx, deadline=deadline, ask=ask, handed_over=handed_over, overdue=overdue)

    async def run(
        self,
        target: CallTarget,
        params: JsonValue,
        ctx: ToolContext,
        *,
        deadline: float | None = None,
        ask: AskApproval | None = None,
        handed_over: bool = False,
        overdue: Overdue | None = None,
    ) -> CallOutcome:
        """One tool call of ``target`` through the steps every call shares (``service.tools.call_contract``).

        The target may change its input in place, so it gets a copy of ``params``; with ``handed_over``
        the caller keeps no reference to ``params`` (a guest request's freshly parsed arguments) and it
        gets ``params`` itself: the arguments exist parsed once.  ``deadline`` (event-loop time) bounds
        the retries of an idempotent tool; time spent waiting for an approval through ``ask`` is added
        to it.  Without ``ask``, a call that needs approval is refused (``approval_denied``): nobody
        could be asked.  ``overdue`` is told a native call's ``tool_timeout`` rejection when the tool
        has not unwound ``CANCEL_GRACE_S`` after its clock ran out (``service.tools.clocks``).
        """
        name = target.name
        self.ledger.check(name)
        self.spend_call(name)
        value = {} if params is None else params if handed_over else jsoncodec.copied(params)
        params = None
        try:  # inline with a small step budget (no coroutine of its own); in a thread when it needs more
            target.check_input(value, INLINE_STEPS)
        except ValidationDeferred:
            await asyncio.to_thread(target.check_input, value)
        self.guard_loop(target.loop_key, name, value)
        prepared, asked = (await target.prepare(value, ctx)) if target.prepares else (value, None)
        value = None  # the target works on ``prepared`` (and kept what else it needs)
        reason = asked or target.approval_reason()
        if reason is not None:
            # While a person decides (maybe for as long as the cell stays parked) the input is held
            # encoded only: its parsed form can be many times the bytes charged for it.
            encoded, prepared = _encoded_input(name, prepared), None
            prepared, deadline = await _approved(name, encoded, reason, ask, deadline)
            del encoded
        if not target.runs_here:  # a client tool: the cell parks for the API caller (``ClientToolCall``)
            return await target.invoke(prepared, ctx, deadline, overdue)
        # The place is taken only now: a call waiting for its approval holds none.
        reservation = self.ledger.take(name) or await self.ledger.hold(name)
        with reservation:
            try:
                outcome = await target.invoke(prepared, ctx, deadline, overdue)
            except Exception as exc:
                counted = target.counted(exc, ctx)
                if counted is not None:
                    reservation.fail(non_retriable=counted.non_retriable, reason=counted.reason)
                raise
            if outcome.is_error:  # a failure the call resolves with (an MCP isError result) counts too
                reservation.fail()
        return outcome

    def spend_call(self, name: str) -> None:
        """Count one call of ``name`` (native, client or MCP) against the cell's budget, or refuse it."""
        if self.call_count >= self.max_calls:
            raise CallBudgetError(
                f"{name} was not called: this cell already made {self.call_count} tool calls, its budget. "
                "Batch the work into fewer calls or continue in a new cell.",
                tool=name,
            )
        self.call_count += 1

    def guard_loop(self, tool_key: tuple[str, str], name: str, params: JsonValue) -> None:
        """Count one call of the tool ``tool_key`` (its kind and identity) with ``params``; refuse a 4th identical one."""
        try:
            canonical = jsoncodec.dumps(params, sort_keys=True)
        except jsoncodec.JSONEncodeError:
            return
        # A digest, not the text: a cell may make hundreds of calls with megabytes of arguments each.
        # BLAKE2b-128 is collision-resistant (a cell cannot make two argument sets collide); a text no
        # longer than a digest's hex is kept as it is (exact, and no hash).  A text is bytes and a
        # digest an int: the two kinds of key never equal each other.
        arguments: bytes | int = canonical
        if len(canonical) > _MAX_KEPT_ARGUMENTS:
            arguments = int.from_bytes(hashlib.blake2b(canonical, digest_size=16).digest())
        key = (tool_key, arguments)
        count = self._repeats.get(key, 0) + 1
        self._repeats[key] = count
        if count > LOOP_GUARD_LIMIT:
            raise LoopGuardError(
                f"{name} was refused: it was already called {LOOP_GUARD_LIMIT} times "
                "in this cell with exactly these arguments; repeating it will not give a different result. "
                "Change the arguments, use the earlier result, or stop.",
                tool=name,
            )


def _encoded_input(name: str, prepared: JsonValue) -> bytes:
    try:
        return jsoncodec.dumps_kept(prepared)
    except jsoncodec.JSONEncodeError as exc:
        raise InputContractError(f"{name}: the input to approve is not JSON: {exc}", tool=name) from None


async def _approved(
    name: str, encoded: bytes, reason: str, ask: AskApproval | None, deadline: float | None
) -> tuple[JsonValue, float | None]:
    """Wait for the API caller's approval of one call (its input ``encoded``): the input parsed again and
    the deadline moved by the time the decision took; ApprovalDeniedError if it is denied."""
    if ask is None:
        raise ApprovalDeniedError(f"{name} was not run: {reason}, and this cell cannot ask for it", tool=name)
    loop = asyncio.get_running_loop()
    started = loop.time()
    approved, why = await ask(name, encoded, reason)
    if not approved:
        raise ApprovalDeniedError(denial_message(name, why), tool=name)
    return jsoncodec.loads(encoded), None if deadline is None else deadline + loop.time() - started
