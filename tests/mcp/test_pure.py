"""Pure parts: identifier rules, argument preparation, result shaping, config validation."""

from __future__ import annotations

import dataclasses

import pytest

from service.errors import McpConfigError
from service.mcp.arguments import ONE_OBJECT, prepare_arguments, shape_native, shape_tool_result
from service.mcp.errors import McpError
from service.mcp.identifiers import assign_identifiers, camel_identifier
from service.settings_mcp import McpServerConfig


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("delete", "delete2"),
        ("default", "default2"),
        ("return", "return2"),
        ("enum", "enum2"),
        ("class", "class2"),
        ("constructor", "constructor2"),
        ("prototype", "prototype2"),
        ("__proto__", "__proto__2"),
        ("$api", "$api2"),
        ("resources", "resources2"),
        ("prompts", "prompts2"),
        ("my-tool", "myTool"),
        ("get.issue list", "getIssueList"),
        ("snake_case", "snake_case"),
        ("9patch", "_9patch"),
        ("ünïcode", "nCode"),
    ],
)
def test_identifier_table(name: str, expected: str) -> None:
    """Each name maps to its camelCased, reserved-safe identifier."""
    assert assign_identifiers([name]) == [expected]


def test_collisions_get_increasing_suffixes_deterministically() -> None:
    """Names colliding after camelCase get 2, 3, … and an exact spelling keeps its name."""
    names = ["my tool", "my-tool", "myTool", "my_tool"]
    assert assign_identifiers(names) == ["myTool2", "myTool3", "myTool", "my_tool"]
    assert assign_identifiers(names) == assign_identifiers(list(names))


def test_reserved_suffix_skips_taken_names() -> None:
    """A reserved name's suffix moves on when the plain suffixed spelling is taken."""
    assert assign_identifiers(["delete2", "delete"]) == ["delete2", "delete3"]


def test_empty_name_uses_fallback() -> None:
    """A name with no identifier characters becomes the fallback word."""
    assert camel_identifier("---", "server") == "server"


SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "body": {"type": "string", "default": ""},
        "n": {"default": [1]},
    },
    "required": ["title", "owner"],
}


def test_defaults_filled_and_missing_required_named() -> None:
    """Defaults fill missing keys; every missing required key is named."""
    with pytest.raises(McpError) as info:
        prepare_arguments(SCHEMA, {}, label="MCP.docs.createIssue")
    assert info.value.code == "mcp_invalid_input"
    assert "MCP.docs.createIssue" in info.value.message and "title, owner" in info.value.message
    value = {"title": "t", "owner": "o"}
    prepared = prepare_arguments(SCHEMA, value)
    assert prepared == {"title": "t", "owner": "o", "body": "", "n": [1]}
    assert value == {"title": "t", "owner": "o"}
    prepared["n"].append(2)
    assert SCHEMA["properties"]["n"]["default"] == [1]


def test_given_values_win_over_defaults() -> None:
    """A key the caller sent is never replaced by its default."""
    assert prepare_arguments(SCHEMA, {"title": "t", "owner": "o", "body": "mine"})["body"] == "mine"


@pytest.mark.parametrize("value", [None, [], "x", 3])
def test_non_object_refused(value: object) -> None:
    """Only a plain object is accepted."""
    with pytest.raises(McpError) as info:
        prepare_arguments(SCHEMA, value)
    assert info.value.message == ONE_OBJECT


def test_shape_tool_result() -> None:
    """Top-level _meta and SDK keys go; blocks stay whole; isError only when true."""
    block = {"type": "text", "text": "x", "annotations": {"priority": 1}, "_meta": {"k": 1}}
    raw = {"_meta": {"m": 1}, "content": [block], "isError": False, "resultType": "complete"}
    assert shape_tool_result(raw) == {"content": [block]}
    raw = {"content": [], "structuredContent": {"a": 1}, "isError": True}
    assert shape_tool_result(raw) == {"content": [], "structuredContent": {"a": 1}, "isError": True}


def test_shape_native_drops_sdk_keys() -> None:
    """Resource/prompt results lose only the SDK's negotiation keys."""
    raw = {"resources": [], "nextCursor": "2", "ttlMs": 0, "cacheScope": "private", "resultType": "complete"}
    assert shape_native(raw) == {"resources": [], "nextCursor": "2"}


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"command": "x", "url": "http://h/mcp"},
        {"url": "ftp://h"},
        {"command": "x", "timeout_ms": 0},
        {"command": "x", "startup": "now"},
        {"command": "x", "headers": {"A": "b"}},
        {"url": "http://h/mcp", "env": {"A": "b"}},
    ],
)
def test_config_validate_names_the_server(fields: dict) -> None:
    """An unusable server entry raises a config error naming the server."""
    with pytest.raises(McpConfigError) as info:
        McpServerConfig(name="docs", **fields).validate()
    assert info.value.code == "mcp_config" and "'docs'" in info.value.message


def test_config_is_frozen_and_copies_tables() -> None:
    """The config is immutable and does not follow later changes to the caller's dicts."""
    env = {"A": "1"}
    config = McpServerConfig(name="s", command="x", env=env).validate()
    env["A"] = "2"
    assert config.env["A"] == "1"
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.name = "t"  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.env["B"] = "x"  # type: ignore[index]
    assert "A" not in repr(config)
