"""The MCP facade on the official SDK's server side: the only module of ours that imports the SDK's server.

``build_server`` registers the facade's tools and resources as the SDK's low-level handlers; the
protocol (handshake, both protocol eras, JSON-RPC, schemas) is the SDK's.  ``HttpEndpoint`` is the
ASGI app mounted at ``/mcp``: the SDK's Streamable HTTP session manager in stateless JSON mode, so
no per-client session state is kept between requests (cells are tracked by the registry, by id and
tenant) and one caller cannot fill a table of sessions that others need.  ``serve_stdio`` serves one
client on stdin/stdout.

Who calls is decided before the SDK sees a request: the request gate resolved the API key into the
ASGI scope (HTTP), or the command line chose it (stdio).  Each handler reads it from its request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError

from service import __version__
from service.errors import InvalidRequest, NotFound, Overloaded, ServiceError
from service.settings import ApiKey

from .descriptions import SERVER_INSTRUCTIONS
from .facade import DECLARATION_MIME, McpFacade

# JSON-RPC code of the MCP specification for a resource that does not exist.
RESOURCE_NOT_FOUND = -32002

KeyOf = Callable[[Any], ApiKey]


def build_server(facade: McpFacade, key_of: KeyOf) -> Server[Any]:
    """An SDK server whose handlers answer for the key ``key_of(request)`` names."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        key = key_of(ctx.request)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    description=t.description,
                    input_schema=t.input_schema,
                    output_schema=t.output_schema,
                    annotations=types.ToolAnnotations(
                        read_only_hint=t.read_only, destructive_hint=t.destructive, open_world_hint=not t.read_only
                    ),
                )
                for t in facade.tools(key)
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        key = key_of(ctx.request)
        parent = _trace_parent(facade, ctx.request, params.meta)
        answer = await _translated(facade.call(key, params.name, params.arguments, trace_parent=parent))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=answer.text)],
            structured_content=answer.structured,
            is_error=answer.is_error,
        )

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        key = key_of(ctx.request)
        found = await _translated(facade.resources(key))
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=r.uri, name=r.name, description=r.description, mime_type=DECLARATION_MIME, size=r.size
                )
                for r in found
            ]
        )

    async def list_resource_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=t.uri_template, name=t.name, description=t.description, mime_type=DECLARATION_MIME
                )
                for t in facade.resource_templates()
            ]
        )

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        key = key_of(ctx.request)
        uri = str(params.uri)
        text = await _translated(facade.read_resource(key, uri))
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=DECLARATION_MIME, text=text)]
        )

    return Server(
        "codemode",
        version=__version__,
        instructions=SERVER_INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        # Input schemas do not depend on the caller: header validation need not list the tools.
        get_tool_input_schema=facade.input_schema,
    )


def _trace_parent(facade: McpFacade, request: Any, meta: Any) -> Any:
    """A W3C ``traceparent`` from the HTTP request's headers, else from the MCP request's ``_meta``."""
    tracing = facade.svc.tracing
    if not tracing.enabled:
        return None
    scope = getattr(request, "scope", None)
    parent = tracing.parent_from_scope(scope) if isinstance(scope, dict) else None
    if parent is None and isinstance(meta, dict):
        parent = tracing.parent_from_headers(
            {k: v for k, v in meta.items() if k in ("traceparent", "tracestate") and isinstance(v, str)}
        )
    return parent


async def _translated(work: Any) -> Any:
    """Await ``work``; service errors become the MCP error a client expects for them."""
    try:
        return await work
    except NotFound as exc:
        raise MCPError(RESOURCE_NOT_FOUND, exc.message) from None
    except InvalidRequest as exc:
        raise MCPError(types.INVALID_PARAMS, exc.message) from None
    except ServiceError as exc:
        raise MCPError(types.INTERNAL_ERROR, exc.message) from None


class HttpEndpoint:
    """The ASGI app at ``/mcp``; ``run()`` must be open (inside the app's lifespan) while it serves."""

    def __init__(self, facade: McpFacade, key_of: KeyOf, *, max_body_bytes: int) -> None:
        self._server = build_server(facade, key_of)
        self._max_body_bytes = max_body_bytes
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        # A session manager runs once; each lifespan gets its own.
        manager = StreamableHTTPSessionManager(
            app=self._server,
            stateless=True,
            json_response=True,
            # Host and Origin are checked by the request gate, as for every route (service/hosts.py).
            security_settings=None,
            max_request_body_size=self._max_body_bytes,
        )
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._manager is None:
            raise Overloaded(
                "the MCP endpoint is not running (the service is starting or stopping); retry shortly", retry_after=1
            )
        await self._manager.handle_request(scope, receive, send)


async def serve_stdio(facade: McpFacade, key: ApiKey) -> None:
    """Serve one MCP client on stdin/stdout as ``key`` until stdin closes."""
    server = build_server(facade, lambda _request: key)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
