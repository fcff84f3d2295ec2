"""``GET /v1/cells/{cell_id}/events``: a cell's event log as Server-Sent Events.

The stream reads the cell's log (``service.runtime.events``) by event id; it owns no queue, so a reader
that stops reading holds its connection and nothing else, and the cell never waits for it.  An idle
stream sends a ``: keep-alive`` comment every ``events_heartbeat_seconds``; a client that goes away
ends the stream (Starlette cancels it on ``http.disconnect``); the stream ends after the
``envelope`` event.  Streams per tenant are capped (``tenant_max_event_streams``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Annotated

from fastapi import Header, Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from service.api.schemas import ERROR_RESPONSES
from service.errors import InvalidRequest
from service.runtime.events import Event, EventLog
from service.runtime.registry import CellRegistry

from .cell_routes import CellId
from .request_gate import api_key_of
from .route_group import RouteGroup, route

KEEP_ALIVE = b": keep-alive\n\n"
EVENTS_EXAMPLE = (
    'id: 1\nevent: status\ndata: {"status":"running"}\n\n'
    'id: 2\nevent: output\ndata: {"type":"text","text":"fetched page 1"}\n\n'
    ": keep-alive\n\n"
    'id: 3\nevent: status\ndata: {"status":"completed"}\n\n'
    'id: 4\nevent: envelope\ndata: {"status":"completed","cell_id":"cell_...","output":[],"value":2,...}\n\n'
)
LAST_EVENT_ID = "Last-Event-ID"


class EventStreamResponse(StreamingResponse):
    """``text/event-stream`` that gives its tenant's stream slot back however it ends."""

    media_type = "text/event-stream"

    def __init__(self, content: AsyncIterator[bytes], release: Callable[[], None]) -> None:
        # no-cache and X-Accel-Buffering: proxies must pass events on as they come.
        super().__init__(content, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def frame(event: Event) -> bytes:
    # Event data is compact JSON: no raw line breaks, so one data line holds it.
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event.id, event.kind.encode(), event.data)


async def stream(log: EventLog, after: int, heartbeat_s: float) -> AsyncIterator[bytes]:
    """Events after id ``after`` as they come, until the envelope event was written."""
    while True:
        changed = log.changed  # taken before reading: a publication in between is not missed
        for event in log.since(after):
            yield frame(event)
            after = event.id  # the send returned: the event reached the connection
            log.delivered(event)
        if log.ended and after >= log.last_id:
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(changed.wait(), heartbeat_s)
            continue
        yield KEEP_ALIVE


class EventRoutes(RouteGroup):
    """A cell's events as Server-Sent Events, from the registry's event logs."""

    def __init__(self, cells: CellRegistry, heartbeat_s: float) -> None:
        self.cells = cells
        self.heartbeat_s = heartbeat_s  # a comment line goes out after this long without an event

    @route(
        "GET",
        "/v1/cells/{cell_id}/events",
        response_class=EventStreamResponse,
        status_code=200,
        responses={
            # Refusals are the usual JSON error body (the route's own media type is the event stream).
            **{
                code: {
                    "description": ERROR_RESPONSES[code]["description"],
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
                }
                for code in (401, 403, 404, 422, 429)
            },
            200: {
                "description": "Server-Sent Events: status, output, pending, dropped, then envelope",
                "content": {"text/event-stream": {"schema": {"type": "string"}, "example": EVENTS_EXAMPLE}},
            },
        },
        tags=("cells",),
        summary="Cell events (Server-Sent Events)",
        operation_id="stream_cell_events",
    )
    async def cell_events(
        self,
        cell_id: CellId,
        request: Request,
        last_event_id: Annotated[
            str | None,
            Header(
                alias=LAST_EVENT_ID,
                pattern=r"^[0-9]{1,18}$",
                description="resume after this event id (what an EventSource sends on reconnect)",
            ),
        ] = None,
    ) -> EventStreamResponse:
        """Events of a live or just-finished cell of this key's tenant: ``status``, ``output`` (one output entry
        each), ``pending`` (the calls the cell waits for), ``dropped`` (ids a full buffer lost), and last the
        ``envelope`` (its ``output`` is empty: every entry went out as an ``output`` event), then the stream
        closes.  Output written here is not repeated in a later wait answer."""
        key = api_key_of(request)
        release = self.cells.events.stream_slot(key.tenant)  # first: a refused reader makes no log
        try:
            log = self.cells.event_log(key.tenant, cell_id)
            after = int(last_event_id) if last_event_id is not None else 0
            if after > log.last_id:
                raise InvalidRequest(
                    f"{LAST_EVENT_ID} {after} is past this cell's last event ({log.last_id}); "
                    "resume with an id this stream sent",
                    need_param=LAST_EVENT_ID,
                )
        except BaseException:
            release()
            raise
        return EventStreamResponse(stream(log, after, self.heartbeat_s), release)
