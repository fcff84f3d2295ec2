"""Requests to peer replicas: the only module of the cluster that speaks HTTP.

A relayed request keeps the caller's method, path, query, body and headers (its Authorization
too: the holder authenticates and authorises the caller itself) and gains ``FORWARDED_HEADER``,
so the holder answers from its own cells and never relays further.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from service.errors import InvalidRequest, ReplicaUnavailable
from service.outbound_http import PeerTransport, StreamedAnswer

FORWARDED_HEADER = "x-codemode-forwarded-by"
# Hop-by-hop headers belong to one connection, not to the request or answer being relayed.
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"content-length",
    }
)
# Peers close idle keep-alive connections after keep_alive_timeout_seconds (5 s by default):
# give ours up sooner so a request is never written to a connection the peer is closing.
_KEEPALIVE_EXPIRY_SECONDS = 2.0


class PeerClient:
    """One connection pool to every peer of this replica."""

    def __init__(self, replica_id: str, read_timeout_seconds: float) -> None:
        self.replica_id = replica_id
        # The holder bounds every answer (a wait by max_timeout_ms); the read timeout is the
        # backstop for a peer whose machine vanished without closing the connection.
        self._transport = PeerTransport(read_timeout_seconds, _KEEPALIVE_EXPIRY_SECONDS)

    async def open(
        self, base_url: str, method: str, target: str, headers: Iterable[tuple[bytes, bytes]], body: bytes, *, what: str
    ) -> StreamedAnswer:
        """Send one request to the peer at ``base_url``; the answer's body is read by the caller.

        ``target`` is the path and query; ``what`` names the cell for error messages.
        """
        sent = [(k, v) for k, v in headers if k.lower() not in _HOP_BY_HOP and k.lower() != FORWARDED_HEADER.encode()]
        sent.append((FORWARDED_HEADER.encode(), self.replica_id.encode()))
        try:
            response = await self._transport.open(method, base_url + target, sent, body)
        except ValueError as exc:
            raise InvalidRequest(f"this request for {what} cannot be passed to the replica holding it: {exc}") from None
        except ConnectionError as exc:
            raise ReplicaUnavailable(
                f"the replica holding {what} does not answer at {base_url} ({exc}); "
                "retry shortly: if it stopped, its cells answer 404 once its heartbeat expires",
                retry_after=1,
            ) from None
        kept = [(k, v) for k, v in response.headers if k.lower() not in _HOP_BY_HOP - {b"content-length"}]
        return dataclasses.replace(response, headers=kept)

    async def close(self) -> None:
        await self._transport.close()
