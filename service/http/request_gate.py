"""The door every HTTP request passes before routing: who calls, then how much they send.

Order matters: the peer is checked first (no keys: loopback only, and only requests whose Host and
Origin name this service, on every route, /mcp included), then the API key from the headers, and
only then is the body read (up to its cap), its JSON values counted (413 over
``max_request_values``, before anything is parsed) and decoded.  An unauthenticated caller
therefore never makes the service read, let alone parse, its body.  Routes get the resolved key
and the decoded JSON from the scope (``GatedRoute``), so nothing is parsed twice.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated

from fastapi import Depends, Request, Response
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.auth import KeyRing
from service.errors import BodyTooLarge, ServiceError
from service.settings import ApiKey

from .body_limits import BodyCaps, declared_length, read_body, too_large_message
from .error_responses import error_response
from .request_json import BodyDecoder

API_KEY_SCOPE = "codemode.api_key"
#: The gate's key ring, for a route outside /v1 that asks for a key after all (``api_key_of``).
KEY_RING_SCOPE = "codemode.key_ring"
JSON_SCOPE = "codemode.json"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The MCP facade: authenticated and capped here like /v1, but its JSON-RPC body is the SDK's to parse.
MCP_PATH = "/mcp"


class RequestGate:
    """ASGI middleware: peer check, authentication, body cap and JSON decoding, in that order."""

    def __init__(
        self, app: ASGIApp, *, keys: KeyRing, caps: BodyCaps, decoder: BodyDecoder, metrics_require_key: bool
    ) -> None:
        self.app = app
        self.keys = keys
        self.caps = caps
        self.decoder = decoder
        self.metrics_require_key = metrics_require_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            replay = await self.admit(scope, receive)
        except ServiceError as exc:
            await error_response(exc)(scope, receive, send)
            return
        except PeerGone:
            return  # nobody is left to answer
        await self.app(scope, replay or receive, send)

    async def admit(self, scope: Scope, receive: Receive) -> Receive | None:
        """Check the request; return a ``receive`` that replays the body read here (or None).

        Refusals raise ``ServiceError`` (answered with its error body), ``PeerGone`` when nobody is left."""
        scope[KEY_RING_SCOPE] = self.keys
        self.keys.check_peer(scope.get("client"))
        self.keys.check_addressed(scope.get("headers", ()), scope.get("client"))
        path: str = scope["path"]
        key = None
        if path.startswith("/v1/") or path == MCP_PATH or (path == "/metrics" and self.metrics_require_key):
            key = scope[API_KEY_SCOPE] = self.keys.resolve(header_of(scope, b"authorization"))
        if scope["method"] not in BODY_METHODS:
            return None
        cap = self.caps.cap_for(path)
        length = declared_length(scope.get("headers", ()))
        if length is not None and length > cap:
            raise BodyTooLarge(too_large_message(cap))
        body, disconnect = await read_body(receive, cap)
        if disconnect is not None:
            raise PeerGone
        # A large body goes to a helper process of the caller's principal (the key's).
        if key is not None and path == MCP_PATH:
            await self.decoder.check_mcp_body(body, key)
        elif body and _is_json(header_of(scope, b"content-type")):
            scope[JSON_SCOPE] = await self.decoder.decode(
                body, key, tool_values_raw=path.endswith("/wait"), max_values=self.caps.values_cap_for(path)
            )
        return replay_body(body, receive)


# Not a ServiceError: a control-flow signal that stops reading a body nobody waits for any more;
# there is nobody to answer.
class PeerGone(Exception):
    """The peer disconnected before its body was complete."""


def replay_body(body: bytes, receive: Receive) -> Receive:
    """``receive`` that gives ``body`` (read already) first, then what the connection says (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def header_of(scope: Scope, name: bytes) -> str | None:
    """The request header ``name`` (lower case), or None."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")  # type: ignore[no-any-return]
    return None


def _is_json(content_type: str | None) -> bool:
    """What FastAPI parses as JSON: ``application/json`` or ``application/*+json``."""
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def api_key_of(request: Request) -> ApiKey:
    """The key the gate resolved for this request."""
    key: ApiKey | None = request.scope.get(API_KEY_SCOPE)
    if key is None:  # a route outside /v1 asking for a key: resolve it the same way
        keys: KeyRing = request.scope[KEY_RING_SCOPE]
        key = keys.resolve(request.headers.get("authorization"))
    return key


async def caller(request: Request) -> ApiKey:
    # async: a plain def dependency would hop through the thread pool on every request
    return api_key_of(request)


#: A route parameter that is the caller's API key (resolved by the gate before the body was read).
CallerDep = Annotated[ApiKey, Depends(caller)]


class _GatedRequest(Request):
    async def json(self) -> object:
        # The gate's decoding: JSON, with each wait's tool result values kept as raw JSON (RawJson).
        if JSON_SCOPE in self.scope:
            decoded: object = self.scope[JSON_SCOPE]
            return decoded
        parsed: object = await super().json()
        return parsed


class GatedRoute(APIRoute):
    """Routes whose handlers read the JSON the gate already decoded (FastAPI's documented way to give a
    route its own request class: a route class whose ``get_route_handler`` wraps the request)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[None, None, Response]]:
        handler = super().get_route_handler()

        async def gated(request: Request) -> Response:
            # Same scope and body; only json() differs. The response is sent by the framework's own
            # channel, so the request needs no send.
            return await handler(_GatedRequest(request.scope, request.receive))

        return gated
