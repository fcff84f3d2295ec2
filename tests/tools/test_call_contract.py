"""The one tool-call path (``CallSession.run``) applies the shared steps to any ``CallTarget``.

The target here is a small real implementation of the protocol (no server behind it): it records what
the path asked of it, so each test sees which shared step ran, in which order, and what it left
undone.  The kinds of targets the service has are tested through real cells:
tests/service/capabilities/test_mcp_budgets.py (MCP) and tests/tools/test_call_session.py (native).
"""

from __future__ import annotations

import asyncio

import pytest

from bridge import jsoncodec
from bridge.json_types import JsonValue
from service.tools.call_contract import CallOutcome, Counted, Overdue
from service.tools.catalog import ToolCatalog
from service.tools.errors import (
    ApprovalDeniedError,
    CallBudgetError,
    ClientToolCall,
    FailureBudgetError,
    InvalidInputError,
    LoopGuardError,
    ToolDisabledError,
    ToolExecutionError,
)
from service.tools.plugin import ToolContext
from service.tools.run_budget import FailureLimits, RunLedger, RunState
from service.tools.session import CallSession

pytestmark = pytest.mark.anyio
CTX = ToolContext(tenant="t", session_id="s", run_id="r", cell_id="c", call_id="req_1")


class Recording:
    """A call target that records the path's requests; ``result`` says how its invocation ends."""

    prepares = False

    def __init__(self, name: str = "remote.tool", *, reason: str | None = None, runs_here: bool = True) -> None:
        self.name = name
        self.loop_key = ("test", name)
        self.runs_here = runs_here
        self.reason = reason
        self.steps: list[str] = []
        self.result: object = {"ok": True}  # an exception to raise, or the details to return
        self.is_error = False
        self.counts = True
        self.held_places: list[int] = []

    def check_input(self, value: JsonValue, max_steps: int | None = None) -> None:
        self.steps.append("check_input")
        if value == {"bad": True}:
            raise InvalidInputError(f"{self.name}: bad input", tool=self.name)

    async def prepare(self, value: JsonValue, ctx: ToolContext) -> tuple[JsonValue, str | None]:
        raise AssertionError("prepares is False: the path must not await prepare")

    def approval_reason(self) -> str | None:
        self.steps.append("approval_reason")
        return self.reason

    async def invoke(
        self, prepared: JsonValue, ctx: ToolContext, deadline: float | None, overdue: Overdue | None
    ) -> CallOutcome:
        self.steps.append("invoke")
        if not self.runs_here:
            raise ClientToolCall(call_id=ctx.call_id, tool_name=self.name, callable_name=self.name, params=prepared)
        self.deadline = deadline
        self.prepared = prepared
        if isinstance(self.result, Exception):
            raise self.result
        return CallOutcome(self.name, jsoncodec.dumps(self.result), None, self.is_error, True, self.result)

    def counted(self, exc: Exception, ctx: ToolContext) -> Counted | None:
        self.steps.append("counted")
        return Counted() if self.counts else None


def _session(max_calls: int = 50, limits: FailureLimits | None = None) -> CallSession:
    view = ToolCatalog.build([]).view()
    ledger = RunLedger(RunState(), limits or FailureLimits(tool_failures_per_run=3, failures_per_run=5))
    return CallSession(view, max_calls=max_calls, ledger=ledger)


async def test_a_call_goes_check_guard_approval_invoke_and_is_counted_in_the_cell():
    session, target = _session(), Recording()
    outcome = await session.run(target, {"a": 1}, CTX)
    assert outcome.details == {"ok": True}
    assert target.steps == ["check_input", "approval_reason", "invoke"]
    assert session.call_count == 1
    assert session.ledger.state.held == {}  # its place was given back


