"""What one API key's cells may call: its tool policy, catalog view and declaration files.

Every face (HTTP routes, the MCP facade, the command line) asks here, so a key sees the same tools
whichever door it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.api_files.table import ApiFileTable
from service.capabilities.api_files import api_table
from service.errors import InvalidRequest
from service.mcp.scope import McpScope, listed_servers, tenant_scope
from service.settings import ApiKey
from service.tools.access import ToolAccess
from service.tools.catalog import CatalogView
from service.tools.errors import ToolError
from service.tools.policy import ToolPolicy

if TYPE_CHECKING:
    from service.mcp.hub import McpHub  # the hub module loads the MCP SDK: only a configured hub needs it


class KeyedTools:
    """The tools of each API key: its ``[[api_keys]] tools`` narrowing over the service's tool access."""

    def __init__(self, access: ToolAccess, hub: McpHub | None, connect_seconds: float) -> None:
        self.access = access
        self.hub = hub
        self.connect_seconds = connect_seconds  # how long lazy MCP servers may take to connect for a listing
        # Parsed once per key; keys are settings, so this holds at most one entry per configured key.
        self._policies: dict[str, ToolPolicy | None] = {}

    def policy_for(self, key: ApiKey) -> ToolPolicy | None:
        """The key's tool narrowing (``[[api_keys]] tools = {deny = [...]}``), parsed once."""
        if key.key not in self._policies:
            try:
                self._policies[key.key] = (
                    ToolPolicy.from_config(key.tools, where="api_keys.tools") if key.tools else None
                )
            except ToolError as exc:
                raise InvalidRequest(f"this API key's tool policy is invalid: {exc}") from None
        return self._policies[key.key]

    def view_for(self, key: ApiKey) -> CatalogView:
        return self.access.view_for(self.policy_for(key))

    async def api_table_for(self, key: ApiKey) -> ApiFileTable:
        """The declaration files this key's cells see (native tools and MCP under its policy).

        Lazy MCP servers are connected within ``connect_seconds`` (the default cell timeout).
        """
        policy = self.policy_for(key)
        servers = await listed_servers(self.mcp_scope_for(key), self.connect_seconds)
        return api_table(self.access.view_for(policy), servers)

    def mcp_scope_for(self, key: ApiKey) -> McpScope | None:
        """The MCP servers this key's cells see (its tenant's connections, under both policies)."""
        return tenant_scope(self.hub, key.tenant, self.access.tool_policy, self.policy_for(key))
