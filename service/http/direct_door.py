"""The direct door: a request for one of the app's leading direct routes skips the middleware that passes it on.

Every request walks FastAPI's middleware stack: ServerErrorMiddleware, FastAPI's telemetry and body
limit layers, the request gate, ExceptionMiddleware, an AsyncExitStack, the router, the route's
wrapper; each layer is one more coroutine frame on every resume and most make objects per request.
For a direct route (``DirectRoute``) only three of them do anything: the gate, the exception
handlers and the 500 handler.  ``DirectDoor`` serves such a request with exactly those: the app's
own ``RequestGate`` instance, its exception handler table looked up the way ExceptionMiddleware does
(most specific class first, a handled exception's traceback dropped), and its 500 handler applied the
way ServerErrorMiddleware does (answer unless the response started, then raise for the server to
log).  The response's start and body messages are sent as ``Response.__call__`` sends them.

Only requests a direct route fully matches take the door, and only routes before the first route
that is not direct (so no other route could have matched first); a request the endpoint does not
bind (the framework's 422, FastAPI's telemetry watching) goes on to the whole stack with its body
replayed and the gate's verdict kept, so every refusal is still the framework's.  The door stays
shut for an app whose stack holds anything else (another middleware, a body limit, debug pages, a
root path, FastAPI's telemetry on): those requests walk the stack as before.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import Receive, Scope, Send

from service.errors import ServiceError

from .direct_routes import FASTAPI_TELEMETRY_SCOPE, DirectRoute
from .error_responses import error_response
from .request_gate import ADMITTED_SCOPE, PeerGone, RequestGate

Handler = Callable[[Request, Exception], Awaitable[Response | None]]
#: How deep the gate may sit in the middleware stack (ServerErrorMiddleware, telemetry, body limit, gate).
GATE_DEPTH = 4


class _Switch(Protocol):
    def enabled(self) -> bool: ...


def with_door(app: FastAPI) -> DoorApp:
    """``app`` itself, its direct routes served through a ``DirectDoor`` (opened at its first request,
    once its middleware stack is built).

    The app's class is changed in place: the offline docs package makes plain ``FastAPI`` apps, and the
    served app is that very object (embedders and tests hold it)."""
    app.__class__ = DoorApp
    assert isinstance(app, DoorApp)
    app.door = DirectDoor(app)
    return app


class DoorApp(FastAPI):
    """A FastAPI app whose leading direct routes are served through its ``door``."""

    door: DirectDoor | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        door = self.door
        if door is not None and scope["type"] == "http":
            matched = door.match(scope)
            if matched is not None:
                await door.serve(scope, receive, send, matched, super().__call__)
                return
        await super().__call__(scope, receive, send)


class DirectDoor:
    """Serves the requests of one app's leading direct routes with its gate and error handlers only."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._opened = False
        self.gate: RequestGate | None = None
        self.routes: tuple[tuple[str, DirectRoute], ...] = ()
        self.handlers: dict[Any, Handler] = {}
        self.status_handlers: dict[int, Handler] = {}
        self.on_error: Handler | None = None
        self.framework_telemetry: _Switch | None = (
            None  # FastAPI's own, asked per request (it may be switched on later)
        )

    def match(self, scope: Scope) -> tuple[DirectRoute, Scope] | None:
        """The direct route that fully matches the request, with its child scope (None: the stack serves it)."""
        if not self._opened:
            self._open()
        if self.gate is None or MAX_BODY_SIZE_SCOPE_KEY in scope or scope.get("root_path"):
            return None
        if FASTAPI_TELEMETRY_SCOPE in scope or (
            self.framework_telemetry is not None and self.framework_telemetry.enabled()
        ):
            return None
        path: str = scope["path"]
        for prefix, route in self.routes:
            if path.startswith(prefix):
                match, child = route.matches(scope)
                if match is Match.FULL:
                    return route, child
        return None

    def _open(self) -> None:
        """Open the door if the app's stack is the one it stands in for (decided once)."""
        app = self.app
        self._opened = True
        if app.middleware_stack is None:
            app.middleware_stack = app.build_middleware_stack()
        middleware: list[object] = [m.cls for m in app.user_middleware]
        handlers = dict(app.exception_handlers)
        on_error = handlers.pop(500, None) or handlers.pop(Exception, None)
        fits = (
            middleware == [RequestGate]
            and app.max_body_size is None
            and not app.debug
            and not app.root_path
            and on_error is not None
            and HTTPException in handlers
            and all(inspect.iscoroutinefunction(h) for h in [on_error, *handlers.values()])
        )
        gate = _gate_in(app.middleware_stack)
        # FastAPI keeps its telemetry switch on a private attribute; a release without it keeps the door shut.
        telemetry = getattr(app, "_native_telemetry", None)
        if not fits or gate is None or not callable(getattr(telemetry, "enabled", None)):
            return
        self.framework_telemetry = telemetry
        self.gate = gate
        self.on_error = on_error
        self.status_handlers = {k: v for k, v in handlers.items() if isinstance(k, int)}
        self.handlers = {k: v for k, v in handlers.items() if not isinstance(k, int)}
        self.routes = tuple((_literal_prefix(route.path_format), route) for route in _leading_direct(app.router.routes))

    async def serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        matched: tuple[DirectRoute, Scope],
        framework: Callable[[Scope, Receive, Send], Awaitable[None]],
    ) -> None:
        scope["app"] = self.app
        scope.setdefault("router", self.app.router)
        replay = await self._served(scope, receive, send, matched)
        if replay is not None:  # the endpoint did not take it: the whole stack answers, gate passed
            scope[ADMITTED_SCOPE] = True
            await framework(scope, replay, send)

    async def _served(
        self, scope: Scope, receive: Receive, send: Send, matched: tuple[DirectRoute, Scope]
    ) -> Receive | None:
        """Answer the request (None), or return the ``receive`` the framework must serve it with."""
        assert self.gate is not None and self.on_error is not None
        started = False
        try:  # ServerErrorMiddleware's part: the gate and everything inside it
            try:
                replay = await self.gate.admit(scope, receive)
            except ServiceError as exc:
                started = True
                await _send_response(error_response(exc), scope, receive, send)
                return None
            except PeerGone:
                return None
            receive = replay or receive
            route, child = matched
            scope.update(child)
            direct = route.direct
            request = Request(scope, receive, send)
            arguments = direct.binder.bind(request)
            if arguments is None:
                return receive
            try:  # ExceptionMiddleware's part: the endpoint and its response
                response = await direct.endpoint(**arguments)
                started = True
                await _send_response(response, scope, receive, send)
            except Exception as exc:
                handler = self._handler_for(exc)
                if handler is None:
                    raise
                if started:
                    raise RuntimeError("Caught handled exception, but response already started.") from exc
                answer = await handler(Request(scope, receive, send), exc)
                if answer is not None:
                    started = True
                    await _send_response(answer, scope, receive, send)
                exc.__traceback__ = None  # a reused exception instance would grow its traceback
        except Exception as exc:
            answer = await self.on_error(Request(scope), exc)
            if not started and answer is not None:
                await _send_response(answer, scope, receive, send)
            raise
        return None

    def _handler_for(self, exc: Exception) -> Handler | None:
        if isinstance(exc, HTTPException):
            handler = self.status_handlers.get(exc.status_code)
            if handler is not None:
                return handler
        for cls in type(exc).__mro__:
            found = self.handlers.get(cls)
            if found is not None:
                return found
        return None


async def _send_response(response: Response, scope: Scope, receive: Receive, send: Send) -> None:
    """What ``Response.__call__`` sends (a response class of its own sends itself)."""
    if type(response).__call__ is not Response.__call__:
        await response(scope, receive, send)
        return
    await send({"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers})
    await send({"type": "http.response.body", "body": response.body})
    if response.background is not None:
        await response.background()


def _gate_in(stack: object) -> RequestGate | None:
    """The request gate instance of a built middleware stack (it sits under the framework's outer layers)."""
    layer = stack
    for _ in range(GATE_DEPTH):
        layer = getattr(layer, "app", None)
        if isinstance(layer, RequestGate):
            return layer
    return None


def _leading_direct(routes: Sequence[object]) -> list[DirectRoute]:
    """The direct routes before the first route that is not one: no other route can match their requests first."""
    leading: list[DirectRoute] = []
    for route in routes:
        if not isinstance(route, DirectRoute):
            break
        leading.append(route)
    return leading


def _literal_prefix(path_format: str) -> str:
    """The part of a route's path before its first parameter: a request path without it cannot match."""
    return path_format.split("{", 1)[0]
