"""run()'s loop over the wire contract, against a scripted service: what it sends for each stop.

These pin what the client sends for each kind of stop, exactly; test_background_approvals.py runs
the same flows through a real server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from codemode_client import AsyncClient, Client, Envelope, RunLimitError
from codemode_client.tools import NO_APPROVER_REASON, RunState


def envelope(status: str, **fields: Any) -> dict[str, Any]:
    return {
        "status": status,
        "cell_id": "cell_1",
        "output": [],
        "bridge_dispatch_started": False,
        "replay_safe": True,
        "telemetry": {},
        **fields,
    }


APPROVAL = {
    "id": "req_1",
    "method": "approval",
    "tool": "quote_shipping",
    "input": {"weight_kg": 2},
    "reason": "quote_shipping needs approval",
}
CLIENT_CALL = {"id": "req_2", "method": "tool", "tool": "lookup", "name": "lookup", "input": {"q": "x"}}
HOST_CALL = {"id": "req_3", "method": "tool", "tool": "slow_host_tool"}

SCRIPT = [
    envelope("running", output=[{"type": "text", "text": "1"}]),
    envelope(
        "waiting",
        reason="pending_tools",
        pending_tool_calls=[APPROVAL, CLIENT_CALL, HOST_CALL],
        output=[{"type": "text", "text": "2"}],
    ),
    envelope("waiting", reason="yield", pending_tool_calls=[{"id": "req_4", "method": "yield"}]),
    envelope("completed", value="done", output=[{"type": "json", "value": 3}]),
]


class Scripted:
    """Answers exec and each wait with the next envelope of the script, recording the request bodies."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = list(script)
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.transport = httpx.MockTransport(self.answer)

    def answer(self, request: httpx.Request) -> httpx.Response:
        assert request.method == "POST"
        self.requests.append((request.url.path, json.loads(request.content) if request.content else {}))
        return httpx.Response(200, json=self.script.pop(0))

    def sync(self) -> httpx.Client:
        return httpx.Client(transport=self.transport)


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    yield Scripted(SCRIPT)


def check_requests(service: Scripted, approval_answer: dict[str, Any]) -> None:
    (exec_path, exec_body), *waits = service.requests
    assert exec_path == "/v1/exec" and exec_body["background"] is True and exec_body["session_id"] == "s1"
    assert exec_body["client_tools"] == [{"name": "lookup", "input_schema": {"type": "object"}}]
    assert [path for path, _ in waits] == ["/v1/cells/cell_1/wait"] * 3
    # running: wait again with nothing to answer; waiting: one approval and one client result (the host
    # tool's call is not the caller's to answer); yield: nothing to answer.
    assert waits[0][1] == {"session_id": "s1"}
    assert waits[1][1] == {
        "session_id": "s1",
        "approvals": [approval_answer],
        "tool_results": [{"id": "req_2", "ok": True, "value": {"found": "x"}}],
    }
    assert waits[2][1] == {"session_id": "s1"}


def test_run_answers_approvals_client_tools_and_yields(scripted: Scripted):
    """The approver sees the pending entry; its (False, reason) is sent; output of every leg is kept in order."""
    seen: list[Any] = []

    def approve(call):
        seen.append((call.id, call.tool, call.input, call.reason, call.is_approval))
        return False, "not today"

    with Client("http://testserver", http_client=scripted.sync()) as client:
        env = client.run(
            "x", client_tools={"lookup": lambda p: {"found": p["q"]}}, approve=approve, background=True, session_id="s1"
        )
    assert env.status == "completed" and env.value == "done"
    assert [(e.kind, e.text, e.value) for e in env.output] == [
        ("text", "1", None),
        ("text", "2", None),
        ("json", None, 3),
    ]
    assert env.raw == SCRIPT[-1]
    assert seen == [("req_1", "quote_shipping", {"weight_kg": 2}, "quote_shipping needs approval", True)]
    check_requests(scripted, {"id": "req_1", "approve": False, "reason": "not today"})


def test_without_an_approver_approvals_are_denied_saying_why(scripted: Scripted):
    """approve=None answers every approval with approve: false and a reason naming the missing approver."""
    with Client("http://testserver", http_client=scripted.sync()) as client:
        client.run("x", client_tools={"lookup": lambda p: {"found": p["q"]}}, background=True, session_id="s1")
    check_requests(scripted, {"id": "req_1", "approve": False, "reason": NO_APPROVER_REASON})


