"""Every failure the client raises, one tree under ``CodemodeError``.

CodemodeError                     base: ``status`` (HTTP or None), ``code``
 ├── ApiError                     the service answered with its error body (non-200)
 │    ├── BadRequestError         400/405/422 and other refused requests (``need_param`` names the field)
 │    ├── AuthenticationError     401: no or unknown API key
 │    ├── PermissionDeniedError   403: this key may not do that (or a non-loopback peer without keys)
 │    ├── NotFoundError           404: unknown or expired cell (``code`` cell_not_found), file, session
 │    ├── ConflictError           409: another wait on the same cell runs
 │    ├── PayloadTooLargeError    413: a request body over its cap
 │    ├── RateLimitError          429: a tenant or parked-cell cap (``retry_after``)
 │    ├── ServiceUnavailableError 503: no capacity or the store is down (``retry_after``)
 │    └── ServerError             any other 5xx: the service failed handling the request
 ├── TransportError               the request did not get an answer (connection refused, reset, ...)
 │    └── RequestTimeoutError     no answer within the client's timeout
 ├── ProtocolError                an answer that is not what the API documents (not JSON, no status)
 ├── EventStreamError             an event stream kept breaking before its envelope (retries used up)
 └── RunLimitError                run() stopped a cell that did not finish within max_legs or deadline

``code`` is the class's own code unless the service named one in its error body, which wins: a 404
for a cell is ``cell_not_found``, for an API file ``not_found``.  Guest failures are not exceptions:
they come back as an envelope with ``status == "failed"``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class CodemodeError(Exception):
    """Base of every error this client raises."""

    code = "codemode_error"

    def __init__(
        self, message: str, *, status: int | None = None, code: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        if code is not None:
            self.code = code  # the service's own code for this failure, when it gave one
        self.retry_after = retry_after


class ApiError(CodemodeError):
    """The service refused a request with its error body ``{"error": {code, message, error_type, ...}}``."""

    code = "api_error"

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str | None = None,
        retry_after: float | None = None,
        error_type: str | None = None,
        need_param: str | None = None,
        non_retriable: bool | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message, status=status, code=code, retry_after=retry_after)
        self.error_type = error_type
        self.need_param = need_param
        self.non_retriable = non_retriable
        self.body = body

    def __str__(self) -> str:
        where = f" (need_param: {self.need_param})" if self.need_param else ""
        return f"HTTP {self.status} {self.code}: {self.message}{where}"


class BadRequestError(ApiError):
    """A request field is wrong or missing; ``need_param`` names it."""

    code = "invalid_request"


class AuthenticationError(ApiError):
    """No API key, or one the service does not know."""

    code = "unauthorized"


class PermissionDeniedError(ApiError):
    """The key may not do this."""

    code = "forbidden"


class NotFoundError(ApiError):
    """Unknown or expired cell, API file, session or run."""

    code = "not_found"


class ConflictError(ApiError):
    """Another wait on the same cell is running."""

    code = "wait_in_progress"


class PayloadTooLargeError(ApiError):
    """A request body over the service's cap."""

    code = "body_too_large"


class RateLimitError(ApiError):
    """A per-tenant or parked-cell cap was reached; retry after ``retry_after`` seconds."""

    code = "too_many_requests"


class ServiceUnavailableError(ApiError):
    """No capacity right now, or the store does not answer; retry after ``retry_after`` seconds."""

    code = "overloaded"


class ServerError(ApiError):
    """The service failed while handling the request."""

    code = "service_error"


class TransportError(CodemodeError):
    """The request got no answer: connection refused or reset, DNS, TLS, a broken stream."""

    code = "transport_error"


class RequestTimeoutError(TransportError):
    """No answer within the client's timeout (the service may still have acted on the request)."""

    code = "request_timeout"


class ProtocolError(CodemodeError):
    """An answer that does not match the documented API (not JSON, an envelope without a status)."""

    code = "protocol_error"


class EventStreamError(CodemodeError):
    """The event stream of a cell broke before its final envelope more often than the retry bound."""

    code = "event_stream_broken"

    def __init__(self, message: str, *, last_event_id: str | None = None) -> None:
        super().__init__(message)
        self.last_event_id = last_event_id


class RunLimitError(CodemodeError):
    """``run()`` cancelled a cell still not finished when its next wait would pass ``max_legs`` or ``deadline``.

    ``code`` says which (``max_legs_exceeded``, ``deadline_exceeded``); ``envelope`` is the cell's last
    answer before it was cancelled (its output is in it), ``cell_id`` the cell's id.
    """

    code = "run_limit_exceeded"

    def __init__(self, message: str, *, code: str, envelope: Any) -> None:
        super().__init__(message, code=code)
        self.envelope = envelope
        self.cell_id: str = envelope.cell_id


_BY_STATUS: dict[int, type[ApiError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def _retry_after(headers: Mapping[str, str]) -> float | None:
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        return None  # an HTTP date: the service never sends one
    return seconds if seconds >= 0 else None


def api_error(status: int, headers: Mapping[str, str], content: bytes) -> ApiError:
    """The exception for a non-200 answer, from its status, headers (lower-case names) and body."""
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else BadRequestError)
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    detail = body.get("error") if isinstance(body, dict) else None
    if not isinstance(detail, dict):
        text = content[:200].decode("utf-8", "replace")
        return cls(
            f"HTTP {status} without the service's error body: {text!r}",
            status=status,
            retry_after=_retry_after(headers),
            body=body,
        )
    code = detail.get("code")
    need_param = detail.get("need_param")
    return cls(
        str(detail.get("message", "")),
        status=status,
        code=code if isinstance(code, str) else None,
        retry_after=_retry_after(headers),
        error_type=detail.get("error_type") if isinstance(detail.get("error_type"), str) else None,
        need_param=need_param if isinstance(need_param, str) else None,
        non_retriable=detail.get("non_retriable") if isinstance(detail.get("non_retriable"), bool) else None,
        body=body,
    )
