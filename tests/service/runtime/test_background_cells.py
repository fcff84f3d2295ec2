"""Background cells through the real service (worker processes, QuickJS): wait, status, cancel, bounds, quotas."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.auth import LOCAL_TENANT
from tests.conftest import make_client, run
from tests.support.polling import poll_until

ASK = [{"name": "ask"}]
SLEEP = "await new Promise(r => setTimeout(r, {ms}));"


def start(client: TestClient, code: str, **fields: Any) -> str:
    envelope = run(client, code, background=True, **fields)
    assert envelope["status"] == "running" and envelope["output"] == [], envelope
    return envelope["cell_id"]  # type: ignore[no-any-return]


def wait(client: TestClient, cell_id: str, **body: Any) -> dict[str, Any]:
    r = client.post(f"/v1/cells/{cell_id}/wait", json={"timeout_ms": 20000, **body})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def texts(envelope: dict[str, Any]) -> list[str]:
    return [entry["text"] for entry in envelope["output"]]


def test_exec_answers_at_once_and_wait_answers_only_new_output(client):
    """exec answers `running` before the cell's 300 ms timer fires; a short wait answers `running` with the output so
    far; the next wait blocks until the cell completes and answers only the rest; the result is then delivered."""
    cell_id = start(
        client, 'text("a");' + SLEEP.format(ms=300) + 'text("b"); await echo({x: 1, delay: 0.2});text("c"); return "v"'
    )
    assert client.get(f"/v1/cells/{cell_id}").json()["status"] == "running"
    first = wait(client, cell_id, timeout_ms=100)
    assert first["status"] == "running" and texts(first) in ([], ["a"]), first
    done = wait(client, cell_id)
    assert done["status"] == "completed" and done["value"] == "v"
    assert texts(first) + texts(done) == ["a", "b", "c"]
    assert done["telemetry"]["legs"] >= 3  # one leg per stretch between host work: it ran on its own
    assert client.get(f"/v1/cells/{cell_id}").json()["status"] == "completed"
    r = client.post(f"/v1/cells/{cell_id}/wait", json={})
    assert r.status_code == 404 and "delivered" in r.json()["error"]["message"]


def test_cell_wall_ms_is_the_cells_run_time_and_wall_ms_the_calls(client):
    """telemetry.cell_wall_ms counts from the exec, across the time the background cell ran before the wait
    that collected it (at least its 400 ms timer); wall_ms is only that wait's; an exec answered at once
    has one call, which its cell_wall_ms covers."""
    cell_id = start(client, SLEEP.format(ms=400) + "return 1")
    poll_until(lambda: client.get(f"/v1/cells/{cell_id}").json()["status"] == "completed", "the cell completed")
    times = wait(client, cell_id)["telemetry"]
    assert times["cell_wall_ms"] >= 400 and times["cell_wall_ms"] > times["wall_ms"], times
    quick = run(client, "return 1")["telemetry"]
    assert quick["cell_wall_ms"] >= quick["wall_ms"], quick


def test_a_cell_that_needs_its_caller_waits_for_a_wait(client):
    """The run stops at a client tool call (status waiting with the call); the wait's answer resumes it."""
    cell_id = start(
        client, 'text("asking"); const v = await ask({q: 1}); text("got " + v); return v * 2', client_tools=ASK
    )
    parked = wait(client, cell_id)
    assert parked["status"] == "waiting" and parked["reason"] == "pending_tools", parked
    assert texts(parked) == ["asking"]
    [call] = parked["pending_tool_calls"]
    assert call["tool"] == "ask" and call["input"] == {"q": 1}
    assert client.get(f"/v1/cells/{cell_id}").json()["status"] == "waiting"
    done = wait(client, cell_id, tool_results=[{"id": call["id"], "ok": True, "value": 21}])
    assert done["status"] == "completed" and done["value"] == 42 and texts(done) == ["got 21"]


