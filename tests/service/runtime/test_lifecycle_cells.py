"""Cell lifecycle over HTTP: parallel host work, parking, wait, cancel, status, failures, flags."""

from __future__ import annotations

import gc
import threading
from typing import Any

from service.runtime.cell import Cell
from tests.conftest import make_client, parked_calls_settled, run, run_ok, wait
from tests.support.polling import poll_until
from tests.support.tools import ECHO_IN_FLIGHT

PENDING = "pending without host work"


def _wait(client, cell_id: str, **body: Any):
    return client.post(f"/v1/cells/{cell_id}/wait", json=body)


def _status_is(client, cell_id: str, status: str) -> dict[str, Any] | None:
    snapshot = client.get(f"/v1/cells/{cell_id}").json()
    return snapshot if snapshot["status"] == status else None


def _in_thread(fn) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}
    t = threading.Thread(target=lambda: box.setdefault("r", fn()))
    t.start()
    return t, box


def test_promise_all_over_tools_settles_out_of_order(client):
    """Promise.all over tool calls that finish out of order gives results in call order, and the calls ran
    concurrently: they settled in the order of their delays (run one after another, they would settle in
    call order), and the echo tool saw them in flight at once."""
    ECHO_IN_FLIGHT["peak"] = 0
    env = run(
        client,
        "const settled = []; const r = await Promise.all([echo({x: 1, delay: 0.2}), echo({x: 2}), "
        "echo({x: 3, delay: 0.1})].map(p => p.then(v => (settled.push(v.echo), v)))); "
        "return {results: r.map(v => v.echo), settled}",
    )
    assert env["status"] == "completed", env
    assert env["value"] == {"results": [1, 2, 3], "settled": [2, 3, 1]}
    assert env["telemetry"]["call_count"] == 3
    assert ECHO_IN_FLIGHT["peak"] >= 2, ECHO_IN_FLIGHT  # the 0.2 s and 0.1 s calls overlapped


def test_cell_blocked_on_a_tool_parks_at_the_deadline_and_wait_completes(client):
    """A tool slower than timeout_ms parks the cell (waiting) while the tool still runs; wait delivers the rest."""
    env = run(
        client, 'text("before"); const v = await echo({x: 5, delay: 2}); text("after"); return v.echo', timeout_ms=300
    )
    assert 5 in ECHO_IN_FLIGHT["running"], "the cell answered only after its 2 s tool call ended"
    assert env["status"] == "waiting", env
    assert env["reason"] == "pending_tools"
    assert env["pending_tool_calls"] == [{"id": "req_1", "method": "tool", "tool": "echo"}]
    assert env["output"] == [{"type": "text", "text": "before"}]
    assert env["cell_id"].startswith("cell_")
    r = _wait(client, env["cell_id"], timeout_ms=5000)
    assert r.status_code == 200, r.text
    done = r.json()
    assert done["status"] == "completed", done
    assert done["value"] == 5
    assert done["output"] == [{"type": "text", "text": "after"}]
    assert done["cell_id"] == env["cell_id"]


def test_wait_that_times_out_again_answers_waiting(client):
    """A wait shorter than the outstanding tool returns waiting again with the same pending call."""
    env = run(client, "return (await echo({x: 1, delay: 1.2})).echo", timeout_ms=150)
    assert env["status"] == "waiting", env
    again = _wait(client, env["cell_id"], timeout_ms=150).json()
    assert again["status"] == "waiting", again
    assert [c["id"] for c in again["pending_tool_calls"]] == ["req_1"]
    done = _wait(client, env["cell_id"], timeout_ms=3000).json()
    assert done["status"] == "completed" and done["value"] == 1, done


def test_unhandled_tool_rejection_fails_even_when_main_resolved(client):
    """`void fail({})` fails the cell with failure_phase bridge although the body returned."""
    env = run(client, "void fail({}); return 1")
    assert env["status"] == "failed", env
    assert env["failure_phase"] == "bridge"
    assert env["error"].startswith("Unhandled promise rejection")
    assert env["bridge_dispatch_started"] is True and env["replay_safe"] is False


def test_handled_tool_rejection_does_not_fail(client):
    """A caught tool rejection leaves the cell completed."""
    env = run(client, 'try { await fail({message: "m"}) } catch (e) { return e.message.includes("m") }')
    assert env["status"] == "completed" and env["value"] is True, env


