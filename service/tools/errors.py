"""Errors of the tool system; every class has a stable snake_case ``code``.

The codes of ToolCallError and its subclasses reach guest code (``err.code`` of the rejected Error);
the others are internal: the caller sees a 422 naming the field, a start-up error, or (for a search
query over a cap) ``invalid_input``.  PatternError, SchemaRefused and SearchQueryError are also
ValueErrors, as they always were.

ToolError                        tool_system_error: base
 ├── ToolConfigError             tool_config: a plugin, tool definition or policy entry is wrong (start-up)
 ├── PatternError                pattern_refused: a regex RE2 will not run (also a ValueError)
 ├── SchemaRefused               schema_refused: a caller's schema breaks a schema_guard rule (also a ValueError)
 ├── SearchQueryError            search_query_over_cap: a catalog.search query is over a cap (also a ValueError)
 └── ToolCallError               tool_error: one call was refused or failed; reaches the guest as a rejected Error
      ├── InvalidInputError      invalid_input: the caller's arguments do not match the input schema
      │    └── ClientToolDeclError  invalid_input (shared): an exec request's client tool declaration is unusable
      ├── InputContractError     input_contract: arguments prepared by a before-hook do not match it
      ├── OutputContractError    output_contract: the final value does not match the output schema
      ├── InvalidContractError   invalid_contract: the tool's own schemas are unusable; it never runs
      ├── ToolExecutionError     tool_error (shared with ToolCallError, which a plugin may raise itself):
      │                          execute() or a hook raised, or the tool reported failure
      │    └── ToolTimeoutError  tool_timeout: the call ran past its wall clock and was cancelled
      ├── ToolBlockedError       blocked: a before-hook refused the call
      ├── ApprovalDeniedError    approval_denied: the call needed approval and was denied; it never ran
      ├── ToolDisabledError      tool_blocked: the tool failed too often in this run (or non-retriably)
      ├── FailureBudgetError     failure_budget_exhausted: the run had too many tool failures
      ├── UnknownToolError       unknown_tool: no such tool in this cell (also denied tools)
      ├── LoopGuardError         loop_guard: same tool + same arguments a 4th time in one cell
      ├── CallBudgetError        call_budget_exceeded: the cell used its tool-call budget
      └── SearchBudgetError      search_budget_exceeded: the cell used its catalog.search budget

ClientToolCall is not an error (so not a ToolError: ``except ToolError`` must not catch it): it is the
signal that a client tool was called and the cell must park.
"""

from __future__ import annotations

from typing import Any

from bridge.json_types import JsonValue


class ToolError(Exception):
    """Base of every tool-system error."""

    code = "tool_system_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ToolConfigError(ToolError):
    """A plugin, a tool definition or a policy entry cannot be used; says what to fix."""

    code = "tool_config"


class PatternError(ToolError, ValueError):
    """A pattern RE2 will not run; the message says why."""

    code = "pattern_refused"


class SchemaRefused(ToolError, ValueError):
    """The schema breaks one of schema_guard's rules; the message names the rule and where."""

    code = "schema_refused"


class SearchQueryError(ToolError, ValueError):
    """The query is over a cap; the message says which and what to send instead."""

    code = "search_query_over_cap"


class ToolCallError(ToolError):
    """One tool call was refused or failed."""

    code = "tool_error"

    def __init__(
        self,
        message: str,
        *,
        tool: str | None = None,
        details: tuple[str, ...] = (),
        effect_started: bool = False,
        untrusted: bool = False,
    ) -> None:
        super().__init__(message)
        # `tool` is the callable name; catalog ids never leave the host.
        self.tool = tool
        self.details = details
        # True once the tool's execute() was entered: side effects may exist.
        self.effect_started = effect_started
        # True when the message may carry network-derived text (wrap before showing a model).
        self.untrusted = untrusted

    def to_guest(self) -> dict[str, object]:
        """JSON shape the guest turns into a rejected Error."""
        body: dict[str, object] = {"code": self.code, "message": self.message}
        if self.tool is not None:
            body["tool"] = self.tool
        if self.details:
            body["details"] = list(self.details)
        body["effectStatus"] = "unknown" if self.effect_started else "not_started"
        return body


