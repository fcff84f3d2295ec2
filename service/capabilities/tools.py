"""Guest requests for tools: ``tool`` (call one), ``search`` and ``describe`` (the catalog).

A call of a native or client tool goes the one tool-call path (``service.capabilities.tool_calls``)
with the catalog's target (``service.tools.native_calls``: policy, contracts, hooks); MCP tools are
found and described through ``service.capabilities.mcp``.  A result from the network marks the cell,
so its model-facing text is wrapped as untrusted.
"""

from __future__ import annotations

from collections.abc import Awaitable

from bridge.json_types import JsonObject
from service.capabilities.mcp import describe_mcp, search_mcp_tools
from service.runtime.dispatch import CellContext, Dispatcher, HostCall, RawJson
from service.tools.catalog import CatalogLimits
from service.tools.errors import SearchQueryError, ToolCallError

from .cell_tools import CellTools, cell_tools, sync_counters
from .guest_errors import guest_error
from .tool_calls import guest_tool_call


def install_tools(dispatcher: Dispatcher, limits: CatalogLimits) -> None:
    """Register ``tool`` and the read-only ``search`` and ``describe``."""
    requests = ToolRequests(limits)
    dispatcher.register("tool", requests.call_tool)
    dispatcher.on_finish(partial_successes)
    dispatcher.on_finish(failures_written)
    dispatcher.register("search", requests.search, side_effects=False)
    dispatcher.register("describe", requests.describe, side_effects=False)


class ToolRequests:
    """The ``tool``, ``search`` and ``describe`` handlers, with the catalog limits ``search`` clamps by."""

    def __init__(self, limits: CatalogLimits) -> None:
        self.limits = limits

    def call_tool(self, call: HostCall) -> Awaitable[RawJson]:
        """``tool(name, input)``: a call of a native or client tool (no coroutine of its own)."""
        state = cell_tools(call.cell)
        return guest_tool_call(call, state, state.session.native.requested)

    async def search(self, call: HostCall) -> list[JsonObject]:
        state = cell_tools(call.cell)
        query = call.args[0] if call.args else ""
        limit = call.args[1] if len(call.args) > 1 else None
        try:
            found = state.session.search(query, limit)
        except (SearchQueryError, ToolCallError) as exc:
            raise guest_error(exc) from None
        finally:
            sync_counters(call)
        wanted = self.limits.clamp(limit)
        if state.mcp is not None and len(found) < wanted:
            blocked = state.session.ledger.blocked()  # MCP tools are blocked for a run like native ones
            found += [
                {**meta, "blocked": True} if meta["callableName"] in blocked else meta
                for meta in search_mcp_tools(state.mcp_servers, query, wanted - len(found))
            ]
        return found

    async def describe(self, call: HostCall) -> JsonObject:
        state = cell_tools(call.cell)
        name = call.args[0] if call.args else None
        if isinstance(name, str) and name.startswith("MCP.") and state.mcp is not None:
            state.session.record_describe()
            sync_counters(call)
            call.cell.network_content = True  # remote MCP metadata is network-derived
            described: JsonObject = describe_mcp(state.mcp, name)
            return described
        try:
            return state.session.describe(name)
        except ToolCallError as exc:
            raise guest_error(exc) from None
        finally:
            sync_counters(call)


async def partial_successes(cell: CellContext, completed: bool) -> list[str]:
    """Envelope warnings: the tools that succeeded only in part (success: true with completed: false or a warning)."""
    return list(cell.tools.session.native.warnings) if isinstance(cell.tools, CellTools) else []


async def failures_written(cell: CellContext, completed: bool) -> list[str]:
    """Wait until the run's other cells, replicas and restarts can see this cell's failures.

    Its worker is free already; the store's timeout bounds this."""
    if isinstance(cell.tools, CellTools):
        await cell.tools.session.ledger.written()
    return []
