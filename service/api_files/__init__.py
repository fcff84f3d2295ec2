"""Virtual `API` declaration files: JSON Schema to TypeScript, quick index hints, the file table."""

from service.api_files.errors import ApiFileError
from service.api_files.mcp_dts import render_mcp_index, render_mcp_server
from service.api_files.model import McpServerDecl, McpToolDecl, ToolDecl
from service.api_files.quick_index import IndexEntry, quick_index
from service.api_files.results_dts import RESULTS_DTS
from service.api_files.table import ApiFileTable
from service.api_files.tool_dts import render_tool_declaration

__all__ = [
    "RESULTS_DTS",
    "ApiFileError",
    "ApiFileTable",
    "IndexEntry",
    "McpServerDecl",
    "McpToolDecl",
    "ToolDecl",
    "quick_index",
    "render_mcp_index",
    "render_mcp_server",
    "render_tool_declaration",
]
