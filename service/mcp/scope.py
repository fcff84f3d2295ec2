"""One caller's view of the MCP hub: its tenant's connections, and only what its tool policy shows.

A hidden server has no view, no declaration and no unavailable-namespace entry; asking for it by
name gets the same ``McpUnknownTool`` as a server that does not exist, before any connection is made.
A hidden tool is missing from its server's view and refused as unknown before anything is sent.
Resources and prompts belong to the server as a whole: a server shown only tool by tool has none.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from bridge.json_types import JsonObject
from service.tools.policy import McpAccess, McpVisibility, ToolPolicy

from .arguments import prompt_arguments
from .errors import McpError, McpUnknownTool
from .views import McpServerView, McpToolView, root_header, server_header

if TYPE_CHECKING:  # a scope is handed its hub: importing this module loads no MCP SDK
    from .client import McpConnection
    from .hub import McpHub
    from .results import ResultChecker

_T = TypeVar("_T")


class McpScope:
    """The hub as one tenant under one visibility sees it (same methods as the hub, filtered)."""

    def __init__(
        self,
        hub: McpHub,
        tenant: str,
        visibility: McpVisibility | None = None,
        results: ResultChecker | None = None,
    ) -> None:
        """``results``: the caller's check of tool results against their ``outputSchema`` (a cell's
        scope has one; a scope that only lists servers needs none)."""
        self.hub = hub
        self.tenant = tenant
        self.results = results
        self.visibility = visibility or McpVisibility()
        self._access = {ident: self.visibility.server(name, ident) for ident, name in hub.identifiers()}
        self._shown = [ident for ident, access in self._access.items() if access is not McpAccess.NONE]

    # ---- discovery -------------------------------------------------------------------------------

    async def servers(self, *, deadline_s: float | None = None) -> list[McpServerView]:
        """Views of the visible servers reachable for this tenant, connecting now."""
        views = await self.hub.servers(tenant=self.tenant, deadline_s=deadline_s, only=self._shown)
        return [self._narrow(view) for view in views]

    def unavailable(self) -> list[tuple[str, str]]:
        """``(identifier, name)`` of visible servers not connected for this tenant."""
        return [(ident, name) for ident, name in self.hub.unavailable(self.tenant) if ident in self._shown]

    def api_root(self) -> JsonObject:
        views = [view for view in self.hub.views(self.tenant) if view.identifier in self._shown]
        return root_header([self._narrow(view) for view in views])

    def api_server(self, server_identifier: str, tool: str | None = None, schema: bool = False) -> JsonObject:
        self._check(server_identifier)
        return server_header(self._narrow(self.hub.view(server_identifier, self.tenant)), tool, schema)

    def names(
        self, server: str, tool: str, started: Sequence[McpServerView]
    ) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
        """Every spelling of a server and tool a guest called (guest identifiers and configured names).

        The tool's spellings are None when no view of its server knows it yet (not connected): the
        approval rules then treat every `mcp:<server>/<tool>` entry of that server as matching.
        ``started``: the views the cell saw when it started (the live one is asked first).
        """
        name = self.hub.server_name(server)
        servers = (server,) if name is None else (server, name)
        views = [v for v in started if v.identifier == server]
        with contextlib.suppress(McpError):
            views.insert(0, self.hub.view(server, self.tenant))  # the freshest tool list
        for view in views:
            found = view.tool(tool)
            if found is not None:
                return servers, (found.identifier, found.name)
        return servers, None

    # ---- requests --------------------------------------------------------------------------------

    async def call_tool(
        self, server_identifier: str, tool_identifier: str, arguments: object, *, deadline_s: float
    ) -> JsonObject:
        self._check(server_identifier)
        name = self.hub.server_name(server_identifier) or server_identifier

        def visible(tool: McpToolView) -> bool:
            return self.visibility.tool((name, server_identifier), (tool.name, tool.identifier))

        return await self.hub.call_tool(
            server_identifier,
            tool_identifier,
            arguments,
            tenant=self.tenant,
            deadline_s=deadline_s,
            visible=visible,
            results=self.results,
        )

    def tool_clock_s(self, server_identifier: str, tool_identifier: str) -> float:
        """The wall clock of one call of the tool, in seconds (its server's config says)."""
        return self.hub.tool_clock_s(server_identifier, tool_identifier, tenant=self.tenant)

    async def request(
        self, server_identifier: str, op: Callable[[McpConnection, float], Awaitable[_T]], *, deadline_s: float
    ) -> _T:
        """A resource or prompt operation: the server must be shown as a whole (its resources and
        prompts belong to all of it), then ``op`` runs on this tenant's connection."""
        self._check(server_identifier, whole=True)
        return await self.hub.request(server_identifier, self.tenant, op, deadline_s=deadline_s)

    async def list_resources(self, server: str, *, cursor: str | None = None, deadline_s: float) -> JsonObject:
        return await self.request(server, lambda conn, t: conn.list_resources(cursor, t), deadline_s=deadline_s)

    async def list_resource_templates(self, server: str, *, cursor: str | None = None, deadline_s: float) -> JsonObject:
        return await self.request(
            server, lambda conn, t: conn.list_resource_templates(cursor, t), deadline_s=deadline_s
        )

    async def read_resource(self, server: str, uri: str, *, deadline_s: float) -> JsonObject:
        return await self.request(server, lambda conn, t: conn.read_resource(uri, t), deadline_s=deadline_s)

    async def list_prompts(self, server: str, *, cursor: str | None = None, deadline_s: float) -> JsonObject:
        return await self.request(server, lambda conn, t: conn.list_prompts(cursor, t), deadline_s=deadline_s)

    async def get_prompt(self, server: str, name: str, arguments: object, *, deadline_s: float) -> JsonObject:
        self._check(server, whole=True)  # before the arguments are read: a hidden server names no error of them
        args = prompt_arguments(arguments, self.hub.server_name(server) or server)
        return await self.request(server, lambda conn, t: conn.get_prompt(name, args, t), deadline_s=deadline_s)

    # ---- internals -------------------------------------------------------------------------------

    def _check(self, server_identifier: object, *, whole: bool = False) -> None:
        access = (
            self._access.get(server_identifier, McpAccess.NONE)
            if isinstance(server_identifier, str)
            else McpAccess.NONE
        )
        if access is McpAccess.NONE:
            raise McpUnknownTool(f"Unknown MCP server: {server_identifier}")
        if whole and access is not McpAccess.ALL:
            name = self.hub.server_name(str(server_identifier))
            raise McpUnknownTool(
                f"MCP server '{name}' offers only single tools under the tool policy; "
                "its resources and prompts are not available",
                server=name,
            )

    def _narrow(self, view: McpServerView) -> McpServerView:
        """The view without hidden tools; without resources and prompts unless shown as a whole."""
        whole = self._access.get(view.identifier) is McpAccess.ALL
        tools = tuple(
            tool
            for tool in view.tools
            if self.visibility.tool((view.name, view.identifier), (tool.name, tool.identifier))
        )
        return replace(
            view, tools=tools, has_resources=view.has_resources and whole, has_prompts=view.has_prompts and whole
        )


def tenant_scope(
    hub: McpHub | None,
    tenant: str,
    base: ToolPolicy | None,
    key: ToolPolicy | None,
    results: ResultChecker | None = None,
) -> McpScope | None:
    """The hub as ``tenant`` sees it under the base ``[tools]`` policy and its key's (None without MCP);
    ``results`` checks its tool results (a cell's scope; see ``McpScope``)."""
    return None if hub is None else McpScope(hub, tenant, McpVisibility.of(base, key), results)


async def listed_servers(scope: McpScope | None, deadline_s: float) -> list[McpServerView]:
    """The servers ``scope`` shows, lazy ones connected within ``deadline_s`` (none without a scope)."""
    return await scope.servers(deadline_s=deadline_s) if scope is not None else []
