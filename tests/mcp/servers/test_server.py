"""A real MCP server for the tests, built on the official SDK's low-level Server.

Usage: ``python test_server.py stdio`` or ``python test_server.py http PORT [TOKEN]``.
With a TOKEN the HTTP variant rejects requests lacking ``X-Test-Token: TOKEN``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

PAGE_SIZE = 4

_OBJ = "object"

TOOLS: list[types.Tool] = [
    types.Tool(
        name="echo",
        description="Echo text back with annotated content blocks.",
        input_schema={"type": _OBJ, "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
    types.Tool(
        name="add",
        description="Add two numbers.",
        input_schema={
            "type": _OBJ,
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
        output_schema={"type": _OBJ, "properties": {"sum": {"type": "number"}}, "required": ["sum"]},
    ),
    types.Tool(
        name="create-issue",
        description="Create an issue.\nReturns the arguments it saw.",
        input_schema={
            "type": _OBJ,
            "properties": {
                "title": {"type": "string", "description": "Issue title\nShown in tracker"},
                "body": {"type": "string", "default": ""},
                "labels": {"type": "array", "items": {"type": "string"}, "default": ["triage"]},
            },
            "required": ["title"],
        },
    ),
    types.Tool(name="fail", description="Always reports a tool error.", input_schema={"type": _OBJ}),
    types.Tool(
        name="bad_output",
        description="Breaks its own output schema.",
        input_schema={"type": _OBJ},
        output_schema={"type": _OBJ, "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    ),
    types.Tool(name="hang", description="Never answers.", input_schema={"type": _OBJ}),
    types.Tool(name="crash", description="Kills its own server mid-call.", input_schema={"type": _OBJ}),
    types.Tool(
        name="sleep_echo",
        description="Sleep, then echo a value; with a marker file, first append a line to it (with a "
        "cancel_marker file, append a line there when the call is cancelled); with an until file, wake as "
        "soon as that file exists (a test releases the call by an event, with seconds as a cap); with "
        "together n, wake as soon as n calls sleep at once.",
        input_schema={
            "type": _OBJ,
            "properties": {
                "seconds": {"type": "number"},
                "value": {},
                "marker": {"type": "string"},
                "cancel_marker": {"type": "string"},
                "until": {"type": "string"},
                "together": {"type": "integer"},
            },
            "required": ["seconds"],
        },
    ),
    types.Tool(
        name="crash_once",
        description="Append a line to the marker file; kill the server mid-call if it was the first line.",
        input_schema={"type": _OBJ, "properties": {"marker": {"type": "string"}}, "required": ["marker"]},
    ),
    types.Tool(name="env_value", description="Read CODEMODE_TEST_SECRET.", input_schema={"type": _OBJ}),
    types.Tool(name="delete", description="Reserved-word tool.", input_schema={"type": _OBJ}),
    types.Tool(name="constructor", description="Unsafe-name tool.", input_schema={"type": _OBJ}),
    types.Tool(name="my-tool", description="Dashed tool.", input_schema={"type": _OBJ}),
]

RESOURCES = [
    types.Resource(name="readme", uri="docs://readme", mime_type="text/plain", description="The readme."),
]
TEMPLATES = [
    types.ResourceTemplate(name="page", uri_template="docs://pages/{name}", mime_type="text/plain"),
    types.ResourceTemplate(name="section", uri_template="docs://pages/{name}/{section}", mime_type="text/plain"),
]
PROMPTS = [
    types.Prompt(
        name="greet",
        description="Greet someone.",
        arguments=[types.PromptArgument(name="name", description="Who", required=True)],
    ),
]


def _text(text: str) -> types.TextContent:
    return types.TextContent(text=text)


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    start = int(params.cursor) if params is not None and params.cursor else 0
    page = TOOLS[start : start + PAGE_SIZE]
    more = start + PAGE_SIZE < len(TOOLS)
    return types.ListToolsResult(tools=page, next_cursor=str(start + PAGE_SIZE) if more else None)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    name = params.name
    if name == "echo":
        block = types.TextContent(
            text=str(args.get("text")),
            annotations=types.Annotations(audience=["user"], priority=0.5),
            _meta={"source": "test"},
        )
        return types.CallToolResult(content=[block], _meta={"dropped": True})
    if name == "add":
        total = args["a"] + args["b"]
        return types.CallToolResult(content=[_text(str(total))], structured_content={"sum": total})
    if name == "create-issue":
        return types.CallToolResult(content=[_text("created")], structured_content={"seen": args})
    if name == "fail":
        return types.CallToolResult(content=[_text("it broke")], is_error=True)
    if name == "bad_output":
        return types.CallToolResult(content=[_text("oops")], structured_content={"n": "not a number"})
    if name == "hang":
        await anyio.Event().wait()
    if name == "crash":
        os._exit(1)
    if name == "sleep_echo":
        if "marker" in args:
            _append_run(args["marker"])
        _SLEEPING[0] += 1
        seen = _SLEEPING[0]
        try:
            await _sleep(float(args["seconds"]), args.get("until"), args.get("together"))
        except anyio.get_cancelled_exc_class():
            if "cancel_marker" in args:  # the client gave up on the call (notifications/cancelled)
                _append_run(args["cancel_marker"])
            raise
        finally:
            seen = max(seen, _SLEEPING[0])
            _SLEEPING[0] -= 1
        # in_flight: the most sleep_echo calls this call saw running at once (itself included), so a
        # test proves calls overlapped by a count instead of by how long they took.
        return types.CallToolResult(
            content=[_text("slept")], structured_content={"value": args.get("value"), "in_flight": seen}
        )
    if name == "crash_once":
        if _append_run(args["marker"]) == 1:
            os._exit(1)
        return types.CallToolResult(content=[_text("ran again")])
    if name == "env_value":
        return types.CallToolResult(content=[_text(os.environ.get("CODEMODE_TEST_SECRET", "<unset>"))])
    if name in ("delete", "constructor", "my-tool"):
        return types.CallToolResult(content=[_text(name)])
    return types.CallToolResult(content=[_text(f"unknown tool {name}")], is_error=True)


async def _sleep(seconds: float, until: str | None, together: int | None) -> None:
    """Sleep ``seconds``, or less: until the file ``until`` exists, or ``together`` calls sleep at once."""
    woken_early = until is not None or together is not None
    with anyio.move_on_after(seconds):
        while not (until is not None and os.path.exists(until)) and not (together and _SLEEPING[0] >= together):
            await anyio.sleep(0.02 if woken_early else seconds)


#: sleep_echo calls sleeping right now in this server process.
_SLEEPING = [0]


def _append_run(marker: str) -> int:
    """Append one line to the test's marker file; how many lines it has now (the runs so far)."""
    with open(marker, "a+", encoding="utf-8") as file:
        file.write("run\n")
        file.seek(0)
        return len(file.read().splitlines())


