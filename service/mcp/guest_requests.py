"""Guest requests for ``MCP.*`` routed to the cell's MCP scope (its tenant's view of the hub).

Every MCP result is network-derived: it marks the cell so its model-facing text is wrapped as
untrusted.  Hub errors (server down, timeout, bad input) reject the guest's promise with a
message naming the server; they never fail the cell by themselves.  ``catalog.search`` and
``describe`` reach MCP tools through ``search_mcp_tools`` and ``describe_mcp``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from service.cells.dispatch import CellContext, Dispatcher, GuestError, HostCall
from service.tools.approvals import denial_message
from service.tools.clocks import timed_out
from service.tools.errors import ApprovalDeniedError, ToolCallError

from .errors import McpError, McpTimeout, McpUnavailable

if TYPE_CHECKING:  # types only: reaching MCP requests loads no hub or SDK client
    from service.tools.session import CallSession

    from .scope import McpScope
    from .views import McpServerView

ONE_OBJECT = "MCP namespace tools accept one object argument."
#: Characters of a tool name a call may give (MCP recommends at most 128).
MAX_TOOL_NAME_CHARS = 1024
#: Characters of each tool name and description one catalog.search looks at.
_SEARCHED_CHARS = 2048
#: Characters of a description an MCP search handle carries (an ellipsis marks a cut).
_HANDLE_DESCRIPTION_CHARS = 512


class McpCell(Protocol):
    """The part of a cell's handler state that MCP requests use."""

    mcp: McpScope | None  # the tenant's connections under its tool policy
    mcp_servers: list[McpServerView]  # views of the servers connected when the cell started
    # Its call budget, loop guard and ledger (the run's failure budget) count MCP calls too; its
    # approvals say which calls wait.
    session: CallSession


def install_mcp(dispatcher: Dispatcher, state_of: Callable[[CellContext], McpCell]) -> None:
    """Register the ``mcp.*`` methods on ``dispatcher``; ``state_of`` finds a cell's MCP state."""

    def scope(call: HostCall) -> Any:
        return state_of(call.cell).mcp

    def deadline(call: HostCall) -> float:
        return max(call.cell.spec.limits.timeout_ms / 1000, 1.0) * 6  # parked calls may outlive a leg

    async def guarded(call: HostCall, coro: Any) -> Any:
        call.cell.network_content = True
        try:
            return await coro
        except McpError as exc:
            raise GuestError(str(exc), exc.code) from None

    async def call_tool(call: HostCall) -> Any:
        """``MCP.<server>.<tool>(input)`` as a tool call: the run's failure budget, the cell's call
        budget and loop guard, approval, then the call; a failure of the call counts against the run.

        The one place MCP calls use the run budget: ``RunLedger.check`` before, ``RunLedger.reserve``
        around the call (``Reservation.fail`` for a counted failure).
        """
        server, tool = call.args[0] if call.args else None, call.args[1] if len(call.args) > 1 else None
        argc = call.args[3] if len(call.args) > 3 else 1
        value = call.args[2] if len(call.args) > 2 else None
        if argc == 0:
            value, argc = {}, 1  # `MCP.s.t()` is the empty input (declared as `input?`)
        if not isinstance(server, str) or not isinstance(tool, str):
            raise GuestError("MCP tools are called as MCP.<server>.<tool>(input)", "invalid_input", name="TypeError")
        if len(tool) > MAX_TOOL_NAME_CHARS:
            # Any member of an unreached server's namespace is a call; its name is kept in the run's counters.
            raise GuestError(
                f"MCP tool names are at most {MAX_TOOL_NAME_CHARS} characters", "invalid_input", name="TypeError"
            )
        if argc != 1 or not isinstance(value, dict):
            raise GuestError(ONE_OBJECT, "invalid_input", name="TypeError")
        state = state_of(call.cell)
        session = state.session
        servers, tools = mcp_names(state, server, tool)
        name = f"MCP.{server}.{tools[0] if tools is not None else tool}"  # the identifier budgets count by
        try:
            session.ledger.check(name)
            session.spend_call(name)
            session.guard_loop("mcp", name, name, value)
        except ToolCallError as exc:
            raise GuestError(exc.message, exc.code, extra=exc.to_guest()) from None
        finally:
            call.cell.telemetry.call_count = session.call_count
        await approved(call, state, servers, tools, name, value)
        call.cell.network_content = True
        try:
            async with session.ledger.reserve(name) as reservation:  # the run's failure budget, held while it runs
                try:
                    # The tool's wall clock (service.tools.clocks), not the leg's: a parked cell's call goes on.
                    clock_s = scope(call).tool_clock_s(server, tool)
                    result = await scope(call).call_tool(server, tool, value, deadline_s=clock_s)
                except McpTimeout:
                    reservation.fail()
                    timeout = timed_out(name, clock_s)
                    raise GuestError(timeout.message, timeout.code, extra=timeout.to_guest()) from None
                except McpError as exc:
                    if exc.counted:
                        reservation.fail()
                    raise GuestError(str(exc), exc.code, extra=guest_fields(exc, name)) from None
                if isinstance(result, dict) and result.get("isError") is True:
                    # isError results resolve (the MCP contract) but count against the run like any failure.
                    reservation.fail()
        except ToolCallError as exc:  # blocked (or the budget spent) while it waited for a place
            raise GuestError(exc.message, exc.code, extra=exc.to_guest()) from None
        return result

    async def approved(
        call: HostCall,
        state: McpCell,
        servers: tuple[str, ...],
        tools: tuple[str, ...] | None,
        name: str,
        value: Any,
    ) -> None:
        reason = state.session.approvals.mcp(servers, tools, name)
        if reason is None:
            return
        if call.ask_approval is None:
            denied = ApprovalDeniedError(f"{name} was not run: {reason}, and this cell cannot ask for it", tool=name)
        else:
            ok, why = await call.ask_approval(name, value, reason)
            if ok:
                return
            denied = ApprovalDeniedError(denial_message(name, why), tool=name)
        raise GuestError(denied.message, denied.code, extra=denied.to_guest())

    async def api(call: HostCall) -> Any:
        server, tool, options = (list(call.args) + [None, None, None])[:3]
        if server is None:
            return await guarded(call, _now(scope(call).api_root))
        schema = bool(options.get("schema")) if isinstance(options, dict) else False
        return await guarded(call, _now(scope(call).api_server, server, tool, schema))

    def cursor(call: HostCall) -> str | None:
        given = call.args[1] if len(call.args) > 1 else None
        if given is not None and not isinstance(given, str):
            raise GuestError(
                "list({cursor}) needs the string nextCursor of an earlier page", "invalid_input", name="TypeError"
            )
        return given

    async def resources_list(call: HostCall) -> Any:
        listing = scope(call).list_resources(call.args[0], cursor=cursor(call), deadline_s=deadline(call))
        return await guarded(call, listing)

    async def resources_templates(call: HostCall) -> Any:
        listing = scope(call).list_resource_templates(call.args[0], cursor=cursor(call), deadline_s=deadline(call))
        return await guarded(call, listing)

    async def resources_read(call: HostCall) -> Any:
        uri = call.args[1] if len(call.args) > 1 else None
        if not isinstance(uri, str):
            raise GuestError("resources.read(uri) needs a string uri", "invalid_input", name="TypeError")
        return await guarded(call, scope(call).read_resource(call.args[0], uri, deadline_s=deadline(call)))

    async def prompts_list(call: HostCall) -> Any:
        listing = scope(call).list_prompts(call.args[0], cursor=cursor(call), deadline_s=deadline(call))
        return await guarded(call, listing)

    async def prompts_get(call: HostCall) -> Any:
        name = call.args[1] if len(call.args) > 1 else None
        args = call.args[2] if len(call.args) > 2 else {}
        if not isinstance(name, str):
            raise GuestError("prompts.get(name, args?) needs a string name", "invalid_input", name="TypeError")
        return await guarded(call, scope(call).get_prompt(call.args[0], name, args or {}, deadline_s=deadline(call)))

    dispatcher.register("mcp.call", call_tool)
    dispatcher.register("mcp.api", api, side_effects=False)
    dispatcher.register("mcp.resources.list", resources_list, side_effects=False)
    dispatcher.register("mcp.resources.templates", resources_templates, side_effects=False)
    dispatcher.register("mcp.resources.read", resources_read, side_effects=False)
    dispatcher.register("mcp.prompts.list", prompts_list, side_effects=False)
    dispatcher.register("mcp.prompts.get", prompts_get, side_effects=False)


