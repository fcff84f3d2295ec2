"""One connection to one MCP server through the official ``mcp`` SDK (the only importer of ``mcp``).

The SDK's client is an async context manager whose task groups must be entered and left by one
task, so each connection owns a runner task that holds the context open until ``close()``.
Callers from any task then issue requests on the shared session; several may be in flight at once.
Every SDK and transport failure is translated into the ``McpError`` tree here.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self, TypeVar

import anyio
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client import Transport
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import BaseModel

from bridge.json_types import JsonObject
from service.outbound_http import TRANSPORT_ERRORS as _HTTP_TRANSPORT_ERRORS
from service.outbound_http import McpHttpTrouble, mcp_http_client
from service.settings_mcp import McpServerConfig

from . import http_trouble
from .arguments import shape_native, shape_tool_result
from .errors import McpError, McpInvalidInput, McpProtocolError, McpTimeout, McpUnavailable
from .http_trouble import SERVER_WORDS_CHARS, clip

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_W = TypeVar("_W")
#: What a transport's read stream yields: a message, or the failure that ended reading.
_Received = SessionMessage | Exception


class _ReadStream(Protocol):
    """The read side of an SDK transport (the SDK names its stream protocols only in private modules)."""

    async def receive(self) -> _Received: ...
    async def aclose(self) -> None: ...
    async def __anext__(self) -> _Received: ...
    async def __aenter__(self) -> object: ...
    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None: ...


# JSON-RPC error codes the SDK and transports use.
_CONNECTION_CLOSED = mcp_types.CONNECTION_CLOSED
_REQUEST_TIMEOUT = mcp_types.REQUEST_TIMEOUT
_INVALID_PARAMS = mcp_types.INVALID_PARAMS
_MAX_LIST_PAGES = 100
_CLOSE_WAIT_S = 8.0
_CLIENT_INFO = mcp_types.Implementation(name="codemode", version="1")
# Failures of the pipe or socket under the session: the server is gone, not merely unhappy.
_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    EOFError,
    *_HTTP_TRANSPORT_ERRORS,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
)


# Background closes of connections whose opener gave up; held so they are not garbage-collected.
_CLOSING: set[asyncio.Task[None]] = set()


@dataclass(frozen=True)
class ToolInfo:
    """One tool as the server lists it (remote, untrusted metadata)."""

    name: str
    description: str
    input_schema: JsonObject
    output_schema: JsonObject | None


class _EofWatch:
    """A read stream that reports end-of-stream, so a dead server is noticed before the next call."""

    def __init__(self, inner: _ReadStream, on_eof: Callable[[], None]) -> None:
        self._inner = inner
        self._on_eof = on_eof

    @property
    def last_context(self) -> object:
        return getattr(self._inner, "last_context", None)

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, tb)

    def __aiter__(self) -> _EofWatch:
        return self

    async def __anext__(self) -> _Received:
        try:
            return await self._inner.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_eof()
            raise

    async def receive(self) -> _Received:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_eof()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


@asynccontextmanager
async def _watched(
    transport: AbstractAsyncContextManager[tuple[_ReadStream, _W]], on_eof: Callable[[], None]
) -> AsyncIterator[tuple[_EofWatch, _W]]:
    async with transport as (read_stream, write_stream):
        yield _EofWatch(read_stream, on_eof), write_stream


def _unwrap(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (the SDK's task groups wrap transport failures)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class McpConnection:
    """A live session with one server, opened by ``open()`` and ended by ``close()``."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self.tools: tuple[ToolInfo, ...] = ()
        self.has_tools = False
        self.has_resources = False
        self.has_prompts = False
        self._client: Client | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._done = asyncio.Event()
        self._dead = False
        self._failure: BaseException | None = None
        self._runner: asyncio.Task[None] | None = None
        # Marks the HTTP trouble reports this connection made, so a server cannot forge one.
        self._nonce = secrets.token_hex(8)
        self._errors = _ErrorTranslator(config.name, self._nonce, self.mark_dead)
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def alive(self) -> bool:
        """True while the session is open and the server has not gone away."""
        return self._client is not None and not self._dead

    def mark_dead(self, why: str | None = None) -> None:
        """Remember that the server went away (``why`` is logged, once); the hub replaces this connection
        on next use, with a new process or session."""
        if why is not None and self._client is not None and not self._dead:
            log.warning("MCP server '%s': %s; its next request reconnects", self.config.name, why)
        self._dead = True

    # ---- lifecycle -------------------------------------------------------------------------------

    async def open(self, timeout_s: float) -> None:
        """Start the server (stdio) or session (HTTP), initialize, and list its tools."""
        try:
            await self._open(timeout_s)
        except BaseException:
            # Closing waits for the SDK's bounded shutdown; a cancelled opener must not wait for it.
            task = asyncio.create_task(self.close())
            _CLOSING.add(task)
            task.add_done_callback(_CLOSING.discard)
            raise

    async def _open(self, timeout_s: float) -> None:
        self._runner = asyncio.create_task(self._run(), name=f"mcp:{self.config.name}")
        try:
            with anyio.fail_after(max(timeout_s, 0.001)):
                await self._ready.wait()
        except TimeoutError:
            raise self._errors.timeout("start") from None
        if self._client is None:
            raise self._errors.unavailable_from(self._failure)
        caps = self._client.server_capabilities
        self.has_tools = caps.tools is not None
        self.has_resources = caps.resources is not None
        self.has_prompts = caps.prompts is not None
        self.tools = await self._call("tools/list", self._list_all_tools, timeout_s) if self.has_tools else ()

    async def close_when_idle(self) -> None:
        """``close()`` once the requests in flight have their answers (at most ``timeout_ms`` from now).

        A replaced connection is retired this way: requests sent on a forgotten session still get the
        server's refusal, which lets them be resent, instead of a closed connection.
        """
        with anyio.move_on_after(self.config.timeout_ms / 1000):
            await self._idle.wait()
        await self.close()

    async def close(self) -> None:
        """End the session and stop the server process; bounded, never raises."""
        self._dead = True
        runner = self._runner
        if runner is None:
            return
        if self._client is None:
            runner.cancel()  # still connecting: the SDK unwinds a cancelled connect itself
        self._stop.set()
        with anyio.move_on_after(_CLOSE_WAIT_S):
            await self._done.wait()
        if not runner.done():
            runner.cancel()

    async def _run(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                transport = await self._transport(stack)
                client = Client(
                    _watched(transport, lambda: self.mark_dead("the connection ended")),
                    mode="legacy",
                    cache=None,
                    client_info=_CLIENT_INFO,
                )
                await stack.enter_async_context(client)
                self._client = client
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - the runner's outcome is reported to open()
            self._failure = exc
            self.mark_dead(f"the connection ended ({type(_unwrap(exc)).__name__})")
        finally:
            self._dead = True
            self._ready.set()
            self._done.set()

    async def _transport(self, stack: AsyncExitStack) -> Transport:
        cfg = self.config
        if cfg.command is not None:
            params = StdioServerParameters(command=cfg.command, args=list(cfg.args), env=dict(cfg.env), cwd=cfg.cwd)
            return stdio_client(params, errlog=sys.stderr)
        assert cfg.url is not None
        http = await stack.enter_async_context(mcp_http_client(cfg.url, dict(cfg.headers), self._http_trouble))
        return streamable_http_client(cfg.url, http_client=http)

    def _http_trouble(self, trouble: McpHttpTrouble) -> bytes | None:
        """Judge one HTTP request that got no normal answer (``http_trouble.judge``); for a POST, the
        JSON-RPC error the SDK gets instead."""
        verdict = http_trouble.judge(trouble, self._nonce)
        if verdict.dead_because is not None:
            self.mark_dead(verdict.dead_because)
        return verdict.answer

    # ---- requests --------------------------------------------------------------------------------

    async def call_tool(self, name: str, arguments: JsonObject, timeout_s: float) -> JsonObject:
        """Call one tool; the raw result shaped for the guest (``isError`` resolves), not yet checked
        against the tool's ``outputSchema`` (``service.mcp.results`` does that, off the event loop).

        Sent with the session's ``send_request``, not ``call_tool``: the SDK's ``call_tool`` re-validates
        every result against the tool's ``outputSchema`` with stock jsonschema (Python's backtracking
        ``re``) on the event loop (``ClientSession.validate_tool_result``), which a server's pattern can
        make cost seconds.  Nothing else of ``call_tool`` applies to this connection: it negotiates the
        handshake-era protocol (``mode="legacy"``), so no ``input_required`` rounds, no header-mismatch
        resend and no claimed result shapes (we declare no extensions).
        """
        session = self._session().session
        request = mcp_types.CallToolRequest(params=mcp_types.CallToolRequestParams(name=name, arguments=arguments))
        send = lambda: session.send_request(request, mcp_types.CallToolResult)
        result = await self._call(f"tool '{name}'", send, timeout_s, tool=name)
        return shape_tool_result(result.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def list_resources(self, cursor: str | None, timeout_s: float) -> JsonObject:
        """One page of resources in the MCP shape."""
        client = self._session()
        return _native(await self._call("resources/list", lambda: client.list_resources(cursor=cursor), timeout_s))

    async def list_resource_templates(self, cursor: str | None, timeout_s: float) -> JsonObject:
        """One page of resource templates in the MCP shape."""
        client = self._session()
        fetch = lambda: client.list_resource_templates(cursor=cursor)
        return _native(await self._call("resources/templates/list", fetch, timeout_s))

    async def read_resource(self, uri: str, timeout_s: float) -> JsonObject:
        """Read one resource in the MCP shape."""
        client = self._session()
        return _native(await self._call("resources/read", lambda: client.read_resource(uri), timeout_s))

    async def list_prompts(self, cursor: str | None, timeout_s: float) -> JsonObject:
        """One page of prompts in the MCP shape."""
        client = self._session()
        return _native(await self._call("prompts/list", lambda: client.list_prompts(cursor=cursor), timeout_s))

    async def get_prompt(self, name: str, arguments: dict[str, str], timeout_s: float) -> JsonObject:
        """Render one prompt in the MCP shape."""
        client = self._session()
        return _native(await self._call(f"prompt '{name}'", lambda: client.get_prompt(name, arguments), timeout_s))

    async def _list_all_tools(self) -> tuple[ToolInfo, ...]:
        client = self._session()
        tools: list[ToolInfo] = []
        cursor: str | None = None
        for _ in range(_MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools += [ToolInfo(t.name, t.description or "", dict(t.input_schema), t.output_schema) for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        return tuple(tools)

    def _session(self) -> Client:
        if self._client is None or self._dead:
            raise McpUnavailable(
                f"MCP server '{self.config.name}' is not connected", server=self.config.name, retryable=True
            )
        return self._client

    async def _call(
        self, what: str, request: Callable[[], Awaitable[_T]], timeout_s: float, *, tool: str | None = None
    ) -> _T:
        self._in_flight += 1
        self._idle.clear()
        try:
            with anyio.fail_after(max(timeout_s, 0.001)):
                return await request()
        except McpError:
            raise
        except Exception as exc:  # noqa: BLE001 - every SDK and transport failure becomes an McpError
            raise self._errors.translate(_unwrap(exc), what, tool) from None
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()


class _ErrorTranslator:
    """Every SDK and transport failure of one connection as an ``McpError`` naming its server.

    Remote text is clipped; where it may quote URLs or commands that carry secrets, only the
    exception's type is shown.  A failure that ends the connection marks it dead.
    """

    def __init__(self, server: str, nonce: str, mark_dead: Callable[[str | None], None]) -> None:
        self._server = server
        self._nonce = nonce
        self._mark_dead = mark_dead

    def translate(self, exc: BaseException, what: str, tool: str | None) -> McpError:
        server = self._server
        if isinstance(exc, TimeoutError):
            return self.timeout(what, tool=tool)
        if isinstance(exc, MCPError):
            return self._from_rpc_error(exc, what, tool)
        if isinstance(exc, McpError):
            return exc
        if isinstance(exc, _TRANSPORT_ERRORS):
            self._mark_dead(None)
            return McpUnavailable(
                f"MCP server '{server}' is unavailable ({type(exc).__name__}) during {what}",
                server=server,
                tool=tool,
            )
        # Invalid results (pydantic) and anything else the SDK raises; only the type is shown, the text
        # may quote remote data at length.
        return McpProtocolError(
            f"MCP server '{server}' sent an unusable answer for {what} ({type(exc).__name__})",
            server=server,
            tool=tool,
        )

    def timeout(self, what: str, *, tool: str | None = None) -> McpTimeout:
        server = self._server
        return McpTimeout(f"MCP server '{server}' did not answer {what} before the deadline", server=server, tool=tool)

    def unavailable_from(self, failure: BaseException | None) -> McpUnavailable:
        """Why the connection could not open, from the runner's failure."""
        leaf = _unwrap(failure) if failure is not None else None
        if isinstance(leaf, MCPError):
            reason = f"initialize failed: {clip(leaf.message, SERVER_WORDS_CHARS)}"
        elif leaf is not None:
            # Only the type: transport messages may quote URLs or commands that carry secrets.
            reason = f"could not connect ({type(leaf).__name__})"
        else:
            reason = "could not connect"
        return McpUnavailable(f"MCP server '{self._server}' is unavailable: {reason}", server=self._server)

    def _from_rpc_error(self, exc: MCPError, what: str, tool: str | None) -> McpError:
        server = self._server
        words = clip(exc.message, SERVER_WORDS_CHARS)
        report = http_trouble.our_report(exc.data, self._nonce)
        if report is not None and report.get("resendable") is True:
            # Refused unprocessed (a forgotten session) or never sent: the hub may send it again.
            return McpUnavailable(
                f"MCP server '{server}' is unavailable during {what} ({words})",
                server=server,
                tool=tool,
                retryable=True,
            )
        if report is not None and report.get("status") is None:
            return McpUnavailable(
                f"MCP server '{server}' is unavailable: the connection broke during {what} ({words}); it may have run",
                server=server,
                tool=tool,
            )
        # Our report of an HTTP error answer carries the server's own code, which says nothing of our connection.
        if exc.code == _CONNECTION_CLOSED and report is None:
            self._mark_dead(f"the connection closed during {what}")
            return McpUnavailable(
                f"MCP server '{server}' is unavailable: the connection closed during {what}", server=server, tool=tool
            )
        if exc.code == _REQUEST_TIMEOUT:
            return self.timeout(what, tool=tool)
        if exc.code == _INVALID_PARAMS:
            return McpInvalidInput(f"MCP server '{server}' rejected {what}: {words}", server=server, tool=tool)
        return McpProtocolError(f"MCP server '{server}' failed {what}: {words}", server=server, tool=tool)


def _native(result: BaseModel) -> JsonObject:
    """A resources/prompts result in its MCP JSON shape."""
    return shape_native(result.model_dump(mode="json", by_alias=True, exclude_none=True))
