"""The LangChain tool in a LangChain agent (a LangGraph graph) against a live server, driven by LangChain's fake chat model."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from codemode_client.langchain_tool import codemode_tool
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from tests.adapters.conftest import API_KEY, CALLS, CELL, check_outcome, lookup_order, shipping_rate


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, taking tools like a real one and keeping what it was sent."""

    received: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.received.append([])  # the agent binds once per run; nothing to do for a scripted model
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


class ToolRuns(BaseCallbackHandler):
    """Every tool run LangChain's callbacks report, with its parent run."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, UUID, UUID | None]] = []

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self.runs.append((serialized.get("name", "?"), run_id, parent_run_id))


def scripted(code: str, arguments: dict[str, Any] | None = None) -> ScriptedChatModel:
    """A model that writes one cell (``arguments``: the whole call), then says it is done."""
    call = {"name": "codemode", "args": arguments or {"code": code}, "id": "call_1", "type": "tool_call"}
    return ScriptedChatModel(messages=iter([AIMessage(content="", tool_calls=[call]), AIMessage(content="done")]))


def test_a_cell_calls_two_langchain_tools_and_the_value_reaches_the_model(base_url):
    """In a LangChain agent the codemode tool runs a cell calling both LangChain tools (LangChain's validation
    refuses a bad argument before the tool runs); the tool message the model gets next holds the cell's value,
    and the nested tool runs are reported to the callbacks as children of the codemode run."""
    tool = codemode_tool(base_url, tools=[lookup_order, shipping_rate], api_key=API_KEY)
    assert tool.description.startswith(
        "Run JavaScript or TypeScript (types are stripped, not checked) in a fresh sandbox"
    )
    assert "- lookup_order(" in tool.description and "- shipping_rate(" in tool.description
    model = scripted(CELL)
    model.received.clear()
    runs = ToolRuns()
    state = create_agent(model, [tool]).invoke({"messages": [("user", "ship A-17")]}, {"callbacks": [runs]})
    assert state["messages"][-1].content == "done"
    sent = [m for m in model.received[-1] if isinstance(m, ToolMessage)]
    assert len(sent) == 1
    check_outcome(json.loads(sent[0].content))
    codemode_run = next(run_id for name, run_id, _ in runs.runs if name == "codemode")
    nested = [(name, parent) for name, _, parent in runs.runs if name != "codemode"]
    assert [name for name, _ in nested] == ["lookup_order", "shipping_rate"], runs.runs
    assert all(parent == codemode_run for _, parent in nested)


def test_the_blocking_tool_runs_the_same_cell(base_url):
    """tool.invoke (no event loop) runs the cell with the blocking client; the answer is the same."""
    tool = codemode_tool(base_url, tools=[lookup_order, shipping_rate], api_key=API_KEY)
    check_outcome(tool.invoke({"code": CELL}))
    assert CALLS


def test_a_refused_cell_is_an_answer_for_the_model(base_url):
    """Code the service refuses (shell text) comes back as the tool's error text, not as an exception."""
    tool = codemode_tool(base_url, api_key=API_KEY)
    answer = tool.invoke({"code": "ls -la"})
    assert answer["status"] == "failed" and answer["code"] == "invalid_input", answer


def test_a_cell_that_never_ends_is_a_tool_error_the_model_sees(base_url):
    """A cell yielding for ever is stopped at the run's max_legs (an exec field of the tool) and cancelled; the
    tool message the model gets next is LangChain's tool error naming the bound, and the agent goes on."""
    tool = codemode_tool(base_url, api_key=API_KEY, max_legs=3)
    model = scripted("for (;;) await yield_control('again')")
    model.received.clear()
    state = create_agent(model, [tool]).invoke({"messages": [("user", "loop")]})
    assert state["messages"][-1].content == "done"
    [sent] = [m for m in model.received[-1] if isinstance(m, ToolMessage)]
    assert sent.status == "error" and "max_legs_exceeded" in sent.content and "max_legs=3" in sent.content, sent
