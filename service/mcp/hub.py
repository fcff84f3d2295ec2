"""The MCP hub: every configured server behind guest identifiers, connected eagerly or on first use.

A server that fails to start never stops the service: the failure is logged and the next use tries
again.  A connection whose server died is replaced on next use.  Every request runs under a deadline
(the smaller of the server's ``timeout_ms`` and the caller's ``deadline_s``), covering the connect too.

A server is reached through one shared connection (one process or HTTP session for every tenant: a
crash fails every tenant's in-flight calls on it, with a transient error, and the next call restarts
it), or, with ``per_tenant`` (the default for stdio servers of a deployment with several tenants),
through one connection per tenant.  Per-tenant connections are capped per server: a new tenant
beyond the cap replaces the least recently used idle connection, or is refused while all are busy;
``close_idle()`` closes those idle longer than ``tenant_idle_seconds``.  The slots and their connect
and close life are ``McpConnections``; the hub is the request path.  It applies no policy: callers see
it through ``McpScope``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from bridge.json_types import JsonObject
from service.errors import McpConfigError
from service.settings_mcp import McpServerConfig

from .arguments import prepare_arguments
from .client import McpConnection
from .connections import ListedListener, McpConnections, ServerSlots, Slot
from .errors import McpUnavailable, McpUnknownTool
from .identifiers import assign_identifiers
from .results import ResultChecker
from .views import McpServerView, McpToolView

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# After a failed connect, listing servers skips that server for this long so a dead server does not
# slow down every cell; an explicit call on it still retries at once.
LIST_RETRY_AFTER_S = 5.0


class McpHub:
    """All configured MCP servers; safe for concurrent use from one event loop."""

    def __init__(self, configs: Sequence[McpServerConfig], *, tenants: int = 1) -> None:
        """``tenants``: how many tenants the deployment serves (decides ``per_tenant`` where unset)."""
        configs = [config.validate().for_deployment(tenants) for config in configs]
        names = [config.name for config in configs]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise McpConfigError(f"MCP server '{duplicates[0]}' is configured twice", server=duplicates[0])
        identifiers = assign_identifiers(names, fallback="server")
        self._servers = {ident: ServerSlots(config, ident) for ident, config in zip(identifiers, configs)}
        self._connections = McpConnections(self._servers)

    @property
    def on_listed(self) -> ListedListener | None:
        """Told each fresh tool listing: ((server identifier, name), [(tool identifier, name), ...])."""
        return self._connections.on_listed

    @on_listed.setter
    def on_listed(self, listener: ListedListener | None) -> None:
        self._connections.on_listed = listener

    def server_name(self, server_identifier: str) -> str | None:
        """The configured name behind a guest identifier, or None."""
        server = self._servers.get(server_identifier)
        return None if server is None else server.config.name

    def identifiers(self) -> list[tuple[str, str]]:
        """``(identifier, name)`` of every configured server, in config order."""
        return [(ident, server.config.name) for ident, server in self._servers.items()]

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect the eager servers now; failures are logged, never raised."""
        eager = [s.shared for s in self._servers.values() if s.shared is not None and s.config.startup == "eager"]
        await asyncio.gather(*(self._connections.try_connect(slot, slot.config.timeout_ms / 1000) for slot in eager))

    async def close(self) -> None:
        """Close every connection and stop every stdio server."""
        await self._connections.close()

    def close_idle(self) -> int:
        """Close per-tenant connections idle for their server's ``tenant_idle_seconds``; how many."""
        return self._connections.close_idle()

    def tenant_connections(self, server_identifier: str) -> list[str]:
        """The tenants holding a connection slot of a ``per_tenant`` server, least recently used first."""
        return list(self._connections.server(server_identifier).tenants)

    # ---- discovery -------------------------------------------------------------------------------

    async def servers(
        self,
        *,
        tenant: str,
        deadline_s: float | None = None,
        only: Sequence[str] | None = None,
    ) -> list[McpServerView]:
        """Views of the servers reachable for ``tenant`` (all, or those in ``only``), connecting now."""
        now = time.monotonic()
        slots: list[Slot] = []
        for server in self._servers.values():
            if only is not None and server.identifier not in only:
                continue
            try:
                slots.append(self._connections.slot_for(server, tenant))
            except McpUnavailable as exc:
                log.warning("%s", exc.message)
        wanted = [
            slot for slot in slots if slot.failed_at is None or now - slot.failed_at >= LIST_RETRY_AFTER_S or slot.alive
        ]
        budget = math.inf if deadline_s is None else deadline_s
        for slot in slots:
            slot.hold()  # held from now: the connect tasks start later, an eviction must not win
        try:
            await asyncio.gather(
                *(self._connections.try_connect(slot, min(slot.config.timeout_ms / 1000, budget)) for slot in wanted)
            )
        finally:
            for slot in slots:
                slot.release()
        return [slot.view for slot in slots if slot.view is not None and slot.alive]

    def unavailable(self, tenant: str) -> list[tuple[str, str]]:
        """``(identifier, name)`` of configured servers not connected for ``tenant`` right now."""
        down = []
        for server in self._servers.values():
            slot = server.existing(tenant)
            if slot is None or slot.view is None or not slot.alive:
                down.append((server.identifier, server.config.name))
        return down

    def views(self, tenant: str) -> list[McpServerView]:
        """The last known view of every server ``tenant`` has connected to (config order)."""
        found = (server.existing(tenant) for server in self._servers.values())
        return [slot.view for slot in found if slot is not None and slot.view is not None]

    def view(self, server_identifier: str, tenant: str) -> McpServerView:
        """The server's current view for ``tenant``; unknown or unconnected servers raise."""
        server = self._connections.server(server_identifier)
        slot = server.existing(tenant)
        if slot is None or slot.view is None:
            name = server.config.name
            raise McpUnavailable(f"MCP server '{name}' is unavailable: it is not connected yet", server=name)
        return slot.view

    # ---- requests --------------------------------------------------------------------------------

    async def call_tool(
        self,
        server_identifier: str,
        tool_identifier: str,
        arguments: object,
        *,
        tenant: str,
        deadline_s: float,
        visible: Callable[[McpToolView], bool] | None = None,
        results: ResultChecker | None = None,
    ) -> JsonObject:
        """Call ``MCP.<server>.<tool>(arguments)``; the raw result, ``isError`` included.

        A tool ``visible`` rejects is refused as unknown before anything is sent.  ``results`` checks the
        result against the tool's ``outputSchema`` (the caller's checker: a cell's); without it the result
        is returned as the server sent it.
        """
        slot = self._connections.slot(server_identifier, tenant)

        async def call(conn: McpConnection, remaining: float) -> tuple[McpToolView, JsonObject]:
            view = slot.view
            found = view.tool(tool_identifier) if view is not None else None
            if found is None or (visible is not None and not visible(found)):
                raise McpUnknownTool(
                    f"MCP server '{slot.config.name}' has no tool '{tool_identifier}'",
                    server=slot.config.name,
                    tool=tool_identifier,
                )
            label = f"MCP.{slot.identifier}.{found.identifier}"
            prepared = prepare_arguments(found.input_schema, arguments, label=label)
            if results is not None:
                results.before_call(slot.config.name, found.name, found.output)
            return found, await conn.call_tool(found.name, prepared, remaining)

        clock_s = self.tool_clock_s(server_identifier, tool_identifier, tenant=tenant)
        tool, result = await self._request(
            slot, deadline_s, call, replayable=lambda: self._idempotent(slot, tool_identifier), limit_s=clock_s
        )
        if results is not None:  # once, off the server's clock: the answer is in, the check is ours
            await results.check(slot.config.name, tool.name, tool.output, result)
        return result

    def tool_clock_s(self, server_identifier: str, tool_identifier: str, *, tenant: str) -> float:
        """The wall clock of one call of the tool (its ``tool_timeouts_ms`` entry, else the server's
        ``timeout_ms``), in seconds; the connect and a resend after a broken connection are on it too."""
        slot = self._connections.slot(server_identifier, tenant)
        found = slot.view.tool(tool_identifier) if slot.view is not None else None
        return slot.config.tool_timeout_ms(found.name if found is not None else tool_identifier) / 1000

    async def request(
        self,
        server_identifier: str,
        tenant: str,
        op: Callable[[McpConnection, float], Awaitable[_T]],
        *,
        deadline_s: float,
    ) -> _T:
        """Run ``op(connection, seconds left)`` on ``tenant``'s connection to the server, within the
        deadline (connect included); sent once more on a new connection when it broke mid-request
        (the resource and prompt operations only read)."""
        return await self._request(self._connections.slot(server_identifier, tenant), deadline_s, op)

    # ---- internals -------------------------------------------------------------------------------

    async def _request(
        self,
        slot: Slot,
        deadline_s: float,
        op: Callable[[McpConnection, float], Awaitable[_T]],
        *,
        replayable: Callable[[], bool] = lambda: True,
        limit_s: float | None = None,
    ) -> _T:
        """Run ``op`` on a live connection; sent once more on a new one, within the deadline, when the
        first try provably never reached a live server, or when the connection broke mid-request and
        ``replayable()`` says sending it twice is harmless (listings and reads; idempotent tools)."""
        limit = slot.config.timeout_ms / 1000 if limit_s is None else limit_s
        budget = max(min(limit, deadline_s), 0.0)
        end = time.monotonic() + budget
        slot.hold()
        try:
            for attempt in range(2):
                conn = await self._connections.connect(slot, end - time.monotonic())
                try:
                    return await op(conn, end - time.monotonic())
                except McpUnavailable as exc:
                    if attempt or end - time.monotonic() <= 0 or not (exc.retryable or replayable()):
                        raise
            raise AssertionError("unreachable")
        finally:
            slot.release()

    @staticmethod
    def _idempotent(slot: Slot, tool_identifier: str) -> bool:
        """Whether the operator listed the tool in ``idempotent_tools`` (the server's own hints are not trusted)."""
        found = slot.view.tool(tool_identifier) if slot.view is not None else None
        return found is not None and found.name in slot.config.idempotent_tools
