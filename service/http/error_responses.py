"""Every failure as the one error body: service errors, refused requests, framework refusals, bugs."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

from service.errors import InvalidRequest, NotFound, ServiceError

from .responses import JSONBytes as ORJSONResponse


def error_response(exc: ServiceError) -> ORJSONResponse:
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
    return ORJSONResponse(exc.body(), status_code=exc.status, headers=headers)


def install_error_handlers(app: FastAPI, routes: Sequence[BaseRoute] = ()) -> None:
    """Map every failure to the one error body shape; ``routes`` answer a 405's ``Allow``."""

    async def on_service_error(_: Request, exc: Exception) -> ORJSONResponse:
        assert isinstance(exc, ServiceError)
        return error_response(exc)

    async def on_validation_error(_: Request, exc: Exception) -> ORJSONResponse:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "header")]
        field = ".".join(loc) or "body"
        message = f"{field}: {first.get('msg', 'invalid value')}"
        if field == "body":
            message = "request body must be a JSON object matching the documented schema: " + message
        return error_response(InvalidRequest(message, need_param=field))

    async def on_http_error(request: Request, exc: Exception) -> ORJSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            return error_response(NotFound("no such endpoint; see /docs for the API"))
        if exc.status_code == 405:
            err = InvalidRequest("method not allowed on this endpoint; see /docs")
            err.status = 405
            response = error_response(err)
            response.headers.update(exc.headers or {})  # Allow: the methods that are
            # Starlette names only the first route of the path; a path may have several (GET and DELETE).
            allowed = _allowed_methods(routes, request)
            if allowed:
                response.headers["Allow"] = ", ".join(allowed)
            return response
        # Whatever else the framework refuses is about the request, which a retry does not change.
        err2 = InvalidRequest(f"{exc.detail}; see /docs for the request format")
        err2.status = exc.status_code if 400 <= exc.status_code < 500 else 400
        return error_response(err2)

    async def on_unexpected(_: Request, exc: Exception) -> ORJSONResponse:
        err = ServiceError(
            f"the service failed while handling this request ({type(exc).__name__}: {exc}); "
            "the same request will most likely fail the same way: change it, or report it with the request",
            non_retriable=True,
        )
        return error_response(err)

    app.add_exception_handler(ServiceError, on_service_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)


def _allowed_methods(routes: Sequence[BaseRoute], request: Request) -> list[str]:
    """Every method some route of this path answers."""
    methods: set[str] = set()
    for route in routes:
        match, _ = route.matches(request.scope)
        if match == Match.PARTIAL:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)
