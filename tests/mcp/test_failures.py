"""Crashes, restarts, unreachable servers and deadlines, each with its own hub."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest

from service.mcp.errors import McpError
from service.mcp.hub import McpHub
from service.settings_mcp import McpServerConfig
from tests.mcp.conftest import HttpServer, free_port, http_config, stdio_children, stdio_config
from tests.support.polling import apoll_until

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

D = 10.0


async def test_crash_fails_in_flight_calls_and_next_call_restarts() -> None:
    """A tool that kills its server fails every in-flight call with mcp_unavailable; the next call works."""
    hub = McpHub([stdio_config(name="crashy")])
    try:
        assert (await hub.call_tool("crashy", "add", {"a": 1, "b": 2}, deadline_s=D, tenant="default"))[
            "structuredContent"
        ] == {"sum": 3}
        errors: list[McpError] = []

        async def expect_failure(tool: str, args: dict) -> None:
            try:
                await hub.call_tool("crashy", tool, args, deadline_s=D, tenant="default")
            except McpError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(expect_failure, "sleep_echo", {"seconds": 120})  # outlasts D: only the crash ends it in time
            # Every other task blocked: the sleep_echo request is written and awaiting its answer.
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(expect_failure, "crash", {})
        assert [e.code for e in errors] == ["mcp_unavailable", "mcp_unavailable"]
        assert all("'crashy'" in e.message for e in errors)
        assert (await hub.call_tool("crashy", "add", {"a": 2, "b": 2}, deadline_s=D, tenant="default"))[
            "structuredContent"
        ] == {"sum": 4}
    finally:
        await hub.close()


async def test_server_that_died_idle_is_restarted_on_next_use() -> None:
    """A stdio server killed between calls is started again by the next call, which succeeds."""
    before = set(stdio_children())
    hub = McpHub([stdio_config()])
    try:
        await hub.call_tool("tests", "add", {"a": 1, "b": 1}, deadline_s=D, tenant="default")
        (pid,) = set(stdio_children()) - before
        os.kill(pid, signal.SIGKILL)
        await apoll_until(lambda: hub.unavailable(tenant="default"), "the hub notices the server died")
        result = await hub.call_tool("tests", "add", {"a": 1, "b": 2}, deadline_s=D, tenant="default")
        assert result["structuredContent"] == {"sum": 3}
        assert pid not in stdio_children()
    finally:
        await hub.close()


async def test_close_stops_stdio_servers() -> None:
    """close() ends the stdio server process it started."""
    before = set(stdio_children())
    hub = McpHub([stdio_config(startup="eager")])
    await hub.start()
    started = set(stdio_children()) - before
    assert len(started) == 1
    await hub.close()
    assert not (set(stdio_children()) & started)


async def test_http_crash_then_reconnect_after_server_returns() -> None:
    """An HTTP server dying mid-call fails the call with mcp_unavailable; once it is back, calls work again."""
    server = HttpServer(free_port())
    server.start()
    hub = McpHub([http_config(server, name="remote")])
    try:
        await hub.call_tool("remote", "echo", {"text": "a"}, deadline_s=D, tenant="default")
        with pytest.raises(McpError) as info:
            await hub.call_tool("remote", "crash", {}, deadline_s=D, tenant="default")
        assert info.value.code == "mcp_unavailable" and "'remote'" in info.value.message
        server.restart()
        result = await hub.call_tool("remote", "echo", {"text": "back"}, deadline_s=D, tenant="default")
        assert result["content"][0]["text"] == "back"
    finally:
        await hub.close()
        server.stop()


async def test_unreachable_servers_never_stop_the_hub(tmp_path: Path) -> None:
    """Eager servers that cannot start are logged, left out of servers(), and fail calls with mcp_unavailable."""
    dead_http = McpServerConfig(name="gone", url=f"http://127.0.0.1:{free_port()}/mcp", startup="eager")
    missing = McpServerConfig(name="missing", command=str(tmp_path / "no-such-binary"), startup="eager")
    hub = McpHub([dead_http, missing, stdio_config(name="ok")])
    try:
        await hub.start()
        assert [view.name for view in await hub.servers(tenant="default")] == ["ok"]
        for ident, name in (("gone", "gone"), ("missing", "missing")):
            # mcp_unavailable, not mcp_timeout: the call failed on the cause, not by waiting out its deadline.
            with pytest.raises(McpError) as info:
                await hub.call_tool(ident, "echo", {"text": "x"}, deadline_s=D, tenant="default")
            assert info.value.code == "mcp_unavailable"
            assert f"'{name}'" in info.value.message
    finally:
        await hub.close()


async def test_wrong_header_is_unavailable_and_right_header_connects(http_server: HttpServer) -> None:
    """Configured headers reach the HTTP server: without the token it refuses, with it the call works."""
    hub = McpHub([http_config(http_server, name="bad", headers={"X-Test-Token": "wrong"}), http_config(http_server)])
    try:
        with pytest.raises(McpError) as info:
            await hub.call_tool("bad", "echo", {"text": "x"}, deadline_s=D, tenant="default")
        assert info.value.code == "mcp_unavailable" and "'bad'" in info.value.message
        assert "HTTP 401: unauthorized: send X-Test-Token" in info.value.message  # the server's own words
        assert "wrong" not in info.value.message
        assert (await hub.call_tool("tests", "echo", {"text": "ok"}, deadline_s=D, tenant="default"))["content"][0][
            "text"
        ] == "ok"
    finally:
        await hub.close()


async def test_env_reaches_the_stdio_server() -> None:
    """The configured env is given to the stdio server process."""
    hub = McpHub([stdio_config(env={"CODEMODE_TEST_SECRET": "s3cret"})])
    try:
        result = await hub.call_tool("tests", "env_value", {}, deadline_s=D, tenant="default")
        assert result["content"][0]["text"] == "s3cret"
    finally:
        await hub.close()


async def test_server_that_never_initializes_is_bounded_by_the_deadline() -> None:
    """A stdio command that never speaks MCP fails the call with mcp_timeout at the deadline."""
    # The caller's deadline is 0.5 s; the other bounds (the server's clock, the process's life) are 120 s
    # and more, so a call that ended within half of that ended at the caller's deadline, however loaded the machine.
    silent = McpServerConfig(
        name="silent", command=sys.executable, args=("-c", "import time; time.sleep(600)"), timeout_ms=120_000
    )
    hub = McpHub([silent])
    try:
        started = time.monotonic()
        with pytest.raises(McpError) as info:
            await hub.call_tool("silent", "anything", {}, deadline_s=0.5, tenant="default")
        assert info.value.code == "mcp_timeout" and "'silent'" in info.value.message
        assert time.monotonic() - started < 60
    finally:
        await hub.close()


async def test_server_timeout_ms_caps_the_caller_deadline() -> None:
    """The server's timeout_ms bounds a call even when the caller allows longer."""
    hub = McpHub([stdio_config(timeout_ms=1000)])
    try:
        await hub.servers(tenant="default")
        started = time.monotonic()
        with pytest.raises(McpError) as info:
            await hub.call_tool("tests", "hang", {}, deadline_s=120, tenant="default")
        assert info.value.code == "mcp_timeout"
        # Not before the server's 1 s; and within half the caller's deliberately long 120 s (a bound load does
        # not reach): the server's clock ended the call, not the caller's.
        assert 0.9 < time.monotonic() - started < 60
    finally:
        await hub.close()
