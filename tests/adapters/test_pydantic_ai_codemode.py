"""pydantic-ai CodeMode (pydantic-ai-harness) running its code in codemode through ``/v1/monty``, live.

Real parts: the live ``codemode serve`` of tests/adapters (uvicorn on a real socket, API keys), the
harness's own ``CodeMode(monty_sandbox=...)`` with pydantic_monty 1.4's ``AsyncMontyWebsocket`` dialing the
route, a confined ``monty subprocess`` per connection started through ``codemode-monty``, and pydantic-ai's
``FunctionModel`` writing the code.  The tools are plain Python functions pydantic-ai runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pydantic_monty
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_harness import CodeMode

from tests.adapters.conftest import API_KEY, CALLS, NARROW_KEY, lookup_order, shipping_rate

#: What the model writes: the two shop tools, keyword arguments as CodeMode asks, the last value returned.
CODE = """
order = await lookup_order(order_id="A-17")
rate = await shipping_rate(country=order["destination"], weight_kg=order["weight_kg"])
print("order", order["order_id"])
{"order": order["order_id"], "price": rate["price"]}
"""


def ws_url(base_url: str) -> str:
    return base_url.replace("http://", "ws://", 1) + "/v1/monty"


def sandbox(base_url: str, key: str, **pool: Any) -> Any:
    """CodeMode's pool factory: the route's URL and the key as the upgrade request's Authorization."""
    return lambda: pydantic_monty.AsyncMontyWebsocket(
        ws_url(base_url), connect_headers=lambda: {"authorization": f"Bearer {key}"}, **pool
    )


def scripted(code: str) -> FunctionModel:
    """A model that calls ``run_code`` once with ``code``, then answers with what the tool returned."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if not returns:
            assert [t.name for t in info.function_tools] == ["run_code"], info.function_tools
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": code})])
        return ModelResponse(parts=[TextPart(str(returns[-1].content))])

    return FunctionModel(model)


def run(base_url: str, key: str, code: str, tools: list[Any], **code_mode: Any) -> str:
    agent = Agent(
        scripted(code), tools=tools, capabilities=[CodeMode(monty_sandbox=sandbox(base_url, key), **code_mode)]
    )
    return agent.run_sync("ship order A-17").output


def test_codemode_code_runs_in_codemode_and_its_tool_calls_go_through_pydantic_ai(base_url):
    """The model's code calls both tools; pydantic-ai runs them (CALLS), the value and print come back."""
    answer = run(base_url, API_KEY, CODE, [lookup_order, shipping_rate])
    assert "'price': 9.0" in answer and "'order': 'A-17'" in answer, answer
    assert "order A-17" in answer, answer  # print() output is part of run_code's return
    assert CALLS == [
        ("lookup_order", {"order_id": "A-17"}),
        ("shipping_rate", {"country": "FR", "weight_kg": 2.5}),
    ], CALLS


def quote_shipping(origin: str, destination: str, weight_kg: float) -> dict[str, Any]:
    """Quote a parcel (named like the service's own tool, which the narrowed key denies)."""
    CALLS.append(("quote_shipping", {"origin": origin, "destination": destination}))
    return {"price": 12.5}


def test_a_tool_the_key_denies_stays_denied(base_url):
    """Under the narrowed key (deny = ["quote_shipping"]) the call is answered by codemode as a PermissionError
    inside the sandbox and never reaches pydantic-ai; the full key's call runs."""
    code = (
        "try:\n"
        '    q = await quote_shipping(origin="DE", destination="FR", weight_kg=2)\n'
        '    result = {"price": q["price"]}\n'
        "except Exception as e:\n"
        '    result = {"refused": str(e)}\n'
        "result"
    )
    assert "12.5" in run(base_url, API_KEY, code, [quote_shipping])
    assert CALLS == [("quote_shipping", {"origin": "DE", "destination": "FR"})]
    CALLS.clear()
    answer = run(base_url, NARROW_KEY, code, [quote_shipping])
    assert "tool policy does not allow 'quote_shipping'" in answer, answer
    assert CALLS == []


