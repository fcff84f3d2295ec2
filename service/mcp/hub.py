"""The MCP hub: every configured server behind guest identifiers, connected eagerly or on first use.

A server that fails to start never stops the service: the failure is logged and the next use tries
again.  A connection whose server died is replaced on next use.  Every request runs under a deadline
(the smaller of the server's ``timeout_ms`` and the caller's ``deadline_s``), covering the connect too.

A server is reached through one shared connection (one process or HTTP session for every tenant: a
crash fails every tenant's in-flight calls on it, with a transient error, and the next call restarts
it), or, with ``per_tenant`` (the default for stdio servers of a deployment with several tenants),
through one connection per tenant.  Per-tenant connections are capped per server: a new tenant
beyond the cap replaces the least recently used idle connection, or is refused while all are busy;
``close_idle()`` closes those idle longer than ``tenant_idle_seconds``.  The hub applies no policy:
callers see it through ``McpScope``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from service.errors import McpConfigError
from service.settings_mcp import McpServerConfig

from .arguments import prepare_arguments
from .client import McpConnection
from .errors import McpError, McpTimeout, McpUnavailable, McpUnknownTool
from .identifiers import assign_identifiers
from .views import McpServerView, McpToolView

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# After a failed connect, listing servers skips that server for this long so a dead server does not
# slow down every cell; an explicit call on it still retries at once.
LIST_RETRY_AFTER_S = 5.0


@dataclass
class _Slot:
    """One connection to one server: the shared one, or one tenant's."""

    config: McpServerConfig
    identifier: str
    conn: McpConnection | None = None
    view: McpServerView | None = None
    failed_at: float | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    active: int = 0  # requests and connects using the slot right now
    last_used: float = field(default_factory=time.monotonic)

    @property
    def alive(self) -> bool:
        return self.conn is not None and self.conn.alive

    @property
    def busy(self) -> bool:
        return self.active > 0 or self.lock.locked()


