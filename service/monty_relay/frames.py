"""Monty's wire frames as untrusted input, both ways: counted, decoded, bounded, and the few the relay writes.

A frame is one protobuf message of Monty's protocol (``monty_pb2``, generated from the pinned release's
``monty.proto``): a ``ParentRequest`` from the client, a ``ChildEvent`` from the worker.  Each is checked
in this order, and the first failure is a ``MalformedFrame`` that closes its connection:

1. its size, counted before anything decodes it (a WebSocket message's length; the 4-byte prefix on the
   worker's pipe, before its body is read): at most ``monty_max_frame_bytes``;
2. decoding, by protobuf's C decoder over that bounded frame (no Python per field; nested messages
   are bounded by its depth limit, and Monty's values are a flat arena whose depth costs no recursion);
3. its kind (a request or event with none is out of protocol) and its counts: every arena's nodes and
   every repeated list at most ``monty_max_values``, read as lengths (no walk over the values).

Only ``Configure`` is rewritten (its limits clamped to the server's); every other frame goes on as the
bytes that came in.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from service.errors import MalformedFrame

from . import monty_pb2 as pb

#: The worker's pipe framing: a 4-byte little-endian length before each message.
LENGTH = struct.Struct("<I")
#: Monty's own default recursion limit, used when a client asks none.
DEFAULT_RECURSION_DEPTH = 1000
#: Longest ``trace_parent`` a request may carry (a W3C traceparent is 55 characters).
MAX_TRACE_PARENT = 256
#: Requests the relay answers itself: a dump holds the heap, a load would bring back limits of its own.
REFUSED_REQUESTS = {
    "dump": "this server stores no sessions: dump is refused (the session carries on)",
    "load": "this server stores no sessions and loads no state: load is refused (the session carries on)",
}


@dataclass(frozen=True)
class FrameCaps:
    """The bounds and the limits of a session, read from settings once."""

    max_frame_bytes: int
    max_values: int
    memory_bytes: int  # the default when a client asks none
    max_memory_bytes: int
    duration_micros: int
    max_duration_micros: int
    max_recursion_depth: int


@dataclass(frozen=True)
class Request:
    """A client's request: its kind and the bytes for the worker (``data``), or the answer the relay gives
    itself (``refusal``); ``turn_micros``: a ``Configure``'s clamped turn budget."""

    kind: str
    data: bytes
    refusal: bytes = b""
    turn_micros: int = 0


@dataclass(frozen=True)
class Event:
    """A worker's event: its kind, and for a plain function call or name lookup (no host object) the name
    and call id the key's policy is asked about."""

    kind: str
    name: str | None = None
    call_id: int = 0


def check_size(size: int, caps: FrameCaps, side: str) -> None:
    if size > caps.max_frame_bytes:
        raise MalformedFrame(
            f"a {side} frame of {size} bytes is over monty_max_frame_bytes={caps.max_frame_bytes}", too_large=True
        )


def request(data: bytes, caps: FrameCaps) -> Request:
    """The client's frame ``data``, checked (``MalformedFrame``), with a ``Configure``'s limits clamped."""
    check_size(len(data), caps, "client")
    message = pb.ParentRequest()
    _decode(message, data, "client")
    kind = message.WhichOneof("kind")
    if kind is None:
        raise MalformedFrame("a client frame carries no request (ParentRequest.kind is unset)")
    if message.HasField("trace_parent") and len(message.trace_parent) > MAX_TRACE_PARENT:
        raise MalformedFrame(f"trace_parent is over {MAX_TRACE_PARENT} characters")
    body = getattr(message, kind)
    _check_counts(caps, *_request_counts(kind, body))
    if kind in REFUSED_REQUESTS:
        return Request(kind, b"", refusal=_error_event("RuntimeError", REFUSED_REQUESTS[kind]))
    if kind == "configure":
        turn = _clamp(body.limits, caps)
        body.persistence = pb.PERSISTENCE_EPHEMERAL  # relay-only fields: nothing here stores sessions
        body.ClearField("profile")
        return Request(kind, message.SerializeToString(), turn_micros=turn)
    return Request(kind, data)


