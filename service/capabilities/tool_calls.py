"""A guest's tool call, of any kind (``tool`` for native and client tools, ``mcp.call`` for MCP tools).

``guest_tool_call(call, aim)`` hands the request's arguments to the cell's ``CallSession.run`` (the
steps every tool call shares, ``service.tools.call_contract``) with the target ``aim`` names, and
answers the guest: the reply as it was encoded, a ``NeedsCaller`` for a client tool, or the guest
form of what failed (``service.capabilities.guest_errors``).  The cell's telemetry counts the call,
and a result (or a failure's message) from the network marks the cell.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from bridge.json_types import JsonValue
from service.errors import HelperFailed
from service.mcp.errors import McpError
from service.runtime.dispatch import HostCall, NeedsCaller, RawJson
from service.tools.call_contract import CallTarget
from service.tools.errors import ClientToolCall, ToolCallError

from .cell_tools import CellTools, sync_counters, tool_context
from .guest_errors import guest_error

__all__ = ["Aim", "guest_tool_call"]

#: The target of a call and its input, from the request's arguments (which it may keep: the caller
#: lets go of them).  It raises what makes the call fail before it is counted.
Aim = Callable[[list[JsonValue]], tuple[CallTarget, JsonValue]]

#: What a call's failure may be: a tool call's refusal or failure, an MCP server's, a helper's.
_FAILURES = (ToolCallError, McpError, HelperFailed)


async def guest_tool_call(call: HostCall, state: CellTools, aim: Aim) -> RawJson:
    """Run the tool call ``call`` asks for (its target and input found by ``aim``) in the cell whose
    handler state is ``state``, and answer the guest."""
    name = None
    try:
        target, params = aim(call.take_args())
        name = target.name
        # Retries of an idempotent tool stay within one cell timeout of the call's start.
        deadline = asyncio.get_running_loop().time() + call.cell.spec.limits.timeout_ms / 1000
        abandon = call.abandon
        running = state.session.run(
            target,
            params,
            tool_context(state, call),
            deadline=deadline,
            ask=call.ask_approval,
            handed_over=True,
            overdue=None if abandon is None else lambda exc: abandon(guest_error(exc).payload()),
        )
        # From here on only the session holds the parsed arguments (and lets go of them while it waits).
        del params
        outcome = await running
    except ClientToolCall as need:
        raise NeedsCaller("client_tool", tool=need.callable_name, name=need.tool_name, input=need.params) from None
    except _FAILURES as exc:
        if getattr(exc, "untrusted", False):
            call.cell.network_content = True
        # A tool call's error names its tool itself; an MCP server's and a helper's are told it here.
        raise (guest_error(exc) if isinstance(exc, ToolCallError) else guest_error(exc, tool=name)) from None
    finally:
        sync_counters(call)
    if outcome.network:
        call.cell.network_content = True
    return RawJson(outcome.encoded)
