"""Every failure as the one error body: service errors, refused requests, framework refusals, bugs.

One handler function per kind of exception, in one table (``ERROR_HANDLERS``): installed as the framework's
exception handlers, and looked up by ``answer_failure`` for the cell routes' plain ASGI app.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import BaseRoute, Match

from service.errors import InvalidRequest, MethodNotAllowed, NotFound, ServiceError, StoreUnavailable
from service.stores.errors import StoreError

from .responses import JSONBytes

log = logging.getLogger("codemode")
#: Characters of a request path an unexpected failure's log line keeps.
LOGGED_PATH_CHARS = 200


def error_response(exc: ServiceError, status: int | None = None) -> JSONBytes:
    """The error body of ``exc``, with its class's status (or ``status``: a framework refusal's own)."""
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
    return JSONBytes(exc.body(), status_code=status or exc.status, headers=headers)


async def on_service_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServiceError)
    return error_response(exc)


async def on_store_error(_: Request, exc: Exception) -> Response:
    """A session or results store that fails a route's read or write: 503, retry shortly."""
    assert isinstance(exc, StoreError)
    return error_response(StoreUnavailable(f"session store unavailable: {exc}; retry shortly", retry_after=1))


async def on_validation_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "header")]
    field = ".".join(loc) or "body"
    message = f"{field}: {first.get('msg', 'invalid value')}"
    if field == "body":
        message = "request body must be a JSON object matching the documented schema: " + message
    return error_response(InvalidRequest(message, need_param=field))


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404:
        return error_response(NotFound("no such endpoint; see /docs for the API"))
    if exc.status_code == 405:
        response = error_response(MethodNotAllowed("method not allowed on this endpoint; see /docs"))
        response.headers.update(exc.headers or {})  # Allow: the methods that are
        # Starlette names only the first route of the path; a path may have several (GET and DELETE).
        allowed = _allowed_methods(request.app.state.method_routes, request)
        if allowed:
            response.headers["Allow"] = ", ".join(allowed)
        return response
    # Whatever else the framework refuses is about the request, which a retry does not change.
    status = exc.status_code if 400 <= exc.status_code < 500 else 400
    return error_response(InvalidRequest(f"{exc.detail}; see /docs for the request format"), status)


async def on_unexpected(request: Request, exc: Exception) -> Response:
    """A bug: the caller learns that it is one and where the operator finds it, never the exception's
    text (it may hold paths, configuration or another tenant's data)."""
    incident = secrets.token_hex(6)
    path = request.url.path[:LOGGED_PATH_CHARS]
    log.error("unexpected failure (incident %s) in %s %s", incident, request.method, path, exc_info=exc)
    err = ServiceError(
        f"the service failed while handling this request (incident {incident} in the service's log); "
        "the same request will most likely fail the same way: change it, or report it with the incident",
        non_retriable=True,
    )
    return error_response(err)


ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]
#: Each exception kind and the handler that answers it (the most specific class wins).
ERROR_HANDLERS: dict[type[Exception], ErrorHandler] = {
    ServiceError: on_service_error,
    StoreError: on_store_error,
    RequestValidationError: on_validation_error,
    StarletteHTTPException: on_http_error,
    Exception: on_unexpected,
}


async def answer_failure(request: Request, exc: Exception) -> Response:
    """The answer to ``exc`` raised where no framework handler sees it (``cell_app.CellApp``): the table's
    handler of its class or of the nearest class it derives from (the table ends with ``Exception``)."""
    handler = next(ERROR_HANDLERS[kind] for kind in type(exc).__mro__ if kind in ERROR_HANDLERS)
    return await handler(request, exc)


def install_error_handlers(app: FastAPI, routes: Sequence[BaseRoute]) -> None:
    """Map every failure to the one error body shape; ``routes`` answer a 405's ``Allow``."""
    # Kept as given: the app's own list holds FastAPI's included routers, which match no path themselves.
    app.state.method_routes = tuple(routes)
    for kind, handler in ERROR_HANDLERS.items():
        app.add_exception_handler(kind, handler)


def _allowed_methods(routes: Sequence[BaseRoute], request: Request) -> list[str]:
    """Every method some route of this path answers."""
    methods: set[str] = set()
    for route in routes:
        match, _ = route.matches(request.scope)
        if match == Match.PARTIAL:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)
