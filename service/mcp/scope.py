"""One caller's view of the MCP hub: its tenant's connections, and only what its tool policy shows.

A hidden server has no view, no declaration and no unavailable-namespace entry; asking for it by
name gets the same ``McpUnknownTool`` as a server that does not exist, before any connection is made.
A hidden tool is missing from its server's view and refused as unknown before anything is sent.
Resources and prompts belong to the server as a whole: a server shown only tool by tool has none.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from service.tools.policy import McpAccess, McpVisibility

from .errors import McpUnknownTool
from .hub import DEFAULT_TENANT, McpHub
from .views import McpServerView, McpToolView, root_header, server_header


class McpScope:
    """The hub as one tenant under one visibility sees it (same methods as the hub, filtered)."""

    def __init__(self, hub: McpHub, tenant: str = DEFAULT_TENANT, visibility: McpVisibility | None = None) -> None:
        self.hub = hub
        self.tenant = tenant
        self.visibility = visibility or McpVisibility()
        self._access = {ident: self.visibility.server(name, ident) for ident, name in hub.identifiers()}
        self._shown = [ident for ident, access in self._access.items() if access is not McpAccess.NONE]

    # ---- discovery -------------------------------------------------------------------------------

    async def servers(self, *, deadline_s: float | None = None) -> list[McpServerView]:
        """Views of the visible servers reachable for this tenant, connecting now."""
        views = await self.hub.servers(deadline_s=deadline_s, tenant=self.tenant, only=self._shown)
        return [self._narrow(view) for view in views]

    def unavailable(self) -> list[tuple[str, str]]:
        """``(identifier, name)`` of visible servers not connected for this tenant."""
        return [(ident, name) for ident, name in self.hub.unavailable(self.tenant) if ident in self._shown]

    def api_root(self) -> dict[str, Any]:
        views = [view for view in self.hub.views(self.tenant) if view.identifier in self._shown]
        return root_header([self._narrow(view) for view in views])

    def api_server(self, server_identifier: str, tool: str | None = None, schema: bool = False) -> dict[str, Any]:
        self._check(server_identifier)
        return server_header(self._narrow(self.hub.view(server_identifier, self.tenant)), tool, schema)

    # ---- requests --------------------------------------------------------------------------------

    async def call_tool(
        self, server_identifier: str, tool_identifier: str, arguments: Any, *, deadline_s: float
    ) -> dict[str, Any]:
        self._check(server_identifier)
        name = self.hub.server_name(server_identifier) or server_identifier

        def visible(tool: McpToolView) -> bool:
            return self.visibility.tool((name, server_identifier), (tool.name, tool.identifier))

        return await self.hub.call_tool(
            server_identifier, tool_identifier, arguments, deadline_s=deadline_s, tenant=self.tenant, visible=visible
        )

    async def list_resources(
        self, server_identifier: str, *, cursor: str | None = None, deadline_s: float
    ) -> dict[str, Any]:
        self._check(server_identifier, whole=True)
        return await self.hub.list_resources(
            server_identifier, cursor=cursor, deadline_s=deadline_s, tenant=self.tenant
        )

    async def list_resource_templates(
        self, server_identifier: str, *, cursor: str | None = None, deadline_s: float
    ) -> dict[str, Any]:
        self._check(server_identifier, whole=True)
        return await self.hub.list_resource_templates(
            server_identifier, cursor=cursor, deadline_s=deadline_s, tenant=self.tenant
        )

    async def read_resource(self, server_identifier: str, uri: str, *, deadline_s: float) -> dict[str, Any]:
        self._check(server_identifier, whole=True)
        return await self.hub.read_resource(server_identifier, uri, deadline_s=deadline_s, tenant=self.tenant)

    async def list_prompts(
        self, server_identifier: str, *, cursor: str | None = None, deadline_s: float
    ) -> dict[str, Any]:
        self._check(server_identifier, whole=True)
        return await self.hub.list_prompts(server_identifier, cursor=cursor, deadline_s=deadline_s, tenant=self.tenant)

    async def get_prompt(
        self, server_identifier: str, name: str, arguments: Any = None, *, deadline_s: float
    ) -> dict[str, Any]:
        self._check(server_identifier, whole=True)
        return await self.hub.get_prompt(server_identifier, name, arguments, deadline_s=deadline_s, tenant=self.tenant)

    # ---- internals -------------------------------------------------------------------------------

    def _check(self, server_identifier: Any, *, whole: bool = False) -> None:
        access = (
            self._access.get(server_identifier, McpAccess.NONE)
            if isinstance(server_identifier, str)
            else McpAccess.NONE
        )
        if access is McpAccess.NONE:
            raise McpUnknownTool(f"Unknown MCP server: {server_identifier}")
        if whole and access is not McpAccess.ALL:
            name = self.hub.server_name(server_identifier)
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
