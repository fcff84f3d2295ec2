"""Every kind of cell envelope the real service sends validates against ``CellEnvelope`` from /openapi.json.

The schema forbids fields it does not name, so an envelope field added without the schema (or a
schema field no envelope carries under that name) fails here.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from jsonschema import Draft202012Validator, ValidationError

from tests.conftest import parked_calls_settled, run
from tests.support.polling import poll_until


@pytest.fixture(scope="module")
def validator(client) -> Draft202012Validator:
    doc = client.get("/openapi.json").json()
    schema = {"$ref": "#/components/schemas/CellEnvelope", "components": doc["components"]}
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def check(validator: Draft202012Validator, envelope: dict[str, Any]) -> dict[str, Any]:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(envelope)]
    assert not errors, (errors, envelope)
    return envelope


def test_the_schema_refuses_what_is_never_sent(client, validator):
    """The check can fail: an unknown field, an unknown status and a telemetry without its counters are refused."""
    env = run(client, "return 1")
    check(validator, env)
    for bad in (
        {**env, "surprise": 1},
        {**env, "status": "parked"},
        {**env, "telemetry": {"wall_ms": 1.0}},
        {**env, "output": [{"type": "html", "text": "x"}]},
    ):
        with pytest.raises(ValidationError):
            validator.validate(bad)


def test_completed_envelope_with_text_json_and_truncated_output(client, validator):
    """A completed cell with text, json and a truncation marker in its output matches the schema."""
    full = check(validator, run(client, 'text("hi"); json({a: [1, 2]}); return {v: 1}'))
    assert full["status"] == "completed" and [e["type"] for e in full["output"]] == ["text", "json"]
    cut = check(validator, run(client, 'text("x".repeat(100000)); return 1', max_output_bytes=1024))
    assert cut["status"] == "completed" and cut["output"][0]["truncated"] is True, cut


def test_untrusted_envelope(client, validator):
    """A cell that saw network-derived data carries untrusted_content, which the schema names."""
    env = check(validator, run(client, 'await news(); text("read it"); return 1'))
    assert env["untrusted_content"] is True


def test_waiting_envelopes_and_their_status(client, validator):
    """Waiting on a client tool (with input) and on yield_control; GET shows both parked cells."""
    tool = check(validator, run(client, "return await ask({q: 1})", client_tools=[{"name": "ask"}]))
    assert tool["status"] == "waiting" and tool["pending_tool_calls"][0]["input"] == {"q": 1}, tool
    parked = check(validator, client.get(f"/v1/cells/{tool['cell_id']}").json())
    assert parked["status"] == "waiting" and parked["reason"] == "pending_tools"
    yielded = check(validator, run(client, 'await yield_control("checkpoint"); return 1'))
    assert yielded["reason"] == "yield"
    for env in (tool, yielded):
        client.post(f"/v1/cells/{env['cell_id']}/cancel")


@pytest.mark.parametrize(
    ("code", "phase"),
    [
        ("ls -la", "input"),  # refused by the source pre-check, before any worker
        ("return (", "input"),  # a syntax error from the guest engine
        ("null.boom", "guest"),
        ("void fail({}); return 1", "bridge"),
    ],
)
def test_failed_envelope_of_each_phase(client, validator, code, phase):
    """A failed envelope of every failure phase matches the schema."""
    env = check(validator, run(client, code))
    assert env["status"] == "failed" and env["failure_phase"] == phase, env


def test_host_failure_and_finished_summary(client, validator):
    """Cancelling a parked cell fails it in the host phase; GET then shows its bounded summary."""
    env = run(client, "await echo({x: 1, delay: 5}); return 1", timeout_ms=150)
    assert env["status"] == "waiting", env
    cancelled = check(validator, client.post(f"/v1/cells/{env['cell_id']}/cancel").json())
    assert cancelled["failure_phase"] == "host" and cancelled["code"] == "aborted"
    summary = check(validator, client.get(f"/v1/cells/{env['cell_id']}").json())
    assert summary["status"] == "failed" and "output" not in summary
    done = run(client, 'text("x"); return 1')
    summary = check(validator, client.get(f"/v1/cells/{done['cell_id']}").json())
    assert summary["status"] == "completed" and "value" not in summary


def test_running_status_during_a_leg(client, validator):
    """GET /v1/cells/{id} while a wait leg runs answers "running", which the schema allows."""
    env = run(client, "await echo({x: 1, delay: 0.2}); while (true) {}", timeout_ms=100)
    assert env["status"] == "waiting", env
    poll_until(lambda: parked_calls_settled(client, env["cell_id"]), "the parked cell's tool call settles")
    box: dict[str, Any] = {}
    leg = threading.Thread(
        target=lambda: box.setdefault("r", client.post(f"/v1/cells/{env['cell_id']}/wait", json={"timeout_ms": 20000}))
    )
    leg.start()
    try:
        running = poll_until(
            lambda: (s := client.get(f"/v1/cells/{env['cell_id']}").json())["status"] == "running" and s,
            "the wait leg reports running",
        )
        check(validator, running)
    finally:
        client.post(f"/v1/cells/{env['cell_id']}/cancel")
        leg.join(10)
    check(validator, box["r"].json())


def test_background_envelopes(client, validator):
    """A background exec's `running`, a wait that times out while it runs (with output), GET while it runs, and
    its final envelope all match the schema."""
    started = check(validator, run(client, 'text("a"); await echo({x: 1, delay: 0.5}); return 1', background=True))
    assert started["status"] == "running" and started["output"] == []
    cell_id = started["cell_id"]
    check(validator, client.get(f"/v1/cells/{cell_id}").json())
    still = check(validator, client.post(f"/v1/cells/{cell_id}/wait", json={"timeout_ms": 100}).json())
    assert still["status"] == "running", still
    done = check(validator, client.post(f"/v1/cells/{cell_id}/wait", json={"timeout_ms": 20000}).json())
    assert done["status"] == "completed"
