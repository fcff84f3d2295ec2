"""``/v1/monty``: Monty's WebSocket protocol, served by a confined ``monty subprocess`` per connection.

Any ``pydantic_monty.AsyncMontyWebsocket`` (pydantic-ai-harness's ``CodeMode(monty_sandbox=...)``, for one)
dials it: each binary message is one frame of Monty's wire protocol, relayed to a worker started for
this connection alone through the ``codemode-monty`` launcher (service/monty_relay/).  The upgrade
request is admitted like any API request: ``Authorization: Bearer <key>`` (the pool's ``connect_headers``)
names the tenant, without keys only loopback callers whose Host and Origin name this service; the
connection then counts as one of its tenant's running calls (``tenant_max_concurrency``) for as long
as it is open.  A refused upgrade is answered with the usual HTTP error body when the server can
(uvicorn can), else closed with 1008.  Close codes after the upgrade: 1000 the client or worker ended
the session, 1001 idle, 1007 a malformed frame, 1009 a frame over the cap, 1011 the worker failed.
"""

from __future__ import annotations

import contextlib
import logging

from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from service.api.keyed_tools import KeyedTools
from service.auth import KeyRing
from service.errors import MalformedFrame, Overloaded, ServiceError, WorkerGone
from service.monty_relay.child import MontyBinaries, MontyChild
from service.monty_relay.frames import FrameCaps
from service.monty_relay.policy import FunctionPolicy
from service.monty_relay.relay import Receive, RelayBounds, relay
from service.runtime.registry import CellRegistry
from service.settings import ApiKey, Settings

from .error_responses import error_response

MONTY_PATH = "/v1/monty"
NORMAL, GOING_AWAY, POLICY, INVALID_DATA, TOO_BIG, INTERNAL = 1000, 1001, 1008, 1007, 1009, 1011
#: A close frame's reason is at most 123 bytes (RFC 6455 leaves 125 for code and reason).
MAX_REASON_BYTES = 123

log = logging.getLogger("codemode.monty")


def frame_caps(settings: Settings) -> FrameCaps:
    return FrameCaps(
        max_frame_bytes=settings.monty_max_frame_bytes,
        max_values=settings.monty_max_values,
        memory_bytes=settings.memory_limit_bytes,
        max_memory_bytes=settings.max_memory_limit_bytes,
        duration_micros=settings.timeout_ms * 1000,
        max_duration_micros=settings.max_timeout_ms * 1000,
        max_recursion_depth=settings.monty_max_recursion_depth,
    )


class MontyRoute:
    """The endpoint, built with the parts it uses."""

    def __init__(self, settings: Settings, keys: KeyRing, tools: KeyedTools, cells: CellRegistry) -> None:
        self.keys = keys
        self.tools = tools
        self.cells = cells  # a draining replica refuses new connections as it refuses new cells
        self.quotas = cells.quotas
        self.binaries = MontyBinaries.installed()
        self.bounds = RelayBounds(frame_caps(settings), settings.monty_idle_seconds, settings.kill_grace_ms / 1000)

    def route(self) -> WebSocketRoute:
        return WebSocketRoute(MONTY_PATH, self.serve)

    async def serve(self, websocket: WebSocket) -> None:
        with contextlib.ExitStack() as held:
            try:
                key = self._admit(websocket)
                policy = FunctionPolicy(self.tools.policy_for(key))
                held.enter_context(self.quotas.running(key.tenant))  # the connection's whole life
                child = await self._start_child()
            except ServiceError as exc:
                await _refuse(websocket, exc)
                return
            await self._connected(websocket, key, policy, child)

    def _admit(self, websocket: WebSocket) -> ApiKey:
        if self.cells.refuse_new is not None:
            self.cells.refuse_new()  # this replica is draining: the client dials again, another replica answers
        scope = websocket.scope
        self.keys.check_peer(scope.get("client"))
        self.keys.check_addressed(scope.get("headers", ()), scope.get("client"))
        key = self.keys.resolve(websocket.headers.get("authorization"))
        problem = self.binaries.problem()
        if problem is not None:
            raise Overloaded(f"this server cannot start Monty workers: {problem}")
        return key

    async def _start_child(self) -> MontyChild:
        try:
            return await MontyChild.start(self.binaries, self.bounds.caps)
        except OSError as exc:
            raise Overloaded(f"cannot start a Monty worker: {exc}", retry_after=1) from None

    async def _connected(self, websocket: WebSocket, key: ApiKey, policy: FunctionPolicy, child: MontyChild) -> None:
        code, reason = NORMAL, ""
        try:
            await websocket.accept()
            ending = await relay(_receiver(websocket), websocket.send_bytes, child, self.bounds, policy)
            code, reason = (GOING_AWAY if ending.idle else NORMAL), ending.reason
        except MalformedFrame as exc:
            code, reason = (TOO_BIG if exc.too_large else INVALID_DATA), f"malformed_frame: {exc}"
        except WorkerGone as exc:
            code, reason = INTERNAL, f"runtime_unavailable: {exc}"
        except WebSocketDisconnect:
            code = 0  # the client is gone: nothing to send
        finally:
            await child.kill()
        if code != NORMAL:
            log.info("monty connection of tenant %s closed (%s): %s", key.tenant, code, reason)
        if code:
            with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):
                await websocket.close(code, _cut(reason))


def _receiver(websocket: WebSocket) -> Receive:
    async def receive() -> bytes | None:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return None
        data = message.get("bytes")
        if data is None:
            raise MalformedFrame("a text message: Monty's frames are binary messages")
        assert isinstance(data, bytes)
        return data

    return receive


async def _refuse(websocket: WebSocket, exc: ServiceError) -> None:
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(error_response(exc))
    else:
        await websocket.close(POLICY, _cut(f"{exc.code}: {exc}"))


def _cut(reason: str) -> str:
    """``reason`` within a close frame's limit, cut on a character boundary."""
    return reason.encode()[:MAX_REASON_BYTES].decode(errors="ignore")
