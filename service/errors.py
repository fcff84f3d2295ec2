"""Service failures (not cell outcomes) and the only table that knows HTTP status codes.

ServiceError                      base: ``code``, ``error_type``, ``status``
 ├── InvalidRequest               422: a request field is wrong (``need_param`` names it)
 │    ├── MethodNotAllowed        405: the path exists, not with this method (code ``invalid_request``)
 │    └── RequestStateRefused     422: an MCP ``requestState`` that is altered, expired, used or not this caller's
 ├── Unauthorized                 401: no or unknown API key
 ├── Forbidden                    403: the key may not do this
 ├── HostNotAllowed               421: without API keys, a Host or Origin that names no allowed host
 ├── CellNotFound                 404: unknown, expired or another tenant's cell
 ├── CellDrained                  404: its replica was shut down (drained) while it held the cell: start it again
 ├── SnapshotRefused              409: a parked cell's stored state cannot be taken up (start the cell again):
 │    ├── SnapshotTampered        its seal does not match its bytes
 │    ├── SnapshotForeign         it was sealed for another cell or tenant
 │    └── SnapshotVersionMismatch another engine build paused it
 ├── NotFound                     404: unknown session / run / API file
 ├── WaitInProgress               409: a second wait on one cell
 ├── BodyTooLarge                 413
 ├── TooManyRequests              429: a per-tenant or parked-cell cap (``Retry-After``)
 ├── Overloaded                   503: no worker could be had in time (``Retry-After``)
 ├── StoreUnavailable             503: the session store does not answer
 ├── ReplicaUnavailable           503: the replica holding a cell does not answer (``Retry-After``)
 ├── ReplicaDraining              503: this replica is shutting down and admits no new cell (``Retry-After``)
 ├── HelperFailed                 503: a helper process answered out of shape, died or hung; it is replaced (``Retry-After``)
 ├── ResponseNotEncodable         500: an answer could not be written as JSON (retrying cannot help)
 ├── WorkerGone                   a worker's pipe closed or its frames cannot be read; the cell layer
 │                                always turns it into a ``runtime_unavailable`` envelope (never an HTTP answer)
 ├── MalformedFrame               /v1/monty: a frame over its size, undecodable or out of protocol; that connection
 │                                is closed (WebSocket close 1007/1009, never an HTTP answer), its worker killed
 ├── IllegalTransition            500: a cell was asked to move to a state its state machine forbids (a bug)
 ├── ServerUnreachable            ``codemode exec --url``: no server answers at the URL (never an HTTP answer)
 ├── ServerRefused                ``codemode exec --url``: the server answered its error body (never an HTTP answer)
 └── ConfigError                  raised at start: a setting is wrong (never an HTTP answer)
      └── McpConfigError          mcp_config: a [mcp.servers.<name>] entry is unusable (names the server)

Every exception of the ``service`` package derives from ServiceError, except those of the subpackages
with their own tree (``tools/``, ``mcp/``, ``stores/``, ``api_files/``: each has an ``errors`` module)
and three control-flow signals that never leave their layer: ``GuestError`` and ``NeedsCaller``
(runtime/dispatch.py) and ``PeerGone`` (http/request_gate.py).  tests/test_errors.py checks this.
"""

from __future__ import annotations

from typing import Any, Literal

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

    def __init__(
        self,
        message: str,
        *,
        need_param: str | None = None,
        retry_after: int | None = None,
        non_retriable: bool | None = None,
    ) -> None:
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


class HostNotAllowed(ServiceError):
    """Raised, on a server without API keys, for a request whose Host or Origin names no allowed host."""

    code = "host_not_allowed"
    status = 421
    error_type = "config"


class CellNotFound(ServiceError):
    """Raised for an unknown, expired, finished or foreign cell id."""

    code = "cell_not_found"
    status = 404
    error_type = "recoverable"


class CellDrained(ServiceError):
    """Raised for a cell its replica still held when that replica was shut down (drained): its state is gone."""

    code = "cell_drained"
    status = 404
    error_type = "recoverable"


