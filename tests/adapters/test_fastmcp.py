"""FastMCP's own CodeMode transform with codemode as its sandbox, against a live server.

A real FastMCP server with real tools, FastMCP's ``CodeMode`` transform given a
``CodemodeSandboxProvider``, and FastMCP's in-memory ``Client`` calling its ``execute`` tool, as
FastMCP's docs test a server: the code runs as a codemode Python cell under the key's tenant, and each
``call_tool`` the code makes goes back through FastMCP.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from codemode_client import AsyncClient, Envelope
from codemode_client.fastmcp_sandbox import CodemodeSandboxProvider, cell_source
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.experimental.transforms.code_mode import CodeMode

from tests.adapters.conftest import API_KEY, CALLS, NARROW_KEY, lookup_order, shipping_rate

#: FastMCP code as its ``execute`` tool's description asks for it: ``await call_tool(name, params)``, ``return``.
CODE = """
order = await call_tool("lookup_order", {"order_id": "A-17"})
rate = await call_tool("shipping_rate", {"country": order["destination"], "weight_kg": order["weight_kg"]})
try:
    await call_tool("shipping_rate", {"country": "FR", "weight_kg": "heavy"})
    refused = None
except Exception as e:
    refused = str(e)
return {"order": order["order_id"], "price": rate["price"], "refused": refused}
"""


def server(provider: CodemodeSandboxProvider) -> FastMCP:
    """A FastMCP server with the two shop tools and a hidden one, its tools behind CodeMode."""
    mcp = FastMCP("shop")
    mcp.tool(lookup_order)
    mcp.tool(shipping_rate)

    @mcp.tool
    def refund(order_id: str) -> str:
        """Refund an order (hidden from every client below)."""
        CALLS.append(("refund", {"order_id": order_id}))
        return "refunded"

    mcp.disable(names={"refund"})
    mcp.add_transform(CodeMode(sandbox_provider=provider))
    return mcp


def on_a_loop(sandbox: CodemodeSandboxProvider, work: Coroutine[Any, Any, Any]) -> Any:
    """``work`` on a fresh event loop, the provider's client for that loop closed before the loop ends."""

    async def main() -> Any:
        try:
            return await work
        finally:
            await sandbox.aclose()

    return asyncio.run(main())


def execute(sandbox: CodemodeSandboxProvider, code: str) -> Any:
    """The ``execute`` tool's answer through FastMCP's in-memory client (a ToolError raises)."""

    async def call() -> Any:
        async with Client(server(sandbox)) as client:
            return (await client.call_tool("execute", {"code": code})).data

    return on_a_loop(sandbox, call())


def provider(base_url: str, key: str = API_KEY, **kwargs: Any) -> tuple[CodemodeSandboxProvider, list[Envelope]]:
    legs: list[Envelope] = []
    return CodemodeSandboxProvider(base_url, api_key=key, on_envelope=legs.append, **kwargs), legs


def test_fastmcp_code_runs_as_a_codemode_cell_whose_tool_calls_go_through_fastmcp(base_url):
    """The model's code calls two FastMCP tools positionally; FastMCP runs them (its validation refuses a bad
    argument, caught in the code) and the value comes back; the cell ran in codemode, one leg per call."""
    sandbox, legs = provider(base_url)
    answer = execute(sandbox, CODE)
    assert answer["order"] == "A-17" and answer["price"] == 9.0, answer
    assert "call_tool('shipping_rate') failed" in answer["refused"] and "weight_kg" in answer["refused"], answer
    assert CALLS == [
        ("lookup_order", {"order_id": "A-17"}),
        ("shipping_rate", {"country": "FR", "weight_kg": 2.5}),
    ], CALLS
    assert len({env.cell_id for env in legs}) == 1 and len(legs) == 4, legs  # the exec, then a wait per call
    assert [p.name for env in legs[:-1] for p in env.pending_tool_calls] == ["fastmcp_call_tool"] * 3
    assert legs[-1].telemetry["call_count"] == 3, legs[-1].telemetry


def test_the_code_reaches_the_keys_own_tools_and_a_denied_one_stays_denied(base_url):
    """codemode's own tools are globals of the cell under the key's policy: the full key quotes a parcel,
    the narrowed key's cell has no such name; a tool FastMCP hides stays unknown to the code under both."""
    quote = 'q = await quote_shipping(origin="DE", destination="FR", weight_kg=2)\nreturn {"price": q["price"]}'
    hidden = 'await call_tool("refund", {"order_id": "A-17"})'
    full, _ = provider(base_url)
    assert isinstance(execute(full, quote)["price"], float)
    narrow, legs = provider(base_url, NARROW_KEY)
    with pytest.raises(ToolError, match="NameError: name 'quote_shipping' is not defined"):
        execute(narrow, quote)
    assert legs[-1].code == "uncaught_error"
    for sandbox in (full, narrow):
        with pytest.raises(ToolError, match="Unknown tool: refund"):
            execute(sandbox, hidden)
    assert CALLS == []


def test_a_failure_names_the_line_of_the_code_as_written(base_url):
    """The one-line prelude is not counted: a runtime error and a syntax error name the code's own lines; an
    uncaught refusal of FastMCP's keeps its whole message."""
    sandbox, _ = provider(base_url)
    with pytest.raises(ToolError, match=r'ZeroDivisionError: division by zero\n  File "cell.py", line 2,'):
        execute(sandbox, "x = 1\ny = x // 0")
    with pytest.raises(ToolError, match=r"SyntaxError at cell\.py:3:\d+: .*\n\(codemode: invalid_input"):
        execute(sandbox, "x = 1\ny = 2\nz = (")
    # FastMCP's refusal spans two lines (the failure, the valid parameters): the model gets both.
    uncaught = 'await call_tool("shipping_rate", {"country": "FR", "weight_kg": "heavy"})'
    with pytest.raises(ToolError, match=r"call_tool\('shipping_rate'\) failed: weight_kg: .*; Valid parameters"):
        execute(sandbox, uncaught)


