"""What the facade's tools say to a model: the guest API in a few lines, and where the declarations are.

The ``exec`` description ends with the caller's quick index (one line per tool it may call), so a
model sees its tools without a search; everything else is in the declaration files, which MCP
clients read as resources ``codemode://api/<path>`` and cells read with ``API.read(path)``.
"""

from __future__ import annotations

from service.settings import Settings

RESOURCE_PREFIX = "codemode://api/"

_EXEC = """Run JavaScript in a fresh sandbox (QuickJS) as the body of an async function: top-level `await` \
works and `return` gives the result (JSON). Nothing carries over between cells except results.save/load \
(same session_id and run_id) and store/load (same session_id).
- Tools are async globals taking one object: `const r = await tool_name({...})`. Find tools with \
`await catalog.search("words")` (or the search_tools tool); each tool's TypeScript declaration is the resource \
codemode://api/tools/<name>.d.ts (in a cell: `await API.read("tools/<name>.d.ts")`; `await API.list()` lists all).
- MCP servers: `await MCP.<server>.<tool>({...})` returns the MCP result {content, structuredContent?, isError?}; \
declarations in codemode://api/mcp/index.d.ts and codemode://api/mcp/<server>.d.ts.
- Output: text(v), json(v), console.log(...). Large data: `const ref = await results.save(v)`, later \
`await results.load(ref.id)`. No network, files, require or process.
- A cell still blocked on tools when timeout_ms (default {timeout_ms}, at most {max_timeout_ms}) runs out answers \
status "waiting": call wait with its cell_id. Output plus result share max_output_bytes (default {max_output_bytes}); \
over it you get a truncation note, never a failure.
The result text is for you; structuredContent is the full envelope (status, cell_id, output, value or error)."""

_WAIT = """Resume a cell that answered "waiting" (or is still running) until it completes, fails or needs you again, \
or timeout_ms passes. Only output not shown before is returned. Pass approvals [{id, approve, reason?}] to decide \
pending approval requests, tool_results [{id, ok, value|error}] to answer pending client tool calls."""

_CANCEL = "Stop a cell (running or waiting); answers its final envelope (failed, code aborted)."

_SEARCH = """Search the tools your cells can call (native tools by name and description, then MCP tools). \
Each hit names the global to call in a cell, its input and output types, and its declaration resource \
(codemode://api/...). Searching runs no code and calls no tool."""


def exec_description(settings: Settings, quick_index: str) -> str:
    """The exec tool's description with the caller's quick index appended."""
    text = _EXEC
    # Not str.format: the text is full of JavaScript braces.
    for name in ("timeout_ms", "max_timeout_ms", "max_output_bytes"):
        text = text.replace("{" + name + "}", str(getattr(settings, name)))
    return f"{text}\n\n{quick_index}" if quick_index else text


WAIT_DESCRIPTION = _WAIT
CANCEL_DESCRIPTION = _CANCEL
SEARCH_DESCRIPTION = _SEARCH

SERVER_INSTRUCTIONS = """codemode runs agent-written JavaScript cells in sandboxes. Use exec to run code that \
calls many tools in one step and returns only what matters; use search_tools or the declaration resources \
(codemode://api/...) to learn the tools' types first."""
