"""The hub against @modelcontextprotocol/server-everything (Node) over stdio."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from service.mcp.hub import McpHub
from service.mcp.scope import McpScope
from service.settings_mcp import McpServerConfig

pytestmark = pytest.mark.anyio

BINARY = Path(__file__).resolve().parents[1] / "node" / "node_modules" / ".bin" / "mcp-server-everything"
D = 20.0


@pytest.fixture(scope="module")
async def everything(anyio_backend: str) -> AsyncIterator[McpScope]:
    """A hub with server-everything, as a tenant without tool policy sees it; a missing binary fails
    with the install hint."""
    if not BINARY.exists():
        pytest.fail(f"{BINARY} is missing; run `npm ci --prefix tests/node`")
    hub = McpHub([McpServerConfig(name="everything", command=str(BINARY), args=("stdio",), timeout_ms=20000)])
    yield McpScope(hub, "default")
    await hub.close()


async def test_lists_tools_resources_and_prompts(everything: McpScope) -> None:
    """The server's tools are listed under camelCased identifiers, with resources and prompts."""
    (view,) = await everything.servers()
    assert view.identifier == "everything" and view.has_resources and view.has_prompts
    idents = {t.name: t.identifier for t in view.tools}
    assert idents["echo"] == "echo" and idents["get-sum"] == "getSum"
    assert everything.api_root()["servers"][0]["toolCount"] == len(view.tools)


async def test_calls_tools(everything: McpScope) -> None:
    """echo answers with text; get-sum answers too (called through its identifier)."""
    result = await everything.call_tool("everything", "echo", {"message": "hi"}, deadline_s=D)
    assert result["content"][0] == {"type": "text", "text": "Echo: hi"}
    total = await everything.call_tool("everything", "getSum", {"a": 2, "b": 3}, deadline_s=D)
    assert "5" in total["content"][0]["text"]


async def test_reads_a_listed_resource(everything: McpScope) -> None:
    """A resource from the listing can be read back in the MCP shape."""
    listing = await everything.list_resources("everything", deadline_s=D)
    uri = listing["resources"][0]["uri"]
    read = await everything.read_resource("everything", uri, deadline_s=D)
    assert read["contents"][0]["uri"] == uri
    assert read["contents"][0].get("text") or read["contents"][0].get("blob")


async def test_gets_a_prompt_with_arguments(everything: McpScope) -> None:
    """A prompt with a required argument renders messages mentioning it."""
    listing = await everything.list_prompts("everything", deadline_s=D)
    assert "args-prompt" in {p["name"] for p in listing["prompts"]}
    got = await everything.get_prompt("everything", "args-prompt", {"city": "Lisbon"}, deadline_s=D)
    assert got["messages"] and "Lisbon" in got["messages"][0]["content"]["text"]