def test_unhandled_guest_rejection_fails(client):
    """`void Promise.reject(new Error("x"))` fails the cell in phase guest."""
    env = run(client, 'void Promise.reject(new Error("x")); return 1')
    assert env["status"] == "failed", env
    assert env["failure_phase"] == "guest"
    assert "Error: x" in env["error"]


def test_throwing_timer_callback_fails_the_cell(client):
    """A setTimeout callback that throws fails the cell."""
    env = run(
        client, 'setTimeout(() => { throw new Error("tick") }, 0); await new Promise(r => setTimeout(r, 30)); return 1'
    )
    assert env["status"] == "failed", env
    assert "Error: tick" in env["error"]


def test_pending_without_host_work_fails_instead_of_parking(client):
    """A promise that can never settle and no host work outstanding fails at once, not at timeout_ms."""
    env = run(client, "await new Promise(() => {}); return 1", timeout_ms=60_000)
    assert env["status"] == "failed" and env["code"] != "timeout", env
    assert PENDING in env["error"]
    # The reason shows the path; the bound (half the deliberately long timeout) only a cell that waited it out reaches.
    assert env["telemetry"]["wall_ms"] < 30_000, "the cell waited out its timeout instead of failing"


def test_dispatch_flags_for_pure_timer_and_tool_cells(client):
    """bridge_dispatch_started/replay_safe: false/true without tools, true/false after a tool call."""
    pure = run(client, "return 1")
    timer = run(client, "await new Promise(r => setTimeout(r, 1)); return 1")
    tool = run(client, "await echo({x: 1}); return 1")
    safe = run(client, "await echo({x: 1}); return 1", restart_safe=True)
    assert (pure["bridge_dispatch_started"], pure["replay_safe"]) == (False, True)
    assert (timer["bridge_dispatch_started"], timer["replay_safe"]) == (False, True)
    assert (tool["bridge_dispatch_started"], tool["replay_safe"]) == (True, False)
    assert (safe["bridge_dispatch_started"], safe["replay_safe"]) == (True, True)


def test_failed_tool_cell_keeps_dispatch_flag(client):
    """A cell that fails after a tool call reports bridge_dispatch_started true."""
    env = run(client, "await echo({x: 1}); null.boom")
    assert env["status"] == "failed" and env["failure_phase"] == "guest", env
    assert env["bridge_dispatch_started"] is True and env["replay_safe"] is False


def test_telemetry_fields_are_present(client):
    """Every envelope carries telemetry with wall_ms, guest_cpu_ms and the three counters."""
    env = run(client, "return 1")
    for key in ("wall_ms", "guest_cpu_ms", "call_count", "search_count", "describe_count"):
        assert key in env["telemetry"], env["telemetry"]


def test_status_of_parked_running_and_finished_cell(client):
    """GET status says waiting while parked, running during a wait, and the outcome after."""
    env = run(client, "await echo({x: 1, delay: 0.3}); await echo({x: 2, delay: 5}); return 2", timeout_ms=100)
    cid = env["cell_id"]
    parked = client.get(f"/v1/cells/{cid}").json()
    assert parked["status"] == "waiting" and parked["pending_tool_calls"], parked
    thread, box = _in_thread(lambda: _wait(client, cid, timeout_ms=30000))
    # The wait leg delivers the first reply and then awaits the second tool (5 s, long enough for a poll on a
    # loaded machine to see it): running throughout.
    poll_until(lambda: _status_is(client, cid, "running"), "the wait leg reports running")
    thread.join(30)
    assert box["r"].json()["status"] == "completed"
    finished = client.get(f"/v1/cells/{cid}")
    assert finished.status_code == 200
    body = finished.json()
    assert body["status"] == "completed" and body["cell_id"] == cid
    assert "value" not in body and "output" not in body


