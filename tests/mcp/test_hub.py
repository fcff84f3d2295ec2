"""The hub against the SDK-built test server, over stdio and over Streamable HTTP."""

from __future__ import annotations

import time

import anyio
import pytest

from service.mcp.errors import McpError
from service.mcp.hub import McpHub
from service.mcp.results import ResultChecker
from service.mcp.scope import McpScope
from service.tools.schema_guard import SchemaLimits
from tests.mcp.conftest import stdio_config
from tests.support.helper_pools import helper_pool

pytestmark = pytest.mark.anyio

D = 10.0  # caller deadline for calls that should answer at once


def everything(hub: McpHub) -> McpScope:
    """The hub as a tenant sees it with no tool policy: every server and tool shown (resources,
    prompts and declarations are asked through a scope, which checks visibility once)."""
    return McpScope(hub, "default")


async def test_servers_lists_every_tool_across_pages(hub: McpHub) -> None:
    """servers() lists all tools even though the server pages them four at a time."""
    (view,) = await hub.servers(tenant="default")
    assert view.identifier == "tests" and view.name == "tests"
    assert [t.name for t in view.tools][:3] == ["echo", "add", "create-issue"]
    assert len(view.tools) == 13
    assert view.has_resources and view.has_prompts


async def test_identifiers_follow_the_rules(hub: McpHub) -> None:
    """Tool identifiers are camelCased and reserved names get a numeric suffix."""
    (view,) = await hub.servers(tenant="default")
    table = {t.name: t.identifier for t in view.tools}
    assert table["delete"] == "delete2"
    assert table["constructor"] == "constructor2"
    assert table["my-tool"] == "myTool"
    assert table["create-issue"] == "createIssue"
    assert table["sleep_echo"] == "sleep_echo"


async def test_call_keeps_block_annotations_and_drops_top_level_meta(hub: McpHub) -> None:
    """A result keeps block annotations and block _meta, and loses the top-level _meta."""
    result = await hub.call_tool("tests", "echo", {"text": "hi"}, deadline_s=D, tenant="default")
    assert result == {
        "content": [
            {
                "type": "text",
                "text": "hi",
                "annotations": {"audience": ["user"], "priority": 0.5},
                "_meta": {"source": "test"},
            }
        ]
    }


async def test_structured_content_is_returned(hub: McpHub) -> None:
    """A tool with an output schema returns structuredContent next to its content."""
    result = await hub.call_tool("tests", "add", {"a": 2, "b": 3}, deadline_s=D, tenant="default")
    assert result["structuredContent"] == {"sum": 5}
    assert result["content"] == [{"type": "text", "text": "5"}]


async def test_schema_defaults_are_filled_in(hub: McpHub) -> None:
    """Missing keys with schema defaults reach the server with their default values."""
    result = await hub.call_tool("tests", "createIssue", {"title": "Bug"}, deadline_s=D, tenant="default")
    assert result["structuredContent"] == {"seen": {"title": "Bug", "body": "", "labels": ["triage"]}}


async def test_missing_required_keys_are_named(hub: McpHub) -> None:
    """A call without a required key fails before sending, naming the key."""
    with pytest.raises(McpError) as info:
        await hub.call_tool("tests", "createIssue", {"body": "x"}, deadline_s=D, tenant="default")
    assert info.value.code == "mcp_invalid_input"
    assert "title" in info.value.message


async def test_non_object_argument_is_refused(hub: McpHub) -> None:
    """Anything but one plain object is refused with the namespace message."""
    with pytest.raises(McpError) as info:
        await hub.call_tool("tests", "echo", ["hi"], deadline_s=D, tenant="default")
    assert info.value.code == "mcp_invalid_input"
    assert info.value.message == "MCP namespace tools accept one object argument."


async def test_is_error_resolves(hub: McpHub) -> None:
    """isError: true comes back as a result, not an exception."""
    result = await hub.call_tool("tests", "fail", {}, deadline_s=D, tenant="default")
    assert result == {"content": [{"type": "text", "text": "it broke"}], "isError": True}


async def test_output_schema_mismatch_is_a_protocol_error(hub: McpHub) -> None:
    """Structured content that breaks the tool's own output schema fails with mcp_protocol, saying what does
    not match (a tiny schema and value: checked inline, no helper process is started)."""
    helpers = helper_pool(spares=0)
    try:
        results = ResultChecker(helpers, SchemaLimits(), "default", None)
        with pytest.raises(McpError) as info:
            await hub.call_tool("tests", "bad_output", {}, deadline_s=D, tenant="default", results=results)
        assert helpers.started == 0
    finally:
        await helpers.close()
    assert info.value.code == "mcp_protocol"
    assert info.value.message == (
        "MCP server 'tests' sent an unusable answer for tool 'bad_output': its structuredContent does not match "
        "the tool's outputSchema (value withheld): $.n: expected integer, got string"
    )


async def test_unknown_tool_and_server(hub: McpHub) -> None:
    """Unknown tool and server identifiers fail with mcp_unknown_tool."""
    with pytest.raises(McpError) as info:
        await hub.call_tool("tests", "nope", {}, deadline_s=D, tenant="default")
    assert info.value.code == "mcp_unknown_tool" and "nope" in info.value.message
    with pytest.raises(McpError) as info:
        await hub.call_tool("elsewhere", "echo", {}, deadline_s=D, tenant="default")
    assert info.value.code == "mcp_unknown_tool" and "elsewhere" in info.value.message


