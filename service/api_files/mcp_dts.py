"""The `mcp/index.d.ts` and `mcp/<server>.d.ts` declaration files."""

from __future__ import annotations

import json
from collections.abc import Sequence

from service.api_files.model import McpServerDecl, McpToolDecl
from service.api_files.schema_ts import (
    TsNamespace,
    doc_text,
    object_block,
    object_shape,
    one_line,
    schema_type,
)
from service.api_files.tool_dts import accepts_empty_object

__all__ = ["MCP_MAX_DOC_LINES", "render_mcp_index", "render_mcp_server"]

MCP_MAX_DOC_LINES = 12
_INDENT = "    "

# Declared identically in every server file: TypeScript merges identical interface members, so files
# compile alone and together. Index signatures would not merge, hence none here.
_SHARED_TYPES = """\
/** What MCP.<server>.$api() resolves to. */
interface McpApiHeader {
    kind: "mcp_api";
    scope: string;
    server: { identifier: string; serverName: string };
    header: string;
    tools: unknown[];
    schemas?: unknown;
    note?: string;
}

/** The raw MCP tool result; `isError: true` resolves rather than throws. */
interface McpToolResult {
    content: unknown[];
    structuredContent?: unknown;
    isError?: boolean;
}

interface McpResourcesListResult {
    resources: unknown[];
    nextCursor?: string;
}

interface McpResourceTemplatesListResult {
    resourceTemplates: unknown[];
    nextCursor?: string;
}

interface McpResourcesReadResult {
    contents: unknown[];
}

interface McpPromptsListResult {
    prompts: unknown[];
    nextCursor?: string;
}

interface McpPromptsGetResult {
    messages: unknown[];
    description?: string;
}
"""

_RESOURCES = """\
    namespace resources {
        /** One page of this server's resources; pass `nextCursor` back as `cursor` for the next. */
        function list(params?: { cursor?: string }): Promise<McpResourcesListResult>;
        /** One page of this server's resource templates (`uriTemplate`s whose filled-in URIs `read` takes). */
        function templates(params?: { cursor?: string }): Promise<McpResourceTemplatesListResult>;
        /** Read one resource by URI. */
        function read(uri: string): Promise<McpResourcesReadResult>;
        function read(params: { uri: string }): Promise<McpResourcesReadResult>;
    }"""

_PROMPTS = """\
    namespace prompts {
        /** One page of this server's prompts; pass `nextCursor` back as `cursor` for the next. */
        function list(params?: { cursor?: string }): Promise<McpPromptsListResult>;
        /** Render one prompt with its string arguments. */
        function get(name: string, args?: Record<string, string>): Promise<McpPromptsGetResult>;
        function get(params: {
            name: string;
            arguments?: Record<string, string>;
        }): Promise<McpPromptsGetResult>;
    }"""

_ROOT_TYPES = """\
/** One server in MCP.$api(). */
interface McpServerSummary {
    identifier: string;
    serverName: string;
    toolCount: number;
}

/** What MCP.$api() resolves to. */
interface McpRootHeader {
    kind: "mcp_api";
    scope: string;
    servers: McpServerSummary[];
    note?: string;
}
"""


