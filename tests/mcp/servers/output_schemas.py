"""A real MCP server whose tools' results are checked against their ``outputSchema`` (SDK low-level Server).

Usage: ``python output_schemas.py stdio``.

* ``evil``: the pattern ``^(a+)+$``, which a backtracking engine takes exponential time to refuse; it
  answers ``{"s": "a" * n + tail}`` (``n`` 25 and ``tail`` "!" unless given: a string that does not match).
* ``evil_wide``: the same pattern in a schema of more than 256 bytes (checked in a helper, never inline).
* ``non_digits``: ``^\\D+$`` against "١٢٣" (Arabic-Indic digits).  JSON Schema patterns are ECMA-262,
  where ``\\D`` is any character but an ASCII digit, as in RE2: the value fits.  Python's ``re`` reads
  ``\\D`` as any character but a Unicode digit and refuses it, so the SDK's own check would fail it.
* ``lookahead``: a pattern RE2 cannot run; ``huge_schema``: an outputSchema over 64 KiB.  Both count
  their calls (``calls``), so a test can see that a refused tool was never sent.
* ``no_structured``: declares an outputSchema and sends only text; ``fails``: the same, with ``isError``.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

EVIL = "^(a+)+$"
_S = {"type": "string", "pattern": EVIL}
_WIDE_NOTE = "A note that makes this schema too long to be checked inline, as real output schemas are. " * 4

TOOLS = [
    types.Tool(
        name="evil",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}, "tail": {"type": "string"}}},
        output_schema={"type": "object", "properties": {"s": _S}},
    ),
    types.Tool(
        name="evil_wide",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}, "tail": {"type": "string"}}},
        output_schema={"type": "object", "description": _WIDE_NOTE, "properties": {"s": _S}, "required": ["s"]},
    ),
    types.Tool(
        name="non_digits",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"s": {"type": "string", "pattern": "^\\D+$"}}},
    ),
    types.Tool(
        name="lookahead",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"s": {"type": "string", "pattern": "^(?=a)"}}},
    ),
    types.Tool(
        name="huge_schema",
        input_schema={"type": "object"},
        output_schema={
            "type": "object",
            "properties": {f"field_{i}": {"type": "string", "description": "x" * 40} for i in range(2000)},
        },
    ),
    types.Tool(name="no_structured", input_schema={"type": "object"}, output_schema={"type": "object"}),
    types.Tool(name="fails", input_schema={"type": "object"}, output_schema={"type": "object"}),
    types.Tool(name="calls", input_schema={"type": "object"}),
]

#: Calls of each tool this server process answered.
CALLS: dict[str, int] = {}


def _text(text: str) -> types.TextContent:
    return types.TextContent(text=text)


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    name = params.name
    CALLS[name] = CALLS.get(name, 0) + 1
    if name in ("evil", "evil_wide"):
        s = "a" * int(args.get("n", 25)) + str(args.get("tail", "!"))
        return types.CallToolResult(content=[_text(f"{len(s)} characters")], structured_content={"s": s})
    if name == "non_digits":
        return types.CallToolResult(content=[_text("digits")], structured_content={"s": "\u0661\u0662\u0663"})
    if name in ("lookahead", "huge_schema"):
        return types.CallToolResult(content=[_text("ran")], structured_content={"s": "a"})
    if name == "no_structured":
        return types.CallToolResult(content=[_text("only text")])
    if name == "fails":
        return types.CallToolResult(content=[_text("it broke")], is_error=True)
    if name == "calls":
        return types.CallToolResult(content=[_text("counts")], structured_content=dict(CALLS))
    return types.CallToolResult(content=[_text(f"unknown tool {name}")], is_error=True)


async def _serve_stdio() -> None:
    server: Server[Any] = Server(
        "codemode-output-schemas", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool
    )
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    if sys.argv[1:] != ["stdio"]:
        raise SystemExit("usage: python output_schemas.py stdio")
    anyio.run(_serve_stdio)
