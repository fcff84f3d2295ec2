"""A cell's event stream that survives dropped connections: reconnect with ``Last-Event-ID``, bounded.

The service numbers a cell's events and resumes after the id it is sent, so a reconnect neither loses
nor repeats events.  The stream is over after the ``envelope`` event; a connection that ends (or
breaks, or stays silent past ``idle_timeout``, several heartbeats) before it is reopened, up to
``max_reconnects`` times in a row without an event in between, then ``EventStreamError``.  A
reconnection refused for capacity (429/503) counts as one more break, after its ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from .errors import (
    CodemodeError,
    EventStreamError,
    RateLimitError,
    ServiceUnavailableError,
    TransportError,
)
from .models import CellEvent, EnvelopeEvent
from .sse import SseParser, cell_event
from .transport import AsyncHttp, SyncHttp
from .wire import cell_path, last_event_header

#: The service sends a heartbeat every 15 s by default: four missed ones mean the connection is dead.
DEFAULT_IDLE_TIMEOUT_S = 60.0
DEFAULT_MAX_RECONNECTS = 5
FIRST_DELAY_S = 0.25
MAX_DELAY_S = 5.0
#: The most a server's ``retry:`` field may make the client pause before reconnecting.
MAX_SERVER_DELAY_S = 30.0


@dataclass
class Resume:
    """Where a cell's stream is: the last event id seen, and the breaks since the last event."""

    cell_id: str
    last_event_id: str | None
    max_reconnects: int
    breaks: int = 0
    retry_ms: int | None = None
    done: bool = False

    def parser(self) -> SseParser:
        return SseParser(self.last_event_id)  # an id persists across reconnections (SSE rules)

    def take(self, parser: SseParser, chunk: bytes) -> list[CellEvent]:
        events = [cell_event(e) for e in parser.feed(chunk)]
        self.retry_ms = parser.retry_ms if parser.retry_ms is not None else self.retry_ms
        self.last_event_id = parser.last_event_id
        if events:
            self.breaks = 0
            for i, event in enumerate(events):
                if isinstance(event, EnvelopeEvent):
                    self.done = True
                    return events[: i + 1]
        return events

    def may_retry(self, exc: CodemodeError) -> bool:
        """A broken connection may be retried; so may a capacity refusal of a reconnection (the service
        may still count the stream that just broke against the caller's cap)."""
        if isinstance(exc, TransportError):
            return True
        return isinstance(exc, (RateLimitError, ServiceUnavailableError)) and self.breaks > 0

    def broke(self, cause: CodemodeError | None) -> float:
        """Seconds to pause before reconnecting; raises once the breaks in a row pass the bound."""
        self.breaks += 1
        if self.breaks > self.max_reconnects:
            how = f"{type(cause).__name__}: {cause}" if cause is not None else "the server closed it"
            raise EventStreamError(
                f"the event stream of {self.cell_id} ended {self.breaks} times in a row before the cell's "
                f"envelope (last: {how}); resume with events(cell_id, last_event_id={self.last_event_id!r}) "
                "or read the outcome with wait()",
                last_event_id=self.last_event_id,
            ) from cause
        if cause is not None and cause.retry_after is not None:
            return min(cause.retry_after, MAX_SERVER_DELAY_S)
        if self.retry_ms is not None:
            return min(self.retry_ms / 1000, MAX_SERVER_DELAY_S)
        return min(FIRST_DELAY_S * 2.0 ** (self.breaks - 1), MAX_DELAY_S)


def iter_events(http: SyncHttp, resume: Resume, idle_timeout: float | None) -> Iterator[CellEvent]:
    path = cell_path(resume.cell_id, "events")
    while True:
        cause: CodemodeError | None = None
        parser = resume.parser()
        try:
            headers = last_event_header(resume.last_event_id)
            with http.stream(path, headers=headers, read_timeout=idle_timeout) as chunks:
                for chunk in chunks:
                    yield from resume.take(parser, chunk)
                    if resume.done:
                        return
        except CodemodeError as exc:
            if not resume.may_retry(exc):
                raise
            cause = exc
        time.sleep(resume.broke(cause))


async def aiter_events(http: AsyncHttp, resume: Resume, idle_timeout: float | None) -> AsyncIterator[CellEvent]:
    path = cell_path(resume.cell_id, "events")
    while True:
        cause: CodemodeError | None = None
        parser = resume.parser()
        try:
            async with http.stream(
                path, headers=last_event_header(resume.last_event_id), read_timeout=idle_timeout
            ) as chunks:
                async for chunk in chunks:
                    for event in resume.take(parser, chunk):
                        yield event
                    if resume.done:
                        return
        except CodemodeError as exc:
            if not resume.may_retry(exc):
                raise
            cause = exc
        await asyncio.sleep(resume.broke(cause))