def guest_fields(exc: McpError, name: str) -> dict[str, Any]:
    """The guest Error's fields beside message and code: the tool, and ``errorType: "transient"``
    when trying again later may work (the server was down or silent)."""
    fields: dict[str, Any] = {"tool": name}
    if isinstance(exc, McpUnavailable | McpTimeout):
        fields["errorType"] = "transient"
    return fields


def mcp_names(state: McpCell, server: Any, tool: Any) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """Every spelling of the server and tool a guest called (``McpScope.names``; the call's own
    spelling alone when it names no string or the cell has no MCP scope)."""
    if not isinstance(server, str) or not isinstance(tool, str) or state.mcp is None:
        return (str(server),), None
    return state.mcp.names(server, tool, state.mcp_servers)


async def _now(fn: Any, *args: Any) -> Any:
    """Run a synchronous scope method inside ``guarded`` so its ``McpError`` becomes a guest error."""
    return fn(*args)


def search_mcp_tools(servers: list[Any], query: Any, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` MCP tools of ``servers`` whose names or descriptions hold the query's words."""
    if not isinstance(query, str) or not query.strip():
        return []
    words = [w for w in query.lower().split() if w]
    scored = []
    for server in servers:
        for tool in server.tools:
            # Remote metadata may be megabytes: each search reads a bounded prefix of every tool's.
            text = (
                f"{server.name} {server.identifier} {tool.name[:_SEARCHED_CHARS]} {tool.identifier[:_SEARCHED_CHARS]}"
            )
            hay = f"{text} {(tool.description or '')[:_SEARCHED_CHARS]}".lower()
            score = sum(hay.count(w) for w in words)
            if score:
                scored.append((-score, server.identifier, tool.identifier, server, tool))
    scored.sort(key=lambda item: item[:3])
    out = []
    for _, _, _, server, tool in scored[:limit]:
        description = tool.description or ""
        if len(description) > _HANDLE_DESCRIPTION_CHARS:
            description = description[:_HANDLE_DESCRIPTION_CHARS] + "\u2026"  # the rest: describe() or $api
        out.append(
            {
                "callableName": f"MCP.{server.identifier}.{tool.identifier}",
                "toolName": tool.name,
                "description": description,
                "source": "mcp",
                "apiPath": f"mcp/{server.identifier}.d.ts",
                "mcp": [server.identifier, tool.identifier],
            }
        )
    return out


def describe_mcp(scope: Any, name: str) -> Any:
    """``describe("MCP.<server>.<tool>")``: the declaration of a server or one of its tools."""
    _, server, tool = (name.split(".", 2) + ["", ""])[:3]
    try:
        return scope.api_server(server, tool or None, schema=True)
    except McpError as exc:
        raise GuestError(str(exc), exc.code) from None
