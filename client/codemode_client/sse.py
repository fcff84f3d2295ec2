"""Server-Sent Events: an incremental parser (bytes in, events out) and the cell events they carry.

The parser follows the WHATWG event-stream rules, because proxies and servers differ in the details:
lines end in LF, CRLF or CR (a CRLF may be split across two reads); ``field: value`` loses one
leading space; ``data`` lines join with LF; a line starting with ``:`` is a comment (the service's
heartbeat); ``id`` persists until changed, taking effect when its event ends (and is ignored if it
holds NUL); ``retry`` counts only
if it is all ASCII digits; a blank line ends an event, which is dropped if it has no data; an
event the stream ends in the middle of is never dispatched (a new parser per connection drops it).
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from typing import Any

from .errors import ProtocolError
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

#: A line or event longer than this is not an event stream the service writes (its events are one
#: JSON each, bounded by the cell's output budget): refuse it instead of buffering without end.
MAX_LINE_CHARS = 64 * 1024 * 1024
MAX_EVENT_CHARS = MAX_LINE_CHARS


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event: its type (``message`` when unnamed), data, and the last event id."""

    event: str
    data: str
    id: str | None


class SseParser:
    """Feed it bytes as they arrive; it returns the events completed by them."""

    def __init__(self, last_event_id: str | None = None) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._parts: list[str] = []  # the line being received, in pieces
        self._held = 0
        self._after_cr = False  # the last chunk ended in CR: a leading LF in the next one is its pair
        self._first = True
        self._event = ""
        self._data: list[str] = []
        self._data_chars = 0
        # The id of the event being read, and the one of the last event completed (what a reconnect
        # resumes after: an id whose event was cut off must not count as received).
        self._id = last_event_id
        self.last_event_id = last_event_id
        self.retry_ms: int | None = None
        self.comments = 0

    def feed(self, chunk: bytes) -> list[SseEvent]:
        text = self._decoder.decode(chunk)
        if self._first and text:
            self._first = False
            text = text.removeprefix("\ufeff")
        if self._after_cr and text:
            self._after_cr = False
            text = text.removeprefix("\n")
        if "\n" not in text and "\r" not in text:
            # Part of a long line: keep the pieces and join them once, not once per read.
            self._parts.append(text)
            self._held += len(text)
            if self._held > MAX_LINE_CHARS:
                raise ProtocolError(f"an event-stream line over {MAX_LINE_CHARS} characters")
            return []
        self._parts.append(text)
        buf = "".join(self._parts)
        self._parts, self._held = [], 0
        return self._lines(buf)

    def _lines(self, buf: str) -> list[SseEvent]:
        events: list[SseEvent] = []
        start = 0
        lf = buf.find("\n")
        cr = buf.find("\r")
        while lf >= 0 or cr >= 0:
            end = lf if cr < 0 or 0 <= lf < cr else cr
            line = buf[start:end]
            start = end + 1
            if end == cr:
                if start == len(buf):
                    self._after_cr = True
                elif buf[start] == "\n":
                    start += 1
            # Each position is searched for once: the next LF and CR are found only when passed.
            if lf >= 0 and lf < start:
                lf = buf.find("\n", start)
            if cr >= 0 and cr < start:
                cr = buf.find("\r", start)
            event = self._line(line)
            if event is not None:
                events.append(event)
        rest = buf[start:]
        if rest:
            self._parts, self._held = [rest], len(rest)
        return events

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            self.comments += 1
            return None
        name, colon, value = line.partition(":")
        if colon:
            value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
            self._data_chars += len(value) + 1
            if self._data_chars > MAX_EVENT_CHARS:
                raise ProtocolError(f"an event-stream event over {MAX_EVENT_CHARS} characters of data")
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        event, data = self._event, self._data
        self.last_event_id = self._id
        self._event, self._data, self._data_chars = "", [], 0
        if not data:
            return None
        return SseEvent(event or "message", "\n".join(data), self.last_event_id)


def _event_id(raw: str | None) -> int | None:
    return int(raw) if raw is not None and raw.isascii() and raw.isdigit() else None


def cell_event(sse: SseEvent) -> CellEvent:
    """The typed cell event an SSE event carries (its data is one JSON value)."""
    event_id = _event_id(sse.id)
    try:
        data: Any = json.loads(sse.data)
    except ValueError:
        if sse.event in ("status", "output", "pending", "envelope"):
            raise ProtocolError(f"{sse.event} event {sse.id} has data that is not JSON: {sse.data[:200]!r}") from None
        return UnknownEvent(event_id, sse.event, sse.data)
    if sse.event == "status":
        status = data.get("status") if isinstance(data, dict) else None
        if not isinstance(status, str):
            raise ProtocolError(f"status event {sse.id} without a status: {sse.data[:200]!r}")
        return StatusEvent(event_id, status, raw=data)
    if sse.event == "output":
        return OutputEvent(event_id, OutputEntry.parse(data), raw=data)
    if sse.event == "pending":
        if not isinstance(data, dict):
            raise ProtocolError(f"pending event {sse.id} is not a JSON object")
        reason = data.get("reason")
        calls = tuple(PendingCall.parse(p) for p in data.get("pending_tool_calls") or ())
        return PendingEvent(event_id, reason if isinstance(reason, str) else None, calls, raw=data)
    if sse.event == "envelope":
        return EnvelopeEvent(event_id, Envelope.parse(data), raw=data)
    return UnknownEvent(event_id, sse.event, data)
