"""MCP servers failing under cells: a crashing stdio server, a server that never answers, an HTTP server that stops."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.settings_mcp import McpServerConfig
from tests.conftest import make_client, run
from tests.conftest import run_ok as ok
from tests.conftest import wait as post_wait
from tests.mcp.conftest import HTTP_TOKEN, SERVER_SCRIPT, HttpServer, everything_http, free_port
from tests.support.polling import poll_until

pytestmark = pytest.mark.slow

# Small enough to keep the hang tests short, large enough for the Python server to start (~0.6 s) under load.
SLOW_TIMEOUT_MS = 2500


@pytest.fixture(scope="module")
def fail_client(tmp_path_factory: pytest.TempPathFactory, web_server: HttpServer) -> Iterator[TestClient]:
    """A service with `docs` (stdio), `slow` (stdio, short timeout) and `web` (HTTP)."""
    stdio = {"command": sys.executable, "args": (SERVER_SCRIPT, "stdio")}
    servers = (
        McpServerConfig(name="docs", timeout_ms=10000, **stdio),  # type: ignore[arg-type]
        McpServerConfig(name="slow", timeout_ms=SLOW_TIMEOUT_MS, **stdio),  # type: ignore[arg-type]
        McpServerConfig(name="web", url=web_server.url, headers={"X-Test-Token": HTTP_TOKEN}, timeout_ms=10000),
    )
    with make_client(tmp_path_factory.mktemp("mcpfail"), mcp_servers=servers) as c:
        yield c


def wait(client: TestClient, cell_id: str, timeout_ms: int = 15000) -> dict[str, Any]:
    """POST /v1/cells/{id}/wait with a long default timeout and return the envelope."""
    return post_wait(client, cell_id, timeout_ms=timeout_ms)


@pytest.mark.slow
def test_crash_rejects_catchably_and_the_same_cell_recovers(fail_client):
    """`crash` rejects naming the server; the next call in the same cell restarts the server and works."""
    env = ok(
        fail_client,
        """
        let err;
        try { await MCP.docs.crash({}); } catch (e) { err = {name: e.name, message: e.message, code: e.code}; }
        const after = await MCP.docs.echo({text: "after crash"});
        return {err, after: after.content[0].text};
    """,
    )
    err = env["value"]["err"]
    assert err["code"] == "mcp_unavailable" and "'docs'" in err["message"], err
    assert env["value"]["after"] == "after crash"


@pytest.mark.slow
def test_later_cell_reaches_the_restarted_server(fail_client):
    """After a crash, a later cell calls the (restarted) server normally."""
    ok(fail_client, "try { await MCP.docs.crash({}); } catch (e) { return e.code; }")
    env = ok(fail_client, "return (await MCP.docs.add({a: 20, b: 22})).structuredContent.sum")
    assert env["value"] == 42


@pytest.mark.slow
def test_crash_rejects_every_in_flight_call_on_that_server(fail_client):
    """A crash mid-call rejects the server's other in-flight calls too, each naming the server."""
    env = ok(
        fail_client,
        """
        const settled = await Promise.allSettled([MCP.docs.sleep_echo({seconds: 120}), MCP.docs.crash({})]);
        return settled.map(s => [s.status, s.reason && s.reason.code, s.reason && s.reason.message]);
    """,
    )
    # The sleep would outlast the cell: only the crash can have rejected it (with this code) in time.
    for status, code, message in env["value"]:
        assert status == "rejected" and code == "mcp_unavailable" and "'docs'" in message, env["value"]


@pytest.mark.slow
def test_hang_rejects_with_a_timeout_naming_the_server(fail_client):
    """`hang` rejects after the server's `timeout_ms` (its tools' clock) with `tool_timeout` naming server and
    tool; the server still works."""
    env = ok(
        fail_client,
        """
        let err;
        try { await MCP.slow.hang({}); } catch (e) { err = {name: e.name, message: e.message, code: e.code}; }
        return {err, next: (await MCP.slow.echo({text: "still here"})).content[0].text};
    """,
    )
    err = env["value"]["err"]
    assert err["code"] == "tool_timeout" and "MCP.slow.hang" in err["message"], err
    # The message names the clock that ended the call: the server's, not another one.
    assert f"wall clock of {SLOW_TIMEOUT_MS / 1000:g} s" in err["message"], err
    assert env["value"]["next"] == "still here"
    assert env["telemetry"]["wall_ms"] >= SLOW_TIMEOUT_MS, env["telemetry"]


@pytest.mark.slow
def test_hang_cannot_hold_a_cell_past_its_deadline(fail_client):
    """A cell with `timeout_ms: 300` blocked on `hang` parks on time; a later wait gets the timeout rejection.

    "waiting" is the bound: a cell held until the server's clock ended the call would have completed."""
    env = run(
        fail_client,
        """
        try { await MCP.slow.hang({}); return "answered"; }
        catch (e) { return {code: e.code, message: e.message}; }
    """,
        timeout_ms=300,
    )
    assert env["status"] == "waiting", env
    assert env["pending_tool_calls"] == [
        {"id": env["pending_tool_calls"][0]["id"], "method": "mcp.call", "tool": "MCP.slow.hang"}
    ]
    done = wait(fail_client, env["cell_id"])
    assert done["status"] == "completed", done
    assert done["value"]["code"] == "tool_timeout" and "MCP.slow.hang" in done["value"]["message"]


