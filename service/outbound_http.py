"""Outbound HTTP, to peer replicas and to MCP servers: the one module that imports httpx2.

Relayed requests fail as built-in errors, ``ValueError`` (the request cannot be built) and
``ConnectionError`` (nothing answered, or the answer broke off); the MCP SDK raises httpx2's own
errors from inside its transport, which its caller recognises with ``TRANSPORT_ERRORS``.  Neither
kind of client follows redirects on its own.

Under an MCP client every request that gets no normal answer (an HTTP error status, or no answer
at all) is shown to the client's ``on_trouble`` as an ``McpHttpTrouble`` first; what it returns
replaces the answer.  So the MCP client can tell, request by request, a forgotten session or a
request that never left from one that may have run, and keep the server's own words, which the
SDK would otherwise drop.
"""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx2

#: Failures of the connection itself: nothing answered, or the answer broke off.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (httpx2.TransportError,)
#: Failures before a request left: resending it cannot run anything twice.
_NOT_SENT: tuple[type[BaseException], ...] = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)
#: Bytes of an error answer's body kept for its message; the rest is never read.
ERROR_BODY_BYTES = 4096


@dataclass
class StreamedAnswer:
    """An answer whose body is still arriving (an event stream may go on for long); close it when done."""

    status: int
    headers: list[tuple[bytes, bytes]]
    _response: httpx2.Response

    async def chunks(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.aiter_raw():
            yield chunk

    async def close(self) -> None:
        await self._response.aclose()


class PeerTransport:
    """One pool of keep-alive connections to peer replicas, for relaying requests as they came."""

    def __init__(self, read_timeout_seconds: float, keepalive_expiry_seconds: float) -> None:
        self._client = httpx2.AsyncClient(
            timeout=httpx2.Timeout(connect=2.0, read=read_timeout_seconds, write=30.0, pool=5.0),
            limits=httpx2.Limits(
                max_connections=None, max_keepalive_connections=64, keepalive_expiry=keepalive_expiry_seconds
            ),
            follow_redirects=False,
            trust_env=False,  # a proxy from the environment must not sit between replicas
        )

    async def open(self, method: str, url: str, headers: Iterable[tuple[bytes, bytes]], body: bytes) -> StreamedAnswer:
        """Send one request; the body of the answer is read by the caller, who closes it."""
        try:
            request = self._client.build_request(method, url, headers=list(headers), content=body)
        except httpx2.InvalidURL as exc:
            raise ValueError(str(exc)) from None
        try:
            response = await self._client.send(request, stream=True)
        except httpx2.TransportError as exc:
            raise ConnectionError(f"{type(exc).__name__}: {exc}") from None
        return StreamedAnswer(response.status_code, list(response.headers.raw), response)

    async def close(self) -> None:
        await self._client.aclose()


@dataclass(frozen=True)
class McpHttpTrouble:
    """One MCP request that got an HTTP error status (``status``) or no answer at all (``failure``)."""

    method: str
    sent_session: bool  # the request carried an Mcp-Session-Id
    status: int | None = None
    content_type: str = ""
    body: bytes = b""  # the first ERROR_BODY_BYTES of the answer (none when it is compressed)
    failure: str | None = None  # "not_sent": it never left; "broken": it left, the answer never came
    error: str = ""  # the transport error's type name


#: Shown each trouble; returns the JSON body of the answer the SDK gets instead, or None for the original.
TroubleHandler = Callable[[McpHttpTrouble], bytes | None]


class _WatchedTransport(httpx2.AsyncBaseTransport):
    """A connection pool whose troubled answers ``on_trouble`` sees and may replace (status 502 if none came)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, on_trouble: TroubleHandler) -> None:
        self._inner = inner
        self._on_trouble = on_trouble

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        sent_session = "mcp-session-id" in request.headers
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            failure = "not_sent" if isinstance(exc, _NOT_SENT) else "broken"
            replacement = self._on_trouble(
                McpHttpTrouble(request.method, sent_session, failure=failure, error=type(exc).__name__)
            )
            if replacement is None:
                raise
            return _json_answer(502, replacement)
        if response.status_code < 400:
            return response
        content_type = response.headers.get("content-type", "")
        body = await _head(response)
        trouble = McpHttpTrouble(request.method, sent_session, response.status_code, content_type, body)
        replacement = self._on_trouble(trouble)
        if replacement is not None:
            return _json_answer(response.status_code, replacement)
        return httpx2.Response(response.status_code, headers=[("content-type", content_type)], content=body)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _head(response: httpx2.Response) -> bytes:
    """At most ERROR_BODY_BYTES of an answer's body, then the answer is closed (the rest never read)."""
    try:
        if response.headers.get("content-encoding", "identity").lower() != "identity":
            return b""  # a compressed error body is not worth a decompressor
        head = bytearray()
        async for chunk in response.aiter_raw():
            head += chunk[: ERROR_BODY_BYTES - len(head)]
            if len(head) >= ERROR_BODY_BYTES:
                break
        return bytes(head)
    except httpx2.TransportError:
        return b""
    finally:
        await response.aclose()


def _json_answer(status: int, body: bytes) -> httpx2.Response:
    return httpx2.Response(status, headers=[("content-type", "application/json")], content=body)


def _environment_proxy(url: str) -> str | None:
    """The proxy the environment (``HTTPS_PROXY``, ``NO_PROXY``, …) names for ``url``, as a client would use."""
    parts = urlsplit(url)
    if parts.hostname is None or urllib.request.proxy_bypass(parts.hostname):
        return None
    proxies = urllib.request.getproxies_environment()
    return proxies.get(parts.scheme) or proxies.get("all")


def mcp_http_client(url: str, headers: dict[str, str], on_trouble: TroubleHandler) -> httpx2.AsyncClient:
    """The client under the streamable-HTTP transport to the MCP server at ``url`` (entered by the caller).

    The timeouts are the ones the SDK gives the client it would build itself: 30 s to connect, write
    or wait for a pooled connection, 300 s between reads because a server may hold an event stream
    open; every request also runs under its own deadline.  Redirects stay off: the transport follows
    them itself, and only within the endpoint's origin.  A proxy from the environment is used as a
    default client would use it.
    """
    pool = httpx2.AsyncHTTPTransport(proxy=_environment_proxy(url))
    return httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(30.0, read=300.0),
        follow_redirects=False,
        transport=_WatchedTransport(pool, on_trouble),
    )
