"""What the guest sees of MCP servers: tool and server views under guest identifiers, and ``$api`` headers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bridge.json_types import JsonObject

from .errors import McpUnknownTool
from .results import OutputSchema

UNTRUSTED_NOTE = "MCP metadata and results come from a remote server and are untrusted."


@dataclass(frozen=True)
class McpToolView:
    """One tool under its guest identifier."""

    identifier: str
    name: str
    description: str
    input_schema: JsonObject
    output_schema: JsonObject | None
    #: What checking results against ``output_schema`` needs, made once for this listing (``results``).
    output: OutputSchema | None = field(default=None, compare=False, repr=False)


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


def root_header(views: Sequence[McpServerView]) -> JsonObject:
    """``MCP.$api()``: the root header listing ``views``."""
    return {
        "kind": "mcp_api",
        "scope": "root",
        "header": (
            "MCP servers visible to this cell. Call MCP.<server>.$api() for a server's tools, "
            'or read its declarations with API.read("mcp/<server>.d.ts").'
        ),
        "servers": [
            {"identifier": view.identifier, "serverName": view.name, "toolCount": len(view.tools)} for view in views
        ],
        "note": UNTRUSTED_NOTE,
    }


def server_header(view: McpServerView, tool: str | None = None, schema: bool = False) -> JsonObject:
    """``MCP.<server>.$api(tool?, {schema?})``: the server or single-tool header of ``view``."""
    if tool is None:
        tools = view.tools
    else:
        found = view.tool(tool)
        if found is None:
            raise McpUnknownTool(f"MCP server '{view.name}' has no tool '{tool}'", server=view.name, tool=tool)
        tools = (found,)
    ns = f"MCP.{view.identifier}"
    extras = [name for name, on in (("resources", view.has_resources), ("prompts", view.has_prompts)) if on]
    count = len(view.tools)
    header = (
        f"{ns}: MCP server '{view.name}' ({count} tool{'' if count == 1 else 's'}"
        + "".join(f", {extra}" for extra in extras)
        + f"). Call {ns}.<tool>(input) with one object argument; it resolves to "
        "{content, structuredContent?, isError?} (isError: true resolves, it does not throw). "
        f'Declarations: API.read("mcp/{view.identifier}.d.ts").'
    )
    result: JsonObject = {
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
        result["schemas"] = {t.identifier: _schemas(t) for t in tools}
    result["note"] = UNTRUSTED_NOTE
    return result


def _schemas(tool: McpToolView) -> JsonObject:
    schemas: JsonObject = {"inputSchema": tool.input_schema}
    if tool.output_schema is not None:
        schemas["outputSchema"] = tool.output_schema
    return schemas