def test_cancel_while_an_mcp_call_is_in_flight(fail_client):
    """Cancelling a cell parked on an MCP call fails it with `aborted`; the service keeps serving."""
    env = run(fail_client, "await MCP.docs.hang({}); return 1;", timeout_ms=200)
    assert env["status"] == "waiting", env
    r = fail_client.post(f"/v1/cells/{env['cell_id']}/cancel")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "failed" and r.json()["code"] == "aborted"
    assert ok(fail_client, 'return (await MCP.docs.echo({text: "ok"})).content[0].text')["value"] == "ok"


@pytest.mark.slow
def test_http_server_stopping_mid_call_rejects_and_service_keeps_serving(fail_client, web_server):
    """An HTTP server stopped mid-call rejects with catchable `mcp_unavailable`; other cells and servers still work."""
    env = run(
        fail_client,
        """
        try { await MCP.web.sleep_echo({seconds: 120}); return "answered"; }
        catch (e) { return {name: e.name, code: e.code, message: e.message}; }
    """,
        timeout_ms=300,
    )
    assert env["status"] == "waiting", env
    try:
        web_server.stop()
        done = wait(fail_client, env["cell_id"])
        assert done["status"] == "completed", done
        assert done["value"]["code"] == "mcp_unavailable" and "'web'" in done["value"]["message"], done
        assert ok(fail_client, "return 6 * 7")["value"] == 42
        down = ok(
            fail_client,
            """
            if (typeof MCP.web !== "object") return "hidden";
            try { await MCP.web.add({a: 1, b: 1}); return "answered"; } catch (e) { return e.code; }
        """,
        )["value"]
        assert down in ("hidden", "mcp_unavailable"), down
        assert ok(fail_client, "return (await MCP.docs.add({a: 1, b: 2})).structuredContent.sum")["value"] == 3
    finally:
        web_server.start()
    add_again = """
        if (typeof MCP.web !== "object") return null;
        try { return (await MCP.web.add({a: 2, b: 2})).structuredContent.sum; } catch (e) { return e.code; }
    """
    poll_until(lambda: ok(fail_client, add_again)["value"] == 4, "the HTTP server is reachable again after restarting")


def test_a_server_that_comes_back_serves_the_same_cell(tmp_path):
    """A server down when a cell starts has a namespace whose tool calls reach the host: rejected while it is
    down, answered (connecting it) once it is back, in the same cell."""
    late = HttpServer(free_port())
    config = McpServerConfig(name="late", url=late.url, headers={"X-Test-Token": HTTP_TOKEN}, timeout_ms=10000)
    try:
        with make_client(tmp_path, mcp_servers=(config,)) as c:
            env = run(
                c,
                """
            const call = () => MCP.late.echo({text: "back"}).then(r => r.content[0].text, e => e.code);
            const before = await call();
            await yield_control("start the server");
            return {before, after: await call(), listed: typeof MCP.late.echo};
            """,
                timeout_ms=10000,
            )
            assert env["status"] == "waiting", env
            late.start()
            done = post_wait(c, env["cell_id"], timeout_ms=15000)
            assert done["status"] == "completed", done
            assert done["value"] == {"before": "mcp_unavailable", "after": "back", "listed": "function"}
    finally:
        late.stop()


def test_a_server_down_at_cell_start_rejects_calls_naming_it(tmp_path):
    """A configured server that cannot be reached still has a namespace whose calls reject catchably, naming it;
    a member name over 1024 characters is refused before anything is sent."""
    dead = McpServerConfig(name="ghost", url="http://127.0.0.1:9/mcp", timeout_ms=1000)
    with make_client(tmp_path, mcp_servers=(dead,)) as c:
        env = run(
            c,
            """
        const out = [];
        const calls = [() => MCP.ghost.search({q: 1}), () => MCP.ghost.resources.list(),
                       () => MCP.ghost.resources.templates(), () => MCP.ghost.$api()];
        for (const f of calls) {
          try { await f(); out.push("resolved"); } catch (e) { out.push([e.code, e.message]); }
        }
        return out;
        """,
            timeout_ms=3000,
        )
        assert env["status"] == "completed", env
        for code, message in env["value"]:
            assert code == "mcp_unavailable"
            assert "MCP server 'ghost' is unavailable" in message
        long = run(c, 'try { await MCP.ghost["x".repeat(1025)]({}); } catch (e) { return [e.code, e.message]; }')
        assert long["value"] == ["invalid_input", "MCP tool names are at most 1024 characters"], long
        assert run(c, "return 1")["value"] == 1  # the service keeps serving


def test_cells_reach_a_restarted_server_everything_over_http(tmp_path):
    """The issue's reproduction through cells: server-everything over Streamable HTTP, one call, the server
    killed and started again on the same port; the next cell's call is answered (a new session), and a call
    while it is down rejects naming the server and the request that never left."""
    remote = everything_http(free_port())
    remote.start()
    try:
        config = McpServerConfig(name="remote", url=remote.url, timeout_ms=20000)
        with make_client(tmp_path, mcp_servers=(config,)) as c:
            echo = 'try { return (await MCP.remote.echo({message: "{text}"})).content[0].text; } catch (e) { return [e.code, e.errorType, e.message]; }'
            assert ok(c, echo.replace("{text}", "one"), timeout_ms=20000)["value"] == "Echo: one"
            remote.stop()
            code, error_type, message = ok(c, echo.replace("{text}", "down"), timeout_ms=20000)["value"]
            assert (code, error_type) == ("mcp_unavailable", "transient") and "'remote'" in message, message
            assert "never sent: ConnectError" in message, message
            remote.start()
            assert ok(c, echo.replace("{text}", "two"), timeout_ms=20000)["value"] == "Echo: two"
            remote.restart()
            assert ok(c, echo.replace("{text}", "three"), timeout_ms=20000)["value"] == "Echo: three"
    finally:
        remote.stop()
