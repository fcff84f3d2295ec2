"""Catalog views: handle metadata, search ranking and limits, describe, client tools."""

from __future__ import annotations

import json

import pytest

from service.tools.catalog import CatalogLimits, ClientTool, ToolCatalog
from service.tools.errors import InvalidInputError, ToolConfigError

CLOSED = {
    "type": "object",
    "properties": {"id": {"type": "string"}},
    "required": ["id"],
    "additionalProperties": False,
}


def _walk(value):
    yield value
    if isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def test_handles_are_safe_metadata(make_tool) -> None:
    """Handles carry callable/tool name, description, source, hints; never ids, plugin ids or nulls."""
    spec = make_tool("lookup", plugin_id="secretplugin", label="Look up", output_schema=CLOSED, input_schema=CLOSED)
    view = ToolCatalog.build([spec, make_tool("plain")]).view()
    handles = view.handles()
    assert handles[0] == {
        "callableName": "lookup",
        "toolName": "lookup",
        "label": "Look up",
        "description": "lookup tool",
        "source": "plugin",
        "input": "{ id: string }",
        "output": "{ id: string }",
    }
    assert "label" not in handles[1]
    text = json.dumps(handles)
    assert "secretplugin" not in text and "demo.plain" not in text
    assert all(v is not None for v in _walk(handles))


def test_a_shared_view_makes_its_handles_once(make_tool) -> None:
    """Every cell of a policy shares its view: the handles are made on the first call and reused, and a
    caller changing the list it got does not change what the next caller gets."""
    catalog = ToolCatalog.build([make_tool("lookup"), make_tool("plain")])
    view = catalog.view()
    assert catalog.view() is view
    first = view.handles()
    first.append({"callableName": "intruder"})
    again = view.handles()
    assert [h["callableName"] for h in again] == ["lookup", "plain"]
    assert all(a is b for a, b in zip(first, again, strict=False))


def test_output_hint_only_for_complete_trusted_schema(make_tool) -> None:
    """An open output schema gets no `output`; client tools get `input: unknown` and no output."""
    open_out = {"type": "object", "properties": {"id": {"type": "string"}}}
    view = ToolCatalog.build([make_tool("open", output_schema=open_out)]).view(
        client_tools=[ClientTool("ask", "Ask the user", {"type": "object"})]
    )
    assert "output" not in view.handle("open")
    assert view.handle("ask") == {
        "callableName": "ask",
        "toolName": "ask",
        "description": "Ask the user",
        "source": "client",
        "input": "unknown",
    }


def test_describe_has_parameters_and_output_schema(make_tool) -> None:
    """describe() adds `name`, `parameters` and (trusted) `outputSchema` to the metadata."""
    view = ToolCatalog.build([make_tool("lookup", input_schema=CLOSED, output_schema=CLOSED)]).view(
        client_tools=[ClientTool("ask", input_schema=CLOSED)]
    )
    described = view.describe("lookup")
    assert described["name"] == "lookup" and described["callableName"] == "lookup"
    assert described["parameters"] == CLOSED and described["outputSchema"] == CLOSED
    client = view.describe("ask")
    assert client["parameters"] == CLOSED and "outputSchema" not in client and "output" not in client


@pytest.fixture
def search_view(make_tool):
    tools = [
        make_tool("quote_shipping", description="Price a parcel between two countries."),
        make_tool("track_package", description="Tracking history of a parcel."),
        make_tool("list_carriers", description="Carriers that can ship parcels."),
        make_tool("weather", description="Forecast for a city."),
        make_tool("Weather", description="Another forecast tool."),
    ]
    return ToolCatalog.build(tools).view()


def test_search_exact_then_case_insensitive(search_view) -> None:
    """Exact callable spelling comes first, then case-insensitive name matches; no ranking mixed in."""
    assert [h["callableName"] for h in search_view.search("Weather")] == ["Weather", "weather"]
    assert [h["callableName"] for h in search_view.search("TRACK_PACKAGE")] == ["track_package"]


def test_search_ranks_by_name_and_description(search_view) -> None:
    """Ranked search prefers name words over description words; unrelated tools are left out."""
    found = [h["callableName"] for h in search_view.search("parcel tracking")]
    assert found[0] == "track_package"
    assert set(found) == {"track_package", "quote_shipping", "list_carriers"}
    assert [h["callableName"] for h in search_view.search("carriers")][0] == "list_carriers"


def test_search_no_match_is_empty(search_view) -> None:
    """A query matching nothing returns []."""
    assert search_view.search("kubernetes") == []
    assert search_view.search("") == []


def test_search_ties_are_ordered_by_name_not_registration(make_tool) -> None:
    """Tools that score alike come back in callable-name order, whatever order they were registered in."""
    names = ["zeta", "alpha", "mid", "beta"]
    for order in (names, names[::-1]):
        view = ToolCatalog.build([make_tool(name, description="Common word.") for name in order]).view()
        assert [h["callableName"] for h in view.search("common")] == ["alpha", "beta", "mid", "zeta"]


def test_search_limit_clamped(make_tool) -> None:
    """Omitted limit -> default; larger -> max; zero/negative -> 1; settings may lower both."""
    tools = [make_tool(f"tool_{i:02d}", description="common word") for i in range(60)]
    view = ToolCatalog.build(tools).view()
    assert len(view.search("common")) == 8
    assert len(view.search("common", 500)) == 50
    assert len(view.search("common", 0)) == 1
    assert len(view.search("common", 3.9)) == 3
    low = ToolCatalog.build(tools, limits=CatalogLimits(search_default_limit=8, max_search_limit=3)).view()
    assert len(low.search("common")) == 3 and len(low.search("common", 40)) == 3


def test_limits_reject_out_of_range() -> None:
    """max_search_limit outside 1..50 is a config error."""
    with pytest.raises(ToolConfigError, match="max_search_limit"):
        CatalogLimits(max_search_limit=51)


@pytest.mark.parametrize(
    ("client_tools", "message"),
    [
        ([ClientTool("")], r"client_tools\[0\].name"),
        ([ClientTool("a"), ClientTool("a")], r"client_tools\[1\].name: 'a' is declared twice"),
        ([ClientTool("a", input_schema={"type": "nope"})], r"client_tools\[0\].input_schema"),
        ([{"name": "a", "inputSchema": {}}], r"client_tools\[0\].inputSchema: unknown field"),
    ],
)
def test_bad_client_tools_name_the_field(client_tools, message) -> None:
    """Malformed client tool declarations are invalid_input naming the field."""
    with pytest.raises(InvalidInputError, match=message):
        ToolCatalog.build([]).view(client_tools=client_tools)


def test_duplicate_tool_ids_are_config_errors(make_tool) -> None:
    """Two tools with the same id stop the build with a message naming the id."""
    with pytest.raises(ToolConfigError, match='tool id "demo.x" is used by two tools'):
        ToolCatalog.build([make_tool("x"), make_tool("x")])