def render_mcp_index(servers: Sequence[McpServerDecl]) -> str:
    """Render `mcp/index.d.ts`: references to every server file and the root `MCP.$api()`."""
    lines = [f'/// <reference path="./{server.identifier}.d.ts" />' for server in servers]
    lines += [
        "",
        "// MCP servers visible to this cell. Call tools as MCP.<server>.<tool>(input) with one object",
        "// argument; each server's declarations are in mcp/<server>.d.ts.",
    ]
    for server in servers:
        extras = [name for name, on in (("resources", server.has_resources), ("prompts", server.has_prompts)) if on]
        count = len(server.tools)
        summary = f"{count} tool{'' if count == 1 else 's'}" + "".join(f", {extra}" for extra in extras)
        lines.append(f"//   MCP.{server.identifier}: {_comment(server.server_name)} ({summary})")
    lines += [
        "",
        _ROOT_TYPES,
        "declare namespace MCP {",
        f"{_INDENT}/** List the visible MCP servers with their identifiers and tool counts. */",
        f"{_INDENT}function $api(): Promise<McpRootHeader>;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def render_mcp_server(server: McpServerDecl) -> str:
    """Render `mcp/<server>.d.ts`: the server's namespace with one function per tool."""
    ident = server.identifier
    lines = [
        f"// MCP server {_comment(server.server_name)}, reached as MCP.{ident}.",
        "// Types approximate the server's JSON Schemas (remote, untrusted metadata); for the raw schemas",
        f'// call MCP.{ident}.$api("<tool>", {{ schema: true }}).',
        "",
        _SHARED_TYPES,
        f"declare namespace MCP.{ident} {{",
        f"{_INDENT}/** This server's API header, or one tool's; `schema: true` adds raw input schemas. */",
        f"{_INDENT}function $api(tool?: string, options?: {{ schema?: boolean }}): Promise<McpApiHeader>;",
    ]
    for tool in server.tools:
        lines += ["", _tool_function(ident, tool)]
    if server.has_resources:
        lines += ["", _RESOURCES]
    if server.has_prompts:
        lines += ["", _PROMPTS]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _tool_function(server: str, tool: McpToolDecl) -> str:
    schema = tool.input_schema
    # Named types of the schema's local references: MCP.<server>.<tool>.<Name>, merged with the function.
    types = TsNamespace(tool.identifier)
    shape = object_shape(schema, defaults_optional=True, namespace=types) if schema is not None else None
    params: list[tuple[str, str]] = []
    if schema is None or (shape is not None and not shape.members and shape.index_type is None):
        signature = "input?: Record<string, never>"
    elif shape is not None:
        optional = all(member.optional for member in shape.members)
        index_only = not shape.members
        input_type = f"Record<string, {shape.index_type}>" if index_only else object_block(shape, _INDENT)
        signature = f"input{'?' if optional else ''}: {input_type}"
        params = [(member.name, member.description or "") for member in shape.members]
        types.add(shape.declarations)
    else:
        optional = accepts_empty_object(schema)
        rendered = schema_type(schema, types)
        signature = f"input{'?' if optional else ''}: {rendered.text}"
        types.add(rendered.declarations)
    doc = _tool_doc(server, tool, params)
    return "\n".join(
        [
            *types.block(_INDENT, declare=False),
            *doc,
            f"{_INDENT}function {tool.identifier}({signature}): Promise<McpToolResult>;",
        ]
    )


def _tool_doc(server: str, tool: McpToolDecl, params: list[tuple[str, str]]) -> list[str]:
    body = [line.rstrip() for line in (tool.description or "").splitlines() if line.strip()]
    if len(body) > MCP_MAX_DOC_LINES:
        # A cut must say so, and where the rest is: a model would otherwise take the start for the whole.
        body = [
            *body[:MCP_MAX_DOC_LINES],
            f'\u2026 (cut at {MCP_MAX_DOC_LINES} lines; the full description: MCP.{server}.$api("{tool.identifier}"))',
        ]
    if tool.name != tool.identifier:
        body.append(f"MCP tool name: {one_line(tool.name)}")
    tags = [f"@param {one_line(name)} {one_line(text)}".rstrip() for name, text in params if text.strip()]
    if not body and not tags:
        return []
    lines = [f"{_INDENT}/**"]
    lines += [f"{_INDENT} * {doc_text(line)}" for line in body]
    if body and tags:
        lines.append(f"{_INDENT} *")
    lines += [f"{_INDENT} * {doc_text(tag)}" for tag in tags]
    lines.append(f"{_INDENT} */")
    return lines


def _comment(text: str) -> str:
    """A server name quoted for a `//` line; collapsing whitespace removes every line terminator."""
    return json.dumps(one_line(text), ensure_ascii=False)
