"""Requests for a cell held by another replica go to that replica (any route under /v1/cells/{id}).

Runs after the request gate (the caller is authenticated and the body is read within its cap) and
before routing.  The cell id names its holder (service/cluster/identity.py); this replica asks the
store where the holder lives and relays the request and the answer, streaming, so wait, cancel,
status and event streams behave the same from every replica.  A holder whose heartbeat expired has
stopped: its cells answer 404 saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any

from service.cluster.identity import holder_of
from service.cluster.peers import FORWARDED_HEADER
from service.cluster.replica import Replica
from service.errors import CellNotFound, ServiceError, StoreUnavailable
from service.outbound_http import StreamedAnswer
from service.stores.errors import StoreError

from .error_responses import error_response
from .request_gate import BODY_METHODS

Scope = dict[str, Any]
_CELLS = "/v1/cells/"
_ACTION = re.compile(r"^[a-z_]{1,32}$")  # wait, cancel, events: one plain segment after the id


class ReplicaRouting:
    """ASGI middleware: serve this replica's cells, relay the others'."""

    def __init__(self, app: Any, *, replica: Replica) -> None:
        self.app = app
        self.replica = replica

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        replica = self.replica
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(_CELLS):
            await self.app(scope, receive, send)
            return
        cell_id, _, action = path[len(_CELLS) :].partition("/")
        holder = holder_of(cell_id)
        # Only a cell route is relayed (the target is rebuilt from checked parts, never the caller's raw path).
        if holder is None or holder == replica.replica_id or (action and not _ACTION.match(action)):
            await self.app(scope, receive, send)
            return
        try:
            response = await self._open(replica, holder, cell_id, action, scope, receive)
        except ServiceError as exc:
            await error_response(exc)(scope, receive, send)
            return
        await _relay(response, receive, send)

    async def _open(
        self, replica: Replica, holder: str, cell_id: str, action: str, scope: Scope, receive: Any
    ) -> StreamedAnswer:
        what = f"cell {cell_id}"
        if _header(scope, FORWARDED_HEADER.encode()) is not None:
            # Relayed here by a peer, yet held elsewhere: the holder's address now names another process.
            raise CellNotFound(
                f"{what} is unknown here: the replica that ran it ({holder}) no longer answers at this address "
                f"(this is replica {replica.replica_id}: the holder stopped and this one took its address, or "
                "its advertise_url names something other than the replica itself); start a new cell"
            )
        try:
            url = await replica.membership.peer_url(holder)
        except StoreError as exc:
            raise StoreUnavailable(
                f"the shared store that says which replica holds {what} is unavailable: {exc}; retry shortly",
                retry_after=1,
            ) from None
        if url is None:
            raise CellNotFound(
                f"{what} is unknown: the replica that ran it ({holder}) stopped (its heartbeat is gone: it shut "
                f"down or was silent for {replica.ttl_seconds} s), and the cell's state was lost with it; "
                "start a new cell"
            )
        body = await _body(scope, receive)
        target = _CELLS + cell_id + (f"/{action}" if action else "")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        try:
            return await replica.peers.open(url, scope["method"], target, scope["headers"], body, what=what)
        except ServiceError:
            replica.membership.forget_peer(holder)
            raise


async def _body(scope: Scope, receive: Any) -> bytes:
    """The body the gate read and replays (only requests that may carry one)."""
    if scope["method"] not in BODY_METHODS:
        return b""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _relay(response: StreamedAnswer, receive: Any, send: Any) -> None:
    """Pass the holder's answer on as it arrives; stop when either side goes away."""

    async def pump() -> None:
        await send({"type": "http.response.start", "status": response.status, "headers": response.headers})
        async for chunk in response.chunks():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def caller_left() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    pumping = asyncio.ensure_future(pump())
    watching = asyncio.ensure_future(caller_left())
    try:
        await asyncio.wait({pumping, watching}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watching.cancel()
        if not pumping.done():
            pumping.cancel()  # the caller left: stop reading an answer nobody takes
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        try:
            await pumping
        except asyncio.CancelledError:
            pass
        finally:
            await response.close()


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")  # type: ignore[no-any-return]
    return None