@pytest.mark.parametrize(
    ("fields", "code", "failure"),
    [
        ({"timeout_ms": 300}, "while True:\n    pass", "codemode: timeout"),
        # A long timeout: on a loaded machine the allocation must meet the memory limit before the clock.
        (
            {"memory_limit_bytes": 8 * 1024 * 1024, "timeout_ms": 60000},
            "x = [0] * 50_000_000\nreturn len(x)",
            "memory_limit_exceeded",
        ),
    ],
    ids=["timeout", "memory"],
)
def test_codemodes_limits_bound_the_code(base_url, fields, code, failure):
    """The provider's exec fields are the cell's limits: a runaway loop times out, an allocation past the
    memory limit fails, each a ToolError naming codemode's code."""
    sandbox, _ = provider(base_url, **fields)
    with pytest.raises(ToolError, match=failure):
        execute(sandbox, code)


def test_a_cancelled_run_cancels_its_parked_cell(base_url):
    """FastMCP's wall_clock_timeout_secs cancels run() (``asyncio.wait_for``); cancelled while the cell waits
    on a slow external function, the run cancels that cell in codemode, so it does not stay parked."""
    sandbox, legs = provider(base_url)

    async def scenario() -> Envelope:
        entered, never = asyncio.Event(), asyncio.Event()

        async def slow() -> str:
            entered.set()
            await never.wait()  # set by nobody: only the cancellation ends this call
            return "late"

        run = asyncio.create_task(sandbox.run("await slow()", external_functions={"slow": slow}))
        await entered.wait()  # the cell is parked on its call now
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        await sandbox.aclose()
        async with AsyncClient(base_url, API_KEY) as cm:
            return await cm.status(legs[0].cell_id)

    ended = asyncio.run(scenario())
    assert legs[0].status == "waiting"
    assert ended.status == "failed" and ended.code == "aborted", ended.raw  # what a cancelled cell ends as


def test_inputs_become_names_of_the_cell(base_url):
    """SandboxProvider's ``inputs`` are bound as names before the code runs (crossing as JSON, not source)."""
    sandbox, _ = provider(base_url)
    inputs = {"n": 21, "label": 'it\'s "quoted"\n\u00e9', "items": [1, None, {"a": True}]}
    code = "return [n * 2, label, items]"
    assert on_a_loop(sandbox, sandbox.run(code, inputs=inputs)) == [42, inputs["label"], inputs["items"]]


@pytest.mark.parametrize(
    ("inputs", "functions", "refusal"),
    [
        ({"x = 1; import os": 1}, [], "an input named"),
        ({"class": 1}, [], "an input named"),
        ({"x": float("nan")}, [], "must be JSON values"),
        ({"x": {1, 2}}, [], "must be JSON values"),
        ({}, ["call_tool(); x"], "an external function named"),
    ],
    ids=["statement", "keyword", "nan", "set", "function"],
)
def test_names_and_inputs_that_are_not_data_are_refused_before_any_request(inputs, functions, refusal):
    """A name that is not a plain identifier never reaches the cell's source; a value that is not JSON is refused."""
    with pytest.raises(ToolError, match=refusal):
        cell_source("return 1", inputs, functions)


def test_an_external_function_keeps_its_own_name_and_positional_arguments(base_url):
    """Any external function (not only call_tool) is called by its name with positional and keyword
    arguments, sync or async, and what it returns crosses back as JSON; gathered calls park the cell once."""
    seen: list[tuple[Any, ...]] = []

    def scale(x: int, *, by: int = 2) -> int:
        seen.append((x, by))
        return x * by

    async def echo(*args: Any) -> list[Any]:
        return list(args)

    functions: dict[str, Callable[..., Any]] = {"scale": scale, "echo": echo}
    sandbox, legs = provider(base_url)
    code = "return [await scale(3), await scale(3, by=5), await echo('a', [1])]"
    assert on_a_loop(sandbox, sandbox.run(code, external_functions=functions)) == [6, 15, ["a", [1]]]
    assert seen == [(3, 2), (3, 5)]
    legs.clear()
    gathered = "import asyncio\nreturn await asyncio.gather(scale(1), scale(2), scale(3))"
    assert on_a_loop(sandbox, sandbox.run(gathered, external_functions=functions)) == [2, 4, 6]
    assert [len(env.pending_tool_calls) for env in legs] == [3, 0]


def test_an_approval_stands_between_the_code_and_fastmcps_tools(base_url):
    """require_approval on the client tool puts every call_tool to approve(): approved, FastMCP runs the tool;
    denied, it never runs and the code fails with codemode's approval_denied."""
    code = 'return await call_tool("lookup_order", {"order_id": "A-17"})'
    asked: list[str | None] = []
    for decision in (True, False):
        sandbox, _ = provider(
            base_url,
            require_approval=["fastmcp_call_tool"],
            approve=lambda call: (asked.append(call.tool), decision)[1],  # noqa: B023 - used in this iteration
        )
        if decision:
            assert execute(sandbox, code)["order_id"] == "A-17"
            assert CALLS == [("lookup_order", {"order_id": "A-17"})]
        else:
            CALLS.clear()
            with pytest.raises(ToolError, match="approval was denied"):
                execute(sandbox, code)
            assert CALLS == []
    assert asked == ["fastmcp_call_tool", "fastmcp_call_tool"]
