"""One connection to one MCP server through the official ``mcp`` SDK (the only importer of ``mcp``).

The SDK's client is an async context manager whose task groups must be entered and left by one
task, so each connection owns a runner task that holds the context open until ``close()``.
Callers from any task then issue requests on the shared session; several may be in flight at once.
Every SDK and transport failure is translated into the ``McpError`` tree here.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Self, TypeVar

import anyio
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from service.outbound_http import TRANSPORT_ERRORS as _HTTP_TRANSPORT_ERRORS
from service.outbound_http import McpHttpTrouble, mcp_http_client
from service.settings_mcp import McpServerConfig

from .arguments import shape_native, shape_tool_result
from .errors import McpError, McpInvalidInput, McpProtocolError, McpTimeout, McpUnavailable

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# JSON-RPC error codes the SDK and transports use.
_CONNECTION_CLOSED = mcp_types.CONNECTION_CLOSED
_REQUEST_TIMEOUT = mcp_types.REQUEST_TIMEOUT
_INTERNAL_ERROR = mcp_types.INTERNAL_ERROR
_INVALID_PARAMS = mcp_types.INVALID_PARAMS
#: Characters of a server's own error text kept in an error message (remote text, bounded).
_SERVER_WORDS_CHARS = 512
#: Where our HTTP trouble reports ride in a JSON-RPC error's `data` (with the connection's nonce).
_TROUBLE_KEY = "codemodeHttpTrouble"
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
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None


class _EofWatch:
    """A read stream that reports end-of-stream, so a dead server is noticed before the next call."""

    def __init__(self, inner: Any, on_eof: Callable[[], None]) -> None:
        self._inner = inner
        self._on_eof = on_eof

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._inner.__aexit__(*exc)

    def __aiter__(self) -> _EofWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_eof()
            raise

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_eof()
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@asynccontextmanager
async def _watched(transport: Any, on_eof: Callable[[], None]) -> AsyncIterator[tuple[Any, Any]]:
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
            raise self._timeout("start") from None
        if self._client is None:
            raise self._unavailable_from(self._failure)
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

    async def _transport(self, stack: AsyncExitStack) -> Any:
        cfg = self.config
        if cfg.command is not None:
            params = StdioServerParameters(command=cfg.command, args=list(cfg.args), env=dict(cfg.env), cwd=cfg.cwd)
            return stdio_client(params, errlog=sys.stderr)
        assert cfg.url is not None
        http = await stack.enter_async_context(mcp_http_client(cfg.url, dict(cfg.headers), self._http_trouble))
        return streamable_http_client(cfg.url, http_client=http)

    def _http_trouble(self, trouble: McpHttpTrouble) -> bytes | None:
        """Judge one HTTP request that got no normal answer; for a POST, the JSON-RPC error the SDK gets.

        A 404 to a request carrying our session, or a 400 whose text names the session, means the
        server forgot the session (it restarted): the request was refused unprocessed.  A request
        that could not connect never left.  Both end this connection (the next request opens a new
        session) and may be resent; a request whose answer broke off may have run.
        """
        words = _server_words(trouble)
        stale = trouble.sent_session and (
            trouble.status == 404 or (trouble.status == 400 and "session" in words.lower())
        )
        not_sent = trouble.failure == "not_sent"
        if stale:
            self.mark_dead(f"the server no longer knows our session ({_clip(words, 200)})")
        elif trouble.failure is not None and trouble.error != "PoolTimeout":  # a full pool is ours, not the server's
            self.mark_dead(f"a request failed ({words})")
        if trouble.method != "POST":
            return None  # the SDK retries its event stream, then gives up; the next request reconnects
        code = _rpc_error(trouble.body).get("code") if "json" in trouble.content_type else None
        report = {"nonce": self._nonce, "resendable": stale or not_sent, "status": trouble.status}
        error = {
            "code": code if type(code) is int else _INTERNAL_ERROR,  # the server's own code where it gave one
            "message": words,
            "data": {_TROUBLE_KEY: report},
        }
        return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()

    # ---- requests --------------------------------------------------------------------------------

    async def call_tool(self, name: str, arguments: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Call one tool; the raw result shaped for the guest (``isError`` resolves)."""
        client = self._session()
        result = await self._call(f"tool '{name}'", lambda: client.call_tool(name, arguments), timeout_s, tool=name)
        return shape_tool_result(result.model_dump(mode="json", by_alias=True, exclude_none=True))

    async def list_resources(self, cursor: str | None, timeout_s: float) -> dict[str, Any]:
        """One page of resources in the MCP shape."""
        client = self._session()
        return self._native(await self._call("resources/list", lambda: client.list_resources(cursor=cursor), timeout_s))

    async def list_resource_templates(self, cursor: str | None, timeout_s: float) -> dict[str, Any]:
        """One page of resource templates in the MCP shape."""
        client = self._session()
        fetch = lambda: client.list_resource_templates(cursor=cursor)
        return self._native(await self._call("resources/templates/list", fetch, timeout_s))

    async def read_resource(self, uri: str, timeout_s: float) -> dict[str, Any]:
        """Read one resource in the MCP shape."""
        client = self._session()
        return self._native(await self._call("resources/read", lambda: client.read_resource(uri), timeout_s))

    async def list_prompts(self, cursor: str | None, timeout_s: float) -> dict[str, Any]:
        """One page of prompts in the MCP shape."""
        client = self._session()
        return self._native(await self._call("prompts/list", lambda: client.list_prompts(cursor=cursor), timeout_s))

    async def get_prompt(self, name: str, arguments: dict[str, str], timeout_s: float) -> dict[str, Any]:
        """Render one prompt in the MCP shape."""
        client = self._session()
        return self._native(await self._call(f"prompt '{name}'", lambda: client.get_prompt(name, arguments), timeout_s))

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

    @staticmethod
    def _native(result: Any) -> dict[str, Any]:
        return shape_native(result.model_dump(mode="json", by_alias=True, exclude_none=True))

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
            raise self._translate(_unwrap(exc), what, tool) from None
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()

    def _translate(self, exc: BaseException, what: str, tool: str | None) -> McpError:
        server = self.config.name
        if isinstance(exc, TimeoutError):
            return self._timeout(what, tool=tool)
        if isinstance(exc, MCPError):
            return self._from_rpc_error(exc, what, tool)
        if isinstance(exc, McpError):
            return exc
        if isinstance(exc, _TRANSPORT_ERRORS):
            self.mark_dead()
            return McpUnavailable(
                f"MCP server '{server}' is unavailable ({type(exc).__name__}) during {what}",
                server=server,
                tool=tool,
            )
        # Invalid results (pydantic), output-schema mismatches (RuntimeError) and anything else the SDK
        # raises; only the type is shown, the text may quote remote data at length.
        return McpProtocolError(
            f"MCP server '{server}' sent an unusable answer for {what} ({type(exc).__name__})",
            server=server,
            tool=tool,
        )

    def _from_rpc_error(self, exc: MCPError, what: str, tool: str | None) -> McpError:
        server = self.config.name
        words = _clip(exc.message, _SERVER_WORDS_CHARS)
        found = exc.data.get(_TROUBLE_KEY) if isinstance(exc.data, dict) else None
        report = found if isinstance(found, dict) and found.get("nonce") == self._nonce else None
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
            self.mark_dead(f"the connection closed during {what}")
            return McpUnavailable(
                f"MCP server '{server}' is unavailable: the connection closed during {what}", server=server, tool=tool
            )
        if exc.code == _REQUEST_TIMEOUT:
            return self._timeout(what, tool=tool)
        if exc.code == _INVALID_PARAMS:
            return McpInvalidInput(f"MCP server '{server}' rejected {what}: {words}", server=server, tool=tool)
        return McpProtocolError(f"MCP server '{server}' failed {what}: {words}", server=server, tool=tool)

    def _timeout(self, what: str, *, tool: str | None = None) -> McpTimeout:
        server = self.config.name
        return McpTimeout(f"MCP server '{server}' did not answer {what} before the deadline", server=server, tool=tool)

    def _unavailable_from(self, failure: BaseException | None) -> McpUnavailable:
        server = self.config.name
        leaf = _unwrap(failure) if failure is not None else None
        if isinstance(leaf, MCPError):
            reason = f"initialize failed: {_clip(leaf.message, _SERVER_WORDS_CHARS)}"
        elif leaf is not None:
            # Only the type: transport messages may quote URLs or commands that carry secrets.
            reason = f"could not connect ({type(leaf).__name__})"
        else:
            reason = "could not connect"
        return McpUnavailable(f"MCP server '{server}' is unavailable: {reason}", server=server)


def _clip(text: str, limit: int) -> str:
    """Remote text on one line, at most ``limit`` characters (an ellipsis marks a cut)."""
    line = " ".join(text[: limit * 4].split())
    return line if len(line) <= limit else line[:limit] + "\u2026"


def _rpc_error(body: bytes) -> dict[str, Any]:
    """The ``error`` object of a JSON-RPC error body (or a bare ``{code?, message}``), else ``{}``."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    found = parsed.get("error", parsed) if isinstance(parsed, dict) else None
    return found if isinstance(found, dict) else {}


def _server_words(trouble: McpHttpTrouble) -> str:
    """What went wrong in the server's own words where it gave any: ``HTTP 400: Bad Request: …``."""
    if trouble.status is None:
        return f"{'never sent' if trouble.failure == 'not_sent' else 'no answer'}: {trouble.error}"
    text = ""
    if "json" in trouble.content_type:
        message = _rpc_error(trouble.body).get("message")
        text = message if isinstance(message, str) else ""
    if not text and trouble.content_type.startswith(("text/", "application/json")):
        text = trouble.body.decode("utf-8", "replace")
    text = _clip(text, _SERVER_WORDS_CHARS)
    return f"HTTP {trouble.status}" + (f": {text}" if text else "")
