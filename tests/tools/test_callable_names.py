"""Callable names (SPEC §7.2): sanitising, prefixes, reserved names, collisions, determinism."""

from __future__ import annotations

import hashlib

import pytest

from service.mcp.identifiers import JS_RESERVED
from service.tools.catalog import ClientTool, ToolCatalog
from service.tools.names import JS_RESERVED_WORDS, RESERVED_NAMES, assign_callable_names, base_name


def _hex(tool_id: str, width: int = 8) -> str:
    return hashlib.sha256(tool_id.encode()).hexdigest()[:width]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("read", "read"),
        ("llm-task", "llm_task"),
        ("web.search", "web_search"),
        ("9patch", "tool_9patch"),
        ("__codemodeResult", "tool___codemodeResult"),
        ("__openclawResult", "tool___openclawResult"),
        ("$dollar", "$dollar"),
        ("héllo wörld", "h_llo_w_rld"),
    ],
)
def test_base_name_table(name: str, expected: str) -> None:
    """Unsafe chars become `_`; digit-leading and reserved-prefix names get `tool_`."""
    assert base_name(name) == expected
    assert assign_callable_names([(f"p.{name}", name)]) == {f"p.{name}": expected}


@pytest.mark.parametrize(
    "name",
    [
        "catalog",
        "API",
        "MCP",
        "text",
        "json",
        "store",
        "load",
        "results",
        "console",
        "setTimeout",
        "yield_control",
        "Array",
        "JSON",
        "Promise",
        "Uint8Array",
        "Object",
        "eval",
        "globalThis",
        "class",
        "delete",
        "require",
        "process",
        "TextDecoder",
    ],
)
def test_reserved_names_get_hash_suffix(name: str) -> None:
    """Reserved words and globals get `_` plus 8 hex of sha256(tool id)."""
    names = assign_callable_names([("p.x", name)])
    assert names["p.x"] == f"{name}_{_hex('p.x')}"
    assert name in RESERVED_NAMES


def test_exact_name_wins_plain_spelling_over_sanitised_twin() -> None:
    """`llm_task` (exact) keeps its spelling; `llm-task` (sanitises to the same) gets a suffix."""
    names = assign_callable_names([("a.dash", "llm-task"), ("z.exact", "llm_task")])
    assert names == {"z.exact": "llm_task", "a.dash": f"llm_task_{_hex('a.dash')}"}


def test_duplicate_names_sorted_by_id() -> None:
    """Two tools with the same exact name: the smaller id keeps the name, the other is suffixed."""
    names = assign_callable_names([("b.search", "search"), ("a.search", "search")])
    assert names == {"a.search": "search", "b.search": f"search_{_hex('b.search')}"}


def test_suffix_lengthens_on_collision() -> None:
    """When `<base>_<8 hex>` is taken by an exact name, the suffix grows by 2."""
    taken = f"search_{_hex('b.search')}"
    names = assign_callable_names([("a.search", "search"), ("b.search", "search"), ("c.x", taken)])
    assert names["c.x"] == taken
    assert names["b.search"] == f"search_{_hex('b.search', 10)}"


def test_assignment_is_order_independent() -> None:
    """The same set of tools gets the same names whatever the input order."""
    pairs = [("a.1", "x-y"), ("b.2", "x_y"), ("c.3", "Array"), ("d.4", "9x"), ("e.5", "x_y")]
    assert assign_callable_names(pairs) == assign_callable_names(list(reversed(pairs)))


def test_names_never_start_with_private_prefix() -> None:
    """No callable name starts with a host-hook prefix, even for colliding names."""
    pairs = [(f"p.{i}", n) for i, n in enumerate(["__codemode", "__codemode", "__openclawX", "__codemodeY"])]
    for name in assign_callable_names(pairs).values():
        assert not name.startswith(("__codemode", "__openclaw"))


def test_client_tool_wins_exact_name(make_tool) -> None:
    """A client tool shadows a plugin tool of the same name; only one tool carries that name."""
    spec = make_tool("notify")
    view = ToolCatalog.build([spec]).view(client_tools=[ClientTool("notify", "ask the caller")])
    assert [e.callable_name for e in view.entries()] == ["notify"]
    assert view.entry("notify").source == "client"
    assert [h["source"] for h in view.search("notify")] == ["client"]


def test_view_names_match_everywhere(make_tool) -> None:
    """Handles, search, describe and entries use the same callable names."""
    view = ToolCatalog.build([make_tool("9lives"), make_tool("Promise"), make_tool("ok-tool")]).view()
    names = [e.callable_name for e in view.entries()]
    assert names == sorted(["tool_9lives", f"Promise_{_hex('demo.Promise')}", "ok_tool"])
    assert [h["callableName"] for h in view.handles()] == names
    for name in names:
        assert view.describe(name)["callableName"] == name
        assert view.entry(name).callable_name == name


def test_tool_names_and_mcp_identifiers_refuse_one_base_of_reserved_words() -> None:
    """Both kinds of guest identifier refuse every reserved word; each adds only its documented extras
    (a callable name also ``async``, an MCP identifier the literals and ``eval``)."""
    assert JS_RESERVED_WORDS <= RESERVED_NAMES and "async" in RESERVED_NAMES
    assert {"eval", "undefined", "NaN", "Infinity"} == JS_RESERVED - JS_RESERVED_WORDS
    assert assign_callable_names([("p.x", "async")]) == {"p.x": f"async_{_hex('p.x')}"}
