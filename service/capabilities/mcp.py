"""Guest requests for ``MCP.*`` routed to the cell's MCP scope (its tenant's view of the hub).

Every MCP result is network-derived: it marks the cell so its model-facing text is wrapped as
untrusted.  Hub errors (server down, timeout, bad input) reject the guest's promise with a
message naming the server; they never fail the cell by themselves.  ``catalog.search`` and
``describe`` reach MCP tools through ``search_mcp_tools`` and ``describe_mcp``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from bridge.json_types import JsonObject, JsonValue
from service.errors import HelperFailed
from service.mcp.errors import McpError, McpTimeout, McpUnavailable, McpUnknownTool
from service.runtime.dispatch import CellContext, Dispatcher, GuestError, HostCall
from service.tools.approvals import denial_message
from service.tools.clocks import timed_out
from service.tools.errors import ApprovalDeniedError, ToolCallError

if TYPE_CHECKING:  # types only: reaching MCP requests loads no hub or SDK client
    from service.mcp.scope import McpScope
    from service.mcp.views import McpServerView
    from service.tools.run_budget import Reservation
    from service.tools.session import CallSession

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
    McpGuestRequests(state_of).register(dispatcher)


class McpGuestRequests:
    """The handlers of the guest's ``mcp.*`` requests, each finding its cell's MCP state with ``state_of``."""

    def __init__(self, state_of: Callable[[CellContext], McpCell]) -> None:
        self._state_of = state_of

    def register(self, dispatcher: Dispatcher) -> None:
        """Register every ``mcp.*`` method; only ``mcp.call`` may have side effects."""
        dispatcher.register("mcp.call", self.call_tool)
        reads: dict[str, Callable[[HostCall], Awaitable[JsonValue]]] = {
            "mcp.api": self.api,
            "mcp.resources.list": self.resources_list,
            "mcp.resources.templates": self.resources_templates,
            "mcp.resources.read": self.resources_read,
            "mcp.prompts.list": self.prompts_list,
            "mcp.prompts.get": self.prompts_get,
        }
        for method, handler in reads.items():
            dispatcher.register(method, handler, side_effects=False)

    # ---- tool calls ------------------------------------------------------------------------------

    async def call_tool(self, call: HostCall) -> JsonObject:
        """``MCP.<server>.<tool>(input)`` as a tool call: the run's failure budget, the cell's call
        budget and loop guard, approval, then the call; a failure of the call counts against the run.

        The one place MCP calls use the run budget: ``RunLedger.check`` before, ``RunLedger.hold``
        around the call (``Reservation.fail`` for a counted failure).
        """
        server, tool, value = _call_arguments(call.args)
        state = self._state_of(call.cell)
        servers, tools = mcp_names(state, server, tool)
        name = f"MCP.{server}.{tools[0] if tools is not None else tool}"  # the identifier budgets count by
        session = state.session
        try:
            session.ledger.check(name)
            session.spend_call(name)
            session.guard_loop("mcp", name, name, value)
        except ToolCallError as exc:
            raise GuestError(exc.message, exc.code, extra=exc.to_guest()) from None
        finally:
            call.cell.telemetry.call_count = session.call_count
        await _approved(call, state, servers, tools, name, value)
        call.cell.network_content = True
        try:
            with await session.ledger.hold(name) as reservation:  # the run's failure budget, held while it runs
                return await self._reserved_call(self._scope(call), reservation, server, tool, name, value)
        except ToolCallError as exc:  # blocked (or the budget spent) while it waited for a place
            raise GuestError(exc.message, exc.code, extra=exc.to_guest()) from None

    @staticmethod
    async def _reserved_call(
        scope: McpScope, reservation: Reservation, server: str, tool: str, name: str, value: JsonObject
    ) -> JsonObject:
        """The call itself, under its reservation of the run's failure budget (failed when it counts)."""
        try:
            # The tool's wall clock (service.tools.clocks), not the leg's: a parked cell's call goes on.
            clock_s = scope.tool_clock_s(server, tool)
            result = await scope.call_tool(server, tool, value, deadline_s=clock_s)
        except McpTimeout:
            reservation.fail()
            timeout = timed_out(name, clock_s)
            raise GuestError(timeout.message, timeout.code, extra=timeout.to_guest()) from None
        except McpError as exc:
            if exc.counted:
                reservation.fail()
            raise GuestError(str(exc), exc.code, extra=guest_fields(exc, name)) from None
        except HelperFailed as exc:  # no helper checked the result: the service's trouble, not the server's
            raise GuestError(
                f"{name} ran, but its result could not be checked against the tool's outputSchema: {exc.message}",
                exc.code,
                extra={"tool": name, "errorType": "transient", "effectStatus": "unknown"},
            ) from None
        if result.get("isError") is True:
            # isError results resolve (the MCP contract) but count against the run like any failure.
            reservation.fail()
        return result

    # ---- declarations, resources and prompts -----------------------------------------------------

    async def api(self, call: HostCall) -> JsonObject:
        tool, options = (list(call.args[1:]) + [None, None])[:2]
        scope = self._scope(call)
        if not call.args or call.args[0] is None:
            return await _guarded(call, _now(scope.api_root))
        server = _server(call)
        if not (tool is None or isinstance(tool, str)):
            raise GuestError("$api(tool?) takes a tool name as a string", "invalid_input", name="TypeError")
        schema = bool(options.get("schema")) if isinstance(options, dict) else False
        return await _guarded(call, _now(lambda: scope.api_server(server, tool, schema)))

    async def resources_list(self, call: HostCall) -> JsonObject:
        listing = self._scope(call).list_resources(_server(call), cursor=_cursor(call), deadline_s=_deadline(call))
        return await _guarded(call, listing)

    async def resources_templates(self, call: HostCall) -> JsonObject:
        scope = self._scope(call)
        listing = scope.list_resource_templates(_server(call), cursor=_cursor(call), deadline_s=_deadline(call))
        return await _guarded(call, listing)

    async def resources_read(self, call: HostCall) -> JsonObject:
        uri = call.args[1] if len(call.args) > 1 else None
        if not isinstance(uri, str):
            raise GuestError("resources.read(uri) needs a string uri", "invalid_input", name="TypeError")
        return await _guarded(call, self._scope(call).read_resource(_server(call), uri, deadline_s=_deadline(call)))

    async def prompts_list(self, call: HostCall) -> JsonObject:
        listing = self._scope(call).list_prompts(_server(call), cursor=_cursor(call), deadline_s=_deadline(call))
        return await _guarded(call, listing)

    async def prompts_get(self, call: HostCall) -> JsonObject:
        name = call.args[1] if len(call.args) > 1 else None
        args = call.args[2] if len(call.args) > 2 else {}
        if not isinstance(name, str):
            raise GuestError("prompts.get(name, args?) needs a string name", "invalid_input", name="TypeError")
        rendering = self._scope(call).get_prompt(_server(call), name, args or {}, deadline_s=_deadline(call))
        return await _guarded(call, rendering)

    def _scope(self, call: HostCall) -> McpScope:
        """The cell's MCP scope (the guest reaches ``mcp.*`` only where the cell has one)."""
        scope = self._state_of(call.cell).mcp
        if scope is None:
            raise GuestError("this cell has no MCP servers", McpUnknownTool.code)
        return scope


