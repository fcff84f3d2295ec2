"""Per-tenant connections against the real test server: the default by transport and tenant count, isolation,
cap, idle close."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from service.mcp.errors import McpError, McpUnavailable
from service.mcp.hub import McpHub
from tests.mcp.conftest import HttpServer, http_config, stdio_children, stdio_config
from tests.support.polling import apoll_until

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

D = 10.0


async def echo(hub: McpHub, tenant: str, text: str = "hi") -> str:
    result = await hub.call_tool("lab", "echo", {"text": text}, deadline_s=D, tenant=tenant)
    return str(result["content"][0]["text"])


@pytest.mark.slow
@pytest.mark.parametrize("per_tenant", [True, False], ids=["per_tenant", "shared"])
async def test_crash_by_one_tenant_and_another_tenants_in_flight_call(per_tenant: bool, tmp_path: Path) -> None:
    """With per_tenant, tenant a crashing its server leaves b's in-flight call answered; shared, b's call fails too.

    b's call answers only once a's crash has failed (a gate file the crash task opens), so the crash
    overlaps it by construction."""
    gate = tmp_path / "gate"
    hub = McpHub([stdio_config(name="lab", per_tenant=per_tenant)])
    before = set(stdio_children())
    try:
        async with anyio.create_task_group() as tg:  # start both tenants' connections at once
            tg.start_soon(echo, hub, "a")
            tg.start_soon(echo, hub, "b")
        assert len(set(stdio_children()) - before) == (2 if per_tenant else 1)
        outcome: dict[str, object] = {}

        async def in_flight() -> None:
            try:
                held = {"seconds": 120, "until": str(gate), "value": "b"}
                result = await hub.call_tool("lab", "sleep_echo", held, deadline_s=D, tenant="b")
                outcome["b"] = result["structuredContent"]["value"]
            except McpError as exc:
                outcome["b"] = exc.code

        async def crash() -> None:
            try:
                with pytest.raises(McpUnavailable, match="'lab'"):
                    await hub.call_tool("lab", "crash", {}, deadline_s=D, tenant="a")
            finally:
                gate.touch()

        async with anyio.create_task_group() as tg:
            tg.start_soon(in_flight)  # runs first: its request is queued before the crash
            tg.start_soon(crash)
        if per_tenant:
            assert outcome["b"] == "b", outcome
        else:
            assert outcome["b"] == "mcp_unavailable", outcome
        assert await echo(hub, "a", "restarted") == "restarted"
    finally:
        await hub.close()


@pytest.mark.parametrize(("tenants", "processes"), [(2, 2), (1, 1)], ids=["several_tenants", "one_tenant"])
async def test_stdio_servers_are_per_tenant_by_default_when_the_deployment_has_several_tenants(
    tenants: int, processes: int
) -> None:
    """`per_tenant` unset: two tenants calling get a process each when the deployment serves several tenants,
    and share one when it serves one."""
    hub = McpHub([stdio_config(name="lab")], tenants=tenants)
    before = set(stdio_children())
    try:
        assert [await echo(hub, "a"), await echo(hub, "b")] == ["hi", "hi"]
        assert len(set(stdio_children()) - before) == processes
        assert hub.tenant_connections("lab") == (["a", "b"] if processes == 2 else [])
    finally:
        await hub.close()


async def test_http_servers_stay_shared_by_default(http_server: HttpServer) -> None:
    """An HTTP server with `per_tenant` unset is one session for every tenant, however many tenants there are."""
    hub = McpHub([http_config(http_server, name="lab")], tenants=5)
    try:
        assert [await echo(hub, "a"), await echo(hub, "b")] == ["hi", "hi"]
        assert hub.tenant_connections("lab") == [] and hub.view("lab", "a") is hub.view("lab", "b")
    finally:
        await hub.close()


async def test_each_tenant_gets_its_own_process_up_to_the_cap() -> None:
    """Beyond max_tenant_connections a new tenant replaces the least recently used idle connection."""
    hub = McpHub([stdio_config(name="lab", per_tenant=True, max_tenant_connections=2)])
    before = set(stdio_children())
    try:
        await echo(hub, "a")
        await echo(hub, "b")
        await echo(hub, "a")  # b is now the least recently used
        assert hub.tenant_connections("lab") == ["b", "a"]
        first_two = set(stdio_children()) - before
        assert len(first_two) == 2
        await echo(hub, "c")
        assert hub.tenant_connections("lab") == ["a", "c"]
        await apoll_until(lambda: len(set(stdio_children()) - before) == 2, "b's process was stopped")
        assert await echo(hub, "b") == "hi"  # b comes back by replacing a
        assert hub.tenant_connections("lab") == ["c", "b"]
    finally:
        await hub.close()


async def test_new_tenant_is_refused_while_every_connection_is_busy(tmp_path: Path) -> None:
    """With every per-tenant connection in use, another tenant's call is refused naming the cap (the busy
    calls hold their connections until the newcomer has its answer: a gate file it opens)."""
    gate = tmp_path / "gate"
    hub = McpHub([stdio_config(name="lab", per_tenant=True, max_tenant_connections=2)])
    try:
        await echo(hub, "a")
        await echo(hub, "b")
        refusal: list[McpError] = []

        async def busy(tenant: str) -> None:
            await hub.call_tool("lab", "sleep_echo", {"seconds": 120, "until": str(gate)}, deadline_s=D, tenant=tenant)

        async def newcomer() -> None:
            try:
                await echo(hub, "c")
            except McpError as exc:
                refusal.append(exc)
            finally:
                gate.touch()

        async with anyio.create_task_group() as tg:
            tg.start_soon(busy, "a")
            tg.start_soon(busy, "b")
            tg.start_soon(newcomer)  # both calls above hold their connections by now
        (exc,) = refusal
        assert exc.code == "mcp_unavailable"
        assert "'lab'" in exc.message and "2 per-tenant connections" in exc.message
        assert "max_tenant_connections" in exc.message
        assert await echo(hub, "c") == "hi"  # once idle, c replaces one of them
    finally:
        await hub.close()


@pytest.mark.slow
async def test_idle_tenant_connections_are_closed() -> None:
    """close_idle() stops a per-tenant process idle for tenant_idle_seconds; the next call starts a new one."""
    hub = McpHub([stdio_config(name="lab", per_tenant=True, tenant_idle_seconds=1)])
    before = set(stdio_children())
    try:
        await echo(hub, "a")
        (pid,) = set(stdio_children()) - before
        assert hub.close_idle() == 0  # just used
        closed: list[int] = []
        await apoll_until(lambda: closed.append(hub.close_idle()) or sum(closed) == 1, "one idle connection closes")
        assert hub.tenant_connections("lab") == []
        await apoll_until(lambda: pid not in stdio_children(), "the idle server's process ends")
        assert await echo(hub, "a", "again") == "again"
    finally:
        await hub.close()


async def test_shared_servers_are_never_closed_for_idleness() -> None:
    """A shared server keeps its one connection whatever tenants use it; close_idle() leaves it."""
    hub = McpHub([stdio_config(name="lab", tenant_idle_seconds=1)])
    try:
        await echo(hub, "a")
        view = hub.view("lab", "b")  # every tenant sees the one shared connection
        assert hub.close_idle() == 0 and hub.tenant_connections("lab") == []
        assert await echo(hub, "b") == "hi" and hub.view("lab", "a") is view
    finally:
        await hub.close()