def test_results_for_a_running_cell_are_refused(client):
    """A wait with tool_results while the cell runs on its own and asks nothing is 422 naming tool_results."""
    cell_id = start(client, SLEEP.format(ms=2000) + "return 1")
    r = client.post(f"/v1/cells/{cell_id}/wait", json={"tool_results": [{"id": "req_1", "ok": True}]})
    assert r.status_code == 422 and r.json()["error"]["need_param"] == "tool_results", r.text
    client.post(f"/v1/cells/{cell_id}/cancel")


def test_second_concurrent_wait_is_409(client):
    """One wait at a time per background cell, as for any cell: a second wait while one is in progress is 409."""
    cell_id = start(client, SLEEP.format(ms=60000) + "return 1")
    quotas = client.app.state.services.cells.quotas
    codes: list[int] = []
    first = threading.Thread(
        target=lambda: codes.append(client.post(f"/v1/cells/{cell_id}/wait", json={"timeout_ms": 60000}).status_code)
    )
    first.start()
    poll_until(lambda: quotas.usage(LOCAL_TENANT)["waits"] == 1, "the first wait is in progress")
    second = client.post(f"/v1/cells/{cell_id}/wait", json={"timeout_ms": 60000})
    assert second.status_code == 409, second.text
    client.post(f"/v1/cells/{cell_id}/cancel")  # ends the cell: the first wait returns its final envelope
    first.join()
    assert codes == [200], codes


def test_cancel_answers_the_final_envelope_with_undelivered_output(client):
    """Cancel ends a sleeping background cell: `aborted`, with the output no one was shown; then it is gone."""
    cell_id = start(client, 'text("started");' + SLEEP.format(ms=60000) + "return 1")
    # `legs` counts a leg as it starts; heap_bytes is set by the worker's first report, which carries the output
    poll_until(lambda: client.get(f"/v1/cells/{cell_id}").json()["telemetry"]["heap_bytes"] > 0, "the first leg ran")
    final = client.post(f"/v1/cells/{cell_id}/cancel").json()
    assert final["status"] == "failed" and final["code"] == "aborted" and texts(final) == ["started"], final
    assert client.post(f"/v1/cells/{cell_id}/wait", json={}).status_code == 404


def test_each_leg_is_bounded_by_timeout_ms(client):
    """A background busy loop fails with `timeout` after its leg's timeout_ms, like any cell."""
    cell_id = start(client, "while (true) {}", timeout_ms=300)
    final = wait(client, cell_id)
    assert final["status"] == "failed" and final["code"] == "timeout", final


TTL_NOW = [0.0]  # the clock of the short_ttl service's registry: the TTL test moves it


@pytest.fixture(scope="module")
def short_ttl(tmp_path_factory: pytest.TempPathFactory):
    with make_client(Path(tmp_path_factory.mktemp("ttl")), cell_ttl_seconds=60, cells_clock=lambda: TTL_NOW[0]) as c:
        yield c


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory):
    """Two parked cells per tenant and one worker slot."""
    with make_client(Path(tmp_path_factory.mktemp("small")), tenant_max_parked_cells=2, workers=1) as c:
        yield c


def test_running_on_its_own_is_bounded_by_cell_ttl_seconds(short_ttl):
    """A cell that never ends (a timer loop) is ended cell_ttl_seconds after its exec, naming the setting."""
    cell_id = start(short_ttl, "for (;;) " + SLEEP.format(ms=50))
    poll_until(lambda: short_ttl.get(f"/v1/cells/{cell_id}").json()["telemetry"]["legs"] >= 3, "it runs leg after leg")
    assert short_ttl.get(f"/v1/cells/{cell_id}").json()["status"] == "running"
    TTL_NOW[0] += 61  # past cell_ttl_seconds since its exec
    final = wait(short_ttl, cell_id, timeout_ms=10000)
    assert final["status"] == "failed" and final["code"] == "aborted", final
    assert "cell_ttl_seconds" in final["error"]


