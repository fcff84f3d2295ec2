"""Guest requests for ``MCP.*`` routed to the cell's MCP scope (its tenant's view of the hub).

A tool call (``MCP.<server>.<tool>(input)``) goes the one tool-call path
(``service.capabilities.tool_calls``) with an ``McpTarget``: the cell's call budget, loop guard,
approval rules and its run's failure budget count it like any tool call.  Every MCP result is
network-derived: it marks the cell so its model-facing text is wrapped as untrusted.  Hub errors
(server down, timeout, bad input) reject the guest's promise with a message naming the server (their
guest form: ``service.capabilities.guest_errors``); they never fail the cell by themselves.  ``catalog.search`` and
``describe`` reach MCP tools through ``search_mcp_tools`` and ``describe_mcp``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from bridge import jsoncodec
from bridge.json_types import JsonObject, JsonValue
from service.errors import HelperFailed
from service.mcp.errors import McpError, McpTimeout, McpUnknownTool
from service.runtime.dispatch import CellContext, Dispatcher, GuestError, HostCall, RawJson
from service.tools.call_contract import CallOutcome, CallTarget, Counted, Overdue
from service.tools.clocks import timed_out
from service.tools.errors import ToolTimeoutError
from service.tools.plugin import ToolContext

from .cell_tools import cell_tools
from .guest_errors import guest_error
from .tool_calls import guest_tool_call

if TYPE_CHECKING:  # types only: reaching MCP requests loads no hub or SDK client
    from service.mcp.scope import McpScope
    from service.mcp.views import McpServerView
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

    def call_tool(self, call: HostCall) -> Awaitable[RawJson]:
        """``MCP.<server>.<tool>(input)``: a tool call (``service.capabilities.tool_calls``) of an ``McpTarget``."""
        state = cell_tools(call.cell)  # the one call path reads the cell's handler state itself
        return guest_tool_call(call, state, lambda args: _mcp_target(call.cell, state, args))

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
            raise guest_error(McpUnknownTool("this cell has no MCP servers"))
        return scope


def _mcp_target(cell: CellContext, state: McpCell, args: list[JsonValue]) -> tuple[CallTarget, JsonValue]:
    """``mcp.call(server, tool, input, argc)``: the target (named as budgets count it) and the input."""
    server, tool, value = _call_arguments(args)
    servers, tools = mcp_names(state, server, tool)
    name = f"MCP.{server}.{tools[0] if tools is not None else tool}"  # the identifier budgets count by
    reason = state.session.approvals.mcp(servers, tools, name)
    return McpTarget(state.mcp, cell, server, tool, name, reason), value


class McpTarget:
    """One call of an MCP server's tool, as a ``CallTarget``: the server checks the input, and its tool's
    wall clock is the server's; its failures count as the server's (``McpError.counted``), a timeout
    is the tool's ``tool_timeout``, and an ``isError`` result resolves but counts."""

    __slots__ = ("_cell", "_reason", "_scope", "loop_key", "name", "server", "tool")

    runs_here = True
    prepares = False  # no hooks: they are the catalog's

    def __init__(
        self, scope: McpScope | None, cell: CellContext, server: str, tool: str, name: str, reason: str | None
    ) -> None:
        self._scope = scope
        self._cell = cell
        self.server = server
        self.tool = tool
        self.name = name
        self.loop_key = ("mcp", name)
        self._reason = reason

    def check_input(self, value: JsonValue, max_steps: int | None = None) -> None:
        """Nothing here: the hub checks the input against the tool's schema when it calls (``mcp_invalid_input``)."""

    async def prepare(self, value: JsonValue, ctx: ToolContext) -> tuple[JsonValue, str | None]:
        return value, None

    def approval_reason(self) -> str | None:
        return self._reason

    async def invoke(
        self, prepared: JsonValue, ctx: ToolContext, deadline: float | None, overdue: Overdue | None
    ) -> CallOutcome:
        scope = self._scope
        if scope is None:
            raise McpUnknownTool("this cell has no MCP servers")
        self._cell.network_content = True  # whatever comes back (or fails) is the server's
        # The tool's wall clock (service.tools.clocks), not the leg's: a parked cell's call goes on.
        clock_s = scope.tool_clock_s(self.server, self.tool)
        try:
            result = await scope.call_tool(self.server, self.tool, prepared, deadline_s=clock_s)
        except McpTimeout:
            raise timed_out(self.name, clock_s) from None
        except HelperFailed as exc:  # no helper checked the result: the service's trouble, not the server's
            raise HelperFailed(
                f"{self.name} ran, but its result could not be checked against the tool's outputSchema: {exc.message}"
            ) from None
        return CallOutcome(self.name, jsoncodec.dumps(result), None, result.get("isError") is True, True, result)

    def counted(self, exc: Exception, ctx: ToolContext) -> Counted | None:
        """The server failing the call counts (down, silent, broken answer); the caller's own mistakes and
        codemode's refusals do not (``McpError.counted``)."""
        if isinstance(exc, ToolTimeoutError) or (isinstance(exc, McpError) and exc.counted):
            return Counted()
        return None


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
        raise guest_error(exc) from None


async def _now(read: Callable[[], JsonObject]) -> JsonObject:
    """Run a synchronous scope method inside ``_guarded`` so its ``McpError`` becomes a guest error."""
    return read()


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
        raise guest_error(exc) from None