async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=RESOURCES)


async def list_templates(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
    # One template per page, so callers must follow nextCursor.
    start = int(params.cursor) if params is not None and params.cursor else 0
    more = start + 1 < len(TEMPLATES)
    return types.ListResourceTemplatesResult(
        resource_templates=TEMPLATES[start : start + 1], next_cursor=str(start + 1) if more else None
    )


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri == "docs://readme":
        text = "Read me first."
    elif uri.startswith("docs://pages/"):
        text = f"Page {uri.removeprefix('docs://pages/')}"
    else:
        raise ValueError(f"no resource {uri}")
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text=text)])


async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=PROMPTS)


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    who = (params.arguments or {}).get("name", "nobody")
    message = types.PromptMessage(role="user", content=_text(f"Say hello to {who}."))
    return types.GetPromptResult(description="A greeting", messages=[message])


def build() -> Server[Any]:
    """The server with every handler wired."""
    return Server(
        "codemode-test",
        version="1.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def _serve_stdio() -> None:
    server = build()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _require_token(app: Any, token: str) -> Any:
    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"x-test-token") != token.encode():
                await send(
                    {"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]}
                )
                await send({"type": "http.response.body", "body": b"unauthorized: send X-Test-Token"})
                return
        await app(scope, receive, send)

    return guarded


def _serve_http(port: int, token: str | None) -> None:
    import uvicorn

    app: Any = build().streamable_http_app(host="127.0.0.1")
    if token:
        app = _require_token(app, token)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        anyio.run(_serve_stdio)
    else:
        _serve_http(int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
