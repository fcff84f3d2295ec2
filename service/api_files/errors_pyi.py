"""The `errors.pyi` stub of Python cells: what `error_info(e)` answers for a caught host failure.

A JavaScript cell reads a failed host call's fields off the error it caught (``ToolCallError`` in
``results.d.ts``); Monty's exceptions carry no attributes, so a Python cell asks ``error_info(e)``
(guest_runtime/monty/engine.py), typed here.  The fields are the ones ``results.d.ts`` declares.
"""

from __future__ import annotations

__all__ = ["ERRORS_PYI", "ERRORS_PYI_DESCRIPTION"]

ERRORS_PYI_DESCRIPTION = "error_info(e): the code and fields of a failed tool call (or other host call) a cell caught."

ERRORS_PYI = """\
# What error_info(e) answers for an exception a Python cell caught. A failed host call (a tool, an
# approval, a client tool, MCP, the store, saved results, API files) raises a RuntimeError (TypeError,
# or ValueError for what JavaScript raises as RangeError) whose message ends "(code: <code>)";
# error_info(e) gives its fields, the ones a JavaScript cell reads off the error (e.code, e.tool, ...).
# For an exception the cell raised itself it answers None. error_info is a built-in of Python cells,
# like text() and json(); this file is how a type checker reads it.
from typing import Any, Literal, NotRequired, TypedDict


class HostError(TypedDict):
    # The host's message, without the "(code: ...)" the exception's text ends with.
    message: str
    # tool_error: the tool failed. tool_blocked: it failed 4 times in this run (or once with
    # nonRetriable): use another tool. failure_budget_exhausted: 8 failures in this run, stop and report.
    # Also invalid_input, loop_guard, output_contract, call_budget_exceeded, tool_timeout,
    # approval_denied, mcp_unavailable, store_unavailable, result_unavailable, ...
    code: str
    # The tool's callable name.
    tool: NotRequired[str]
    # The tool's own failure object (tool_error), or validation details.
    details: NotRequired[Any]
    data: NotRequired[Any]
    # recoverable: fix the arguments (see needParam) and call again; config: a setup problem no retry
    # fixes; transient: jitter, the host already retried idempotent tools.
    errorType: NotRequired[Literal["recoverable", "config", "transient"]]
    # The argument that is missing or malformed.
    needParam: NotRequired[str]
    # True: the same call can never succeed; the tool is blocked for this run.
    nonRetriable: NotRequired[bool]
    # Text meant for the user, safe to pass on.
    userMessage: NotRequired[str]
    # Another tool or action to use instead.
    redirect: NotRequired[Any]
    # The failing upstream service's own reply.
    upstream: NotRequired[Any]
    effectStatus: NotRequired[Literal["not_started", "unknown"]]
    # tool_timeout: the call's wall clock, in seconds.
    timeoutSeconds: NotRequired[float]


def error_info(error: BaseException, /) -> HostError | None: ...
"""
