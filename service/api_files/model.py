"""Plain inputs to the declaration renderers: what a tool or MCP server looks like to them."""

from __future__ import annotations

from dataclasses import dataclass

from bridge.json_types import JsonObject

__all__ = ["McpServerDecl", "McpToolDecl", "ToolDecl"]


@dataclass(frozen=True)
class ToolDecl:
    """A callable tool global; `trusted` is False for client tools (their metadata is not believed)."""

    callable_name: str
    description: str
    input_schema: JsonObject | None
    output_schema: JsonObject | None
    trusted: bool


@dataclass(frozen=True)
class McpToolDecl:
    """One MCP tool; `identifier` is its safe member name under `MCP.<server>`."""

    identifier: str
    name: str
    description: str
    input_schema: JsonObject | None
    output_schema: JsonObject | None = None  # the server's outputSchema: its results' structuredContent


@dataclass(frozen=True)
class McpServerDecl:
    """One MCP server; `identifier` is its safe member name under `MCP`."""

    identifier: str
    server_name: str
    tools: tuple[McpToolDecl, ...]
    has_resources: bool
    has_prompts: bool