def test_background_cells_hold_parked_slots_until_their_result_is_collected(small):
    """With tenant_max_parked_cells=2, two background cells (one finished, not collected) refuse a third with 429;
    collecting the finished one's result frees its slot."""
    finished = start(small, "return 1")
    poll_until(lambda: small.get(f"/v1/cells/{finished}").json()["status"] == "completed", "the first cell ends")
    sleeping = start(small, SLEEP.format(ms=60000) + "return 2")
    r = small.post("/v1/exec", json={"code": "return 3", "background": True})
    assert r.status_code == 429 and "tenant_max_parked_cells" in r.json()["error"]["message"], r.text
    assert wait(small, finished)["value"] == 1
    third = start(small, "return 3")
    assert wait(small, third)["value"] == 3
    small.post(f"/v1/cells/{sleeping}/cancel")


def test_a_cell_sleeping_between_legs_holds_no_worker_slot(small):
    """With one worker slot, a background cell asleep on a long timer does not keep another cell from running."""
    sleeping = start(small, SLEEP.format(ms=60000) + "return 1")
    poll_until(lambda: small.get(f"/v1/cells/{sleeping}").json()["telemetry"]["heap_bytes"] > 0, "it sleeps")
    assert run(small, "return 5", timeout_ms=2000)["value"] == 5
    small.post(f"/v1/cells/{sleeping}/cancel")


def test_a_finished_cells_events_are_still_readable(client):
    """A reader that connects after a quick cell ended gets its whole history, the envelope last, and the stream
    closes. A malformed Last-Event-ID is 422 naming the header."""
    cell_id = start(client, 'text("quick"); return 1')
    poll_until(lambda: client.get(f"/v1/cells/{cell_id}").json()["status"] == "completed", "the cell ends")
    r = client.get(f"/v1/cells/{cell_id}/events")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), r.text
    blocks = [b for b in r.text.split("\n\n") if b]
    kinds = [next(line[7:] for line in b.split("\n") if line.startswith("event: ")) for b in blocks]
    assert kinds == ["status", "output", "status", "envelope"], r.text
    assert '"text":"quick"' in blocks[1] and '"output":[]' in blocks[3]
    live = start(client, SLEEP.format(ms=60000) + "return 1")
    bad = client.get(f"/v1/cells/{live}/events", headers={"Last-Event-ID": "-1"})
    assert bad.status_code == 422 and bad.json()["error"]["need_param"] == "Last-Event-ID", bad.text
    client.post(f"/v1/cells/{live}/cancel")


def test_a_background_cell_stops_for_an_approval_and_runs_the_call_once_approved(client):
    """A background cell whose call needs approval stops (`waiting`, an approval entry) without running it; the
    wait's approval resumes it in the background; a denial in a second call rejects catchably."""
    cell_id = start(
        client,
        "const a = await echo({x: 1}); let b; try { await echo({x: 2}); } catch (e) { b = e.code; } return [a.echo, b]",
        require_approval=["echo"],
    )
    parked = wait(client, cell_id)
    assert parked["status"] == "waiting" and parked["bridge_dispatch_started"] is False, parked
    [entry] = parked["pending_tool_calls"]
    assert entry["method"] == "approval" and entry["tool"] == "echo" and entry["input"] == {"x": 1}
    r = client.post(
        f"/v1/cells/{cell_id}/wait",
        json={"approvals": [{"id": entry["id"], "approve": True}], "tool_results": [{"id": entry["id"], "ok": True}]},
    )
    assert r.status_code == 422, r.text  # an approval entry is not answered by a tool result
    second = wait(client, cell_id, approvals=[{"id": entry["id"], "approve": True}])
    assert second["status"] == "waiting", second
    [entry2] = second["pending_tool_calls"]
    assert entry2["method"] == "approval" and entry2["input"] == {"x": 2}
    done = wait(client, cell_id, approvals=[{"id": entry2["id"], "approve": False, "reason": "no"}])
    assert done["status"] == "completed" and done["value"] == [1, "approval_denied"], done
    assert done["bridge_dispatch_started"] is True
