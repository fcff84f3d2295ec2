"""The `mcp/index.pyi` and `mcp/<server>.pyi` declarations for Python cells, beside their `.d.ts`.

A Python cell reaches a server as ``MCP.<server>`` and calls a tool with its input as keyword
arguments (``await MCP.travel.forecast(city="Paris")``).  So each server's stub declares one class,
``<Server>Server``, with a method per tool (input a ``TypedDict`` unpacked as keyword arguments,
rendered as ``tools/<name>.pyi`` renders a tool's input), and its ``resources`` and ``prompts`` when
the server has them.  A tool answers the raw MCP result, ``McpResult[<output>]``: its
``structuredContent`` is typed by the tool's ``outputSchema`` when it declares one (the service checks
results against it), ``Any`` otherwise; an input-discriminated output gets one ``@overload`` per
selector value, as a tool stub does; ``mcp/index.pyi`` declares ``MCP`` with one attribute per server.  A tool or
server whose identifier is not a Python name (a Python keyword such as ``def``) cannot be reached as
an attribute: the stub says so, and the cell calls it through its catalog handle.

Server metadata is remote and untrusted, as for the `.d.ts`: these are approximations for a reader,
bounded per tool like the tool stubs (past a bound a tool's input stays open).
"""

from __future__ import annotations

from collections.abc import Sequence

from service.api_files.model import McpServerDecl, McpToolDecl
from service.api_files.tool_pyi import (
    MAX_CHARS,
    StubRenderer,
    comment_lines,
    is_python_name,
    output_overloads,
    pascal_name,
)

__all__ = ["render_mcp_index_stub", "render_mcp_server_stub"]

_HEADER = (
    "# Generated from the MCP server's tool list for Python cells. Its schemas are remote, untrusted",
    "# metadata: shapes Python typing cannot express stay `Any`, and the server validates each call.",
    "from typing import Any, Generic, Literal, Required, TypedDict, TypeVar, Unpack, overload",
)

# Declared in every server's stub, so each stub stands alone.
_RESULTS = '''\
_Structured = TypeVar("_Structured")


class McpResult(TypedDict, Generic[_Structured], total=False):
    """The raw MCP tool result; `isError: True` is returned, not raised (then there is no structuredContent)."""
    content: Required[list[Any]]
    structuredContent: _Structured
    isError: bool


McpToolResult = McpResult[Any]


class McpResourcesListResult(TypedDict, total=False):
    resources: Required[list[Any]]
    nextCursor: str


class McpResourceTemplatesListResult(TypedDict, total=False):
    resourceTemplates: Required[list[Any]]
    nextCursor: str


class McpResourcesReadResult(TypedDict):
    contents: list[Any]


class McpPromptsListResult(TypedDict, total=False):
    prompts: Required[list[Any]]
    nextCursor: str


class McpPromptsGetResult(TypedDict, total=False):
    messages: Required[list[Any]]
    description: str'''

_RESOURCES = '''\
class {name}Resources:
    async def list(self, cursor: str | None = None) -> McpResourcesListResult:
        """One page of the server's resources; pass `nextCursor` back as `cursor` for the next."""
    async def templates(self, cursor: str | None = None) -> McpResourceTemplatesListResult:
        """One page of the server's resource templates."""
    async def read(self, uri: str) -> McpResourcesReadResult:
        """Read one resource by URI."""'''

_PROMPTS = '''\
class {name}Prompts:
    async def list(self, cursor: str | None = None) -> McpPromptsListResult:
        """One page of the server's prompts."""
    async def get(self, name: str, arguments: dict[str, str] | None = None) -> McpPromptsGetResult:
        """One prompt, filled in with `arguments`."""'''


def server_class(server: McpServerDecl) -> str:
    """The class name of a server in the stubs (``travel`` → ``TravelServer``)."""
    return pascal_name(server.identifier) + "Server"


