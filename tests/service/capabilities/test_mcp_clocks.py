"""Wall clocks of MCP tool calls through HTTP, with the real test MCP server over stdio and Streamable
HTTP: a call past its clock (``tool_timeouts_ms`` of its server, else the server's ``timeout_ms``)
rejects with ``tool_timeout`` naming the tool and the limit, counts against the run, and the server
sees the cancellation (``sleep_echo`` writes its ``cancel_marker`` file); a cancelled cell cancels
the MCP calls it still has running."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.errors import ConfigError, McpConfigError
from service.settings import Settings
from service.settings_mcp import McpServerConfig
from tests.conftest import make_client, run, run_ok
from tests.mcp.conftest import HTTP_TOKEN, SERVER_SCRIPT, HttpServer
from tests.support.polling import poll_until

#: The clock of `sleep_echo` on both servers, in ms: a call asked to sleep 30 s runs past it.
CLOCK_MS = 400
TRANSPORTS = ("local", "web")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, web_server: HttpServer) -> Iterator[TestClient]:
    """`local` (stdio) and `web` (HTTP), each with a short clock for `sleep_echo` only."""
    clocks = {"timeout_ms": 20000, "tool_timeouts_ms": {"sleep_echo": CLOCK_MS}}
    servers = (
        McpServerConfig(name="local", command=sys.executable, args=(SERVER_SCRIPT, "stdio"), **clocks),  # type: ignore[arg-type]
        McpServerConfig(name="web", url=web_server.url, headers={"X-Test-Token": HTTP_TOKEN}, **clocks),  # type: ignore[arg-type]
    )
    with make_client(tmp_path_factory.mktemp("mcpclocks"), mcp_servers=servers) as c:
        yield c


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.parametrize("server", TRANSPORTS)
def test_an_mcp_call_past_its_clock_rejects_with_tool_timeout(client, tmp_path, server):
    """`sleep_echo` past its 0.4 s clock rejects with tool_timeout naming MCP.<server>.sleep_echo and the
    limit; the server saw the call cancelled; the failure counts against the run; the server still answers."""
    marker = tmp_path / "cancelled"
    session = "s-" + uuid.uuid4().hex[:12]
    code = f"""
    let err;
    try {{ await MCP.{server}.sleep_echo({{seconds: 30, cancel_marker: {str(marker)!r}}}); }}
    catch (e) {{ err = {{code: e.code, tool: e.tool, limit: e.timeoutSeconds, message: e.message}}; }}
    return {{err, next: (await MCP.{server}.echo({{text: "still here"}})).content[0].text}};
    """
    env = run_ok(client, code, session_id=session, run_id="r1")
    err = env["value"]["err"]
    assert err["code"] == "tool_timeout" and err["tool"] == f"MCP.{server}.sleep_echo", err
    assert err["limit"] == CLOCK_MS / 1000 and "wall clock of 0.4 s" in err["message"], err
    assert env["value"]["next"] == "still here"
    poll_until(lambda: lines(marker) == 1, f"the {server} server saw the call cancelled")
    counters = client.get(f"/v1/sessions/{session}/runs/r1").json()
    assert counters["failures"] == {f"MCP.{server}.sleep_echo": 1}, counters


@pytest.mark.parametrize("server", TRANSPORTS)
def test_other_tools_run_on_the_servers_timeout_ms(client, server):
    """A tool without its own entry in tool_timeouts_ms is on the server's timeout_ms: `echo` answers."""
    env = run_ok(client, f'return (await MCP.{server}.echo({{text: "hi"}})).content[0].text')
    assert env["value"] == "hi"


@pytest.mark.parametrize("server", TRANSPORTS)
def test_cancelling_a_cell_cancels_its_mcp_calls(tmp_path, web_server, server):
    """A cell parked on an MCP call (clock of 20 s) and cancelled: the server sees the call cancelled, and
    nothing of the call stays charged to the tenant."""
    marker = tmp_path / "cancelled"
    servers = (
        McpServerConfig(name="local", command=sys.executable, args=(SERVER_SCRIPT, "stdio"), timeout_ms=20000),
        McpServerConfig(name="web", url=web_server.url, headers={"X-Test-Token": HTTP_TOKEN}, timeout_ms=20000),
    )
    with make_client(tmp_path / "svc", mcp_servers=servers) as c:
        started = tmp_path / "started"
        code = f"return await MCP.{server}.sleep_echo({{seconds: 30, marker: {str(started)!r}, cancel_marker: {str(marker)!r}}});"
        # A background cell parks as soon as it blocks on the call, however busy the machine is.
        env = run(c, code, background=True)
        assert env["status"] == "running", (env.get("code"), env.get("error"))
        poll_until(lambda: lines(started) == 1, "the server started the call")
        r = c.post(f"/v1/cells/{env['cell_id']}/cancel")
        assert r.json()["code"] == "aborted", r.text
        poll_until(lambda: lines(marker) == 1, f"the {server} server saw the call cancelled")
        assert c.app.state.services.cells.quotas.held_account("local").used == 0  # nothing of it stays charged


def test_tool_timeouts_ms_must_map_names_to_positive_integers():
    """A tool_timeouts_ms entry that is not a positive integer is refused, naming the server."""
    for bad in ({"t": 0}, {"t": 1.5}, {"t": True}, {"t": "10"}):
        with pytest.raises(McpConfigError, match="'tool_timeouts_ms' must map tool names to positive integers"):
            McpServerConfig(name="s", command="x", tool_timeouts_ms=bad).validate()  # type: ignore[arg-type]


def test_an_mcp_clock_over_the_cap_stops_the_service_at_start():
    """A server whose timeout_ms or one of whose tool_timeouts_ms is above tool_timeout_cap_seconds is refused."""
    slow_tool = McpServerConfig(name="s", command="x", tool_timeouts_ms={"crawl": 7_200_000}).validate()
    with pytest.raises(ConfigError, match=r"mcp.servers.s: tool_timeouts_ms.crawl = 7200000 is above"):
        Settings(mcp_servers=(slow_tool,)).check()
    slow_server = McpServerConfig(name="s", command="x", timeout_ms=61_000).validate()
    with pytest.raises(ConfigError, match=r"timeout_ms = 61000 is above tool_timeout_cap_seconds \(60 s\)"):
        Settings(mcp_servers=(slow_server,), tool_timeout_cap_seconds=60, tool_timeout_seconds=60).check()


def test_tool_timeouts_ms_is_read_from_the_config_file(tmp_path):
    """`tool_timeouts_ms` in `[mcp.servers.<name>]` is a table of tool name -> ms; other tools use timeout_ms."""
    from service.settings_load import load_settings

    path = tmp_path / "codemode.toml"
    path.write_text(
        '[mcp.servers.search]\nurl = "https://search.example/mcp"\ntimeout_ms = 5000\n'
        "tool_timeouts_ms = { deep_crawl = 600000 }\n"
    )
    (server,) = load_settings(environ={}, config_path=str(path)).mcp_servers
    assert server.tool_timeout_ms("deep_crawl") == 600000 and server.tool_timeout_ms("lookup") == 5000