async def test_concurrent_calls_share_one_server(hub: McpHub) -> None:
    """Three calls are in flight at once on the one server (it counts the calls it is running): each
    sleeps until all three sleep together, or 5 s, so a hub that sent them one by one shows a count of 1."""
    results: list[dict] = []

    async def one(i: int) -> None:
        results.append(
            await hub.call_tool(
                "tests", "sleep_echo", {"seconds": 5, "together": 3, "value": i}, deadline_s=D, tenant="default"
            )
        )

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(one, i)
    assert sorted(r["structuredContent"]["value"] for r in results) == [0, 1, 2]
    assert max(r["structuredContent"]["in_flight"] for r in results) == 3, results


async def test_hanging_tool_is_bounded_by_the_deadline(hub: McpHub) -> None:
    """A tool that never answers fails with mcp_timeout at the caller's deadline, naming server and tool."""
    started = time.monotonic()
    with pytest.raises(McpError) as info:
        await hub.call_tool("tests", "hang", {}, deadline_s=0.4, tenant="default")
    # Half the server's own clock (timeout_ms, 30 s): a bound only a call that waited for that clock reaches.
    assert time.monotonic() - started < stdio_config().timeout_ms / 1000 / 2
    assert info.value.code == "mcp_timeout"
    assert "'tests'" in info.value.message and "hang" in info.value.message
    # The connection is still usable afterwards.
    assert (await hub.call_tool("tests", "add", {"a": 1, "b": 1}, deadline_s=D, tenant="default"))[
        "structuredContent"
    ] == {"sum": 2}


async def test_resources_list_and_read(hub: McpHub) -> None:
    """Resources are listed and read (static and templated) in their MCP shapes."""
    listing = await everything(hub).list_resources("tests", deadline_s=D)
    assert listing == {
        "resources": [
            {"name": "readme", "uri": "docs://readme", "description": "The readme.", "mimeType": "text/plain"}
        ]
    }
    read = await everything(hub).read_resource("tests", "docs://readme", deadline_s=D)
    assert read == {"contents": [{"uri": "docs://readme", "mimeType": "text/plain", "text": "Read me first."}]}
    page = await everything(hub).read_resource("tests", "docs://pages/intro", deadline_s=D)
    assert page["contents"][0]["text"] == "Page intro"
    templates = await everything(hub).list_resource_templates("tests", deadline_s=D)
    assert templates["resourceTemplates"][0]["uriTemplate"] == "docs://pages/{name}"


async def test_prompts_list_and_get(hub: McpHub) -> None:
    """Prompts are listed and rendered with their arguments in their MCP shapes."""
    listing = await everything(hub).list_prompts("tests", deadline_s=D)
    assert listing["prompts"][0]["name"] == "greet"
    assert listing["prompts"][0]["arguments"] == [{"name": "name", "description": "Who", "required": True}]
    got = await everything(hub).get_prompt("tests", "greet", {"name": "Ada"}, deadline_s=D)
    assert got == {
        "description": "A greeting",
        "messages": [{"role": "user", "content": {"type": "text", "text": "Say hello to Ada."}}],
    }


async def test_api_root_shape(hub: McpHub) -> None:
    """MCP.$api() lists servers with identifier, serverName and toolCount."""
    await hub.servers(tenant="default")
    root = everything(hub).api_root()
    assert root["kind"] == "mcp_api" and root["scope"] == "root" and root["header"]
    assert root["servers"] == [{"identifier": "tests", "serverName": "tests", "toolCount": 13}]


async def test_api_server_shape_without_and_with_schemas(hub: McpHub) -> None:
    """MCP.<server>.$api() has no schemas; with a tool and schema: true it has that tool's schemas."""
    await hub.servers(tenant="default")
    api = everything(hub).api_server("tests", None, False)
    assert api["kind"] == "mcp_api" and api["scope"] == "server"
    assert api["server"] == {"identifier": "tests", "serverName": "tests"}
    assert "schemas" not in api and api["note"] and "MCP.tests" in api["header"]
    assert {t["identifier"] for t in api["tools"]} >= {"createIssue", "delete2", "myTool"}
    one = everything(hub).api_server("tests", "add", True)
    assert one["scope"] == "tool"
    assert [t["callableName"] for t in one["tools"]] == ["MCP.tests.add"]
    assert one["schemas"]["add"]["outputSchema"]["required"] == ["sum"]
    assert one["schemas"]["add"]["inputSchema"]["required"] == ["a", "b"]
    with pytest.raises(McpError) as info:
        everything(hub).api_server("tests", "missing", False)
    assert info.value.code == "mcp_unknown_tool"


async def test_reserved_identifier_tools_are_callable(hub: McpHub) -> None:
    """Tools reached through suffixed identifiers call the server under their real names."""
    for ident, name in (("delete2", "delete"), ("constructor2", "constructor"), ("myTool", "my-tool")):
        result = await hub.call_tool("tests", ident, {}, deadline_s=D, tenant="default")
        assert result["content"][0]["text"] == name
