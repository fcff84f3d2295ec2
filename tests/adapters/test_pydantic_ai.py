"""The pydantic-ai toolset against a live server, driven by pydantic-ai's own FunctionModel."""

from __future__ import annotations

import json
from typing import Any

from codemode_client import AsyncClient
from codemode_client.pydantic_ai_toolset import CodeModeToolset
from pydantic_ai import Agent, FunctionToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests.adapters.conftest import API_KEY, CALLS, CELL, check_outcome, lookup_order, shipping_rate


def scripted(code: str, seen: dict[str, Any], arguments: dict[str, Any] | None = None) -> FunctionModel:
    """A model that writes one cell (``arguments``: the whole call), then answers with the tool's return as its
    final text; ``seen`` gets the tools' descriptions and argument schemas it was shown."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if not returns:
            seen["tools"] = {t.name: t.description for t in info.function_tools}
            seen["schemas"] = {t.name: t.parameters_json_schema for t in info.function_tools}
            return ModelResponse(parts=[ToolCallPart("codemode", arguments or {"code": code})])
        return ModelResponse(parts=[TextPart(json.dumps(returns[-1].content))])

    return FunctionModel(model)


def test_a_cell_calls_two_pydantic_ai_tools_and_the_value_reaches_the_model(base_url):
    """The model sees one codemode tool (the server's description plus the two tools); its cell calls both
    tools through pydantic-ai (whose validation refuses a bad argument), and the cell's value is the answer."""
    seen: dict[str, Any] = {}
    toolset = CodeModeToolset(AsyncClient(base_url, API_KEY), FunctionToolset([lookup_order, shipping_rate]))
    result = Agent(scripted(CELL, seen), toolsets=[toolset]).run_sync("ship order A-17")
    assert list(seen["tools"]) == ["codemode"]
    description = seen["tools"]["codemode"]
    assert description.startswith("Run JavaScript or TypeScript (types are stripped, not checked) in a fresh sandbox")
    assert "- lookup_order(" in description and "- shipping_rate(" in description
    check_outcome(json.loads(result.output))


def test_a_tool_that_requires_approval_asks_the_approver(base_url):
    """A wrapped tool with requires_approval runs only when approve() says yes; refused, the cell's call rejects."""
    asked: list[str] = []
    tools = FunctionToolset([lookup_order])
    tools.add_function(shipping_rate, requires_approval=True)
    code = (
        'try { return await shipping_rate({country: "FR", weight_kg: 1}); } catch (e) { return {refused: e.message}; }'
    )
    for decision in (True, False):
        CALLS.clear()

        def approve(name: str, args: Any) -> bool:
            asked.append(name)
            return decision  # noqa: B023 - the toolset is used in this iteration

        toolset = CodeModeToolset(AsyncClient(base_url, API_KEY), tools, approve=approve)
        answer = json.loads(Agent(scripted(code, {}), toolsets=[toolset]).run_sync("rate").output)
        if decision:
            assert answer["value"] == {"country": "FR", "price": 6.0} and CALLS, answer
        else:
            assert "requires approval" in answer["value"]["refused"] and CALLS == [], answer
    assert asked == ["shipping_rate", "shipping_rate"]


def test_one_toolset_serves_runs_on_separate_event_loops(base_url):
    """A toolset made from a URL opens its connection per call, so two run_sync calls (two event loops) both work."""
    toolset = CodeModeToolset(base_url, FunctionToolset([lookup_order]), api_key=API_KEY)
    agent = Agent(scripted('return (await lookup_order({order_id: "B-2"})).order_id;', {}), toolsets=[toolset])
    assert [json.loads(agent.run_sync("x").output)["value"] for _ in range(2)] == ["B-2", "B-2"]


def test_a_cell_refused_before_it_ran_is_a_model_retry(base_url):
    """A cell with a syntax error is pydantic-ai's ModelRetry (the model sees the error as a tool return whose
    outcome is "retried", cause model_retry); the model's next cell runs."""
    retries: list[ToolReturnPart] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        retries[:] = [p for p in returns if p.outcome == "retried"]
        if returns and returns[-1].outcome != "retried":
            return ModelResponse(parts=[TextPart(json.dumps(returns[-1].content))])
        code = "return 6 * 7" if retries else "return 6 *"
        return ModelResponse(parts=[ToolCallPart("codemode", {"code": code})])

    toolset = CodeModeToolset(base_url, FunctionToolset([lookup_order]), api_key=API_KEY)
    answer = json.loads(Agent(FunctionModel(model), toolsets=[toolset]).run_sync("compute").output)
    assert answer == {"status": "completed", "value": 42}, answer
    assert len(retries) == 1 and retries[0].retry is not None and retries[0].retry.cause == "model_retry"
    assert "refused the cell before running it (invalid_input): SyntaxError at cell.js:" in str(retries[0].content)


def test_a_cell_that_never_ends_is_a_tool_error_the_model_sees(base_url):
    """A cell yielding for ever is stopped at the run's max_legs (an exec field of the toolset) and cancelled;
    the model gets pydantic-ai's retry prompt naming the bound, and can write other code."""
    prompts: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("codemode", {"code": "for (;;) await yield_control('again')"})])
        prompts.append(f"{returns[-1].outcome}: {returns[-1].content}")
        return ModelResponse(parts=[TextPart("gave up")])

    toolset = CodeModeToolset(AsyncClient(base_url, API_KEY), max_legs=3)
    assert Agent(FunctionModel(model), toolsets=[toolset]).run_sync("loop").output == "gave up"
    assert len(prompts) == 1 and prompts[0].startswith("retried: "), prompts
    assert "max_legs_exceeded" in prompts[0] and "max_legs=3" in prompts[0], prompts
