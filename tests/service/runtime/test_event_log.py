"""The per-cell event log and the process's logs: bounded memory, gaps named, undelivered output, retention."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridge import jsoncodec
from service.errors import TooManyRequests
from service.runtime.envelopes import SealedEnvelope
from service.runtime.events import EVENT_OVERHEAD_BYTES, LOG_OVERHEAD_BYTES, EventLog, EventLogs


def undelivered(log: EventLog) -> list[Any]:
    """``take_undelivered()`` as the caller receives it (the entries are held encoded)."""
    entries: list[Any] = jsoncodec.loads(jsoncodec.dumps(log.take_undelivered()))
    return entries


def text(n: int, size: int = 100) -> dict[str, str]:
    return {"type": "text", "text": f"{n:06d}" + "x" * (size - 6)}


def payloads(log: EventLog, after: int = 0) -> list[tuple[int, str, object]]:
    return [(e.id, e.kind, json.loads(e.data)) for e in log.since(after)]


def final(output: list[object]) -> SealedEnvelope:
    envelope = {"status": "completed", "cell_id": "cell_1", "output": output, "value": "v"}
    return SealedEnvelope(envelope, json.dumps(envelope).encode())


def test_a_log_keeps_at_most_its_buffer_and_names_what_it_dropped():
    """1,000 output events into a 4 KiB log: it holds at most 4 KiB, and a reader from the start gets one
    `dropped` event for the lost ids, then consecutive events, none twice."""
    log = EventLog("cell_1", "t", 4096)
    log.output([text(i) for i in range(1000)])
    assert 0 < log.bytes <= 4096 and log.last_id == 1000
    events = log.since(0)
    dropped, kept = events[0], events[1:]
    assert dropped.kind == "dropped"
    info = json.loads(dropped.data)
    assert info["first_id"] == 1 and info["last_id"] == kept[0].id - 1 == dropped.id
    assert [e.id for e in kept] == list(range(kept[0].id, 1001))
    assert json.loads(kept[-1].data) == text(999)
    assert [e.id for e in log.since(kept[0].id)] == list(range(kept[0].id + 1, 1001))  # a caught-up reader: no marker


def test_an_event_larger_than_the_buffer_is_not_kept_but_its_gap_is_named():
    """A 10 KB entry in a 4 KiB log is never stored; readers see `dropped` for its id; a wait still gets it."""
    log = EventLog("cell_1", "t", 4096)
    log.output([text(1), text(2, size=10_000), text(3)], undelivered=True)
    assert [(i, k) for i, k, _ in payloads(log)] == [(1, "output"), (2, "dropped"), (3, "output")]
    assert log.bytes < 4096
    assert [e["text"][:6] for e in undelivered(log)] == ["000001", "000002", "000003"]


def test_the_envelope_is_kept_whatever_its_size_and_carries_no_output():
    """The final envelope event survives a full buffer; the final output goes out as output events before it."""
    log = EventLog("cell_1", "t", 4096)
    log.output([text(i) for i in range(100)])
    log.final(final([text(100), {"type": "json", "value": "x" * 8000}]))
    events = payloads(log, 100)
    assert [k for _, k, _ in events] == ["output", "dropped", "status", "envelope"]
    envelope = events[-1][2]
    assert envelope["status"] == "completed" and envelope["value"] == "v" and envelope["output"] == []
    assert log.ended and log.since(log.last_id) == []
    big = EventLog("cell_2", "t", 4096)
    envelope = {"status": "completed", "cell_id": "cell_2", "output": [], "value": "x" * 8000}
    big.final(SealedEnvelope(envelope, json.dumps(envelope).encode()))
    assert json.loads(big.since(big.last_id - 1)[0].data)["value"] == "x" * 8000  # kept though over the buffer


def test_output_a_reader_wrote_is_not_undelivered_and_a_newer_projection_replaces_a_marker():
    """delivered() takes an entry out of the next envelope; a truncation marker gives way to the output that follows."""
    log = EventLog("cell_1", "t", 1 << 20)
    log.output([text(1), text(2)], undelivered=True)
    log.delivered(log.since(0)[0])
    marker = {"truncated": True, "prefix": "[", "omittedBytes": 10, "guidance": "g"}
    log.output([marker], undelivered=True)
    log.output([text(3)], undelivered=True)
    assert [e.get("text", "")[:6] for e in undelivered(log)] == ["000002", "000003"]
    assert undelivered(log) == []


def test_status_events_only_on_change():
    log = EventLog("cell_1", "t", 1 << 20)
    for status in ("running", "running", "waiting", "running"):
        log.status(status)
    assert [p for _, _, p in payloads(log)] == [{"status": "running"}, {"status": "waiting"}, {"status": "running"}]


def test_finished_logs_are_kept_for_a_while_within_a_byte_cap():
    """Retired logs stay findable (same tenant only) until events_retain_seconds pass or the byte cap evicts them."""
    now = [0.0]
    logs = EventLogs(
        buffer_bytes=1 << 20,
        retain_seconds=60,
        retained_bytes=3 * (200 + EVENT_OVERHEAD_BYTES + LOG_OVERHEAD_BYTES),
        tenant_max_streams=2,
        clock=lambda: now[0],
    )
    for i in range(4):
        logs.open(f"cell_{i}", "t").output([text(i, size=170)])
        logs.retire(f"cell_{i}")
    assert logs.find("t", "cell_0") is None  # over the byte cap: the oldest went first
    assert logs.find("t", "cell_3") is not None and logs.find("other", "cell_3") is None
    now[0] = 61.0
    logs.sweep()
    assert logs.find("t", "cell_3") is None and logs.stats()["retained_bytes"] == 0


def test_stream_slots_are_capped_per_tenant():
    logs = EventLogs(buffer_bytes=4096, retain_seconds=1, retained_bytes=1 << 20, tenant_max_streams=2)
    first, _ = logs.stream_slot("a"), logs.stream_slot("a")
    with pytest.raises(TooManyRequests, match="tenant_max_event_streams=2"):
        logs.stream_slot("a")
    logs.stream_slot("b")  # another tenant is not affected
    first()
    first()  # a second release of the same slot frees nothing more
    assert logs.open_streams("a") == 1
    logs.stream_slot("a")
