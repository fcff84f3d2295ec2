"""Guest requests for tools: ``tool`` (call one), ``search`` and ``describe`` (the catalog).

Native and client tools go through the cell's ``CallSession`` (policy, contracts, hooks, budgets,
loop guard); MCP tools are found and described through ``service.capabilities.mcp``.  A result
from the network marks the cell, so its model-facing text is wrapped as untrusted.
"""

from __future__ import annotations

import asyncio

from bridge.json_types import JsonObject
from service.capabilities.mcp import describe_mcp, search_mcp_tools
from service.runtime.dispatch import CellContext, Dispatcher, GuestError, HostCall, NeedsCaller, RawJson
from service.tools.catalog import CatalogLimits
from service.tools.errors import ClientToolCall, SearchQueryError, ToolCallError

from .cell_tools import CellTools, cell_tools, sync_counters, tool_context


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

    async def call_tool(self, call: HostCall) -> RawJson:
        state = cell_tools(call.cell)
        # Whatever the guest sent: the view answers a non-string name as an unknown tool.
        args = call.take_args()
        name = args[0] if args else None
        # Retries of an idempotent tool stay within one cell timeout of the call's start.
        deadline = asyncio.get_running_loop().time() + call.cell.spec.limits.timeout_ms / 1000
        abandon = call.abandon
        running = state.session.call_detailed(
            name,
            args[1] if len(args) > 1 else {},
            tool_context(state, call),
            deadline=deadline,
            ask=call.ask_approval,
            handed_over=True,
            overdue=None if abandon is None else lambda exc: abandon(_guest_error(exc).payload()),
        )
        # From here on only the session holds the parsed arguments (and lets go of them while it waits).
        del args
        try:
            outcome = await running
        except ClientToolCall as need:
            raise NeedsCaller("client_tool", tool=need.callable_name, name=need.tool_name, input=need.params) from None
        except ToolCallError as exc:
            if getattr(exc, "untrusted", False):
                call.cell.network_content = True
            raise _guest_error(exc) from None
        finally:
            sync_counters(call)
        if outcome.network:
            call.cell.network_content = True
        return RawJson(outcome.encoded)

    async def search(self, call: HostCall) -> list[JsonObject]:
        state = cell_tools(call.cell)
        query = call.args[0] if call.args else ""
        limit = call.args[1] if len(call.args) > 1 else None
        try:
            found = state.session.search(query, limit)
        except SearchQueryError as exc:
            raise GuestError(str(exc), "invalid_input", name="RangeError") from None
        except ToolCallError as exc:
            raise GuestError(exc.message, exc.code, name="RangeError") from None
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
            raise GuestError(exc.message, exc.code, extra=exc.to_guest()) from None
        finally:
            sync_counters(call)


async def partial_successes(cell: CellContext, completed: bool) -> list[str]:
    """Envelope warnings: the tools that succeeded only in part (success: true with completed: false or a warning)."""
    return list(cell.tools.session.warnings) if isinstance(cell.tools, CellTools) else []


async def failures_written(cell: CellContext, completed: bool) -> list[str]:
    """Wait until the run's other cells, replicas and restarts can see this cell's failures.

    Its worker is free already; the store's timeout bounds this."""
    if isinstance(cell.tools, CellTools):
        await cell.tools.session.ledger.written()
    return []


def _guest_error(exc: ToolCallError) -> GuestError:
    """The guest's rejection of a tool call that failed with ``exc``."""
    return GuestError(exc.message, exc.code, extra=exc.to_guest())
