"""events(): typed events until the envelope, resuming with Last-Event-ID across dropped connections."""

from __future__ import annotations

import json

import pytest
from codemode_client import (
    AsyncClient,
    Client,
    EnvelopeEvent,
    EventStreamError,
    NotFoundError,
    OutputEvent,
    ProtocolError,
    RateLimitError,
    StatusEvent,
)

from tests.client.sse_server import HANG, SSE_HEAD, event, sse_server

ENVELOPE = json.dumps(
    {
        "status": "completed",
        "cell_id": "cell_1",
        "value": 7,
        "output": [],
        "bridge_dispatch_started": False,
        "replay_safe": True,
        "telemetry": {},
    }
)
FIRST = (
    SSE_HEAD
    + b"retry: 0\n"
    + event(1, "status", '{"status": "running"}')
    + event(2, "output", '{"type": "text", "text": "a"}')
)
# Event 3 cut off in the middle of its data line, then the connection closes.
CUT = b'id: 3\nevent: output\ndata: {"type": "te'
REST = event(3, "output", '{"type": "text", "text": "b"}') + b": keep-alive\n\n" + event(4, "envelope", ENVELOPE)
AFTER = event(5, "output", '{"type": "text", "text": "never read"}')


def resumed_script(n: int, headers: dict[str, str]) -> list[object]:
    """First connection: events 1-2 and half of 3; later ones: what follows the Last-Event-ID sent."""
    if n == 0:
        return [FIRST, CUT]
    assert headers.get("last-event-id") == "2"
    return [SSE_HEAD, REST, AFTER, HANG]


def summary(events: list[object]) -> list[tuple[str, int | None]]:
    return [(type(e).__name__, getattr(e, "id", None)) for e in events]


EXPECTED = [("StatusEvent", 1), ("OutputEvent", 2), ("OutputEvent", 3), ("EnvelopeEvent", 4)]


def test_sync_stream_resumes_after_a_cut_event_without_loss_or_duplicates():
    """A drop mid-event reconnects with Last-Event-ID 2; events 1-4 arrive once each; 5 (after the envelope) is not read."""
    with sse_server(resumed_script) as (base, seen), Client(base) as client:
        events = list(client.events("cell_1"))
    assert summary(events) == EXPECTED
    assert [h.get("last-event-id") for _, h in seen.requests] == [None, "2"]
    assert seen.requests[0][0] == "GET /v1/cells/cell_1/events HTTP/1.1"
    assert seen.requests[0][1]["accept"] == "text/event-stream"
    texts = [e.entry.text for e in events if isinstance(e, OutputEvent)]
    assert texts == ["a", "b"]
    final = events[-1]
    assert isinstance(final, EnvelopeEvent) and final.envelope.value == 7


@pytest.mark.anyio
async def test_async_stream_resumes_after_a_cut_event_without_loss_or_duplicates():
    """The asyncio client resumes the same way."""
    with sse_server(resumed_script) as (base, seen):
        async with AsyncClient(base) as client:
            events = [e async for e in client.events("cell_1")]
    assert summary(events) == EXPECTED
    assert [h.get("last-event-id") for _, h in seen.requests] == [None, "2"]


def test_a_silent_connection_is_reopened_after_the_idle_timeout():
    """Only heartbeats for longer than events_idle_timeout: the client reconnects, resuming after the id it was given."""

    def script(n: int, headers: dict[str, str]) -> list[object]:
        if n == 0:
            return [SSE_HEAD + b"retry: 0\n: keep-alive\n\n", HANG]
        return [SSE_HEAD, event(8, "envelope", ENVELOPE)]

    with sse_server(script) as (base, seen), Client(base, events_idle_timeout=0.3) as client:
        events = list(client.events("cell_1", last_event_id=7))
    assert summary(events) == [("EnvelopeEvent", 8)]
    assert [h.get("last-event-id") for _, h in seen.requests] == ["7", "7"]


def test_reconnects_are_bounded_when_no_event_arrives():
    """A stream that keeps closing without an event raises EventStreamError after max_reconnects retries."""

    def script(n: int, headers: dict[str, str]) -> list[object]:
        return [SSE_HEAD + b"retry: 0\n: keep-alive\n\n"]

    with sse_server(script) as (base, seen), Client(base, max_reconnects=2) as client:
        with pytest.raises(EventStreamError, match="ended 3 times in a row") as caught:
            list(client.events("cell_1", last_event_id="5"))
    assert len(seen.requests) == 3
    assert caught.value.last_event_id == "5" and caught.value.code == "event_stream_broken"


