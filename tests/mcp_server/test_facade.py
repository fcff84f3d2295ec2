"""The facade through the SDK's MCP client, over Streamable HTTP (`/mcp` of `codemode serve`) and over
stdio (`codemode mcp`): the same tests, both transports, one connection per transport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.mcp_server.conftest import ALPHA, connected

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PLUGIN_AND_MCP = """
text("quoting");
const quote = await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2});
const sum = await MCP.docs.add({a: 2, b: 3});
return {carrier: quote.carrier, sum: sum.structuredContent.sum};
"""


@pytest.fixture(scope="module", params=["http", "stdio"])
async def alpha(
    request: pytest.FixtureRequest, config_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Client]:
    """A connected client of tenant alpha (every tool) on one transport."""
    async with connected(request, config_file, tmp_path_factory, ALPHA) as client:
        yield client


def text_of(result: Any) -> str:
    assert [block.type for block in result.content] == ["text"]
    return str(result.content[0].text)


async def test_lists_four_tools_with_the_envelope_as_output_schema(alpha: Client) -> None:
    """tools/list: exec, wait, cancel, search_tools; exec teaches the API, lists this key's tools and
    points to the declaration resources; cell tools declare the envelope schema."""
    tools = {t.name: t for t in (await alpha.list_tools()).tools}
    assert sorted(tools) == ["cancel", "exec", "search_tools", "wait"]
    exec_tool = tools["exec"]
    assert "- quote_shipping {" in exec_tool.description  # the quick index of this key
    assert "codemode://api/tools/<name>.d.ts" in exec_tool.description
    assert "MCP.<server>.<tool>" in exec_tool.description
    assert exec_tool.input_schema["required"] == ["code"]
    assert exec_tool.input_schema["properties"]["code"]["maxLength"] == 1024 * 1024
    assert "client_tools" not in exec_tool.input_schema["properties"]
    for name in ("exec", "wait", "cancel"):
        schema = tools[name].output_schema
        assert schema is not None and {"status", "cell_id", "telemetry"} <= set(schema["properties"])
    # alpha may not answer approvals (mcp_model_approvals is off): a person decides them, not its model
    assert set(tools["wait"].input_schema["properties"]) == {"cell_id", "timeout_ms", "tool_results"}
    assert tools["search_tools"].annotations.read_only_hint is True


async def test_listings_keep_one_order_and_say_how_long_they_may_be_reused(alpha: Client) -> None:
    """tools/list answers the four tools in one fixed order every time (a prompt cache keeps its prefix),
    resources/list its files in one order; on 2026-07-28 (the SDK client's choice on both transports) each
    listing carries ttlMs and cacheScope: a key's tools and files are private, the templates public."""
    assert alpha.protocol_version == "2026-07-28"
    listings = [await alpha.list_tools(cache_mode="bypass") for _ in range(2)]
    assert [[t.name for t in listing.tools] for listing in listings] == [["exec", "wait", "cancel", "search_tools"]] * 2
    assert [t.model_dump() for t in listings[0].tools] == [t.model_dump() for t in listings[1].tools]
    assert (listings[0].ttl_ms, listings[0].cache_scope) == (60_000, "private")
    resources = [await alpha.list_resources(cache_mode="bypass") for _ in range(2)]
    uris = [str(r.uri) for r in resources[0].resources]
    assert uris == [str(r.uri) for r in resources[1].resources] and len(uris) > 3
    assert (resources[0].ttl_ms, resources[0].cache_scope) == (60_000, "private")
    templates = await alpha.list_resource_templates(cache_mode="bypass")
    assert (templates.ttl_ms, templates.cache_scope) == (3_600_000, "public")


async def test_a_cell_calls_a_plugin_tool_and_an_mcp_server(alpha: Client) -> None:
    """exec runs a cell that calls the shipping plugin and the MCP test server: the model text has the
    output and the result (wrapped: MCP data is network-derived), structuredContent the envelope."""
    result = await alpha.call_tool("exec", {"code": PLUGIN_AND_MCP, "title": "mcp facade"})
    assert result.is_error is False
    envelope = result.structured_content
    assert envelope is not None and envelope["status"] == "completed"
    assert envelope["value"] == {"carrier": envelope["value"]["carrier"], "sum": 5}
    assert isinstance(envelope["value"]["carrier"], str) and envelope["telemetry"]["call_count"] == 2
    text = text_of(result)
    assert "quoting" in text
    assert '"sum":5' in text and "Result: " in text
    assert envelope["untrusted_content"] is True and "EXTERNAL_UNTRUSTED_CONTENT" in text


async def test_a_failing_cell_is_an_error_result_with_its_envelope(alpha: Client) -> None:
    """A failed cell answers isError with the error in the text and the failed envelope beside it."""
    result = await alpha.call_tool("exec", {"code": 'text("before"); null.boom'})
    assert result.is_error is True
    envelope = result.structured_content
    assert envelope is not None and envelope["status"] == "failed" and envelope["failure_phase"] == "guest"
    text = text_of(result)
    assert "before" in text and "TypeError" in text and "guest phase" in text


async def test_bad_arguments_are_error_results_naming_the_argument(alpha: Client) -> None:
    """Arguments are checked with the HTTP API's own bounds; a refusal names the argument."""
    unknown = await alpha.call_tool("exec", {"code": "return 1", "client_tools": []})
    assert unknown.is_error is True and "'client_tools'" in text_of(unknown)
    blank = await alpha.call_tool("exec", {"code": "   "})
    assert blank.is_error is True and text_of(blank).startswith("Refused (invalid_request") and "code" in text_of(blank)
    timeout = await alpha.call_tool("exec", {"code": "return 1", "timeout_ms": 10**9})
    assert timeout.is_error is True and "timeout_ms" in text_of(timeout)
    bad_id = await alpha.call_tool("wait", {"cell_id": "../etc/passwd"})
    assert bad_id.is_error is True and "cell_id" in text_of(bad_id)
    half_decision = await alpha.call_tool("wait", {"cell_id": "cell_1", "approvals": [{"id": "req_1"}]})
    assert half_decision.is_error is True and "approvals.0.approve" in text_of(half_decision)


async def test_wait_resumes_a_waiting_cell_and_cancel_ends_one(alpha: Client) -> None:
    """A cell still blocked on an MCP call at its timeout answers waiting (text says to call wait);
    wait resumes it to completion; cancel ends another one as failed (aborted)."""
    code = 'const r = await MCP.docs.sleep_echo({seconds: 0.5, value: "late"}); return r.structuredContent ?? r.content'
    parked = await alpha.call_tool("exec", {"code": code, "timeout_ms": 100})
    envelope = parked.structured_content
    assert envelope is not None and envelope["status"] == "waiting", envelope
    assert parked.is_error is False and "Call `wait` with cell_id" in text_of(parked)
    assert "Still running on the host: MCP.docs.sleep_echo." in text_of(parked)
    done = await alpha.call_tool("wait", {"cell_id": envelope["cell_id"], "timeout_ms": 10000})
    assert done.structured_content is not None and done.structured_content["status"] == "completed"
    assert "late" in text_of(done)

    other = await alpha.call_tool("exec", {"code": code, "timeout_ms": 100})
    assert other.structured_content is not None and other.structured_content["status"] == "waiting"
    cancelled = await alpha.call_tool("cancel", {"cell_id": other.structured_content["cell_id"]})
    assert cancelled.is_error is True
    assert cancelled.structured_content is not None and cancelled.structured_content["code"] == "aborted"


async def test_declaration_resources_are_what_a_cell_reads(alpha: Client) -> None:
    """resources/list names every declaration file as codemode://api/<path>; resources/read returns
    exactly what API.read gives a cell of the same key."""
    uris = [str(r.uri) for r in (await alpha.list_resources()).resources]
    assert {
        "codemode://api/results.d.ts",
        "codemode://api/tools/quote_shipping.d.ts",
        "codemode://api/mcp/index.d.ts",
        "codemode://api/mcp/docs.d.ts",
    } <= set(uris)
    for path in ("tools/quote_shipping.d.ts", "mcp/docs.d.ts"):
        read = await alpha.read_resource(f"codemode://api/{path}")
        (contents,) = read.contents
        cell = await alpha.call_tool("exec", {"code": f'return (await API.read("{path}")).content'})
        assert cell.structured_content is not None
        assert contents.text == cell.structured_content["value"]
    assert (
        "declare function quote_shipping("
        in (await alpha.read_resource("codemode://api/tools/quote_shipping.d.ts")).contents[0].text
    )


async def test_resource_templates_name_the_files_a_cell_reads(alpha: Client) -> None:
    """resources/templates/list (asked on connect by the Inspector) answers the tool and MCP-server
    declaration templates; a template filled with a listed name reads that file."""
    templates = {t.uri_template: t for t in (await alpha.list_resource_templates()).resource_templates}
    assert set(templates) == {"codemode://api/tools/{name}.d.ts", "codemode://api/mcp/{server}.d.ts"}
    assert all(t.mime_type == "text/typescript" and t.description for t in templates.values())
    listed = {str(r.uri) for r in (await alpha.list_resources()).resources}
    for template, value in (
        ("codemode://api/tools/{name}.d.ts", "quote_shipping"),
        ("codemode://api/mcp/{server}.d.ts", "docs"),
    ):
        uri = template.replace("{name}", value).replace("{server}", value)
        assert uri in listed
        assert value in (await alpha.read_resource(uri)).contents[0].text


async def test_reading_an_unknown_resource_is_a_protocol_error(alpha: Client) -> None:
    """An unknown declaration path and a foreign URI scheme are refused with the reason."""
    for uri in ("codemode://api/tools/nope.d.ts", "file:///etc/passwd", "codemode://api/../x"):
        with pytest.raises(Exception) as refused:
            await alpha.read_resource(uri)
        assert "API file" in str(refused.value) or "codemode://api/" in str(refused.value)


async def test_search_tools_finds_native_then_mcp_tools(alpha: Client) -> None:
    """search_tools ranks this key's native tools and adds MCP tools; text names the declaration."""
    result = await alpha.call_tool("search_tools", {"query": "shipping quote"})
    assert result.is_error is False and result.structured_content is not None
    names = [h["callableName"] for h in result.structured_content["tools"]]
    assert names[0] == "quote_shipping"
    assert "codemode://api/tools/quote_shipping.d.ts" in text_of(result)
    echo = await alpha.call_tool("search_tools", {"query": "echo", "limit": 5})
    assert echo.structured_content is not None
    assert "MCP.docs.echo" in [h["callableName"] for h in echo.structured_content["tools"]]
    assert "EXTERNAL_UNTRUSTED_CONTENT" in text_of(echo)  # remote descriptions are data


async def test_output_over_the_budget_is_a_spelled_out_truncation(alpha: Client) -> None:
    """Output over max_output_bytes reaches the model as a truncation note within the budget, never as
    marker JSON, and the envelope keeps the marker."""
    result = await alpha.call_tool("exec", {"code": 'text("x".repeat(20000)); return "done"', "max_output_bytes": 2048})
    assert result.is_error is False and result.structured_content is not None
    (marker,) = result.structured_content["output"]
    assert marker["truncated"] is True
    text = text_of(result)
    assert text.startswith(f"[output truncated: {marker['omittedBytes']} more bytes are not shown.")
    assert text.endswith('Result: "done"') and len(text.encode()) <= 2048 + 200