@pytest.mark.anyio
async def test_async_run_awaits_an_async_approver(scripted: Scripted):
    """AsyncClient.run awaits the approver and the handler; True is sent as approve: true without reason."""

    async def approve(call):
        return True

    async def lookup(params):
        return {"found": params["q"]}

    http = httpx.AsyncClient(transport=scripted.transport)
    async with AsyncClient("http://testserver", http_client=http) as client:
        env = await client.run("x", client_tools={"lookup": lookup}, approve=approve, background=True, session_id="s1")
    await http.aclose()
    assert env.value == "done"
    check_requests(scripted, {"id": "req_1", "approve": True})


def test_an_approver_that_raises_stops_run(scripted: Scripted):
    """The approver's own exception propagates (the cell stays parked; nothing is guessed for it)."""

    def approve(call):
        raise RuntimeError("approver is down")

    with Client("http://testserver", http_client=scripted.sync()) as client:
        with pytest.raises(RuntimeError, match="approver is down"):
            client.run("x", client_tools={"lookup": lambda p: p}, approve=approve, background=True, session_id="s1")
    assert len(scripted.requests) == 2  # exec and the first wait; the waiting stop was never answered


YIELDED = envelope("waiting", reason="yield", pending_tool_calls=[{"id": "req_9", "method": "yield"}])
ASKED = envelope("waiting", reason="pending_tools", pending_tool_calls=[CLIENT_CALL])


def test_run_pauses_before_resuming_a_stop_that_only_yielded(scripted: Scripted, monkeypatch):
    """Each yield-only stop is resumed after a pause that doubles from 50 ms up to 2 s; a stop that needed
    an answer resets it, and one answered (a client tool call) is resumed at once."""
    scripted.script = [YIELDED] * 8 + [ASKED, YIELDED, envelope("completed", value=1)]
    pauses: list[float] = []
    monkeypatch.setattr("codemode_client.client._sleep", pauses.append)
    with Client("http://testserver", http_client=scripted.sync()) as client:
        env = client.run("x", client_tools={"lookup": lambda p: 1})
    assert env.value == 1 and len(scripted.requests) == 11
    assert pauses == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 0.05]


def test_run_stops_a_cell_at_max_legs_cancelling_it(scripted: Scripted, monkeypatch):
    """With max_legs=3, the third stop is not resumed: the cell is cancelled and RunLimitError names the bound."""
    scripted.script = [YIELDED] * 3 + [envelope("failed", code="aborted")]
    monkeypatch.setattr("codemode_client.client._sleep", lambda s: None)
    with Client("http://testserver", http_client=scripted.sync()) as client:
        with pytest.raises(RunLimitError) as caught:
            client.run("x", max_legs=3)
    assert caught.value.code == "max_legs_exceeded" and caught.value.cell_id == "cell_1"
    assert "max_legs=3" in caught.value.message and caught.value.envelope.reason == "yield"
    assert [path for path, _ in scripted.requests] == [
        "/v1/exec",
        "/v1/cells/cell_1/wait",
        "/v1/cells/cell_1/wait",
        "/v1/cells/cell_1/cancel",
    ]


@pytest.mark.anyio
async def test_async_run_is_bounded_alike(scripted: Scripted, monkeypatch):
    """AsyncClient.run pauses (awaiting) and stops at max_legs the same way."""
    scripted.script = [YIELDED] * 3 + [envelope("failed", code="aborted")]
    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)

    monkeypatch.setattr("codemode_client.async_client._sleep", pause)
    http = httpx.AsyncClient(transport=scripted.transport)
    async with AsyncClient("http://testserver", http_client=http) as client:
        with pytest.raises(RunLimitError, match="max_legs=3"):
            await client.run("x", max_legs=3)
    await http.aclose()
    assert pauses == [0.05, 0.1, 0.2] and scripted.requests[-1][0] == "/v1/cells/cell_1/cancel"


def test_the_deadline_bounds_the_pauses_and_the_run():
    """By the run's clock: a pause never outlasts the deadline, and past it the next wait is refused."""
    now = [0.0]
    state = RunState(max_legs=100, deadline=1.0, clock=lambda: now[0])
    yielded = Envelope.parse(YIELDED)
    assert state.pause(yielded, answered=False) == 0.05
    now[0] = 0.95
    assert state.over(yielded) is None
    assert state.pause(yielded, answered=False) == pytest.approx(0.05)  # 0.1 due, 0.05 left
    now[0] = 1.0
    over = state.over(yielded)
    assert over is not None and over.code == "deadline_exceeded" and "deadline=1 s" in over.message
    assert RunState(deadline=None).pause(yielded, answered=False) == 0.05


@pytest.mark.parametrize("bounds", [{"max_legs": 0}, {"max_legs": True}, {"deadline": 0}, {"deadline": -1.0}])
def test_bounds_out_of_range_are_refused(bounds):
    with pytest.raises(ValueError, match=next(iter(bounds))):
        RunState(**bounds)
