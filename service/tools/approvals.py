"""Which tool calls wait for a person's approval before they run, and why.

Approval entries come from three places and only ever add up: the server's `[tools] approve`, the
API key's `tools = { approve = [...] }` and the exec request's `require_approval`.  They are
spelled like tool-policy entries (tool names, tool ids, plugin ids, `group:core`/`group:plugins`,
`mcp:<server>`, `mcp:<server>/<tool>`, `mcp:*`) and matched the same way.  A before-hook may also
return `NeedsApproval(reason)` for one call.

A call that needs approval has passed every check that can refuse it without a person (known tool,
input schema, loop guard, budgets, hooks); the input shown for approval is the one that will run.
An entry that names nothing is refused (at start for config and keys, with a 422 for a request):
a misspelt entry would otherwise let the call run without anyone being asked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from service.tools.policy import MCP_ALL, MCP_PREFIX, PolicySubject, is_mcp_entry
from service.tools.policy import unknown_entry as policy_unknown_entry

__all__ = [
    "KEY",
    "MAX_REASON_CHARS",
    "MAX_REQUEST_ENTRIES",
    "REQUEST",
    "SERVER",
    "ApprovalRules",
    "AskApproval",
    "NeedsApproval",
    "denial_message",
    "unknown_entry",
]

#: Where an entry came from, as the pending entry's reason names it.
SERVER = "the server's [tools] approve"
KEY = "this API key's tools.approve"
REQUEST = "this exec's require_approval"
#: Entries one exec request may list (the schema refuses more).
MAX_REQUEST_ENTRIES = 64
#: Characters of a reason (a hook's or the approver's) that reach the caller or the guest.
MAX_REASON_CHARS = 2048

#: Asks the API caller to approve one call: (tool, input, reason) -> (approved, the approver's reason).
#: (callable name, the input's compact JSON, reason) -> (approved, the approver's reason).
AskApproval = Callable[[str, bytes, str], Awaitable[tuple[bool, str | None]]]


@dataclass(frozen=True)
class NeedsApproval:
    """Returned by a before-hook: this call runs only once the API caller approves it; `reason` is shown."""

    reason: str


@dataclass(frozen=True)
class ApprovalRules:
    """The approval entries of one cell, each group with where it came from."""

    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def adding(self, where: str, entries: Sequence[str]) -> ApprovalRules:
        return ApprovalRules((*self.groups, (where, tuple(entries)))) if entries else self

    def native(self, subject: PolicySubject) -> str | None:
        """Why a call of this native or client tool needs approval, or None."""
        for where, entries in self.groups:
            for entry in entries:
                if not is_mcp_entry(entry) and subject.matches(entry):
                    return f"{subject.name} needs approval: {where} lists {entry!r}"
        return None

    def mcp(self, servers: Iterable[str], tools: Iterable[str] | None, shown: str) -> str | None:
        """Why a call of the MCP tool (known by `tools`) on the server (known by `servers`) needs approval.

        `tools=None` (the tool's names are not known yet): any entry for one of the server's tools matches.
        """
        server_names, tool_names = set(servers), None if tools is None else set(tools)
        for where, entries in self.groups:
            for entry in entries:
                if is_mcp_entry(entry) and _mcp_match(entry, server_names, tool_names):
                    return f"{shown} needs approval: {where} lists {entry!r}"
        return None


def _mcp_match(entry: str, servers: set[str], tools: set[str] | None) -> bool:
    if entry == MCP_ALL:
        return True
    server, _, tool = entry[len(MCP_PREFIX) :].partition("/")
    return server in servers and (not tool or tools is None or tool in tools)


def unknown_entry(
    entries: Sequence[str], where: str, subjects: Sequence[PolicySubject], servers: Iterable[str]
) -> str | None:
    """The problem with the first entry naming no tool of `subjects` and no server of `servers`, or None."""
    problem = policy_unknown_entry(entries, where, subjects, servers)
    if problem is None:
        return None
    return problem + "; a misspelt approval entry would let calls run unasked, so it is refused"


def clip_reason(reason: object) -> str | None:
    """A reason as shown to the caller or the guest: a string, bounded (None when absent)."""
    if reason is None:
        return None
    text = reason if isinstance(reason, str) else str(reason)
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS] + "…"


def hook_reason(tool: str, outcome: NeedsApproval) -> str:
    return f"{tool} needs approval: {clip_reason(outcome.reason) or 'a before-hook asked for it'}"


def denial_message(tool: str, reason: str | None) -> str:
    return f"{tool} was not run: its approval was denied" + (f": {reason}" if reason else "")
