"""The one tool-call contract: what a call target supplies to ``CallSession.run``, and what a finished call is.

Every tool call of a cell (a native tool, a client tool, an MCP server's tool) goes through
``CallSession.run``, which applies the steps they share once, in this order: the run's failure
budget (``RunLedger.check``), the cell's call budget, the target's input check, the loop guard, the
target's preparation (before-hooks), approval (the target's rule or a hook's request; the deadline
moves by the time a person took), then a place in the run's failure budget held around the call,
and the failure count.  A target supplies only what differs: how it is named, how its input is
checked and prepared, which approval rule applies to it, how it is invoked (on whose clock) and
which of its failures count against the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from bridge import jsoncodec
from bridge.json_types import JsonValue
from service.tools.errors import ToolCallError
from service.tools.plugin import ToolContext

__all__ = ["UNPARSED", "CallOutcome", "CallTarget", "Counted", "Overdue", "Unparsed"]

#: Told a call's ``tool_timeout`` rejection when the call outlives its clock by ``CANCEL_GRACE_S``.
Overdue = Callable[[ToolCallError], None]


class Unparsed:
    """The type of ``UNPARSED``: an outcome's details not decoded yet."""


UNPARSED = Unparsed()


class CallOutcome:
    """A finished call (read-only by convention): `details` go to the guest.

    `encoded` is the compact JSON of `details`, made once; the cell hands it to the guest as is.
    ``is_error``: the call resolved with a failure (an MCP ``isError`` result), counted against the run.
    A slots class, not a frozen dataclass: one is made per call, and a frozen ``__init__`` costs
    a microsecond or two of the call.
    """

    __slots__ = ("callable_name", "encoded", "is_error", "network", "parsed", "text")

    def __init__(
        self,
        callable_name: str,
        encoded: bytes,
        text: str | None,
        is_error: bool,
        network: bool,
        parsed: JsonValue | Unparsed = UNPARSED,
    ) -> None:
        self.callable_name = callable_name
        self.encoded = encoded
        self.text = text
        self.is_error = is_error
        self.network = network
        self.parsed = parsed

    @property
    def details(self) -> JsonValue:
        parsed = self.parsed
        if isinstance(parsed, Unparsed):
            parsed = self.parsed = jsoncodec.loads(self.encoded)
        return parsed


class Counted(NamedTuple):
    """A failure that counts against the run: ``non_retriable`` blocks the tool at once, for ``reason``."""

    non_retriable: bool = False
    reason: str = ""


class CallTarget(Protocol):
    """One call's target: what differs between native, client and MCP tool calls."""

    #: The callable name (``search_docs``, ``MCP.docs.echo``): budgets, the ledger and messages count by it.
    @property
    def name(self) -> str: ...

    #: The loop guard's key for the tool: its kind ("native", "client", "mcp") and its identity.
    @property
    def loop_key(self) -> tuple[str, str]: ...

    #: False for a client tool: the API caller runs it, so the cell parks and holds no place in the run.
    @property
    def runs_here(self) -> bool: ...

    #: Whether ``prepare`` has anything to do (a before-hook to run): without, the call skips its await.
    @property
    def prepares(self) -> bool: ...

    def check_input(self, value: JsonValue, max_steps: int | None = None) -> None:
        """Refuse input the tool does not accept (``ValidationDeferred`` past ``max_steps``: repeat in a thread)."""

    async def prepare(self, value: JsonValue, ctx: ToolContext) -> tuple[JsonValue, str | None]:
        """The input the call runs on (before-hooks may rewrite it), and why a hook asked for approval."""

    def approval_reason(self) -> str | None:
        """Why calls of this tool wait for a person's approval (the approval rules), or None."""

    async def invoke(
        self, prepared: JsonValue, ctx: ToolContext, deadline: float | None, overdue: Overdue | None
    ) -> CallOutcome:
        """Run the call on the target's own clock; raise what failed (``ClientToolCall`` to park)."""

    def counted(self, exc: Exception, ctx: ToolContext) -> Counted | None:
        """Whether ``exc`` (raised by ``invoke``) counts against the run's failure budget, and how."""
