"""Reading a Server-Sent Events stream the way a browser's EventSource does (tests only)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event, or a comment line (``kind == ":"``, text in ``data``)."""

    id: int | None
    kind: str
    data: Any
    at: float  # time.monotonic() when the reader saw it


def events(response: httpx.Response) -> Iterator[SseEvent]:
    """Events and comments of a streaming response, as they arrive."""
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if line.startswith(":"):
            yield SseEvent(None, ":", line[1:].strip(), time.monotonic())
            continue
        if line == "":
            if "data" in fields:
                raw_id = fields.get("id")
                yield SseEvent(
                    int(raw_id) if raw_id else None,
                    fields.get("event", "message"),
                    json.loads(fields["data"]),
                    time.monotonic(),
                )
            fields = {}
            continue
        name, _, value = line.partition(":")
        fields[name] = value[1:] if value.startswith(" ") else value


def read_until(stream: Iterator[SseEvent], kind: str, *, skip_comments: bool = True) -> list[SseEvent]:
    """Events up to and including the first of ``kind`` (comments left out unless asked for)."""
    seen = []
    for event in stream:
        if event.kind == ":" and skip_comments:
            continue
        seen.append(event)
        if event.kind == kind:
            return seen
    raise AssertionError(f"the stream ended before a {kind!r} event: {seen}")