def refund_order(order_id: str) -> str:
    """Refund an order: a function only the agent has (no service tool is named so)."""
    CALLS.append(("refund_order", {"order_id": order_id}))
    return "refunded"


def test_a_function_of_the_agent_alone_is_denied_by_its_client_entry(base_url):
    """`client:refund_order` in the narrowed key's deny names a function the server never saw (the service
    starts with it all the same): under that key the call is refused in the sandbox and never reaches
    pydantic-ai; the full key's call runs."""
    code = 'try:\n    r = await refund_order(order_id="A-17")\nexcept Exception as e:\n    r = str(e)\nr'
    assert "refunded" in run(base_url, API_KEY, code, [refund_order])
    assert CALLS == [("refund_order", {"order_id": "A-17"})]
    CALLS.clear()
    answer = run(base_url, NARROW_KEY, code, [refund_order])
    assert "tool policy does not allow 'refund_order'" in answer, answer
    assert CALLS == []


async def feed(base_url: str, code: str, limits: dict[str, Any] | None = None, key: str = API_KEY) -> Any:
    async with sandbox(base_url, key)() as pool:
        async with pool.checkout(limits=limits) as session:
            return await session.feed_run(code)


def test_the_limits_a_client_asks_are_clamped_to_the_servers(base_url):
    """A client asking for a terabyte and an hour gets the server's caps (max_memory_limit_bytes 1 GiB,
    max_timeout_ms 60 s): a 2 GB string fails with MemoryError; a modest one runs."""
    generous = {"max_memory": 10**12, "max_feed_duration_secs": 3600, "max_turn_duration_secs": 3600}
    assert asyncio.run(feed(base_url, "len('x' * 10**6)", generous)) == 10**6
    with pytest.raises(pydantic_monty.MontyRuntimeError, match="MemoryError"):
        asyncio.run(feed(base_url, "x = 'x' * (2 * 10**9)\nlen(x)", generous))


def test_a_wrong_key_is_refused_at_the_upgrade(base_url):
    with pytest.raises(Exception, match="401"):
        asyncio.run(feed(base_url, "1 + 1", key="ck_not_a_key_0123456789"))


def test_the_sample_of_the_docs_page_runs(base_url):
    """docs/guide/pydantic-ai-codemode.md's sample, with its URL and key pointed at the test server."""
    from examples.pydantic_ai_codemode import build_agent

    agent = build_agent(ws_url(base_url), API_KEY, scripted(CODE))
    answer = agent.run_sync("ship order A-17").output
    assert "'price': 9.0" in answer and "'order': 'A-17'" in answer, answer


# ---- hostile frames: each closes its own connection only ---------------------------------------------


async def send_raw(base_url: str, message: bytes | str) -> tuple[int | None, str]:
    """One raw WebSocket connection (the websockets library, no Monty client) sending ``message``; the close
    code and reason the route answers with."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    headers = {"authorization": f"Bearer {API_KEY}"}
    async with connect(ws_url(base_url), additional_headers=headers, max_size=None) as ws:
        await ws.send(message)
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 60)
        assert ws.close_code is not None
        return ws.close_code, ws.close_reason or ""


@pytest.mark.parametrize(
    ("message", "code", "reason"),
    [
        (b"\xff\xff\xff\xff", 1007, "malformed_frame: a client frame is not a Monty protocol message"),
        (b"", 1007, "malformed_frame: a client frame carries no request"),
        ("a text message", 1007, "malformed_frame: a text message"),
        (b"\x1a" + b"\x00" * (8 * 1024 * 1024), 1009, ""),  # over monty_max_frame_bytes (8 MiB)
    ],
    ids=["undecodable", "no-kind", "text", "oversized"],
)
def test_a_malformed_frame_closes_its_connection_and_nothing_else(base_url, message, code, reason):
    """The route closes the connection with the code and a reason naming the problem (an oversized message
    is refused by the server's WebSocket layer before it is assembled); the service and a new connection
    run code as before."""
    closed = asyncio.run(send_raw(base_url, message))
    assert closed[0] == code, closed
    assert closed[1].startswith(reason), closed
    assert asyncio.run(feed(base_url, "6 * 7")) == 42