class InvalidInputError(ToolCallError):
    """The caller's arguments do not match the tool's input schema; the tool did not run."""

    code = "invalid_input"


class ClientToolDeclError(InvalidInputError):
    """A client tool declared by an exec request cannot be used; ``field`` names it (``client_tools[2].name``)."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class InputContractError(ToolCallError):
    """Arguments rewritten by a before-hook do not match the tool's input schema."""

    code = "input_contract"


class OutputContractError(ToolCallError):
    """The final tool value does not match the declared output schema; the value is withheld."""

    code = "output_contract"


class InvalidContractError(ToolCallError):
    """The tool's input or output schema (or its discriminator annotation) is unusable."""

    code = "invalid_contract"


class ToolExecutionError(ToolCallError):
    """The tool or one of its hooks raised (only the exception class and message are kept), or the
    tool reported a failure (the tool failure contract's envelope: ``reported`` is its own dict, ``fields`` the contract's
    fields in the guest's camelCase: errorType, needParam, nonRetriable, userMessage, redirect, upstream).

    ``recoverable`` failures are fixed by changing the arguments and never count against a run's
    failure budget; ``non_retriable`` ones block the tool for the rest of the run at once.
    """

    code = "tool_error"

    def __init__(
        self,
        message: str,
        *,
        reported: object = None,
        fields: dict[str, object] | None = None,
        recoverable: bool = False,
        non_retriable: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, **kwargs)
        self.reported = reported
        self.fields = fields or {}
        self.recoverable = recoverable
        self.non_retriable = non_retriable

    def to_guest(self) -> dict[str, object]:
        body = {**super().to_guest(), **self.fields}
        if self.reported is not None:
            body["details"] = self.reported
        return body


class ToolTimeoutError(ToolExecutionError):
    """The call ran past its wall clock (``limit_s``) and was cancelled; counted against the run."""

    code = "tool_timeout"

    def __init__(self, message: str, *, limit_s: float, **kwargs: Any) -> None:
        super().__init__(message, effect_started=True, **kwargs)
        self.limit_s = limit_s

    def to_guest(self) -> dict[str, object]:
        return {**super().to_guest(), "timeoutSeconds": self.limit_s}


class ToolBlockedError(ToolCallError):
    """A before-hook refused the call."""

    code = "blocked"


class ApprovalDeniedError(ToolCallError):
    """The call needed a person's approval and was denied (or could not be asked); it never ran."""

    code = "approval_denied"


class ToolDisabledError(ToolCallError):
    """The tool failed too often in this run, or non-retriably: later calls reject without running."""

    code = "tool_blocked"

    def to_guest(self) -> dict[str, object]:
        return {**super().to_guest(), "nonRetriable": True}


class FailureBudgetError(ToolCallError):
    """The run reached its total tool-failure budget: every further tool call rejects."""

    code = "failure_budget_exhausted"

    def to_guest(self) -> dict[str, object]:
        return {**super().to_guest(), "nonRetriable": True}


class UnknownToolError(ToolCallError):
    """No tool of that callable name is available in this cell."""

    code = "unknown_tool"


class LoopGuardError(ToolCallError):
    """The same tool was called with the same arguments more than three times in one cell."""

    code = "loop_guard"


class CallBudgetError(ToolCallError):
    """The cell has used its whole tool-call budget."""

    code = "call_budget_exceeded"


class SearchBudgetError(ToolCallError):
    """The cell has used its whole ``catalog.search`` budget."""

    code = "search_budget_exceeded"


class ClientToolCall(Exception):
    """Signal: a client tool was called; the caller executes it, so the cell must park.

    Raised by ``CallSession.call`` after the policy, input and loop-guard checks passed.
    """

    code = "client_tool_call"

    def __init__(self, *, call_id: str, tool_name: str, callable_name: str, params: JsonValue) -> None:
        super().__init__(f"client tool {callable_name} must be executed by the caller")
        self.call_id = call_id
        self.tool_name = tool_name
        self.callable_name = callable_name
        self.params = params