def test_progress_resets_the_reconnect_bound():
    """Connections that each deliver an event before dropping keep the stream alive past max_reconnects."""

    def script(n: int, headers: dict[str, str]) -> list[object]:
        if n < 4:
            return [SSE_HEAD + b"retry: 0\n" + event(n + 1, "status", '{"status": "running"}')]
        return [SSE_HEAD, event(5, "envelope", ENVELOPE)]

    with sse_server(script) as (base, seen), Client(base, max_reconnects=1) as client:
        events = list(client.events("cell_1"))
    assert [e.id for e in events] == [1, 2, 3, 4, 5] and all(isinstance(e, StatusEvent) for e in events[:4])
    assert [h.get("last-event-id") for _, h in seen.requests] == [None, "1", "2", "3", "4"]


def test_an_error_answer_raises_at_once_with_its_code():
    """A 404 error body raises NotFoundError carrying status and code; nothing is retried."""
    body = b'{"error": {"code": "cell_not_found", "message": "cell is unavailable or expired", "error_type": "recoverable"}}'

    def script(n: int, headers: dict[str, str]) -> list[object]:
        head = f"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        return [head.encode() + b"Connection: close\r\n\r\n" + body]

    with sse_server(script) as (base, seen), Client(base) as client:
        with pytest.raises(NotFoundError) as caught:
            next(iter(client.events("cell_gone")))
    assert (caught.value.status, caught.value.code) == (404, "cell_not_found")
    assert len(seen.requests) == 1


def test_an_answer_that_is_not_an_event_stream_raises_protocol_error():
    """HTTP 200 with a JSON content type is not a stream: ProtocolError naming what came."""

    def script(n: int, headers: dict[str, str]) -> list[object]:
        return [
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        ]

    with sse_server(script) as (base, _), Client(base) as client:
        with pytest.raises(ProtocolError, match="application/json"):
            list(client.events("cell_1"))


def test_closing_a_stream_early_ends_it():
    """Closing the stream after one event ends the iteration; last_event_id says where to resume."""

    def script(n: int, headers: dict[str, str]) -> list[object]:
        return [SSE_HEAD + event(1, "status", '{"status": "running"}'), HANG]

    with sse_server(script) as (base, _), Client(base) as client:
        with client.events("cell_1") as stream:
            first = next(stream)
        assert isinstance(first, StatusEvent) and stream.last_event_id == "1"
        with pytest.raises(StopIteration):
            next(stream)


def test_a_capacity_refusal_of_a_reconnection_is_retried_after_retry_after():
    """A 429 answering the reconnection (the broken stream still counted) is one more break, not the end."""
    body = b'{"error": {"code": "too_many_requests", "message": "event stream cap", "error_type": "transient"}}'
    refusal = (
        f"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 0\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body

    def script(n: int, headers: dict[str, str]) -> list[object]:
        if n == 0:
            return [SSE_HEAD + b"retry: 0\n" + event(1, "status", '{"status": "running"}')]
        if n == 1:
            return [refusal]
        return [SSE_HEAD, event(2, "envelope", ENVELOPE)]

    with sse_server(script) as (base, seen), Client(base) as client:
        events = list(client.events("cell_1"))
    assert [e.id for e in events] == [1, 2]
    assert [h.get("last-event-id") for _, h in seen.requests] == [None, "1", "1"]


def test_a_capacity_refusal_of_the_first_connection_raises():
    """Refused before any stream was open: RateLimitError with its retry_after, for the caller to decide."""
    body = b'{"error": {"code": "too_many_requests", "message": "event stream cap", "error_type": "transient"}}'

    def script(n: int, headers: dict[str, str]) -> list[object]:
        return [
            (
                f"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 2\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode()
            + body
        ]

    with sse_server(script) as (base, seen), Client(base) as client:
        with pytest.raises(RateLimitError) as caught:
            list(client.events("cell_1"))
    assert caught.value.retry_after == 2.0 and len(seen.requests) == 1