def _call_arguments(args: Sequence[object]) -> tuple[str, str, JsonObject]:
    """The server, the tool and the one object input of an ``mcp.call`` (TypeErrors for anything else)."""
    server, tool = args[0] if args else None, args[1] if len(args) > 1 else None
    argc = args[3] if len(args) > 3 else 1
    value = args[2] if len(args) > 2 else None
    if argc == 0:
        value, argc = {}, 1  # `MCP.s.t()` is the empty input (declared as `input?`)
    if not isinstance(server, str) or not isinstance(tool, str):
        raise GuestError("MCP tools are called as MCP.<server>.<tool>(input)", "invalid_input", name="TypeError")
    if len(tool) > MAX_TOOL_NAME_CHARS:
        # Every member of an unreached server's namespace is a call; its name is kept in the run's counters.
        raise GuestError(
            f"MCP tool names are at most {MAX_TOOL_NAME_CHARS} characters", "invalid_input", name="TypeError"
        )
    if argc != 1 or not isinstance(value, dict):
        raise GuestError(ONE_OBJECT, "invalid_input", name="TypeError")
    return server, tool, value


async def _approved(
    call: HostCall,
    state: McpCell,
    servers: tuple[str, ...],
    tools: tuple[str, ...] | None,
    name: str,
    value: JsonObject,
) -> None:
    """Return when the call may run; a ``GuestError`` when its approval is refused or cannot be asked."""
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


def _server(call: HostCall) -> str:
    """The server a resource or prompt request names (the prelude sends its identifier as a string)."""
    server = call.args[0] if call.args else None
    if not isinstance(server, str):
        raise GuestError("MCP requests name their server as a string", "invalid_input", name="TypeError")
    return server


def _deadline(call: HostCall) -> float:
    return max(call.cell.spec.limits.timeout_ms / 1000, 1.0) * 6  # parked calls may outlive a leg


def _cursor(call: HostCall) -> str | None:
    given = call.args[1] if len(call.args) > 1 else None
    if given is not None and not isinstance(given, str):
        raise GuestError(
            "list({cursor}) needs the string nextCursor of an earlier page", "invalid_input", name="TypeError"
        )
    return given


async def _guarded(call: HostCall, work: Awaitable[JsonObject]) -> JsonObject:
    """Await ``work`` for the guest: the cell now holds network content; an ``McpError`` is a guest error."""
    call.cell.network_content = True
    try:
        return await work
    except McpError as exc:
        raise GuestError(str(exc), exc.code) from None


async def _now(read: Callable[[], JsonObject]) -> JsonObject:
    """Run a synchronous scope method inside ``_guarded`` so its ``McpError`` becomes a guest error."""
    return read()


def guest_fields(exc: McpError, name: str) -> JsonObject:
    """The guest Error's fields beside message and code: the tool, and ``errorType: "transient"``
    when trying again later may work (the server was down or silent)."""
    fields: JsonObject = {"tool": name}
    if isinstance(exc, McpUnavailable | McpTimeout):
        fields["errorType"] = "transient"
    return fields


def mcp_names(state: McpCell, server: object, tool: object) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """Every spelling of the server and tool a guest called (``McpScope.names``; the call's own
    spelling alone when it names no string or the cell has no MCP scope)."""
    if not isinstance(server, str) or not isinstance(tool, str) or state.mcp is None:
        return (str(server),), None
    return state.mcp.names(server, tool, state.mcp_servers)


def search_mcp_tools(servers: Sequence[McpServerView], query: object, limit: int) -> list[JsonObject]:
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
    out: list[JsonObject] = []
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


def describe_mcp(scope: McpScope, name: str) -> JsonObject:
    """``describe("MCP.<server>.<tool>")``: the declaration of a server or one of its tools."""
    _, server, tool = (name.split(".", 2) + ["", ""])[:3]
    try:
        return scope.api_server(server, tool or None, schema=True)
    except McpError as exc:
        raise GuestError(str(exc), exc.code) from None
