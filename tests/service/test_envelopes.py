"""Sealed final envelopes (encoded once, read-only) and bounded finished-cell summaries."""

from __future__ import annotations

import json

import pytest

from service.cells.envelopes import SUMMARY_TEXT_BYTES, SUMMARY_WARNINGS, SealedEnvelope, finished_summary
from service.http.responses import JSONBytes

FAILED = {
    "status": "failed",
    "cell_id": "cell_x",
    "output": [{"type": "text", "text": "o" * 10_000}],
    "error": "Error: " + "😀" * 5000,
    "code": "internal_error",
    "failure_phase": "guest",
    "warnings": ["w" * 10_000] * 50,
    "bridge_dispatch_started": True,
    "replay_safe": False,
    "telemetry": {"wall_ms": 1.0},
    "value": "v" * 10_000,
    "extra": "x" * 10_000,
}


def test_sealed_envelope_is_sent_as_encoded_and_cannot_change():
    """The HTTP response carries the bytes made when the cell ended; mutation is refused."""
    sealed = SealedEnvelope({"status": "completed", "value": 1}, b'{"status":"completed","value":1}')
    assert JSONBytes(sealed).body == sealed.encoded
    assert sealed == {"status": "completed", "value": 1}
    for mutate in (
        lambda e: e.__setitem__("value", 2),
        lambda e: e.pop("value"),
        lambda e: e.update(a=1),
        lambda e: e.setdefault("a", 1),
        lambda e: e.clear(),
        lambda e: e.__delitem__("value"),
    ):
        with pytest.raises(TypeError, match="read-only"):
            mutate(sealed)
    assert json.loads(sealed.encoded) == sealed


def test_finished_summary_bounds_every_field():
    """The summary keeps outcome fields only; error and warnings are cut UTF-8-safely and marked."""
    summary = finished_summary(FAILED)
    assert set(summary) == {
        "status",
        "cell_id",
        "error",
        "code",
        "failure_phase",
        "warnings",
        "bridge_dispatch_started",
        "replay_safe",
        "telemetry",
    }
    assert summary["error"].startswith("Error: 😀") and summary["error"].endswith(" [error truncated]")
    assert len(summary["error"].encode()) <= SUMMARY_TEXT_BYTES
    assert len(summary["warnings"]) == SUMMARY_WARNINGS
    assert all(len(w.encode()) <= SUMMARY_TEXT_BYTES for w in summary["warnings"])
    assert len(json.dumps(summary, ensure_ascii=False).encode()) < (SUMMARY_WARNINGS + 2) * SUMMARY_TEXT_BYTES


def test_finished_summary_keeps_short_errors_whole():
    """A short error is not marked."""
    assert finished_summary({**FAILED, "error": "Error: boom"})["error"] == "Error: boom"
