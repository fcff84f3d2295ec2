"""The OpenAI Agents SDK function tool against a live server, driven by the SDK's own ScriptedModel."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tracing import TracingProcessor, set_trace_processors
from codemode_client.openai_agents_tool import codemode_tool

from tests.adapters.conftest import API_KEY, CALLS, CELL, check_outcome, lookup_order, shipping_rate


class Spans(TracingProcessor):
    """Keeps every span the SDK ends (nothing is exported anywhere)."""

    def __init__(self) -> None:
        self.ended: list[Any] = []

    def on_trace_start(self, trace: Any) -> None: ...
    def on_trace_end(self, trace: Any) -> None: ...
    def on_span_start(self, span: Any) -> None: ...
    def on_span_end(self, span: Any) -> None:
        self.ended.append(span)

    def shutdown(self) -> None: ...
    def force_flush(self) -> None: ...


@pytest.fixture
def spans() -> Iterator[Spans]:
    collector = Spans()
    set_trace_processors([collector])  # replaces the SDK's exporter: this test sends no trace anywhere
    yield collector
    set_trace_processors([])


def tools() -> list[Any]:
    # failure_error_function=None: a failure rejects the cell's call (the SDK's default answers with error text).
    return [function_tool(lookup_order), function_tool(shipping_rate, failure_error_function=None)]


def scripted(code: str, arguments: dict[str, Any] | None = None) -> ScriptedModel:
    """A model that writes one cell (``arguments``: the whole call), then says it is done."""
    call = function_call("codemode", arguments or {"code": code}, call_id="call_1")
    return ScriptedModel([[call], [assistant_message("done")]])


def tool_output(model: ScriptedModel) -> dict[str, Any]:
    """The codemode tool's output as the model received it on its second call."""
    items = [i for i in model.calls[1].input if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert len(items) == 1, model.calls[1].input
    return json.loads(items[0]["output"])  # type: ignore[no-any-return]


def test_a_cell_calls_two_agents_sdk_tools_and_the_value_reaches_the_model(base_url, spans):
    """The agent's one codemode tool runs a cell calling both function tools through their own on_invoke_tool (the SDK's
    validation refuses a bad argument); the model's next input holds the cell's value, and each nested call is a
    function span under the codemode tool's span."""
    tool = codemode_tool(base_url, tools(), api_key=API_KEY)
    assert tool.description.startswith(
        "Run JavaScript or TypeScript (types are stripped, not checked) in a fresh sandbox"
    )
    assert "- lookup_order(" in tool.description and "- shipping_rate(" in tool.description
    model = scripted(CELL)
    result = Runner.run_sync(Agent(name="shipper", model=model, tools=[tool]), "ship A-17")
    assert result.final_output == "done"
    check_outcome(tool_output(model))
    functions = [s for s in spans.ended if type(s.span_data).__name__ == "FunctionSpanData"]
    by_name = {s.span_data.name: s for s in functions}
    assert {"codemode", "lookup_order", "shipping_rate"} <= set(by_name), [s.span_data.name for s in functions]
    assert by_name["lookup_order"].parent_id == by_name["codemode"].span_id


def test_a_tool_that_needs_approval_asks_the_approver(base_url, spans):
    """A function tool with needs_approval runs only when approve() says yes; refused, the cell's call rejects."""
    gated = function_tool(shipping_rate, needs_approval=True)
    code = (
        'try { return await shipping_rate({country: "FR", weight_kg: 1}); } catch (e) { return {refused: e.message}; }'
    )
    for decision in (True, False):
        CALLS.clear()
        tool = codemode_tool(base_url, [gated], api_key=API_KEY, approve=lambda name, args: decision)  # noqa: B023 - used in this iteration
        model = scripted(code)
        Runner.run_sync(Agent(name="shipper", model=model, tools=[tool]), "rate")
        answer = tool_output(model)
        if decision:
            assert answer["value"] == {"country": "FR", "price": 6.0} and CALLS, answer
        else:
            assert "needs approval" in answer["value"]["refused"] and CALLS == [], answer


def test_a_cell_that_never_ends_is_a_tool_error_the_model_sees(base_url):
    """A cell yielding for ever is stopped at the run's max_legs (an exec field of the tool) and cancelled; the
    model's next input is the tool's answer saying it stopped the cell, naming the bound."""
    tool = codemode_tool(base_url, api_key=API_KEY, max_legs=3)
    model = scripted("for (;;) await yield_control('again')")
    result = Runner.run_sync(Agent(name="looper", model=model, tools=[tool]), "loop")
    assert result.final_output == "done"
    answer = tool_output(model)
    assert answer["status"] == "stopped" and answer["code"] == "max_legs_exceeded", answer
    assert "max_legs=3" in answer["error"]
