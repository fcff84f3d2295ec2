"""Reconnecting to servers that went away, and what is (never) sent twice: the reference
`@modelcontextprotocol/server-everything` over Streamable HTTP killed and restarted on the same port,
and the SDK test server over HTTP and stdio."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from service.mcp.errors import McpUnavailable
from service.mcp.hub import McpHub
from service.settings_mcp import McpServerConfig
from tests.mcp.conftest import HttpServer, everything_http, free_port, http_config, stdio_config
from tests.support.polling import apoll_until

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

D = 20.0
STALE = "no longer knows our session"


@pytest.fixture
def everything() -> Iterator[HttpServer]:
    server = everything_http(free_port())
    server.start()
    yield server
    server.stop()


def stale_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "service.mcp.client" and STALE in r.getMessage()]


async def echo(hub: McpHub, text: str) -> str:
    result = await hub.call_tool("remote", "echo", {"message": text}, deadline_s=D, tenant="default")
    return str(result["content"][0]["text"])


async def test_a_restarted_server_everything_is_reached_with_a_new_session(
    everything: HttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    """After server-everything is killed and restarted on its port, the next calls (three at once) are
    answered: the 400 "No valid session ID provided" ends the old session, logged once with the server's
    words, and the refused requests are sent again on a new session."""
    hub = McpHub([McpServerConfig(name="remote", url=everything.url, timeout_ms=20000)])
    try:
        assert await echo(hub, "before") == "Echo: before"
        with caplog.at_level(logging.WARNING, logger="service.mcp.client"):
            everything.restart()
            answers: list[str] = []

            async def call(text: str) -> None:
                answers.append(await echo(hub, text))

            async with anyio.create_task_group() as tg:
                for text in ("a", "b", "c"):
                    tg.start_soon(call, text)
        assert sorted(answers) == ["Echo: a", "Echo: b", "Echo: c"]
        (warning,) = stale_warnings(caplog)
        assert "'remote'" in warning and "HTTP 400: Bad Request: No valid session ID provided" in warning, warning
        assert await echo(hub, "after") == "Echo: after"
    finally:
        await hub.close()


async def test_a_server_down_at_the_next_call_is_unavailable_then_reached_once_back(everything: HttpServer) -> None:
    """Killed and not yet back: the call is `mcp_unavailable` saying the request was never sent; once the
    server listens again on the port, the next call is answered."""
    hub = McpHub([McpServerConfig(name="remote", url=everything.url, timeout_ms=20000)])
    try:
        assert await echo(hub, "before") == "Echo: before"
        everything.stop()
        with pytest.raises(McpUnavailable) as info:
            await echo(hub, "down")
        assert "'remote'" in info.value.message and "ConnectError" in info.value.message, info.value.message
        everything.start()
        assert await echo(hub, "back") == "Echo: back"
    finally:
        await hub.close()


async def test_a_call_in_flight_when_the_http_server_dies_is_not_sent_again(
    http_server: HttpServer, tmp_path: Path
) -> None:
    """A tool call that reached the server, which then dies, rejects with `mcp_unavailable` and is never
    resent (it may have run: the marker shows one run); after the restart the next call is answered."""
    marker = tmp_path / "runs"
    hub = McpHub([http_config(http_server, timeout_ms=20000)])
    outcome: list[BaseException] = []

    async def in_flight() -> None:
        try:
            await hub.call_tool(
                "tests", "sleep_echo", {"seconds": 30, "marker": str(marker)}, deadline_s=D, tenant="default"
            )
        except McpUnavailable as exc:
            outcome.append(exc)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(in_flight)
            await apoll_until(marker.exists, "the call reached the server")
            http_server.restart()
        (exc,) = outcome
        assert "'tests'" in exc.message and not exc.retryable, exc.message
        assert marker.read_text().splitlines() == ["run"]
        ok = await hub.call_tool("tests", "echo", {"text": "again"}, deadline_s=D, tenant="default")
        assert ok["content"][0]["text"] == "again"
        assert marker.read_text().splitlines() == ["run"]
    finally:
        await hub.close()


@pytest.mark.parametrize("idempotent", [False, True], ids=["not_idempotent", "idempotent"])
async def test_only_idempotent_tools_are_sent_again_after_the_server_died_mid_call(
    idempotent: bool, tmp_path: Path
) -> None:
    """`crash_once` kills its stdio server on its first run: listed in `idempotent_tools` it is sent again to
    the restarted server and answers (two runs); otherwise the call rejects and ran once."""
    marker = tmp_path / "runs"
    hub = McpHub([stdio_config(idempotent_tools=("crash_once",) if idempotent else ())])
    try:
        call = hub.call_tool("tests", "crash_once", {"marker": str(marker)}, deadline_s=D, tenant="default")
        if idempotent:
            assert (await call)["content"][0]["text"] == "ran again"
            assert marker.read_text().splitlines() == ["run", "run"]
        else:
            with pytest.raises(McpUnavailable, match="'tests'"):
                await call
            assert marker.read_text().splitlines() == ["run"]
    finally:
        await hub.close()


def test_idempotent_tools_must_be_a_list_of_strings() -> None:
    """A lone string is refused (not split into characters), naming the server and the key."""
    from service.errors import McpConfigError

    for bad in ("echo", ["echo", 3]):
        with pytest.raises(McpConfigError, match=r"MCP server 'tests': 'idempotent_tools' must be a list of strings"):
            stdio_config(idempotent_tools=bad).validate()