def test_cancel_parked_cell_then_wait_is_404(client):
    """Cancel answers failed/aborted; a later wait is 404 and status still says aborted."""
    env = run(client, "await echo({x: 1, delay: 5}); return 1", timeout_ms=150)
    assert env["status"] == "waiting", env
    cancelled = client.post(f"/v1/cells/{env['cell_id']}/cancel")
    assert cancelled.status_code == 200
    body = cancelled.json()
    assert body["status"] == "failed" and body["code"] == "aborted" and body["failure_phase"] == "host"
    later = _wait(client, env["cell_id"])
    assert later.status_code == 404
    assert later.json()["error"]["message"].startswith("cell is unavailable or expired")
    status = client.get(f"/v1/cells/{env['cell_id']}").json()
    assert status["status"] == "failed" and status["code"] == "aborted"


def test_cancel_of_a_running_leg_aborts_it_promptly(client):
    """Cancelling a cell whose wait leg spins in a loop ends both calls with aborted."""
    env = run(client, "await echo({x: 1, delay: 0.2}); while (true) {}", timeout_ms=100)
    assert env["status"] == "waiting", env
    # Once the reply is queued, the wait leg hands it over at once and the guest spins.
    poll_until(lambda: parked_calls_settled(client, env["cell_id"]), "the parked cell's tool call settles")
    thread, box = _in_thread(lambda: _wait(client, env["cell_id"], timeout_ms=20000))
    poll_until(lambda: _status_is(client, env["cell_id"], "running"), "the wait leg reports running")
    cancelled = client.post(f"/v1/cells/{env['cell_id']}/cancel").json()
    thread.join(10)  # the wait would otherwise last its 20 s
    assert not thread.is_alive(), "the wait on the spinning leg did not end after the cancel"
    assert cancelled["status"] == "failed" and cancelled["code"] == "aborted", cancelled
    assert box["r"].json()["code"] == "aborted"
    assert run(client, "return 1")["value"] == 1


def test_second_concurrent_wait_gets_409_and_first_completes(client):
    """While one wait runs, a second wait on the same cell answers 409; the first still completes."""
    # The tool runs 5 s: long enough for the second wait to arrive during the first on a loaded machine.
    env = run(client, "await echo({x: 1, delay: 5}); return 7", timeout_ms=100)
    assert env["status"] == "waiting", env
    thread, box = _in_thread(lambda: _wait(client, env["cell_id"], timeout_ms=30000))
    poll_until(lambda: _status_is(client, env["cell_id"], "running"), "the first wait reports running")
    second = _wait(client, env["cell_id"], timeout_ms=5000)
    assert second.status_code == 409, second.text
    err = second.json()["error"]
    assert err["code"] and err["message"] and err["error_type"] in ("recoverable", "transient")
    thread.join(30)
    first = box["r"].json()
    assert first["status"] == "completed" and first["value"] == 7, first


def test_wait_on_unknown_cell_is_404(client):
    """wait/cancel/status of a cell id that never existed answer 404 with the error body."""
    for r in (_wait(client, "cell_nope"), client.post("/v1/cells/cell_nope/cancel"), client.get("/v1/cells/cell_nope")):
        assert r.status_code == 404
        assert r.json()["error"]["message"] == "cell is unavailable or expired"


def test_finished_cells_are_logged_with_their_title(client, caplog):
    """Each finished cell logs one line with its id, tenant, title and outcome (the title is for logs)."""
    import logging

    with caplog.at_level(logging.INFO, logger="codemode.cells"):
        env = run(client, "return 1", title="nightly report")
    lines = [r.getMessage() for r in caplog.records if r.name == "codemode.cells"]
    assert any(
        env["cell_id"] in line and "title='nightly report'" in line and "status=completed" in line for line in lines
    ), lines


def test_a_finished_cell_is_freed_without_the_garbage_collector(tmp_path):
    """A cell that completed, after tool calls and a park, is freed as soon as nothing refers to it:
    no reference cycle through it is left behind for the collector (with it off, no `Cell` piles up)."""
    with make_client(tmp_path) as c:
        run_ok(c, "return 1")  # the first cell's one-off set-up is done
        gc.collect()
        gc.disable()
        try:
            before = _cells_alive()
            for _ in range(20):
                parked = run(c, 'await echo({x: 1}); await yield_control("park"); return 1')
                assert parked["status"] == "waiting", parked
                assert wait(c, parked["cell_id"])["status"] == "completed"
            assert _cells_alive() - before <= 1, "finished cells are left for the garbage collector"
        finally:
            gc.enable()


def _cells_alive() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, Cell))