class SnapshotRefused(ServiceError):
    """Raised when a parked cell's stored state (service/runtime/parked_seal.py) cannot be taken up."""

    code = "snapshot_refused"
    status = 409
    error_type = "recoverable"


class SnapshotTampered(SnapshotRefused):
    """Its seal does not match its bytes: altered, or sealed under a secret this service no longer has."""

    code = "snapshot_tampered"


class SnapshotForeign(SnapshotRefused):
    """Its seal holds, for another cell or tenant: a record copied under this cell's name."""

    code = "snapshot_foreign"


class SnapshotVersionMismatch(SnapshotRefused):
    """A replica of another engine build paused it: only the same build takes a paused program up."""

    code = "snapshot_version_mismatch"


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


class ReplicaUnavailable(ServiceError):
    """Raised when the replica that holds a cell does not answer a forwarded request."""

    code = "replica_unavailable"
    status = 503
    error_type = "transient"


class ReplicaDraining(ServiceError):
    """Raised for a new cell on a replica that is shutting down (draining); another replica takes it."""

    code = "replica_draining"
    status = 503
    error_type = "transient"


class HelperFailed(ServiceError):
    """Raised when a helper process (body decoder, schema checker) answered out of shape, died or hung.

    The helper is stopped and replaced; the request it served is refused, and a retry is served by a
    fresh one.
    """

    code = "helper_failed"
    status = 503
    error_type = "transient"

    def __init__(self, message: str) -> None:
        super().__init__(message, retry_after=1)


class ResponseNotEncodable(ServiceError):
    """Raised when an answer cannot be written as JSON (nested deeper than the encoder allows)."""

    code = "response_not_encodable"
    status = 500
    error_type = "recoverable"

    def __init__(self, message: str) -> None:
        super().__init__(message, non_retriable=True)


class WorkerGone(ServiceError):
    """Raised when a worker's pipe closes or its frames cannot be read."""

    code = "runtime_unavailable"

    def __init__(self, message: str) -> None:
        super().__init__(message)


class MalformedFrame(ServiceError):
    """A frame of Monty's wire protocol (either way through /v1/monty) is too large, undecodable or out of
    protocol; ``too_large`` tells the WebSocket close code (1009 rather than 1007)."""

    code = "malformed_frame"
    status = 400

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


class IllegalTransition(ServiceError):
    """Raised when a cell is moved between states its machine does not connect (``runtime/state.py``): a bug."""

    code = "illegal_transition"
    status = 500


class ServerUnreachable(ServiceError):
    """``codemode exec --url``: no server answered at the URL (refused, reset, timed out, not HTTP)."""

    code = "server_unreachable"
    error_type = "transient"


class ServerRefused(ServiceError):
    """``codemode exec --url``: the server answered with its error body (``answer``, printed as it came)."""

    code = "server_refused"

    def __init__(self, status: int, answer: object) -> None:
        super().__init__(f"the server answered HTTP {status}")
        self.answer = answer


class ConfigError(ServiceError):
    """Raised at start when a setting is missing or invalid; names the setting."""

    code = "config_error"
    status = 500
    error_type = "config"


class McpConfigError(ConfigError):
    """An ``[mcp.servers.<name>]`` entry cannot be used; names the server (service.settings_mcp)."""

    code = "mcp_config"

    def __init__(self, message: str, *, server: str | None = None) -> None:
        super().__init__(message, need_param=f"mcp.servers.{server}" if server else "mcp.servers")
        self.server = server


class MethodNotAllowed(InvalidRequest):
    """The path exists, but not with this HTTP method (the answer's ``Allow`` names those that do)."""

    status = 405


class RequestStateRefused(InvalidRequest):
    """An MCP ``requestState`` sent back with approval answers is refused: altered or not minted here, expired,
    already used, or another caller's (the message says which, and how to be asked again)."""

    code = "request_state_refused"
