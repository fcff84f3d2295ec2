"""Sealed final envelopes (encoded once, read-only) and bounded finished-cell summaries."""

from __future__ import annotations

import json

import pytest

from service.api.schemas import CellEnvelope, CellTelemetry
from service.http.responses import JSONBytes
from service.runtime import envelopes
from service.runtime.envelopes import SUMMARY_TEXT_BYTES, SUMMARY_WARNINGS, Envelope, SealedEnvelope, finished_summary
from service.runtime.spec import Telemetry, TelemetryFields

FAILED = {
    "status": "failed",
    "cell_id": "cell_x",
    "output": [{"type": "text", "text": "o" * 10_000}],
    "error": "Error: " + "😀" * 5000,
    "code": "uncaught_error",
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


def _kinds() -> dict[str, Envelope]:
    """One envelope of each kind, built by its builder."""
    leg = {"bridge_dispatch_started": True, "replay_safe": False, "telemetry": Telemetry(legs=1).public(2.5, 1.0, 1.0)}
    text = [{"type": "text", "text": "hi"}, {"type": "json", "value": {"a": [1]}}]
    pending = [{"id": "req_1", "method": "tool", "name": "ask", "input": {"q": 1}}]
    done = envelopes.failed("cell_f", error="Error: no", code="guest_error", phase="guest", output=text, **leg)
    return {
        "completed": envelopes.completed("cell_c", value={"n": 1}, output=text, **leg),
        "waiting": envelopes.waiting("cell_w", output=[], reason="pending_tools", pending_tool_calls=pending, **leg),
        "failed": done,
        "input_refusal": envelopes.input_refusal("code is empty"),
        "running": envelopes.status_snapshot("cell_r", status="running", **leg),
        "waiting_snapshot": envelopes.status_snapshot(
            "cell_s", status="waiting", reason="yield", pending_tool_calls=pending, **leg
        ),
        "finished_summary": envelopes.finished_summary(done),
    }


@pytest.mark.parametrize("kind", sorted(_kinds()))
def test_each_envelope_kind_is_a_valid_cell_envelope(kind):
    """Every builder's envelope, plain and marked untrusted, validates against the API's wire model
    (which refuses unknown fields)."""
    envelope = _kinds()[kind]
    CellEnvelope.model_validate(envelope)
    untrusted = envelope.copy()
    envelopes.mark_untrusted(untrusted)
    CellEnvelope.model_validate(untrusted)


def test_the_envelope_types_name_the_wire_models_fields():
    """``Envelope`` and ``TelemetryFields`` have the wire models' fields, required where the model requires them."""
    for typed, model in ((Envelope, CellEnvelope), (TelemetryFields, CellTelemetry)):
        # The annotations are postponed (forward references), in which __required_keys__ cannot see NotRequired.
        hints = typed.__annotations__
        required = {name for name, hint in hints.items() if not hint.__forward_arg__.startswith("NotRequired[")}
        fields = model.model_fields
        assert set(hints) == set(fields), typed.__name__
        assert required == {name for name, field in fields.items() if field.is_required()}, typed.__name__
