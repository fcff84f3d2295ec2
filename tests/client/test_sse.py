"""The event-stream parser, fed byte streams cut at every possible place, and the typed cell events."""

from __future__ import annotations

import json

import codemode_client.sse as sse
import pytest
from codemode_client import EnvelopeEvent, OutputEvent, PendingEvent, ProtocolError, StatusEvent, UnknownEvent
from codemode_client.sse import SseEvent, SseParser, cell_event

ENVELOPE = {
    "status": "completed",
    "cell_id": "cell_1",
    "value": 42,
    "output": [],
    "bridge_dispatch_started": False,
    "replay_safe": True,
    "telemetry": {"wall_ms": 1.0},
}

STREAM = (
    ": keep-alive\n"
    "retry: 1500\n"
    'id: 1\nevent: status\ndata: {"status": "running"}\n\n'
    ": keep-alive\r\n"
    'id: 2\r\nevent: output\r\ndata: {"type": "text",\r\ndata:  "text": "h\u00e9llo \U0001f600"}\r\n\r\n'
    'id: 3\revent: pending\rdata: {"reason": "pending_tools", "pending_tool_calls": '
    '[{"id": "req_1", "method": "tool", "tool": "lookup", "input": {"q": 1}}]}\r\r'
    f"id: 4\nevent: envelope\ndata: {json.dumps(ENVELOPE)}\n\n"
).encode()

EXPECTED = [
    SseEvent("status", '{"status": "running"}', "1"),
    SseEvent("output", '{"type": "text",\n "text": "h\u00e9llo \U0001f600"}', "2"),
    SseEvent(
        "pending",
        '{"reason": "pending_tools", "pending_tool_calls": '
        '[{"id": "req_1", "method": "tool", "tool": "lookup", "input": {"q": 1}}]}',
        "3",
    ),
    SseEvent("envelope", json.dumps(ENVELOPE), "4"),
]


def parse(chunks: list[bytes]) -> tuple[list[SseEvent], SseParser]:
    parser = SseParser()
    events = [e for chunk in chunks for e in parser.feed(chunk)]
    return events, parser


def test_whole_stream_in_one_read():
    """LF, CRLF and CR line ends, comments, multi-line data and ids give the four events, retry is read."""
    events, parser = parse([STREAM])
    assert events == EXPECTED
    assert parser.retry_ms == 1500 and parser.comments == 2 and parser.last_event_id == "4"


def test_every_split_point_gives_the_same_events():
    """Cut in two anywhere (mid-line, between CR and LF, inside a multi-byte character): the same events."""
    for cut in range(len(STREAM) + 1):
        events, _ = parse([STREAM[:cut], STREAM[cut:]])
        assert events == EXPECTED, cut


def test_one_byte_at_a_time():
    """A stream arriving one byte per read parses exactly as when it arrives whole."""
    events, parser = parse([STREAM[i : i + 1] for i in range(len(STREAM))])
    assert events == EXPECTED and parser.comments == 2


def test_field_rules():
    """One leading space is dropped, a field without colon has an empty value, unnamed events are
    'message', data-less events are not dispatched, a NUL id and a non-digit retry are ignored."""
    events, parser = parse(
        [
            b"data:  two spaces\n\n"
            b"data\n\n"
            b"event: nothing\n\n"
            b"id: 7\nretry: 12a\ndata: x\n\n"
            b"id: 8\x00\ndata: y\n\n"
            b"unknown: field\ndata:z\n\n"
        ]
    )
    assert events == [
        SseEvent("message", " two spaces", None),
        SseEvent("message", "", None),
        SseEvent("message", "x", "7"),
        SseEvent("message", "y", "7"),
        SseEvent("message", "z", "7"),
    ]
    assert parser.retry_ms is None


def test_byte_order_mark_is_skipped_once():
    """A UTF-8 BOM opening the stream is not part of the first field name."""
    events, _ = parse([b"\xef\xbb", b"\xbfdata: a\n\n"])
    assert events == [SseEvent("message", "a", None)]


def test_an_event_cut_off_by_the_end_of_the_stream_does_not_count():
    """Without its blank line an event is not dispatched, and its id is not the id to resume after."""
    events, parser = parse([b"id: 1\ndata: a\n\nid: 2\ndata: b\n"])
    assert events == [SseEvent("message", "a", "1")]
    assert parser.last_event_id == "1"


def test_seeded_last_event_id_persists():
    """A parser for a reconnection starts from the id resumed after (events without id carry it)."""
    parser = SseParser("41")
    assert parser.feed(b"data: a\n\n") == [SseEvent("message", "a", "41")]


def test_overlong_line_is_refused(monkeypatch):
    """A line past the cap raises ProtocolError instead of buffering without end."""
    monkeypatch.setattr(sse, "MAX_LINE_CHARS", 100)
    parser = SseParser()
    parser.feed(b"data: " + b"x" * 60)
    with pytest.raises(ProtocolError, match="line over 100"):
        parser.feed(b"x" * 60)


def test_overlong_event_is_refused(monkeypatch):
    """Many data lines past the event cap raise ProtocolError too."""
    monkeypatch.setattr(sse, "MAX_EVENT_CHARS", 100)
    with pytest.raises(ProtocolError, match="event over 100"):
        SseParser().feed(b"data: 0123456789\n" * 20)


# ---- typed events -------------------------------------------------------------------------------


def test_cell_events_are_typed():
    """status/output/pending/envelope become their dataclasses with integer ids and parsed fields."""
    status, output, pending, envelope = (cell_event(e) for e in EXPECTED)
    assert isinstance(status, StatusEvent) and status.id == 1 and status.status == "running"
    assert isinstance(output, OutputEvent) and output.entry.kind == "text"
    assert output.entry.text == "h\u00e9llo \U0001f600"
    assert isinstance(pending, PendingEvent) and pending.reason == "pending_tools"
    (call,) = pending.pending_tool_calls
    assert call.id == "req_1" and call.tool == "lookup" and call.input == {"q": 1} and call.is_client_tool
    assert isinstance(envelope, EnvelopeEvent) and envelope.id == 4
    assert envelope.envelope.value == 42 and envelope.envelope.is_final and envelope.envelope.raw == ENVELOPE


def test_output_entries_of_every_kind():
    """A json entry keeps its value; the truncation marker becomes kind 'truncated' with its prefix."""
    marker = {"truncated": True, "prefix": "[1,2", "omittedBytes": 9, "guidance": "narrow it"}
    json_entry = cell_event(SseEvent("output", json.dumps({"type": "json", "value": [1]}), "5"))
    truncated = cell_event(SseEvent("output", json.dumps(marker), "6"))
    assert isinstance(json_entry, OutputEvent) and json_entry.entry.value == [1]
    assert isinstance(truncated, OutputEvent) and truncated.entry.kind == "truncated"
    assert truncated.entry.text == "[1,2" and truncated.entry.raw["omittedBytes"] == 9


def test_unknown_events_pass_through_and_broken_known_ones_raise():
    """An event type from a newer service is kept as UnknownEvent; a status event without JSON raises."""
    unknown = cell_event(SseEvent("progress", "not json", "9"))
    assert unknown == UnknownEvent(9, "progress", "not json")
    with pytest.raises(ProtocolError, match="status event 3"):
        cell_event(SseEvent("status", "{oops", "3"))
    with pytest.raises(ProtocolError, match="without a status"):
        cell_event(SseEvent("status", "{}", "3"))
