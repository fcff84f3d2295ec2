"""Python client of the codemode service (depends on httpx and the standard library only).

from codemode_client import Client

with Client("http://127.0.0.1:8000", api_key=None) as cm:
    env = cm.run("return await lookup({q: 'x'})", client_tools={"lookup": lookup})
    print(env.status, env.value)
"""

from __future__ import annotations

from importlib.metadata import version

from .async_client import AsyncClient, AsyncEventStream
from .client import Client, EventStream
from .errors import (
    ApiError,
    AuthenticationError,
    BadRequestError,
    CodemodeError,
    ConflictError,
    EventStreamError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    ProtocolError,
    RateLimitError,
    RequestTimeoutError,
    RunLimitError,
    ServerError,
    ServiceUnavailableError,
    TransportError,
)
from .models import (
    CellEvent,
    Envelope,
    EnvelopeEvent,
    OutputEntry,
    OutputEvent,
    PendingCall,
    PendingEvent,
    StatusEvent,
    UnknownEvent,
)

# One version source: client/pyproject.toml's [project] version, as installed.
__version__ = version("codemode-client")

__all__ = [
    "__version__",
    "ApiError",
    "AsyncClient",
    "AsyncEventStream",
    "AuthenticationError",
    "BadRequestError",
    "CellEvent",
    "Client",
    "CodemodeError",
    "ConflictError",
    "Envelope",
    "EnvelopeEvent",
    "EventStream",
    "EventStreamError",
    "NotFoundError",
    "OutputEntry",
    "OutputEvent",
    "PayloadTooLargeError",
    "PendingCall",
    "PendingEvent",
    "PermissionDeniedError",
    "ProtocolError",
    "RateLimitError",
    "RequestTimeoutError",
    "RunLimitError",
    "ServerError",
    "ServiceUnavailableError",
    "StatusEvent",
    "TransportError",
    "UnknownEvent",
]
