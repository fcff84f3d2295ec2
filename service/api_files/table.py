"""The read-only virtual file table behind the guest's `API.list` / `API.read`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bridge.json_types import JsonObject, JsonValue
from service.api_files.errors import ApiFileError
from service.api_files.errors_pyi import ERRORS_PYI, ERRORS_PYI_DESCRIPTION
from service.api_files.mcp_dts import render_mcp_index, render_mcp_server
from service.api_files.mcp_pyi import render_mcp_index_stub, render_mcp_server_stub
from service.api_files.model import McpServerDecl, ToolDecl
from service.api_files.results_dts import RESULTS_DTS, RESULTS_DTS_DESCRIPTION
from service.api_files.schema_ts import one_line
from service.api_files.tool_dts import render_tool_declaration
from service.api_files.tool_pyi import render_tool_stub

__all__ = ["ApiFileTable", "normalize_api_path"]

_MAX_DESCRIPTION_CHARS = 160


@dataclass
class _Entry:
    description: str | None
    render: Callable[[], str]
    lazy: bool
    content: str | None = None

    def text(self) -> str:
        if self.content is None:
            self.content = _well_formed(self.render())
        return self.content


class ApiFileTable:
    """Declaration files of one cell's tool surface; tool files are rendered on first read.

    ``python``: a Python cell's table, which has ``errors.pyi`` (``error_info``) and ``tools/<name>.pyi``
    beside each ``tools/<name>.d.ts``.
    """

    def __init__(
        self, tools: Sequence[ToolDecl], mcp_servers: Sequence[McpServerDecl], *, python: bool = False
    ) -> None:
        entries: dict[str, _Entry] = {
            "results.d.ts": _Entry(RESULTS_DTS_DESCRIPTION, lambda: RESULTS_DTS, lazy=False),
        }
        if python:
            entries["errors.pyi"] = _Entry(ERRORS_PYI_DESCRIPTION, lambda: ERRORS_PYI, lazy=False)
        for tool in sorted(tools, key=lambda item: item.callable_name):
            path = f"tools/{tool.callable_name}.d.ts"
            if path in entries:
                raise ValueError(f"duplicate callable name {tool.callable_name!r}")
            entries[path] = _Entry(_tool_description(tool), _tool_renderer(tool), lazy=True)
            if python:
                entries[f"tools/{tool.callable_name}.pyi"] = _Entry(
                    _tool_description(tool), _stub_renderer(tool), lazy=True
                )
        servers = sorted(mcp_servers, key=lambda item: item.identifier)
        if servers:
            entries["mcp/index.d.ts"] = _Entry(
                "MCP servers and MCP.$api(); references every mcp/<server>.d.ts.",
                lambda: render_mcp_index(servers),
                lazy=False,
            )
            for server in servers:
                path = f"mcp/{server.identifier}.d.ts"
                if path in entries:
                    raise ValueError(f"duplicate MCP server identifier {server.identifier!r}")
                entries[path] = _Entry(
                    _well_formed(f"MCP.{server.identifier}: tools of MCP server {one_line(server.server_name)}"),
                    _server_renderer(server),
                    lazy=False,
                )
            if python:
                entries.update(_mcp_stub_entries(servers))
        self._entries = entries

    def list(self, prefix: object = None) -> JsonObject:
        """`{"files": [...]}` under `prefix` (whole table when None or empty); tool files have no `bytes`."""
        wanted = _normalize_prefix(prefix)
        files: list[JsonValue] = []
        for path, entry in self._entries.items():
            if wanted and path != wanted and not path.startswith(wanted + "/"):
                continue
            item: JsonObject = {"path": path}
            if entry.description:
                item["description"] = entry.description
            # Tool files are rendered on read; listing them never forces (or reveals) a render.
            if not entry.lazy:
                item["bytes"] = _utf8_len(entry.text())
            files.append(item)
        return {"files": files}

    def read(self, path: str) -> JsonObject:
        """`{"path", "description"?, "content", "bytes"}` of one file; raises ApiFileError."""
        normalized = normalize_api_path(path)
        entry = self._entries.get(normalized)
        if entry is None:
            raise ApiFileError(f"Unknown API file: {normalized}")
        content = entry.text()
        result: JsonObject = {"path": normalized}
        if entry.description:
            result["description"] = entry.description
        result["content"] = content
        result["bytes"] = _utf8_len(content)
        return result

    def paths(self) -> tuple[str, ...]:
        """Every path in the table, in listing order."""
        return tuple(self._entries)


def normalize_api_path(path: object) -> str:
    """Trim, drop leading slashes and reject empty, `.` and `..` segments."""
    if not isinstance(path, str):
        raise ApiFileError("invalid API file path")
    trimmed = path.strip().lstrip("/")
    segments = trimmed.split("/")
    if not trimmed or any(segment in ("", ".", "..") for segment in segments):
        raise ApiFileError("invalid API file path")
    return trimmed


def _normalize_prefix(prefix: object) -> str:
    if prefix is None:
        return ""
    if not isinstance(prefix, str):
        raise ApiFileError("invalid API file path")
    trimmed = prefix.strip().strip("/")
    return normalize_api_path(trimmed) if trimmed else ""


def _tool_description(tool: ToolDecl) -> str:
    first = next((line.strip() for line in (tool.description or "").splitlines() if line.strip()), "")
    if len(first) > _MAX_DESCRIPTION_CHARS:
        first = first[: _MAX_DESCRIPTION_CHARS - 1].rstrip() + "\u2026"
    if not first:
        return f"Declaration of the {tool.callable_name} tool."
    return _well_formed(f"{tool.callable_name}: {first}")


def _tool_renderer(tool: ToolDecl) -> Callable[[], str]:
    return lambda: render_tool_declaration(
        tool.callable_name, tool.description, tool.input_schema, tool.output_schema, tool.trusted
    )


def _stub_renderer(tool: ToolDecl) -> Callable[[], str]:
    return lambda: render_tool_stub(
        tool.callable_name, tool.description, tool.input_schema, tool.output_schema, tool.trusted
    )


def _server_renderer(server: McpServerDecl) -> Callable[[], str]:
    return lambda: render_mcp_server(server)


def _server_stub_renderer(server: McpServerDecl) -> Callable[[], str]:
    return lambda: render_mcp_server_stub(server)


def _mcp_stub_entries(servers: Sequence[McpServerDecl]) -> dict[str, _Entry]:
    """A Python table's MCP stubs: ``mcp/index.pyi`` (the ``MCP`` root) and one ``mcp/<server>.pyi`` each."""
    entries = {
        "mcp/index.pyi": _Entry(
            "MCP for Python cells: one attribute per server, typed in mcp/<server>.pyi.",
            lambda: render_mcp_index_stub(servers),
            lazy=False,
        )
    }
    for server in servers:
        entries[f"mcp/{server.identifier}.pyi"] = _Entry(
            _well_formed(
                f"MCP.{server.identifier} for Python cells: tools of MCP server {one_line(server.server_name)}"
            ),
            _server_stub_renderer(server),
            lazy=False,
        )
    return entries


def _well_formed(text: str) -> str:
    """Replace lone surrogates (possible in JSON-decoded descriptions) so the text encodes as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))
