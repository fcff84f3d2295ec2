"""The client over background cells, their event stream and approvals, through a real server."""

from __future__ import annotations

import pytest
from codemode_client import AsyncClient, Client, EnvelopeEvent, OutputEvent, PendingEvent, StatusEvent
from codemode_client.tools import NO_APPROVER_REASON

from tests.client.conftest import API_KEY

pytestmark = pytest.mark.slow

QUOTE = '{origin: "DE", destination: "FR", weight_kg: 2}'
STREAMING = f"""
text("a");
await new Promise(r => setTimeout(r, 150));
text("b");
const quote = await quote_shipping({QUOTE});
text("c");
await new Promise(r => setTimeout(r, 150));
return quote.currency;
"""


def texts(events: list[object]) -> list[str | None]:
    return [e.entry.text for e in events if isinstance(e, OutputEvent)]


def test_background_cell_streams_output_while_it_sleeps_and_calls_a_tool(client: Client):
    """exec(background=True) answers running at once; the stream brings a, b, c as produced, then the
    envelope, which does not repeat them."""
    started = client.exec(STREAMING, background=True)
    assert started.status == "running" and started.output == ()
    events = list(client.events(started.cell_id))
    assert texts(events) == ["a", "b", "c"]
    final = events[-1]
    assert isinstance(final, EnvelopeEvent) and final.envelope.status == "completed"
    assert final.envelope.value == "USD" and final.envelope.output == ()
    assert any(isinstance(e, StatusEvent) for e in events)
    ids = [e.id for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_events_resume_after_last_event_id_without_duplicates(client: Client):
    """Leave the stream after two events and reopen it with last_event_id: the rest arrive once each."""
    started = client.exec(STREAMING, background=True)
    with client.events(started.cell_id) as stream:
        head = [next(stream), next(stream)]
        resume_after = stream.last_event_id
    assert resume_after == str(head[-1].id)
    tail = list(client.events(started.cell_id, last_event_id=resume_after))
    events = head + tail
    assert [e.id for e in events] == list(range(events[0].id or 0, (events[0].id or 0) + len(events)))
    assert texts(events) == ["a", "b", "c"] and isinstance(events[-1], EnvelopeEvent)


def test_run_drives_a_background_cell_with_a_client_tool(client: Client):
    """run(background=True) waits through running answers, calls the client tool, returns the final envelope."""
    env = client.run(
        'text("x"); const r = await lookup({q: 2}); await new Promise(r => setTimeout(r, 100)); return r.n * 10',
        client_tools={"lookup": lambda p: {"n": p["q"]}},
        background=True,
    )
    assert env.status == "completed" and env.value == 20, env.error


@pytest.mark.anyio
async def test_async_events_stream_to_the_envelope(base_url: str):
    """AsyncClient.events yields the same typed events, ending with the envelope."""
    async with AsyncClient(base_url, API_KEY) as client:
        started = await client.exec(STREAMING, background=True)
        events = [e async for e in client.events(started.cell_id)]
    assert texts(events) == ["a", "b", "c"]
    assert isinstance(events[-1], EnvelopeEvent) and events[-1].envelope.value == "USD"


# ---- approvals -----------------------------------------------------------------------------------

APPROVAL_CODE = f"""
try {{
  const quote = await quote_shipping({QUOTE});
  return {{ran: true, currency: quote.currency}};
}} catch (e) {{
  return {{ran: false, code: e.code, message: e.message}};
}}
"""


def test_run_approves_a_call_and_the_tool_runs(client: Client):
    """The approver sees the pending entry (tool, input); approved, the guest's await gets the tool's result."""
    asked = []

    def approve(call):
        asked.append((call.method, call.tool, call.input))
        return True

    env = client.run(APPROVAL_CODE, approve=approve, require_approval=["quote_shipping"])
    assert env.value == {"ran": True, "currency": "USD"}, env.error
    assert asked == [("approval", "quote_shipping", {"origin": "DE", "destination": "FR", "weight_kg": 2})]
    assert env.bridge_dispatch_started


def test_run_denies_with_the_approvers_reason(client: Client):
    """(False, reason): the guest's call rejects with approval_denied and the reason; nothing was dispatched."""
    env = client.run(APPROVAL_CODE, approve=lambda call: (False, "over budget"), require_approval=["quote_shipping"])
    assert env.value["ran"] is False and env.value["code"] == "approval_denied", env.value
    assert "over budget" in env.value["message"]
    assert env.bridge_dispatch_started is False


def test_run_without_an_approver_denies_saying_so(client: Client):
    """approve=None: denied, the message says no approver was given."""
    env = client.run(APPROVAL_CODE, require_approval=["quote_shipping"])
    assert env.value["code"] == "approval_denied" and NO_APPROVER_REASON in env.value["message"], env.value


def test_run_answers_a_client_tool_and_an_approval_in_one_cell(client: Client):
    """One cell needing both: run() calls the client tool and asks the approver, then returns the value."""
    code = f"const q = await quote_shipping({QUOTE}); const n = await note({{text: q.currency}}); return n"
    env = client.run(
        code,
        client_tools={"note": lambda p: "noted " + p["text"]},
        approve=lambda call: True,
        require_approval=["quote_shipping"],
    )
    assert env.status == "completed" and env.value == "noted USD", env.error


def test_a_backend_hears_the_approval_on_the_stream_and_answers_it(client: Client):
    """Start in the background, do nothing until the pending event, answer the approval, read the envelope
    from the stream: no polling request, and the cell runs once."""
    started = client.exec('text("asking"); ' + APPROVAL_CODE, background=True, require_approval=["quote_shipping"])
    answered = []
    with client.events(started.cell_id) as stream:
        for event in stream:
            if isinstance(event, PendingEvent):
                (call,) = event.pending_tool_calls
                assert call.is_approval and call.tool == "quote_shipping"
                client.wait(started.cell_id, approvals=[{"id": call.id, "approve": True}], timeout_ms=100)
                answered.append(call.id)
            if isinstance(event, EnvelopeEvent):
                final = event.envelope
    assert len(answered) == 1
    assert final.status == "completed" and final.value == {"ran": True, "currency": "USD"}
    assert final.telemetry.get("legs", 0) >= 1