def render_mcp_index_stub(servers: Sequence[McpServerDecl]) -> str:
    """`mcp/index.pyi`: ``MCP`` with one attribute per server, each typed by its own stub."""
    reachable = [s for s in servers if is_python_name(s.identifier)]
    lines = ["# The MCP servers of this cell, reached as MCP.<server>; each is declared in mcp/<server>.pyi."]
    lines += [f"from {s.identifier} import {server_class(s)}" for s in reachable]
    lines += ["", "", "class Mcp:"]
    for server in servers:
        if is_python_name(server.identifier):
            lines.append(f"    {server.identifier}: {server_class(server)}")
        else:
            lines.append(f"    # {server.identifier!r} is not a Python name: use its tools' catalog handles.")
    if not servers:
        lines.append("    pass")
    lines += ["", "", "MCP: Mcp"]
    return "\n".join(lines) + "\n"


def render_mcp_server_stub(server: McpServerDecl) -> str:
    """`mcp/<server>.pyi`: the server's class, a method per tool, and its resources and prompts."""
    name = pascal_name(server.identifier)
    blocks: list[str] = []
    # A comment, not a docstring: the server's name is remote text, and no quoting of it can end a comment.
    members = [
        f"    {line}" for line in comment_lines(f"MCP server {server.server_name}, reached as MCP.{server.identifier}.")
    ]
    declared = len(members)
    if server.has_resources:
        blocks.append(_RESOURCES.format(name=name))
        members.append(f"    resources: {name}Resources")
    if server.has_prompts:
        blocks.append(_PROMPTS.format(name=name))
        members.append(f"    prompts: {name}Prompts")
    for tool in server.tools:
        declarations, method = _tool_method(name, tool)
        blocks += declarations
        members += method
    if not any(line.lstrip().startswith(("async def", "resources:", "prompts:")) for line in members[declared:]):
        members.append("    ...")  # a class body of comments alone is not Python
    parts = ["\n".join(_HEADER), _RESULTS, *blocks, "\n".join([f"class {server_class(server)}:", *members])]
    return "\n\n\n".join(parts) + "\n"


def _tool_method(server: str, tool: McpToolDecl) -> tuple[list[str], list[str]]:
    """The input declarations a tool needs and its method lines in the server class."""
    doc = [f"    {line}" for line in comment_lines(tool.description)]
    if tool.name != tool.identifier:
        doc += [f"    # MCP tool name: {line.removeprefix('# ')}" for line in comment_lines(tool.name)[:1]]
    if not is_python_name(tool.identifier):
        return [], [*doc, f"    # {tool.identifier!r} is not a Python name: call it through its catalog handle."]
    renderer = StubRenderer(server + pascal_name(tool.identifier))
    kwargs = renderer.input_kwargs(tool.input_schema)
    signatures = _signatures(renderer, tool, kwargs)
    declarations = ["\n".join(renderer.blocks)] if renderer.blocks else []
    if sum(len(block) + 1 for block in declarations) > MAX_CHARS:
        # Bounded like a tool stub: past it the input and the output stay open.
        declarations, signatures = [], [f"async def {tool.identifier}(self, **input: Any) -> McpToolResult: ..."]
    return declarations, [*doc, *(f"    {line}" for line in signatures)]


def _signatures(renderer: StubRenderer, tool: McpToolDecl, kwargs: str) -> list[str]:
    """The tool's method: one signature answering ``McpResult[<output>]``, or its overloads by input."""
    if tool.output_schema is None:
        return [f"async def {tool.identifier}(self, **input: {kwargs}) -> McpToolResult: ..."]
    overloads = output_overloads(
        renderer,
        tool.identifier,
        tool.input_schema,
        tool.output_schema,
        kwargs,
        method=True,
        answer=lambda output: f"McpResult[{output}]",
    )
    if overloads is not None:
        return overloads
    output = renderer.type_of(tool.output_schema, "Output")
    return [f"async def {tool.identifier}(self, **input: {kwargs}) -> McpResult[{output}]: ..."]
