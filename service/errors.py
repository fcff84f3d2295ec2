"""Service failures (not cell outcomes) and the only table that knows HTTP status codes.

ServiceError                      base: ``code``, ``error_type``, ``status``
 ├── InvalidRequest               422: a request field is wrong (``need_param`` names it)
 ├── Unauthorized                 401: no or unknown API key
 ├── Forbidden                    403: the key may not do this
 ├── CellNotFound                 404: unknown, expired or another tenant's cell
 ├── NotFound                     404: unknown session / run / API file
 ├── WaitInProgress               409: a second wait on one cell
 ├── BodyTooLarge                 413
 ├── TooManyRequests              429: a per-tenant or parked-cell cap (``Retry-After``)
 ├── Overloaded                   503: no worker could be had in time (``Retry-After``)
 ├── StoreUnavailable             503: the session store does not answer
 ├── ResponseNotEncodable         500: an answer could not be written as JSON (retrying cannot help)
 └── ConfigError                  raised at start: a setting is wrong (never an HTTP answer)
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from .responses import JSONBytes as ORJSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

ErrorType = Literal["recoverable", "config", "transient"]
# ``transient`` tells clients to retry automatically: only for failures a retry can cure
# (capacity, a store that is down).  Anything deterministic is ``recoverable`` or ``config``.


class ServiceError(Exception):
    """Raised for a request the service cannot serve; mapped to one error body."""

    code = "service_error"
    status = 500
    # An unforeseen failure is most likely to repeat (a bug), and an automatic retry could repeat
    # a cell's side effects: only the subclasses that a retry can cure say ``transient``.
    error_type: ErrorType = "recoverable"

    def __init__(self, message: str, *, need_param: str | None = None, retry_after: int | None = None,
                 non_retriable: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.need_param = need_param
        self.retry_after = retry_after
        self.non_retriable = non_retriable

    def body(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message, "error_type": self.error_type}
        if self.need_param is not None:
            err["need_param"] = self.need_param
        if self.non_retriable is not None:
            err["non_retriable"] = self.non_retriable
        return {"error": err}


class InvalidRequest(ServiceError):
    """Raised when a request field is missing or out of range."""

    code = "invalid_request"
    status = 422
    error_type = "recoverable"


class Unauthorized(ServiceError):
    """Raised when the Authorization header is missing or the key is unknown."""

    code = "unauthorized"
    status = 401
    error_type = "config"


class Forbidden(ServiceError):
    """Raised when the caller may not act on this resource."""

    code = "forbidden"
    status = 403
    error_type = "config"


class CellNotFound(ServiceError):
    """Raised for an unknown, expired, finished or foreign cell id."""

    code = "cell_not_found"
    status = 404
    error_type = "recoverable"


class NotFound(ServiceError):
    """Raised for an unknown session, run or API file."""

    code = "not_found"
    status = 404
    error_type = "recoverable"


class WaitInProgress(ServiceError):
    """Raised when a wait arrives while another wait on the same cell runs."""

    code = "wait_in_progress"
    status = 409
    error_type = "recoverable"


class BodyTooLarge(ServiceError):
    """Raised when a request body is over its cap."""

    code = "body_too_large"
    status = 413
    error_type = "recoverable"


class TooManyRequests(ServiceError):
    """Raised when a tenant's concurrency cap or the parked-cell cap is reached."""

    code = "too_many_requests"
    status = 429
    error_type = "transient"


class Overloaded(ServiceError):
    """Raised when no worker became free in time."""

    code = "overloaded"
    status = 503
    error_type = "transient"


class StoreUnavailable(ServiceError):
    """Raised when the session store backend does not answer."""

    code = "store_unavailable"
    status = 503
    error_type = "transient"


class ResponseNotEncodable(ServiceError):
    """Raised when an answer cannot be written as JSON (nested deeper than the encoder allows)."""

    code = "response_not_encodable"
    status = 500
    error_type = "recoverable"

    def __init__(self, message: str) -> None:
        super().__init__(message, non_retriable=True)


class ConfigError(ServiceError):
    """Raised at start when a setting is missing or invalid; names the setting."""

    code = "config_error"
    status = 500
    error_type = "config"


def error_response(exc: ServiceError) -> ORJSONResponse:
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
    return ORJSONResponse(exc.body(), status_code=exc.status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Map every failure to the one error body shape."""

    async def on_service_error(_: Request, exc: Exception) -> ORJSONResponse:
        assert isinstance(exc, ServiceError)
        return error_response(exc)

    async def on_validation_error(_: Request, exc: Exception) -> ORJSONResponse:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        field = ".".join(loc) or "body"
        message = f"{field}: {first.get('msg', 'invalid value')}"
        if field == "body":
            message = "request body must be a JSON object matching the documented schema: " + message
        return error_response(InvalidRequest(message, need_param=field))

    async def on_http_error(_: Request, exc: Exception) -> ORJSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            return error_response(NotFound("no such endpoint; see /docs for the API"))
        if exc.status_code == 405:
            err = InvalidRequest("method not allowed on this endpoint; see /docs")
            err.status = 405
            response = error_response(err)
            response.headers.update(exc.headers or {})  # Allow: the methods that are
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
