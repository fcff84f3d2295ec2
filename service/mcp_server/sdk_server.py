"""The MCP facade on the official SDK's server side: the only module of ours that imports the SDK's server.

``build_server`` registers the facade's tools and resources as the SDK's low-level handlers; the
protocol (handshake, both protocol eras, JSON-RPC, schemas) is the SDK's.  ``HttpEndpoint`` is the
ASGI app mounted at ``/mcp``: the SDK's Streamable HTTP session managers, stateless for 2026-07-28
requests and with sessions per tenant for 2025-11-25 clients (cells themselves are tracked by the
registry, by id and tenant, whatever the era).  ``serve_stdio`` serves one client on stdin/stdout.

Who calls is decided before the SDK sees a request: the request gate resolved the API key into the
ASGI scope (HTTP), or the command line chose it (stdio).  Each handler reads it from its request.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.inbound import MCP_NAME_HEADER, MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import Field
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from service import __version__
from service.errors import InvalidRequest, NotFound, Overloaded, ServiceError
from service.settings import ApiKey
from service.tracing import TraceParent

from .approval_forms import APPROVAL_SCHEMA, MAX_FORMS
from .cell_tools import Outcome, TaskStarted, ToolAnswer
from .descriptions import SERVER_INSTRUCTIONS
from .facade import DECLARATION_MIME, McpFacade, ToolDef
from .rounds import Caller, InputNeeded, RoundReply
from .tasks import POLL_INTERVAL_MS, TASKS_EXTENSION, TaskView

_T = TypeVar("_T")

# JSON-RPC code of the MCP specification for a resource that does not exist.
RESOURCE_NOT_FOUND = -32002
#: Approval rounds one tool call may run on a 2025-11-25 connection before it answers the waiting envelope.
MAX_LEGACY_ROUNDS = 64
#: How long a 2026-07-28 client may reuse a listing (``ttlMs``, ``cacheScope``).  The tools, the resources and
#: their contents follow the key's policy and the MCP servers' own lists (``private``, a minute); the
#: templates are the same for everyone and change only with the service (``public``, an hour).
CACHE_HINTS: dict[CacheableMethod, CacheHint] = {
    "tools/list": CacheHint(60_000, "private"),
    "resources/list": CacheHint(60_000, "private"),
    "resources/read": CacheHint(60_000, "private"),
    "resources/templates/list": CacheHint(3_600_000, "public"),
}

#: Who calls, from the SDK's request object (a starlette request over HTTP, None over stdio).
KeyOf = Callable[[Any], ApiKey]
#: The per-request context the SDK hands a handler (no lifespan state of ours).
_Context = ServerRequestContext[object]


def build_server(facade: McpFacade, key_of: KeyOf) -> Server[object]:
    """An SDK server whose handlers answer for the key ``key_of(request)`` names."""
    handlers = _Handlers(facade, key_of)
    server: Server[object] = Server(
        "codemode",
        version=__version__,
        instructions=SERVER_INSTRUCTIONS,
        cache_hints=CACHE_HINTS,
        on_list_tools=handlers.list_tools,
        on_list_resources=handlers.list_resources,
        on_list_resource_templates=handlers.list_resource_templates,
        on_read_resource=handlers.read_resource,
        # Input schemas do not depend on the caller: header validation need not list the tools.
        get_tool_input_schema=facade.input_schema,
    )
    # Cells as tasks: the extension is advertised (server/discover) and its three methods served.
    server.extensions[TASKS_EXTENSION] = {}
    # Registered as a request handler: tools/call may also answer a task, which is not a core result type.
    server.add_request_handler("tools/call", types.CallToolRequestParams, handlers.call_tool)
    server.add_request_handler("tasks/get", _TaskParams, handlers.get_task)
    server.add_request_handler("tasks/update", _TaskUpdateParams, handlers.update_task)
    server.add_request_handler("tasks/cancel", _TaskParams, handlers.cancel_task)
    return server


class _Handlers:
    """The SDK's low-level handlers: each reads the caller's key from its request and asks the facade."""

    def __init__(self, facade: McpFacade, key_of: KeyOf) -> None:
        self._facade = facade
        self._key_of = key_of

    async def list_tools(self, ctx: _Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(t) for t in self._facade.tools(self._key_of(ctx.request))])

    async def call_tool(
        self, ctx: _Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, object]:
        caller = Caller(
            self._key_of(ctx.request),
            asks_person=_shows_forms(ctx),
            trace_parent=_trace_parent(self._facade, ctx.request, params.meta),
            uses_tasks=_takes_tasks(ctx),
        )
        reply = None
        if params.request_state is not None or params.input_responses:
            responses = {k: v.model_dump(by_alias=True, mode="json") for k, v in (params.input_responses or {}).items()}
            reply = RoundReply(params.request_state, responses)
        outcome = await _translated(self._facade.call(caller, params.name, params.arguments, reply))
        if isinstance(outcome, InputNeeded):
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                return types.InputRequiredResult(
                    input_requests={form.call_id: _elicitation(form.message) for form in outcome.forms},
                    request_state=outcome.state,
                )
            outcome = await self._asked_on_connection(ctx, caller, params, outcome)
        if isinstance(outcome, TaskStarted):
            return {"resultType": "task", **_task_wire(self._facade.tasks.view(outcome.record))}
        return _tool_result(outcome)

    async def _asked_on_connection(
        self, ctx: _Context, caller: Caller, params: types.CallToolRequestParams, needed: InputNeeded
    ) -> ToolAnswer | TaskStarted:
        """A 2025-11-25 round: each form is an ``elicitation/create`` request on this connection, answered while
        the tool call waits; the answers resume the cell, which may ask again (up to ``MAX_LEGACY_ROUNDS``
        rounds, then the cell is answered as it waits: ``wait`` asks again)."""
        outcome: Outcome = needed
        rounds = 0
        while True:
            if not isinstance(outcome, InputNeeded):
                return outcome
            rounds += 1
            responses = await _elicited(ctx, outcome) if rounds <= MAX_LEGACY_ROUNDS else {}
            outcome = await _translated(self._facade.decided(caller, params.name, params.arguments, outcome, responses))

    async def get_task(self, ctx: _Context, params: _TaskParams) -> dict[str, object]:
        caller = self._task_caller(ctx, params)
        return _task_wire(await _translated(self._facade.tasks.get(caller, params.task_id)))

    async def update_task(self, ctx: _Context, params: _TaskUpdateParams) -> dict[str, object]:
        caller = self._task_caller(ctx, params)
        responses = {k: v.model_dump(by_alias=True, mode="json") for k, v in params.input_responses.items()}
        await _translated(self._facade.tasks.update(caller, params.task_id, responses))
        return {}

    async def cancel_task(self, ctx: _Context, params: _TaskParams) -> dict[str, object]:
        await _translated(self._facade.tasks.cancel(self._task_caller(ctx, params), params.task_id))
        return {}

    def _task_caller(self, ctx: _Context, params: _TaskParams) -> Caller:
        """The caller of a tasks/* request, which must have declared the extension on it and, over HTTP, named
        the task in its Mcp-Name header (that header routes it to the replica holding the task)."""
        if not _takes_tasks(ctx):
            raise MCPError(
                types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"Missing required client capability: declare the {TASKS_EXTENSION} extension on tasks/* requests",
                data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )
        headers = getattr(ctx.request, "headers", None)
        named = headers.get(MCP_NAME_HEADER) if headers is not None else None
        if named is not None and named != params.task_id:
            raise MCPError(types.INVALID_PARAMS, f"the {MCP_NAME_HEADER} header must be the taskId of the request")
        return Caller(self._key_of(ctx.request), asks_person=_shows_forms(ctx), uses_tasks=True)

    async def list_resources(
        self, ctx: _Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        found = await _translated(self._facade.resources(self._key_of(ctx.request)))
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=r.uri, name=r.name, description=r.description, mime_type=DECLARATION_MIME, size=r.size
                )
                for r in found
            ]
        )

    async def list_resource_templates(
        self, ctx: _Context, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=t.uri_template, name=t.name, description=t.description, mime_type=DECLARATION_MIME
                )
                for t in self._facade.resource_templates()
            ]
        )

    async def read_resource(self, ctx: _Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        text = await _translated(self._facade.read_resource(self._key_of(ctx.request), uri))
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=DECLARATION_MIME, text=text)]
        )


class _TaskParams(types.RequestParams):
    task_id: str = Field(min_length=1, max_length=256)


class _TaskUpdateParams(_TaskParams):
    input_responses: dict[str, types.ElicitResult] = Field(max_length=MAX_FORMS)


def _takes_tasks(ctx: _Context) -> bool:
    """Whether this 2026-07-28 request declares the tasks extension (a task is never answered to another)."""
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    return modern and extensions is not None and TASKS_EXTENSION in extensions


def _task_wire(view: TaskView) -> dict[str, object]:
    """A task as the extension writes it (``DetailedTask``): its state and, by status, forms, result or error."""
    record = view.record
    wire: dict[str, object] = {
        "taskId": record.cell_id,
        "status": view.status,
        "createdAt": _iso(record.created_at),
        "lastUpdatedAt": _iso(record.updated_at),
        "ttlMs": view.ttl_ms,
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    if view.status == "input_required":
        requests = {form.call_id: _elicitation(form.message) for form in view.forms}
        wire["inputRequests"] = {
            k: r.model_dump(by_alias=True, mode="json", exclude_none=True) for k, r in requests.items()
        }
        wire["statusMessage"] = f"waiting for a person to approve {len(view.forms)} call(s)"
    elif view.status == "completed":
        wire["result"] = record.result
    elif view.status == "failed":
        wire["error"] = {"code": types.INTERNAL_ERROR, "message": record.message or "the cell was lost"}
        wire["statusMessage"] = record.message
    elif view.status == "cancelled" and record.message:
        wire["statusMessage"] = record.message
    return wire


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def _tool_result(answer: ToolAnswer) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=answer.text)],
        structured_content=answer.structured,
        is_error=answer.is_error,
    )


async def _elicited(ctx: _Context, needed: InputNeeded) -> dict[str, object]:
    """The person's answers to a round's forms, asked one after another on the request's connection; a form
    the client could not ask is left undecided, and so are the ones after it."""
    responses: dict[str, object] = {}
    for form in needed.forms:
        try:
            answer = await ctx.session.elicit_form(form.message, APPROVAL_SCHEMA, related_request_id=ctx.request_id)
        except (MCPError, NoBackChannelError):
            break
        responses[form.call_id] = answer.model_dump(by_alias=True, mode="json")
    return responses


def _elicitation(message: str) -> types.ElicitRequest:
    """One approval form as an embedded elicitation request."""
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=APPROVAL_SCHEMA))


def _shows_forms(ctx: _Context) -> bool:
    """Whether this request's client shows elicitation forms to a person, on a wire that can carry them: the
    2026-07-28 envelope's capabilities (answered with input_required), or a 2025-11-25 connection's, when
    it can carry a request to the client (a session at /mcp, stdio)."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    # An empty elicitation capability is the form mode of the revisions before URL mode existed.
    forms = elicitation is not None and (elicitation.form is not None or elicitation.url is None)
    return forms and (ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or ctx.session.can_send_request)


def _tool(tool: ToolDef) -> types.Tool:
    """One facade tool in the SDK's shape, with its hints."""
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only, destructive_hint=tool.destructive, open_world_hint=not tool.read_only
        ),
    )


def _trace_parent(facade: McpFacade, request: object, meta: Mapping[str, object] | None) -> TraceParent:
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


async def _translated(work: Awaitable[_T]) -> _T:
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
    """The ASGI app at ``/mcp``; ``run()`` must be open (inside the app's lifespan) while it serves.

    Both protocol eras on one URL, told apart as the SDK tells them (the ``MCP-Protocol-Version`` header):

    * 2026-07-28 requests are stateless: one request, one JSON answer, on the SDK's single-exchange path;
    * 2025-11-25 (and older) clients get sessions: ``initialize`` opens one (``Mcp-Session-Id``), and each
      request of it is answered as an event stream, which can carry an ``elicitation/create`` request to the
      client while a tool call waits.  Sessions are kept per tenant, each tenant's table bounded
      (``mcp_sessions_per_tenant``: one tenant cannot fill a table another needs) and a session idle for
      ``mcp_session_idle_seconds`` is closed.  A session lives in the replica that opened it: behind a load
      balancer, requests carrying ``Mcp-Session-Id`` must go back there (deploy/haproxy.cfg sticks them).
    """

    def __init__(
        self,
        facade: McpFacade,
        key_of: KeyOf,
        *,
        max_body_bytes: int,
        sessions_per_tenant: int,
        session_idle_seconds: float,
    ) -> None:
        self._server = build_server(facade, key_of)
        self._key_of = key_of
        self._max_body_bytes = max_body_bytes
        self._sessions_per_tenant = sessions_per_tenant
        self._session_idle_seconds = session_idle_seconds
        self._stateless: StreamableHTTPSessionManager | None = None
        self._sessions: dict[str, _TenantSessions] = {}  # tenant -> its sessions, once it has one
        self._opening = anyio.Lock()
        self._task_group: anyio.abc.TaskGroup | None = None

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        # A session manager runs once; each lifespan gets its own.
        stateless = self._manager(stateless=True)
        async with stateless.run(), anyio.create_task_group() as task_group:
            self._stateless, self._task_group = stateless, task_group
            try:
                yield
            finally:
                self._stateless = self._task_group = None
                self._sessions = {}
                task_group.cancel_scope.cancel()  # each tenant's sessions end with their manager's task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._stateless is None:
            raise Overloaded(
                "the MCP endpoint is not running (the service is starting or stopping); retry shortly", retry_after=1
            )
        version = Headers(scope=scope).get(MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await self._stateless.handle_request(scope, receive, send)
            return
        tenant = self._key_of(Request(scope)).tenant
        await (await self._sessions_of(tenant)).handle(scope, receive, send)

    async def _sessions_of(self, tenant: str) -> _TenantSessions:
        """The sessions of ``tenant``, their manager started in its own task on first use."""
        async with self._opening:
            sessions = self._sessions.get(tenant)
            if sessions is None:
                if self._task_group is None:
                    raise Overloaded("the MCP endpoint is stopping; retry shortly", retry_after=1)
                manager = self._manager(stateless=False)
                await self._task_group.start(_keep_running, manager)
                sessions = self._sessions[tenant] = _TenantSessions(
                    manager, self._sessions_per_tenant, self._session_idle_seconds
                )
        return sessions

    def _manager(self, *, stateless: bool) -> StreamableHTTPSessionManager:
        return StreamableHTTPSessionManager(
            app=self._server,
            stateless=stateless,
            # Stateless answers are one JSON body; a session's are event streams, so they can carry requests.
            json_response=stateless,
            # Host and Origin are checked by the request gate, as for every route (service/hosts.py).
            security_settings=None,
            max_request_body_size=self._max_body_bytes,
            session_idle_timeout=self._session_idle_seconds,
            max_sessions=self._sessions_per_tenant,
        )


class _TenantSessions:
    """One tenant's 2025-11-25 sessions: the SDK's manager, and when each session it opened was last used.

    A client that runs once and exits (a command line) leaves its session open until it idles out.  So a
    tenant at its cap does not refuse a new session while one of its own sessions is idle: the least recently
    used idle one is closed (as its client's DELETE would close it; that client is told it is gone and opens
    a new one).  Only when every session is in use does the SDK answer 503 "Too many open sessions".
    """

    def __init__(self, manager: StreamableHTTPSessionManager, cap: int, idle_seconds: float) -> None:
        self.manager = manager
        self._cap = cap
        self._idle_seconds = idle_seconds
        self._used: OrderedDict[str, float] = OrderedDict()  # session id -> last use (monotonic), oldest first
        self._busy: Counter[str] = Counter()  # session id -> its requests in flight (an open stream included)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        session = Headers(scope=scope).get(MCP_SESSION_ID_HEADER)
        if session is None:
            await self._make_room()
        elif session in self._used:  # only sessions this tenant opened here are followed, never an invented id
            self._busy[session] += 1
        answered: dict[str, object] = {}

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                answered["status"] = message["status"]
                answered["session"] = Headers(raw=message["headers"]).get(MCP_SESSION_ID_HEADER)
            await send(message)

        try:
            await self.manager.handle_request(scope, receive, watched)
        finally:
            if session is not None and self._busy[session]:
                self._busy[session] -= 1
                if not self._busy[session]:
                    del self._busy[session]
        opened = answered.get("session")
        if session is None:
            if isinstance(opened, str) and answered.get("status") == 200:
                self._used[opened] = time.monotonic()
        elif session in self._used:
            if scope["method"] == "DELETE" or answered.get("status") == 404:
                del self._used[session]  # closed by its client, or already gone
            else:
                self._used[session] = time.monotonic()
                self._used.move_to_end(session)

    async def _make_room(self) -> None:
        """Forget sessions that idled out; at the cap, close the least recently used idle one."""
        stale = time.monotonic() - self._idle_seconds
        for session in [s for s, at in self._used.items() if at < stale and not self._busy[s]]:
            del self._used[session]
        if len(self._used) < self._cap:
            return
        idle = next((s for s in self._used if not self._busy[s]), None)
        if idle is not None:
            del self._used[idle]
            await self.manager.handle_request(_closing(idle), _no_body, _discard)


def _closing(session: str) -> Scope:
    """A DELETE of ``session``, the request that closes it (made here, never sent by anyone)."""
    return {
        "type": "http",
        "method": "DELETE",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "scheme": "http",
        "http_version": "1.1",
        "headers": [(MCP_SESSION_ID_HEADER.encode("ascii"), session.encode("latin-1"))],
        "server": None,
        "client": None,
    }


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _discard(message: Message) -> None:
    return None


async def _keep_running(
    manager: StreamableHTTPSessionManager, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Run ``manager`` (its sessions' tasks live in it) until the endpoint stops."""
    async with manager.run():
        task_status.started()
        await anyio.sleep_forever()


async def serve_stdio(facade: McpFacade, key: ApiKey) -> None:
    """Serve one MCP client on stdin/stdout as ``key`` until stdin closes."""
    server = build_server(facade, lambda _request: key)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
