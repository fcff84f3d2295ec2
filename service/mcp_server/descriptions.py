"""What the facade's tools say to a model: the guest API in a few lines, and where the declarations are.

The ``exec`` description is the model-facing tool description (``service.tool_description``), ending
with the caller's quick index; everything else is in the declaration files, which MCP clients read as
resources ``codemode://api/<path>`` and cells read with ``API.read(path)``.
"""

from __future__ import annotations

from service.settings import Settings
from service.tool_description import description_text

RESOURCE_PREFIX = "codemode://api/"

_WAIT = """Resume a cell that answered "waiting" (or is still running) until it completes, fails or needs you again, \
or timeout_ms passes. Only output not shown before is returned. Pass tool_results [{id, ok, value|error}] to answer \
pending client tool calls."""
_WAIT_PERSON = """ Calls that need approval are decided by a person (your client's approval forms, or the HTTP API), \
never by you: wait returns what the cell did after the decision."""
_WAIT_MODEL = """ Pass approvals [{id, approve, reason?}] to decide pending approval requests: this key lets you \
approve your own calls, so approve only what the user asked for."""

_CANCEL = "Stop a cell (running or waiting); answers its final envelope (failed, code aborted)."

_SEARCH = """Search the tools your cells can call (native tools by name and description, then MCP tools). \
Each hit names the global to call in a cell, its input and output types, and its declaration resource \
(codemode://api/...). Searching runs no code and calls no tool."""


def exec_description(settings: Settings, quick_index: str) -> str:
    """The exec tool's description: the text of ``GET /v1/tool-description`` (one builder for both faces)."""
    return description_text(settings, quick_index)


def wait_description(model_approves: bool) -> str:
    """The wait tool's description: who decides approvals, for a key whose model may or may not."""
    return _WAIT + (_WAIT_MODEL if model_approves else _WAIT_PERSON)


CANCEL_DESCRIPTION = _CANCEL
SEARCH_DESCRIPTION = _SEARCH

SERVER_INSTRUCTIONS = """codemode runs agent-written JavaScript cells in sandboxes. Use exec to run code that \
calls many tools in one step and returns only what matters; use search_tools or the declaration resources \
(codemode://api/...) to learn the tools' types first."""
