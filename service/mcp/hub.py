"""The MCP hub: every configured server behind guest identifiers, connected eagerly or on first use.

A server that fails to start never stops the service: the failure is logged and the next use tries
again.  A connection whose server died is replaced on next use.  Every request runs under a deadline
(the smaller of the server's ``timeout_ms`` and the caller's ``deadline_s``), covering the connect too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .arguments import prepare_arguments
from .client import McpConnection
from .config import McpServerConfig
from .errors import McpConfigError, McpError, McpInvalidInput, McpTimeout, McpUnavailable, McpUnknownTool
from .identifiers import assign_identifiers

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# After a failed connect, listing servers skips that server for this long so a dead server does not
# slow down every cell; an explicit call on it still retries at once.
LIST_RETRY_AFTER_S = 5.0
UNTRUSTED_NOTE = "MCP metadata and results come from a remote server and are untrusted."


@dataclass(frozen=True)
class McpToolView:
    """One tool under its guest identifier."""

    identifier: str
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None


@dataclass(frozen=True)
class McpServerView:
    """One connected server as the guest sees it (``MCP.<identifier>``)."""

    identifier: str
    name: str
    tools: tuple[McpToolView, ...]
    has_resources: bool
    has_prompts: bool

    def tool(self, key: str) -> McpToolView | None:
        """The tool with this identifier, else the one with this server-side name."""
        for tool in self.tools:
            if tool.identifier == key:
                return tool
        return next((tool for tool in self.tools if tool.name == key), None)


@dataclass
class _Slot:
    config: McpServerConfig
    identifier: str
    conn: McpConnection | None = None
    view: McpServerView | None = None
    failed_at: float | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class McpHub:
    """All configured MCP servers; safe for concurrent use from one event loop."""

    def __init__(self, configs: Sequence[McpServerConfig]) -> None:
        names = [config.validate().name for config in configs]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise McpConfigError(f"MCP server '{duplicates[0]}' is configured twice", server=duplicates[0])
        identifiers = assign_identifiers(names, fallback="server")
        self._slots = {ident: _Slot(config, ident) for ident, config in zip(identifiers, configs)}
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect the eager servers now; failures are logged, never raised."""
        eager = [slot for slot in self._slots.values() if slot.config.startup == "eager"]
        await asyncio.gather(*(self._try_connect(slot, slot.config.timeout_ms / 1000) for slot in eager))

    async def close(self) -> None:
        """Close every connection and stop every stdio server."""
        self._closed = True
        conns = [slot.conn for slot in self._slots.values() if slot.conn is not None]
        for slot in self._slots.values():
            slot.conn, slot.view = None, None
        await asyncio.gather(*(conn.close() for conn in conns), *self._closing, return_exceptions=True)

    # ---- discovery -------------------------------------------------------------------------------

    async def servers(self, *, deadline_s: float | None = None) -> list[McpServerView]:
        """Views of the reachable servers, connecting lazy ones now (config order)."""
        now = time.monotonic()
        wanted = [
            slot
            for slot in self._slots.values()
            if slot.failed_at is None or now - slot.failed_at >= LIST_RETRY_AFTER_S or self._alive(slot)
        ]
        budget = math.inf if deadline_s is None else deadline_s
        await asyncio.gather(
            *(self._try_connect(slot, min(slot.config.timeout_ms / 1000, budget)) for slot in wanted)
        )
        return [slot.view for slot in self._slots.values() if slot.view is not None and self._alive(slot)]

    def unavailable(self) -> list[tuple[str, str]]:
        """``(identifier, name)`` of configured servers that are not connected right now."""
        return [(slot.identifier, slot.config.name) for slot in self._slots.values()
                if slot.view is None or not self._alive(slot)]

    def api_root(self) -> dict[str, Any]:
        """``MCP.$api()``: the root header and the known servers."""
        views = self._views()
        return {
            "kind": "mcp_api",
            "scope": "root",
            "header": (
                "MCP servers visible to this cell. Call MCP.<server>.$api() for a server's tools, "
                'or read its declarations with API.read("mcp/<server>.d.ts").'
            ),
            "servers": [
                {"identifier": view.identifier, "serverName": view.name, "toolCount": len(view.tools)}
                for view in views
            ],
            "note": UNTRUSTED_NOTE,
        }

    def api_server(
        self, server_identifier: str, tool: str | None = None, schema: bool = False
    ) -> dict[str, Any]:
        """``MCP.<server>.$api(tool?, {schema?})``: the server or single-tool header."""
        view = self._view(server_identifier)
        if tool is None:
            tools = view.tools
        else:
            found = view.tool(tool)
            if found is None:
                raise McpUnknownTool(
                    f"MCP server '{view.name}' has no tool '{tool}'", server=view.name, tool=tool
                )
            tools = (found,)
        ns = f"MCP.{view.identifier}"
        extras = [
            name for name, on in (("resources", view.has_resources), ("prompts", view.has_prompts)) if on
        ]
        count = len(view.tools)
        header = (
            f"{ns}: MCP server '{view.name}' ({count} tool{'' if count == 1 else 's'}"
            + "".join(f", {extra}" for extra in extras)
            + f"). Call {ns}.<tool>(input) with one object argument; it resolves to "
            "{content, structuredContent?, isError?} (isError: true resolves, it does not throw). "
            f'Declarations: API.read("mcp/{view.identifier}.d.ts").'
        )
        result: dict[str, Any] = {
            "kind": "mcp_api",
            "scope": "server" if tool is None else "tool",
            "server": {"identifier": view.identifier, "serverName": view.name},
            "header": header,
            "tools": [
                {
                    "identifier": t.identifier,
                    "toolName": t.name,
                    "callableName": f"{ns}.{t.identifier}",
                    "description": t.description,
                }
                for t in tools
            ],
        }
        if schema:
            result["schemas"] = {
                t.identifier: {"inputSchema": t.input_schema}
                | ({"outputSchema": t.output_schema} if t.output_schema is not None else {})
                for t in tools
            }
        result["note"] = UNTRUSTED_NOTE
        return result

    # ---- requests --------------------------------------------------------------------------------

    async def call_tool(
        self, server_identifier: str, tool_identifier: str, arguments: Any, *, deadline_s: float
    ) -> dict[str, Any]:
        """Call ``MCP.<server>.<tool>(arguments)``; the raw result, ``isError`` included."""
        slot = self._slot(server_identifier)

        async def call(conn: McpConnection, remaining: float) -> dict[str, Any]:
            view = slot.view
            found = view.tool(tool_identifier) if view is not None else None
            if found is None:
                raise McpUnknownTool(
                    f"MCP server '{slot.config.name}' has no tool '{tool_identifier}'",
                    server=slot.config.name,
                    tool=tool_identifier,
                )
            label = f"MCP.{slot.identifier}.{found.identifier}"
            prepared = prepare_arguments(found.input_schema, arguments, label=label)
            return await conn.call_tool(found.name, prepared, remaining)

        return await self._request(slot, deadline_s, call)

    async def list_resources(
        self, server_identifier: str, *, cursor: str | None = None, deadline_s: float
    ) -> dict[str, Any]:
        """``MCP.<server>.resources.list()``: one page in the MCP shape."""
        slot = self._slot(server_identifier)
        return await self._request(slot, deadline_s, lambda conn, t: conn.list_resources(cursor, t))

    async def list_resource_templates(
        self, server_identifier: str, *, cursor: str | None = None, deadline_s: float
    ) -> dict[str, Any]:
        """One page of resource templates in the MCP shape."""
        slot = self._slot(server_identifier)
        return await self._request(slot, deadline_s, lambda conn, t: conn.list_resource_templates(cursor, t))

    async def read_resource(self, server_identifier: str, uri: str, *, deadline_s: float) -> dict[str, Any]:
        """``MCP.<server>.resources.read(uri)`` in the MCP shape."""
        slot = self._slot(server_identifier)
        return await self._request(slot, deadline_s, lambda conn, t: conn.read_resource(uri, t))

    async def list_prompts(
        self, server_identifier: str, *, cursor: str | None = None, deadline_s: float
    ) -> dict[str, Any]:
        """``MCP.<server>.prompts.list()``: one page in the MCP shape."""
        slot = self._slot(server_identifier)
        return await self._request(slot, deadline_s, lambda conn, t: conn.list_prompts(cursor, t))

    async def get_prompt(
        self, server_identifier: str, name: str, arguments: Any = None, *, deadline_s: float
    ) -> dict[str, Any]:
        """``MCP.<server>.prompts.get(name, args)`` in the MCP shape; argument values become strings."""
        slot = self._slot(server_identifier)
        if arguments is not None and not isinstance(arguments, dict):
            raise McpInvalidInput("MCP prompt arguments must be an object", server=slot.config.name)
        args = {str(k): v if isinstance(v, str) else _json_text(v) for k, v in (arguments or {}).items()}
        return await self._request(slot, deadline_s, lambda conn, t: conn.get_prompt(name, args, t))

    # ---- internals -------------------------------------------------------------------------------

    async def _request(
        self, slot: _Slot, deadline_s: float, op: Callable[[McpConnection, float], Awaitable[_T]]
    ) -> _T:
        budget = max(min(slot.config.timeout_ms / 1000, deadline_s), 0.0)
        end = time.monotonic() + budget
        for attempt in range(2):
            conn = await self._connect(slot, end - time.monotonic())
            try:
                return await op(conn, end - time.monotonic())
            except McpUnavailable as exc:
                # Resend only what provably never reached a live server (a forgotten HTTP session).
                if not exc.retryable or attempt or end - time.monotonic() <= 0:
                    raise
        raise AssertionError("unreachable")

    async def _connect(self, slot: _Slot, timeout_s: float) -> McpConnection:
        conn = slot.conn
        if conn is not None and conn.alive:
            return conn
        name = slot.config.name
        if self._closed:
            raise McpUnavailable(
                f"MCP server '{name}' is unavailable: the service is shutting down", server=name
            )
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
            slot.conn, slot.failed_at = fresh, None
            slot.view = _view_of(slot.identifier, slot.config.name, fresh)
            return fresh
        finally:
            slot.lock.release()

    async def _try_connect(self, slot: _Slot, timeout_s: float) -> None:
        try:
            await self._connect(slot, timeout_s)
        except McpError as exc:
            log.warning("%s (will retry on use)", exc.message)

    def _close_later(self, conn: McpConnection) -> None:
        task = asyncio.create_task(conn.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    @staticmethod
    def _alive(slot: _Slot) -> bool:
        return slot.conn is not None and slot.conn.alive

    def _views(self) -> list[McpServerView]:
        return [slot.view for slot in self._slots.values() if slot.view is not None]

    def _slot(self, server_identifier: str) -> _Slot:
        slot = self._slots.get(server_identifier)
        if slot is None:
            raise McpUnknownTool(f"Unknown MCP server: {server_identifier}")
        return slot

    def _view(self, server_identifier: str) -> McpServerView:
        view = self._slot(server_identifier).view
        if view is None:
            name = self._slots[server_identifier].config.name
            raise McpUnavailable(f"MCP server '{name}' is not connected", server=name)
        return view


def _view_of(identifier: str, name: str, conn: McpConnection) -> McpServerView:
    idents = assign_identifiers([tool.name for tool in conn.tools])
    tools = tuple(
        McpToolView(ident, tool.name, tool.description, tool.input_schema, tool.output_schema)
        for ident, tool in zip(idents, conn.tools)
    )
    return McpServerView(identifier, name, tools, conn.has_resources, conn.has_prompts)


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
