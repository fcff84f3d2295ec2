"""An exec with ``call_log: true``: its envelopes list the host requests the cell made (telemetry.call_log)."""

from __future__ import annotations

from typing import Any

from service.runtime.call_log import MAX_ENTRIES
from tests.conftest import run, run_ok
from tests.support.polling import poll_until


def calls(envelope: dict[str, Any]) -> list[dict[str, Any]]:
    return envelope["telemetry"]["call_log"]  # type: ignore[no-any-return]


def test_each_call_is_listed_with_its_target_sizes_duration_and_outcome(client):
    """Two tool calls, a failing one and a timer, in the order they settled: method, target, the bytes each
    way, a duration and the outcome (a failure's code); without call_log the field is absent."""
    code = """
      await echo({x: "abc"});
      await new Promise(r => setTimeout(r, 1));
      try { await fail({message: "no"}); } catch (e) {}
      return (await echo({x: 1})).echo"""
    env = run_ok(client, code, call_log=True)
    log = calls(env)
    assert [(c["method"], c["target"]) for c in log] == [
        ("tool", "echo"),
        ("sleep", None),
        ("tool", "fail"),
        ("tool", "echo"),
    ]
    first, _, failed, last = log
    assert first["request_bytes"] > last["request_bytes"] > 0 and first["reply_bytes"] > 0, log
    assert all(c["ms"] >= 0 and c["id"].startswith("req_") for c in log), log
    assert [c["outcome"] for c in log] == ["ok", "ok", "tool_error", "ok"], log
    assert failed["reply_bytes"] > 0, failed
    assert "call_log_dropped" not in env["telemetry"]
    assert "call_log" not in run_ok(client, code)["telemetry"]


def test_each_call_is_shown_once_across_a_parked_cells_envelopes(client):
    """A cell that parks for a client tool: the exec answer lists the call before it; the wait's answer
    lists only what settled after it (the client tool's answer is one of them)."""
    code = "await echo({x: 1}); const r = await ask({q: 1}); await echo({x: r}); return r"
    env = run(client, code, call_log=True, client_tools=[{"name": "ask"}])
    assert env["status"] == "waiting" and [c["target"] for c in calls(env)] == ["echo"], env
    pending = env["pending_tool_calls"][0]["id"]
    r = client.post(
        f"/v1/cells/{env['cell_id']}/wait", json={"tool_results": [{"id": pending, "ok": True, "value": 7}]}
    )
    done = r.json()
    assert done["status"] == "completed" and done["value"] == 7, done
    assert [c["target"] for c in calls(done)] == ["ask", "echo"], done


def test_a_flood_of_requests_keeps_at_most_the_cap_and_counts_the_rest(client):
    """More requests than MAX_ENTRIES in one leg: the envelope lists MAX_ENTRIES and counts the rest."""
    extra = 20
    code = f"for (let i = 0; i < {MAX_ENTRIES + extra}; i++) await new Promise(r => setTimeout(r, 1)); return 1"
    env = run_ok(client, code, call_log=True, timeout_ms=60000)
    assert len(calls(env)) == MAX_ENTRIES and env["telemetry"]["call_log_dropped"] == extra, env["telemetry"]


def test_a_background_cell_lists_all_its_calls_in_its_final_envelope(client):
    """A background cell's legs are not shown: its final envelope lists every call of its life."""
    env = run(
        client,
        "await echo({x: 1}); await new Promise(r => setTimeout(r, 50)); return 2",
        background=True,
        call_log=True,
    )
    cell = env["cell_id"]
    poll_until(lambda: client.get(f"/v1/cells/{cell}").json()["status"] == "completed", "the cell completed")
    done = client.post(f"/v1/cells/{cell}/wait", json={}).json()
    assert [(c["method"], c["target"]) for c in calls(done)] == [("tool", "echo"), ("sleep", None)], done