class _Server:
    """One configured server: its shared slot, or its tenants' slots (least recently used first)."""

    def __init__(self, config: McpServerConfig, identifier: str) -> None:
        self.config = config
        self.identifier = identifier
        self.shared = None if config.per_tenant else _Slot(config, identifier)
        self.tenants: OrderedDict[str, _Slot] = OrderedDict()

    def existing(self, tenant: str) -> _Slot | None:
        return self.shared if self.shared is not None else self.tenants.get(tenant)

    def slots(self) -> Iterator[_Slot]:
        if self.shared is not None:
            yield self.shared
        yield from self.tenants.values()


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
        self._servers = {ident: _Server(config, ident) for ident, config in zip(identifiers, configs)}
        self._closing: set[asyncio.Task[None]] = set()
        self._retiring: set[McpConnection] = set()  # replaced connections closing once their requests end
        self._closed = False
        #: Told each fresh tool listing: ((server identifier, name), [(tool identifier, name), ...]).
        self.on_listed: Callable[[tuple[str, str], list[tuple[str, str]]], None] | None = None

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
        await asyncio.gather(*(self._try_connect(slot, slot.config.timeout_ms / 1000) for slot in eager))

    async def close(self) -> None:
        """Close every connection and stop every stdio server."""
        self._closed = True
        slots = [slot for server in self._servers.values() for slot in server.slots()]
        conns = [slot.conn for slot in slots if slot.conn is not None]
        for slot in slots:
            slot.conn, slot.view = None, None
        retiring = list(self._retiring)  # closed now: their in-flight requests are not waited for
        await asyncio.gather(*(conn.close() for conn in conns + retiring), *self._closing, return_exceptions=True)

    def close_idle(self) -> int:
        """Close per-tenant connections idle for their server's ``tenant_idle_seconds``; how many."""
        now = time.monotonic()
        closed = 0
        for server in self._servers.values():
            idle_s = server.config.tenant_idle_seconds
            for tenant, slot in list(server.tenants.items()):
                if not slot.busy and now - slot.last_used >= idle_s:
                    self._drop(server, tenant)
                    closed += 1
        return closed

    def tenant_connections(self, server_identifier: str) -> list[str]:
        """The tenants holding a connection slot of a ``per_tenant`` server, least recently used first."""
        return list(self._server(server_identifier).tenants)

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
        slots: list[_Slot] = []
        for server in self._servers.values():
            if only is not None and server.identifier not in only:
                continue
            try:
                slots.append(self._slot_for(server, tenant))
            except McpUnavailable as exc:
                log.warning("%s", exc.message)
        wanted = [
            slot for slot in slots if slot.failed_at is None or now - slot.failed_at >= LIST_RETRY_AFTER_S or slot.alive
        ]
        budget = math.inf if deadline_s is None else deadline_s
        for slot in slots:
            slot.active += 1  # held from now: the connect tasks start later, an eviction must not win
        try:
            await asyncio.gather(
                *(self._try_connect(slot, min(slot.config.timeout_ms / 1000, budget)) for slot in wanted)
            )
        finally:
            for slot in slots:
                self._release(slot)
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
        server = self._server(server_identifier)
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
        arguments: Any,
        *,
        tenant: str,
        deadline_s: float,
        visible: Callable[[McpToolView], bool] | None = None,
    ) -> dict[str, Any]:
        """Call ``MCP.<server>.<tool>(arguments)``; the raw result, ``isError`` included.

        A tool ``visible`` rejects is refused as unknown before anything is sent.
        """
        slot = self._slot(server_identifier, tenant)

        async def call(conn: McpConnection, remaining: float) -> dict[str, Any]:
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
            return await conn.call_tool(found.name, prepared, remaining)

        clock_s = self.tool_clock_s(server_identifier, tool_identifier, tenant=tenant)
        return await self._request(
            slot, deadline_s, call, replayable=lambda: self._idempotent(slot, tool_identifier), limit_s=clock_s
        )

    def tool_clock_s(self, server_identifier: str, tool_identifier: str, *, tenant: str) -> float:
        """The wall clock of one call of the tool (its ``tool_timeouts_ms`` entry, else the server's
        ``timeout_ms``), in seconds; the connect and a resend after a broken connection are on it too."""
        slot = self._slot(server_identifier, tenant)
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
        return await self._request(self._slot(server_identifier, tenant), deadline_s, op)

    # ---- internals -------------------------------------------------------------------------------

    async def _request(
        self,
        slot: _Slot,
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
        slot.active += 1
        try:
            for attempt in range(2):
                conn = await self._connect(slot, end - time.monotonic())
                try:
                    return await op(conn, end - time.monotonic())
                except McpUnavailable as exc:
                    if attempt or end - time.monotonic() <= 0 or not (exc.retryable or replayable()):
                        raise
            raise AssertionError("unreachable")
        finally:
            self._release(slot)

    @staticmethod
    def _idempotent(slot: _Slot, tool_identifier: str) -> bool:
        """Whether the operator listed the tool in ``idempotent_tools`` (the server's own hints are not trusted)."""
        found = slot.view.tool(tool_identifier) if slot.view is not None else None
        return found is not None and found.name in slot.config.idempotent_tools

    async def _connect(self, slot: _Slot, timeout_s: float) -> McpConnection:
        conn = slot.conn
        if conn is not None and conn.alive:
            return conn
        name = slot.config.name
        if self._closed:
            raise _shutting_down(name)
        try:
            await asyncio.wait_for(slot.lock.acquire(), timeout=max(timeout_s, 0.001))
        except TimeoutError:
            raise McpTimeout(f"MCP server '{name}' did not start before the deadline", server=name) from None
        try:
            conn = slot.conn
            if conn is not None and conn.alive:
                return conn
            if conn is not None:
                log.info("MCP server '%s' went away; restarting it", name)
                self._close_later(conn)
                slot.conn, slot.view = None, None
            fresh = McpConnection(slot.config)
            try:
                await fresh.open(timeout_s)
            except McpError:
                slot.failed_at = time.monotonic()
                raise
            if self._closed:  # closed while this connection opened: nobody else will close it
                self._close_later(fresh)
                raise _shutting_down(name)
            slot.conn, slot.failed_at = fresh, None
            slot.view = view = _view_of(slot.identifier, slot.config.name, fresh)
            if self.on_listed is not None:
                self.on_listed((view.identifier, view.name), [(t.identifier, t.name) for t in view.tools])
            return fresh
        finally:
            slot.lock.release()

    async def _try_connect(self, slot: _Slot, timeout_s: float) -> None:
        try:
            await self._connect(slot, timeout_s)
        except McpError as exc:
            log.warning("%s (will retry on use)", exc.message)

    @staticmethod
    def _release(slot: _Slot) -> None:
        slot.active -= 1
        slot.last_used = time.monotonic()

    def _close_later(self, conn: McpConnection) -> None:
        """Close ``conn`` in the background once its requests in flight are answered."""
        self._retiring.add(conn)
        task = asyncio.create_task(conn.close_when_idle())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        task.add_done_callback(lambda _: self._retiring.discard(conn))

    def _server(self, server_identifier: str) -> _Server:
        server = self._servers.get(server_identifier)
        if server is None:
            raise McpUnknownTool(f"Unknown MCP server: {server_identifier}")
        return server

    def _slot(self, server_identifier: str, tenant: str) -> _Slot:
        return self._slot_for(self._server(server_identifier), tenant)

    def _slot_for(self, server: _Server, tenant: str) -> _Slot:
        """The tenant's slot (the shared one unless ``per_tenant``), made room for and created if new."""
        if server.shared is not None:
            return server.shared
        slot = server.tenants.get(tenant)
        if slot is not None:
            server.tenants.move_to_end(tenant)
            return slot
        cap = server.config.max_tenant_connections
        if len(server.tenants) >= cap:
            idle = next((t for t, s in server.tenants.items() if not s.busy), None)
            if idle is None:
                name = server.config.name
                raise McpUnavailable(
                    f"MCP server '{name}' is unavailable: all {cap} per-tenant connections "
                    "(max_tenant_connections) are busy; retry shortly",
                    server=name,
                    counted=False,  # codemode's own cap, not a failure of the tool
                )
            self._drop(server, idle)
        slot = server.tenants[tenant] = _Slot(server.config, server.identifier)
        return slot

    def _drop(self, server: _Server, tenant: str) -> None:
        slot = server.tenants.pop(tenant)
        if slot.conn is not None:
            self._close_later(slot.conn)
            slot.conn, slot.view = None, None


def _view_of(identifier: str, name: str, conn: McpConnection) -> McpServerView:
    idents = assign_identifiers([tool.name for tool in conn.tools])
    tools = tuple(
        McpToolView(ident, tool.name, tool.description, tool.input_schema, tool.output_schema)
        for ident, tool in zip(idents, conn.tools)
    )
    return McpServerView(identifier, name, tools, conn.has_resources, conn.has_prompts)


def _shutting_down(name: str) -> McpUnavailable:
    return McpUnavailable(
        f"MCP server '{name}' is unavailable: the service is shutting down", server=name, counted=False
    )
