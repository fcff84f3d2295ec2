"""Requests for a cell held by another replica go to that replica (any route under /v1/cells/{id}, and the
MCP facade's ``tasks/*`` requests, whose ``Mcp-Name`` header names the task: a task is a cell).

Runs after the request gate (the caller is authenticated and the body is read within its cap) and
before routing.  The cell id names its holder (service/cluster/identity.py); this replica asks the
store where the holder lives (service/cluster/relay.py) and relays the request and the answer,
streaming, so wait, cancel, status and event streams behave the same from every replica.  A holder
whose heartbeat expired has stopped: its cells answer 404 saying so, unless another replica took the
cell up (the request goes there) or its parked state is kept (a wait takes it up here).
"""

from __future__ import annotations

import asyncio
import contextlib
import re

from starlette.types import ASGIApp, Receive, Scope, Send

from service.cluster.drained import cell_drained
from service.cluster.peers import FORWARDED_HEADER
from service.cluster.relay import CELLS_PATH, ServeHere, held_elsewhere, open_on_holder
from service.cluster.replica import Replica
from service.drain import Drain
from service.errors import ServiceError
from service.outbound_http import StreamedAnswer

from .error_responses import error_response
from .request_gate import BODY_METHODS, MCP_PATH, header_of, replay_body

_ACTION = re.compile(r"^[a-z_]{1,32}$")  # wait, cancel, events: one plain segment after the id
#: The MCP methods whose Mcp-Name header is a task id (the tasks extension), which names its holder.
_TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})


class ReplicaRouting:
    """ASGI middleware: serve this replica's cells, relay the others'."""

    def __init__(self, app: ASGIApp, *, replica: Replica, drain: Drain | None = None) -> None:
        self.app = app
        self.replica = replica
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if path == MCP_PATH and header_of(scope, b"mcp-method") in _TASK_METHODS:
            cell_id = header_of(scope, b"mcp-name") or ""
            holder, target = held_elsewhere(self.replica, cell_id), MCP_PATH
        elif path.startswith(CELLS_PATH):
            cell_id, _, action = path[len(CELLS_PATH) :].partition("/")
            holder = held_elsewhere(self.replica, cell_id)
            # Only a cell route is relayed (the target is rebuilt from checked parts, never the caller's raw path).
            if action and not _ACTION.match(action):
                holder = None
            target = CELLS_PATH + cell_id + (f"/{action}" if action else "")
            if scope.get("query_string"):
                target += "?" + scope["query_string"].decode("latin-1")
        else:
            cell_id, holder = "", None
        fate = self.drain.fates.get(cell_id) if self.drain is not None and cell_id else None
        if fate is not None:  # drained, and about to stop: say so, as peers will
            await error_response(cell_drained(cell_id, self.replica.replica_id, fate))(scope, receive, send)
            return
        if holder is None:
            await self.app(scope, receive, send)
            return
        body = await _body(scope, receive)
        try:
            response = await open_on_holder(
                self.replica,
                holder,
                cell_id,
                scope["method"],
                target,
                scope["headers"],
                body,
                relayed_here=header_of(scope, FORWARDED_HEADER.encode()) is not None,
                may_take_up=target.endswith("/wait"),
            )
        except ServeHere:  # its replica stopped: this one holds the cell now, or takes it up
            await self.app(scope, replay_body(body, receive), send)
            return
        except ServiceError as exc:
            await error_response(exc)(scope, receive, send)
            return
        await _relay(response, receive, send)


async def _body(scope: Scope, receive: Receive) -> bytes:
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


async def _relay(response: StreamedAnswer, receive: Receive, send: Send) -> None:
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
