"""Outbound HTTP, to peer replicas and to MCP servers: the one module that imports httpx2.

Relayed requests fail as built-in errors, ``ValueError`` (the request cannot be built) and
``ConnectionError`` (nothing answered, or the answer broke off); the MCP SDK raises httpx2's own
errors from inside its transport, which its caller recognises with ``TRANSPORT_ERRORS``.  Neither
kind of client follows redirects on its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

import httpx2

#: Failures of the connection itself: nothing answered, or the answer broke off.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (httpx2.TransportError,)


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


def mcp_http_client(headers: dict[str, str]) -> httpx2.AsyncClient:
    """The client under one MCP server's streamable-HTTP transport (entered by the caller).

    The timeouts are the ones the SDK gives the client it would build itself: 30 s to connect, write
    or wait for a pooled connection, 300 s between reads because a server may hold an event stream
    open; every request also runs under its own deadline.  Redirects stay off: the transport follows
    them itself, and only within the endpoint's origin.
    """
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0), follow_redirects=False)
