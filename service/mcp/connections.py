"""The hub's connection slots: one per server (shared) or one per tenant, with their connect and close life.

A slot is connected on first use under its lock, so concurrent first requests share one connect.  A
connection whose server died is retired (closed once its in-flight requests have their answers) and
replaced on next use.  Per-tenant slots are capped per server: a new tenant beyond the cap takes the
place of the least recently used idle slot, or is refused while all are busy.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from service.settings_mcp import McpServerConfig

from .client import McpConnection
from .errors import McpError, McpTimeout, McpUnavailable, McpUnknownTool
from .identifiers import assign_identifiers
from .results import OutputSchema
from .views import McpServerView, McpToolView

log = logging.getLogger(__name__)

#: Told each fresh tool listing: ((server identifier, name), [(tool identifier, name), ...]).
ListedListener = Callable[[tuple[str, str], list[tuple[str, str]]], None]


@dataclass
class Slot:
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

    def hold(self) -> None:
        """Count one more user of the slot (an eviction passes over it until ``release``)."""
        self.active += 1

    def release(self) -> None:
        self.active -= 1
        self.last_used = time.monotonic()


class ServerSlots:
    """One configured server: its shared slot, or its tenants' slots (least recently used first)."""

    def __init__(self, config: McpServerConfig, identifier: str) -> None:
        self.config = config
        self.identifier = identifier
        self.shared = None if config.per_tenant else Slot(config, identifier)
        self.tenants: OrderedDict[str, Slot] = OrderedDict()

    def existing(self, tenant: str) -> Slot | None:
        return self.shared if self.shared is not None else self.tenants.get(tenant)

    def slots(self) -> Iterator[Slot]:
        if self.shared is not None:
            yield self.shared
        yield from self.tenants.values()


class McpConnections:
    """Every server's slots, connected on use and closed when idle, replaced or shut down."""

    def __init__(self, servers: Mapping[str, ServerSlots]) -> None:
        self.servers = servers
        self._closing: set[asyncio.Task[None]] = set()
        self._retiring: set[McpConnection] = set()  # replaced connections closing once their requests end
        self._closed = False
        self.on_listed: ListedListener | None = None

    def server(self, server_identifier: str) -> ServerSlots:
        server = self.servers.get(server_identifier)
        if server is None:
            raise McpUnknownTool(f"Unknown MCP server: {server_identifier}")
        return server

    def slot(self, server_identifier: str, tenant: str) -> Slot:
        return self.slot_for(self.server(server_identifier), tenant)

    def slot_for(self, server: ServerSlots, tenant: str) -> Slot:
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
        slot = server.tenants[tenant] = Slot(server.config, server.identifier)
        return slot

    async def connect(self, slot: Slot, timeout_s: float) -> McpConnection:
        """The slot's live connection, opened now (once, under the slot's lock) if it has none."""
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
            return await self._open(slot, timeout_s)
        finally:
            slot.lock.release()

    async def try_connect(self, slot: Slot, timeout_s: float) -> None:
        """``connect``, with a failure logged instead of raised (the next use tries again)."""
        try:
            await self.connect(slot, timeout_s)
        except McpError as exc:
            log.warning("%s (will retry on use)", exc.message)

    def close_idle(self) -> int:
        """Close per-tenant connections idle for their server's ``tenant_idle_seconds``; how many."""
        now = time.monotonic()
        closed = 0
        for server in self.servers.values():
            idle_s = server.config.tenant_idle_seconds
            for tenant, slot in list(server.tenants.items()):
                if not slot.busy and now - slot.last_used >= idle_s:
                    self._drop(server, tenant)
                    closed += 1
        return closed

    async def close(self) -> None:
        """Close every connection (in-flight requests on retiring ones are not waited for)."""
        self._closed = True
        slots = [slot for server in self.servers.values() for slot in server.slots()]
        conns = [slot.conn for slot in slots if slot.conn is not None]
        for slot in slots:
            slot.conn, slot.view = None, None
        retiring = list(self._retiring)
        await asyncio.gather(*(conn.close() for conn in conns + retiring), *self._closing, return_exceptions=True)

    async def _open(self, slot: Slot, timeout_s: float) -> McpConnection:
        """A new connection for the slot (its lock held), its view made and announced."""
        name = slot.config.name
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
        slot.view = view = _view_of(slot.identifier, name, fresh)
        if self.on_listed is not None:
            self.on_listed((view.identifier, view.name), [(t.identifier, t.name) for t in view.tools])
        return fresh

    def _close_later(self, conn: McpConnection) -> None:
        """Close ``conn`` in the background once its requests in flight are answered."""
        self._retiring.add(conn)
        task = asyncio.create_task(conn.close_when_idle())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        task.add_done_callback(lambda _: self._retiring.discard(conn))

    def _drop(self, server: ServerSlots, tenant: str) -> None:
        slot = server.tenants.pop(tenant)
        if slot.conn is not None:
            self._close_later(slot.conn)
            slot.conn, slot.view = None, None


def _view_of(identifier: str, name: str, conn: McpConnection) -> McpServerView:
    idents = assign_identifiers([tool.name for tool in conn.tools])
    tools = tuple(
        McpToolView(
            ident,
            tool.name,
            tool.description,
            tool.input_schema,
            tool.output_schema,
            None if tool.output_schema is None else OutputSchema(tool.output_schema),
        )
        for ident, tool in zip(idents, conn.tools)
    )
    return McpServerView(identifier, name, tools, conn.has_resources, conn.has_prompts)


def _shutting_down(name: str) -> McpUnavailable:
    return McpUnavailable(
        f"MCP server '{name}' is unavailable: the service is shutting down", server=name, counted=False
    )
