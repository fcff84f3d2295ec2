"""Requests to peer replicas: the only module of the cluster that speaks HTTP (httpx2).

A relayed request keeps the caller's method, path, query, body and headers (its Authorization
too: the holder authenticates and authorises the caller itself) and gains ``FORWARDED_HEADER``,
so the holder answers from its own cells and never relays further.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

import httpx2

from service.errors import InvalidRequest, ReplicaUnavailable

FORWARDED_HEADER = "x-codemode-forwarded-by"
# Hop-by-hop headers belong to one connection, not to the request or answer being relayed.
_HOP_BY_HOP = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te", b"trailer",
    b"transfer-encoding", b"upgrade", b"host", b"content-length",
})
# Peers close idle keep-alive connections after keep_alive_timeout_seconds (5 s by default):
# give ours up sooner so a request is never written to a connection the peer is closing.
_KEEPALIVE_EXPIRY_SECONDS = 2.0


@dataclass
class PeerResponse:
    """A peer's answer whose body is still arriving (an event stream may go on for long)."""

    status: int
    headers: list[tuple[bytes, bytes]]
    _response: httpx2.Response

    async def chunks(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.aiter_raw():
            yield chunk

    async def close(self) -> None:
        await self._response.aclose()


class PeerClient:
    """One connection pool to every peer of this replica."""

    def __init__(self, replica_id: str, read_timeout_seconds: float) -> None:
        self.replica_id = replica_id
        self._client = httpx2.AsyncClient(
            # The holder bounds every answer (a wait by max_timeout_ms); the read timeout is the
            # backstop for a peer whose machine vanished without closing the connection.
            timeout=httpx2.Timeout(connect=2.0, read=read_timeout_seconds, write=30.0, pool=5.0),
            limits=httpx2.Limits(max_connections=None, max_keepalive_connections=64,
                                 keepalive_expiry=_KEEPALIVE_EXPIRY_SECONDS),
            follow_redirects=False,
            trust_env=False,  # a proxy from the environment must not sit between replicas
        )

    async def open(self, base_url: str, method: str, target: str, headers: Iterable[tuple[bytes, bytes]],
                   body: bytes, *, what: str) -> PeerResponse:
        """Send one request to the peer at ``base_url``; the answer's body is read by the caller.

        ``target`` is the path and query; ``what`` names the cell for error messages.
        """
        sent = [(k, v) for k, v in headers if k.lower() not in _HOP_BY_HOP and k.lower() != FORWARDED_HEADER.encode()]
        sent.append((FORWARDED_HEADER.encode(), self.replica_id.encode()))
        try:
            request = self._client.build_request(method, base_url + target, headers=sent, content=body)
        except httpx2.InvalidURL as exc:
            raise InvalidRequest(f"this request for {what} cannot be passed to the replica holding it: {exc}") from None
        try:
            response = await self._client.send(request, stream=True)
        except httpx2.TransportError as exc:
            raise ReplicaUnavailable(
                f"the replica holding {what} does not answer at {base_url} ({type(exc).__name__}: {exc}); "
                "retry shortly: if it stopped, its cells answer 404 once its heartbeat expires",
                retry_after=1,
            ) from None
        kept = [(k, v) for k, v in response.headers.raw if k.lower() not in _HOP_BY_HOP - {b"content-length"}]
        return PeerResponse(response.status_code, kept, response)

    async def close(self) -> None:
        await self._client.aclose()