async def test_the_call_budget_and_the_loop_guard_refuse_before_the_target_runs():
    session, target = _session(max_calls=5), Recording()
    for _ in range(3):
        await session.run(target, {"same": 1}, CTX)
    target.steps.clear()
    with pytest.raises(LoopGuardError, match="remote.tool was refused"):
        await session.run(target, {"same": 1}, CTX)
    assert "invoke" not in target.steps
    await session.run(target, {"other": 1}, CTX)
    with pytest.raises(CallBudgetError, match="remote.tool was not called"):
        await session.run(target, {"third": 1}, CTX)
    assert session.call_count == 5


async def test_input_the_target_refuses_never_reaches_the_guard_or_the_tool():
    session, target = _session(), Recording()
    with pytest.raises(InvalidInputError):
        await session.run(target, {"bad": True}, CTX)
    assert target.steps == ["check_input"]
    assert session._repeats == {}


async def test_approval_is_asked_with_the_input_encoded_and_moves_the_deadline():
    session, target = _session(), Recording(reason="it writes")
    asked: list[tuple[str, object, str]] = []

    async def ask(tool: str, value: object, reason: str) -> tuple[bool, str | None]:
        asked.append((tool, value, reason))
        await asyncio.sleep(0.05)
        return True, None

    deadline = asyncio.get_running_loop().time() + 10
    await session.run(target, {"a": 1}, CTX, ask=ask, deadline=deadline)
    assert asked == [("remote.tool", b'{"a":1}', "it writes")]
    assert target.prepared == {"a": 1}
    assert target.deadline > deadline + 0.04  # the 50 ms the decision took (a timer may fire a tick early)


async def test_a_call_nobody_can_approve_or_that_is_denied_never_runs():
    session, target = _session(), Recording(reason="it writes")
    with pytest.raises(ApprovalDeniedError, match="cannot ask for it"):
        await session.run(target, {"a": 1}, CTX)

    async def deny(tool: str, value: object, reason: str) -> tuple[bool, str | None]:
        return False, "not today"

    with pytest.raises(ApprovalDeniedError, match="not today"):
        await session.run(target, {"a": 2}, CTX, ask=deny)
    assert "invoke" not in target.steps


async def test_failures_the_target_counts_block_it_for_the_run_and_others_do_not():
    session, target = _session(), Recording()
    target.result = ToolExecutionError("down", tool=target.name)
    target.counts = False
    for i in range(4):
        with pytest.raises(ToolExecutionError):
            await session.run(target, {"i": i}, CTX)
    assert session.ledger.state.view().total == 0
    target.counts = True
    for i in range(3):
        with pytest.raises(ToolExecutionError):
            await session.run(target, {"n": i}, CTX)
    assert session.ledger.state.view().failures == {"remote.tool": 3}
    spent = session.call_count
    with pytest.raises(ToolDisabledError):
        await session.run(target, {"n": 99}, CTX)
    assert session.call_count == spent  # refused before it spent the cell's budget


async def test_a_failure_the_call_resolves_with_counts_against_the_run():
    """An outcome marked ``is_error`` (an MCP ``isError`` result) resolves, and counts."""
    session = _session(limits=FailureLimits(tool_failures_per_run=10, failures_per_run=2))
    target = Recording()
    target.is_error = True
    for i in range(2):
        assert (await session.run(target, {"i": i}, CTX)).is_error
    with pytest.raises(FailureBudgetError):
        await session.run(Recording("another.tool"), {}, CTX)


async def test_a_target_the_caller_runs_holds_no_place_in_the_run():
    """A client tool's call parks the cell (ClientToolCall) after the shared checks, holding no place."""
    session = _session(limits=FailureLimits(tool_failures_per_run=1, failures_per_run=1))
    target = Recording("client.tool", runs_here=False)
    session.ledger.state.held["client.tool"] = 1  # every place taken: a call that held one would wait
    with pytest.raises(ClientToolCall):
        await asyncio.wait_for(session.run(target, {"a": 1}, CTX), 5)
    assert target.steps == ["check_input", "approval_reason", "invoke"]
