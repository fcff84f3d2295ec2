"""Policy entries that name nothing stop the service at start, for `[tools]` and every key; entries naming
an MCP server's tool are checked once the server lists its tools (the real SDK test server over stdio)."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest

from service.assembly import build_components
from service.errors import ConfigError
from service.settings import ApiKey, Settings, ToolSettings
from service.settings_mcp import McpServerConfig
from tests.conftest import make_client
from tests.mcp.conftest import SERVER_SCRIPT
from tests.support.tools import TEST_TOOLS

TEST = McpServerConfig(name="test", command=sys.executable, args=(SERVER_SCRIPT, "stdio"), timeout_ms=10000)


def build(tmp_path: Any, **fields: Any) -> None:
    settings = Settings(workers=1, data_dir=str(tmp_path), mcp_servers=(TEST,)).replace(**fields)
    build_components(settings, extra_tools=TEST_TOOLS, store=False)


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"tools": ToolSettings(deny=("crash",))}, "tools.deny[0]"),
        ({"tools": ToolSettings(allow=("echo", "ehco"))}, "tools.allow[1]"),
        ({"api_keys": (ApiKey("k", "t", {"deny": ["crash"]}),)}, "api_keys[0].tools.deny[0]"),
        (
            {"api_keys": (ApiKey("k1", "a"), ApiKey("k2", "b", {"allow": ["group:core", "nosuch"]}))},
            "api_keys[1].tools.allow[1]",
        ),
    ],
)
def test_a_bare_name_naming_no_native_tool_stops_the_service(tmp_path, fields, where):
    """A bare entry that names no native tool, tool id or plugin id is a start error naming the entry, and
    says how an MCP tool is written (`crash` is the test server's tool: `mcp:test/crash`)."""
    with pytest.raises(ConfigError) as info:
        build(tmp_path, **fields)
    message = str(info.value)
    assert message.startswith(where + ": ") and "names no tool, tool id or plugin id" in message, message
    assert "mcp:<server>/<tool>" in message and "'mcp:test/" in message and "(servers: test)" in message, message
    assert info.value.need_param == where.rsplit("[", 1)[0]


def test_a_key_table_that_cannot_be_parsed_stops_the_service(tmp_path):
    """A key's unusable tool table (deny as a string) is refused at start, not when the key is first used."""
    with pytest.raises(ConfigError, match=r"api_keys\[0\]\.tools\.deny must be a list of strings"):
        build(tmp_path, api_keys=(ApiKey("k", "t", {"deny": "echo"}),))


def test_entries_that_name_something_start(tmp_path):
    """Tool names, tool ids, groups, `mcp:*`, servers and `mcp:<server>/<tool>` (checked later) all start."""
    build(
        tmp_path,
        tools=ToolSettings(allow=("group:core", "echo", "mcp:test"), deny=("plugin.fail", "mcp:test/crash")),
        api_keys=(ApiKey("k", "t", {"deny": ["mcp:*", "blob"], "allow": ["mcp:test/nosuch"]}),),
    )


@pytest.mark.slow
def test_an_mcp_tool_entry_naming_no_listed_tool_is_reported_when_the_server_lists(tmp_path, caplog):
    """`mcp:test/crsh` cannot be checked at start; the first listing of `test` logs one warning naming the
    entry and what the server lists, and the service keeps serving (the real `crash` stays visible)."""
    keys = (ApiKey("k", "t", {"deny": ["mcp:test/crsh"]}),)
    key = {"Authorization": "Bearer k"}
    with caplog.at_level(logging.WARNING, logger="codemode"):
        with make_client(tmp_path, mcp_servers=(TEST,), api_keys=keys) as c:
            for _ in range(2):  # the second cell finds the server connected: nothing new to report
                r = c.post("/v1/exec", json={"code": "return typeof MCP.test.crash", "timeout_ms": 15000}, headers=key)
                assert r.status_code == 200 and r.json()["value"] == "function", r.text
    warned = [rec.getMessage() for rec in caplog.records if "mcp:test/crsh" in rec.getMessage()]
    assert len(warned) == 1, warned
    assert warned[0].startswith("api_keys[0].tools.deny[0]: 'mcp:test/crsh' names no tool MCP server 'test' lists")
    assert "'crash'" in warned[0]
