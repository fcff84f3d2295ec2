"""McpScope: one caller's policy-filtered view of the hub, against the real stdio test server."""

from __future__ import annotations

import pytest

from service.mcp.errors import McpUnknownTool
from service.mcp.hub import McpHub
from service.mcp.scope import McpScope
from service.tools.policy import McpVisibility, ToolPolicy
from tests.mcp.conftest import stdio_config

pytestmark = pytest.mark.anyio

D = 10.0


def scope(hub: McpHub, tenant: str = "t", **policy: list[str]) -> McpScope:
    return McpScope(hub, tenant, McpVisibility.of(ToolPolicy.from_config(policy)))


@pytest.fixture(scope="module")
async def two_servers(anyio_backend: str):
    """A hub with two shared stdio servers, `docs` and `lab`."""
    hub = McpHub([stdio_config(name="docs"), stdio_config(name="lab")])
    yield hub
    await hub.close()


async def test_hidden_server_is_absent_and_refused_before_connecting() -> None:
    """A denied server is not listed, not unavailable, and a call by its name is unknown; nothing connects."""
    hub = McpHub([stdio_config(name="docs")])
    try:
        hidden = scope(hub, deny=["mcp:docs"])
        for attempt in (
            hidden.call_tool("docs", "echo", {"text": "x"}, deadline_s=D),
            hidden.list_resources("docs", deadline_s=D),
            hidden.get_prompt("docs", "greet", {"name": "x"}, deadline_s=D),
        ):
            with pytest.raises(McpUnknownTool, match="Unknown MCP server: docs"):
                await attempt
        with pytest.raises(McpUnknownTool, match="Unknown MCP server: docs"):
            hidden.api_server("docs")
        assert hub.views("t") == []  # no connection was opened for the refused calls
        assert await hidden.servers(deadline_s=D) == []
        assert hidden.unavailable() == [] and hidden.api_root()["servers"] == []
        assert hub.views("t") == []  # listing skipped the hidden server too
    finally:
        await hub.close()


async def test_hidden_tool_is_absent_and_refused_without_reaching_the_server(two_servers: McpHub) -> None:
    """A denied tool is missing from the view and `$api`; calling it by its real name is unknown and sends nothing."""
    narrow = scope(two_servers, deny=["mcp:docs/crash"])
    (docs, lab) = await narrow.servers(deadline_s=D)
    assert "crash" not in [t.name for t in docs.tools] and "crash" in [t.name for t in lab.tools]
    assert docs.has_resources and docs.has_prompts  # a tool deny leaves the server whole
    before = two_servers.view("docs", "t")
    with pytest.raises(McpUnknownTool, match="MCP server 'docs' has no tool 'crash'"):
        await narrow.call_tool("docs", "crash", {}, deadline_s=D)
    with pytest.raises(McpUnknownTool, match="has no tool 'crash'"):
        narrow.api_server("docs", "crash")
    assert "crash" not in [t["toolName"] for t in narrow.api_server("docs")["tools"]]
    # Had `crash` been sent, the server would have died and this call would need a new connection.
    assert (await narrow.call_tool("docs", "echo", {"text": "alive"}, deadline_s=D))["content"][0]["text"] == "alive"
    assert two_servers.view("docs", "t") is before


async def test_allow_list_by_tool_shows_only_those_tools_without_resources(two_servers: McpHub) -> None:
    """`allow = ["mcp:docs/echo"]`: docs has only echo and no resources/prompts; lab is hidden."""
    only_echo = scope(two_servers, allow=["mcp:docs/echo"])
    (docs,) = await only_echo.servers(deadline_s=D)
    assert [t.name for t in docs.tools] == ["echo"] and not docs.has_resources and not docs.has_prompts
    assert only_echo.api_root()["servers"] == [{"identifier": "docs", "serverName": "docs", "toolCount": 1}]
    with pytest.raises(McpUnknownTool, match="resources and prompts are not available"):
        await only_echo.read_resource("docs", "docs://readme", deadline_s=D)
    with pytest.raises(McpUnknownTool, match="has no tool 'add'"):
        await only_echo.call_tool("docs", "add", {"a": 1, "b": 2}, deadline_s=D)
    with pytest.raises(McpUnknownTool, match="Unknown MCP server: lab"):
        await only_echo.call_tool("lab", "echo", {"text": "x"}, deadline_s=D)


async def test_unfiltered_scope_sees_everything(two_servers: McpHub) -> None:
    """Without a policy the scope shows every server whole, as the hub does."""
    full = McpScope(two_servers, "t")
    views = await full.servers(deadline_s=D)
    assert [v.identifier for v in views] == ["docs", "lab"]
    assert [len(v.tools) for v in views] == [13, 13]
    read = await full.read_resource("docs", "docs://readme", deadline_s=D)
    assert read["contents"][0]["text"] == "Read me first."


async def test_non_string_server_identifier_is_unknown(two_servers: McpHub) -> None:
    """A server identifier that is not a string is refused as unknown (no lookup error)."""
    with pytest.raises(McpUnknownTool, match="Unknown MCP server"):
        await McpScope(two_servers, "t").call_tool(["docs"], "echo", {}, deadline_s=D)  # type: ignore[arg-type]
