"""Each adapter describes the language its cells run: the server's ``/v1/tool-description`` for that language.

For each framework and each language, the code tool the model sees must carry the server's description and
input schema for that language (fetched here over HTTP, independently of the adapter), then one line per
framework tool spelled as a cell of that language calls it; and a cell written from that description, in
that language, runs and calls the framework's tools.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from agents import Agent as AgentsAgent
from agents import Runner, function_tool
from codemode_client import AsyncClient
from codemode_client.langchain_tool import codemode_tool as langchain_tool
from codemode_client.openai_agents_tool import codemode_tool as agents_tool
from codemode_client.pydantic_ai_toolset import CodeModeToolset
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from pydantic_ai import Agent, FunctionToolset

from tests.adapters import test_langchain, test_openai_agents, test_pydantic_ai
from tests.adapters.conftest import API_KEY, CELLS, check_outcome, lookup_order, shipping_rate
from tests.adapters.test_openai_agents import spans  # noqa: F401 - the fixture: no trace leaves the test

LANGUAGES = ("javascript", "python")
#: How each language's description tells the model to call its own tools.
CALL_FORM = {"javascript": "`await name({...})`", "python": "`await name(field=value)`"}


def served(base_url: str, language: str) -> dict[str, Any]:
    """``GET /v1/tool-description?language=...`` for the adapters' key, straight from the server."""
    r = httpx.get(
        f"{base_url}/v1/tool-description",
        params={"language": language},
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def check_description(description: str, schema: dict[str, Any], base_url: str, language: str) -> None:
    server = served(base_url, language)
    assert description.startswith(server["description"] + "\n\nYour own tools, also "), description[:200]
    own_tools = description[len(server["description"]) :]
    assert CALL_FORM[language] in own_tools and "- lookup_order(" in own_tools and "- shipping_rate(" in own_tools
    other = "python" if language == "javascript" else "javascript"
    assert CALL_FORM[other] not in own_tools
    assert schema == server["input_schema"]


def call_arguments(language: str) -> dict[str, Any]:
    """What a model following the language's input schema sends: the code, and the language when it is asked."""
    return {"code": CELLS[language], **({"language": language} if language != "javascript" else {})}


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_pydantic_ai_toolset_describes_its_language(base_url: str, language: str):
    seen: dict[str, Any] = {}
    toolset = CodeModeToolset(
        AsyncClient(base_url, API_KEY), FunctionToolset([lookup_order, shipping_rate]), language=language
    )
    model = test_pydantic_ai.scripted(CELLS[language], seen, arguments=call_arguments(language))
    result = Agent(model, toolsets=[toolset]).run_sync("ship order A-17")
    check_description(seen["tools"]["codemode"], seen["schemas"]["codemode"], base_url, language)
    check_outcome(json.loads(result.output))


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_langchain_tool_describes_its_language(base_url: str, language: str):
    tool = langchain_tool(base_url, tools=[lookup_order, shipping_rate], api_key=API_KEY, language=language)
    assert isinstance(tool.args_schema, dict)
    check_description(tool.description, tool.args_schema, base_url, language)
    model = test_langchain.scripted(CELLS[language], arguments=call_arguments(language))
    model.received.clear()
    create_agent(model, [tool]).invoke({"messages": [("user", "ship A-17")]})
    (sent,) = [m for m in model.received[-1] if isinstance(m, ToolMessage)]
    check_outcome(json.loads(sent.content))


@pytest.mark.usefixtures("spans")
@pytest.mark.parametrize("language", LANGUAGES)
def test_the_openai_agents_tool_describes_its_language(base_url: str, language: str):
    tools = [function_tool(lookup_order), function_tool(shipping_rate, failure_error_function=None)]
    tool = agents_tool(base_url, tools, api_key=API_KEY, language=language)
    check_description(tool.description, tool.params_json_schema, base_url, language)
    model = test_openai_agents.scripted(CELLS[language], arguments=call_arguments(language))
    Runner.run_sync(AgentsAgent(name="shipper", model=model, tools=[tool]), "ship A-17")
    check_outcome(test_openai_agents.tool_output(model))


def test_a_model_that_names_another_language_is_told_which_one_runs():
    """A Python tool called with ``language: "javascript"`` refuses, naming the language it runs."""
    from codemode_client.adapters import exec_arguments

    with pytest.raises(ValueError, match="runs python cells, not 'javascript'"):
        exec_arguments({"code": "1", "language": "javascript"}, "python")
    assert exec_arguments({"code": "1", "language": "python"}, "python") == ("1", {"language": "python"})
