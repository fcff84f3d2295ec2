"""Guest requests for the virtual ``API`` files: ``api.list`` and ``api.read``.

The table is built once per cell, on its first request, from the cell's catalog view and the MCP
servers its tenant sees; the HTTP routes build the same table for a key through ``api_table``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bridge.json_types import JsonObject
from service.api_files.errors import ApiFileError
from service.api_files.model import McpServerDecl, McpToolDecl, ToolDecl
from service.api_files.quick_index import IndexEntry
from service.api_files.quick_index import quick_index as render_quick_index
from service.api_files.table import ApiFileTable
from service.errors import InvalidRequest, NotFound
from service.runtime.dispatch import Dispatcher, GuestError, HostCall
from service.tools.catalog import CatalogView

from .cell_tools import cell_tools

if TYPE_CHECKING:
    from service.mcp.views import McpServerView


def api_table(view: CatalogView, servers: Sequence[McpServerView], *, python: bool = False) -> ApiFileTable:
    """The declaration files of the tools in ``view`` and of the MCP ``servers`` (``python``: with the
    Python cells' ``.pyi`` stubs)."""
    tools = [
        ToolDecl(e.callable_name, e.description, e.input_schema, e.output_schema, e.trusted) for e in view.entries()
    ]
    mcp = [
        McpServerDecl(
            s.identifier,
            s.name,
            tuple(
                McpToolDecl(t.identifier, t.name, t.description or "", t.input_schema, t.output_schema) for t in s.tools
            ),
            s.has_resources,
            s.has_prompts,
        )
        for s in servers
    ]
    return ApiFileTable(tools, mcp, python=python)


def quick_index(view: CatalogView) -> str:
    entries = [IndexEntry(e.callable_name, e.input_schema, e.output_schema, e.trusted) for e in view.entries()]
    return render_quick_index(entries)


def list_api_files(table: ApiFileTable, prefix: str | None) -> dict[str, Any]:
    """``table.list(prefix)`` for a caller outside a cell (HTTP, MCP): a bad prefix is InvalidRequest."""
    try:
        return table.list(prefix)
    except ApiFileError as exc:
        raise InvalidRequest(str(exc), need_param="prefix") from None


def read_api_file(table: ApiFileTable, path: str) -> dict[str, Any]:
    """``table.read(path)`` for a caller outside a cell: unknown is NotFound, malformed InvalidRequest."""
    try:
        return table.read(path)
    except ApiFileError as exc:
        if str(exc).startswith("Unknown API file"):
            raise NotFound(str(exc)) from None
        raise InvalidRequest(str(exc), need_param="path") from None


def install_api_files(dispatcher: Dispatcher) -> None:
    """Register the read-only ``api.list`` and ``api.read``."""

    def table(call: HostCall) -> ApiFileTable:
        state = cell_tools(call.cell)
        if state.api is None:
            state.api = api_table(state.view, state.mcp_servers, python=call.cell.spec.language == "python")
        return state.api

    async def api_list(call: HostCall) -> JsonObject:
        prefix = call.args[0] if call.args else None
        try:
            return table(call).list(prefix)
        except ApiFileError as exc:
            raise GuestError(str(exc), "invalid_input") from None

    async def api_read(call: HostCall) -> JsonObject:
        path = call.args[0] if call.args else None
        if not isinstance(path, str):
            raise GuestError("API.read(path) needs a string path", "invalid_input", name="TypeError")
        try:
            return table(call).read(path)
        except ApiFileError as exc:
            raise GuestError(str(exc), "invalid_input") from None

    dispatcher.register("api.list", api_list, side_effects=False)
    dispatcher.register("api.read", api_read, side_effects=False)