def event(data: bytes, caps: FrameCaps) -> Event:
    """The worker's frame ``data`` (its size was checked before it was read), decoded and counted."""
    message = pb.ChildEvent()
    _decode(message, data, "worker")
    kind = message.WhichOneof("kind")
    if kind is None:
        raise MalformedFrame("a worker frame carries no event (ChildEvent.kind is unset)")
    body = getattr(message, kind)
    _check_counts(caps, *_event_counts(kind, body))
    if kind == "function_call" and not body.HasField("object_id"):
        return Event(kind, body.function_name, body.call_id)
    if kind == "name_lookup" and not body.HasField("object_id"):
        return Event(kind, body.name)
    return Event(kind)


def _decode(message: pb.ParentRequest | pb.ChildEvent, data: bytes, side: str) -> None:
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise MalformedFrame(f"a {side} frame is not a Monty protocol message: {exc}") from None


def _check_counts(caps: FrameCaps, *counts: int) -> None:
    largest = max(counts, default=0)
    if largest > caps.max_values:
        raise MalformedFrame(f"a frame carries {largest} values or entries, over monty_max_values={caps.max_values}")


def _request_counts(kind: str, body: object) -> tuple[int, ...]:
    if kind == "feed":
        assert isinstance(body, pb.Feed)
        return len(body.inputs), len(body.values.nodes)
    if kind == "resume_call":
        assert isinstance(body, pb.ResumeCall)
        return (len(body.values.nodes),)
    if kind == "resume_name_lookup":
        assert isinstance(body, pb.ResumeNameLookup)
        return (len(body.values.nodes),)
    if kind == "resume_futures":
        assert isinstance(body, pb.ResumeFutures)
        return len(body.results), len(body.values.nodes)
    if kind == "install_dependencies":
        assert isinstance(body, pb.InstallDependencies)
        return (len(body.requirements),)
    return ()


def _event_counts(kind: str, body: object) -> tuple[int, ...]:
    if kind == "function_call":
        assert isinstance(body, pb.FunctionCall)
        return len(body.args), len(body.kwargs), len(body.values.nodes)
    if kind in ("os_call", "complete"):
        assert isinstance(body, (pb.OsCall, pb.Complete))
        return (len(body.values.nodes),)
    if kind == "print":
        assert isinstance(body, pb.Print)
        return (len(body.segments),)
    if kind == "resolve_futures":
        assert isinstance(body, pb.ResolveFutures)
        return (len(body.pending_call_ids),)
    return ()


def _clamp(limits: pb.ResourceLimits, caps: FrameCaps) -> int:
    """Clamp the limits a client asks for to the server's (absent ones get the server's default, never
    Monty's "unlimited"); returns the turn budget the worker will enforce."""

    def capped(field: str, default: int, cap: int) -> int:
        value = min(getattr(limits, field) if limits.HasField(field) else default, cap)
        setattr(limits, field, value)
        return value

    capped("max_memory_bytes", caps.memory_bytes, caps.max_memory_bytes)
    capped("max_recursion_depth", DEFAULT_RECURSION_DEPTH, caps.max_recursion_depth)
    feed = capped("max_feed_duration_micros", caps.duration_micros, caps.max_duration_micros)
    return max(feed, capped("max_turn_duration_micros", caps.duration_micros, caps.max_duration_micros))


# ---- frames the relay writes -----------------------------------------------------------------------


def _raised(exc_type: str, message: str) -> pb.RaisedException:
    return pb.RaisedException(exc_type=exc_type, message=message)


def _error_event(exc_type: str, message: str) -> bytes:
    return pb.ChildEvent(error=pb.Error(exception=_raised(exc_type, message))).SerializeToString()


def refused_call(call_id: int, message: str) -> bytes:
    """The worker's answer to a function call the key's policy denies: a PermissionError at the call."""
    result = pb.ExtFunctionResult(error=_raised("PermissionError", message))
    return pb.ParentRequest(resume_call=pb.ResumeCall(call_id=call_id, result=result)).SerializeToString()


def undefined_name() -> bytes:
    """The worker's answer to a lookup of a name the key's policy denies: the name is undefined (NameError)."""
    return pb.ParentRequest(resume_name_lookup=pb.ResumeNameLookup(undefined=pb.Unit())).SerializeToString()
