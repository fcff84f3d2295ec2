"""Wall clocks of tool calls through HTTP, with real plugin tools that sleep (tests/support/slow_plugin.py):
a call past its clock is cancelled and rejects with ``tool_timeout`` naming the tool and the limit,
counted against the run; the default clock comes from ``tool_timeout_seconds``; a tool that ignores
its cancellation cannot hold the cell.  No timed assertions: small clocks, and what the tool recorded."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.errors import ConfigError
from service.runtime.registry import CellRegistry
from service.settings import Settings, ToolSettings
from service.tools import ToolConfigError, define_tool
from service.tools.catalog import ToolCatalog
from service.tools.clocks import ToolClocks
from tests.conftest import make_client, run, run_ok
from tests.support import slow_plugin
from tests.support.polling import poll_until

PLUGIN = "tests.support.slow_plugin"
CATCH = "catch (e) { return {code: e.code, tool: e.tool, limit: e.timeoutSeconds, message: e.message}; }"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A service with the sleeping plugin, the default clock at 1 s, and `slow` needing approval in one key."""
    with make_client(
        tmp_path_factory.mktemp("clocks"),
        tools=ToolSettings(plugins=(PLUGIN,), approve=("slow_default",)),
        tool_timeout_seconds=1,
    ) as c:
        yield c


def tag() -> str:
    return "t-" + uuid.uuid4().hex[:12]


def events(name: str) -> list[str]:
    return list(slow_plugin.EVENTS.get(name, ()))


def held(client: TestClient, tenant: str = "local") -> int:
    cells: CellRegistry = client.app.state.services.cells
    return cells.quotas.held_account(tenant).used


def test_a_call_past_its_declared_clock_rejects_with_tool_timeout_and_is_cancelled(client):
    """`slow` (timeout_s=0.5) asked to sleep 30 s rejects with code tool_timeout, naming the tool and
    its limit; the tool saw its cancellation and never finished; the cell goes on."""
    t = tag()
    env = run_ok(client, f'try {{ await slow({{s: 30, tag: "{t}"}}); return "answered"; }} {CATCH}')
    err = env["value"]
    assert err["code"] == "tool_timeout", err
    assert err["tool"] == "slow" and err["limit"] == slow_plugin.SLOW_TIMEOUT_S, err
    assert "slow did not finish within its wall clock of 0.5 s" in err["message"], err
    assert events(t) == ["started", "cancelled"]


def test_a_call_within_its_clock_is_untouched(client):
    """A call that finishes inside its clock answers normally and is not cancelled."""
    t = tag()
    env = run_ok(client, f'return await slow({{s: 0, tag: "{t}"}});')
    assert env["value"] == {"slept": 0}
    assert events(t) == ["started", "finished"]


def test_each_call_runs_as_a_task_of_its_own_from_its_first_line(client):
    """A tool may use what needs its task (``asyncio.timeout``, cancel scopes) before it first waits:
    every call runs as a task of its own from its first line, whether it finishes at once (handlers
    start eagerly where Python can) or waits, and never as the leg's task or another call's."""
    t = tag()
    env = run_ok(client, f'for (const s of [0, 0.01, 0, 0]) await in_task({{s, tag: "{t}"}}); return 1;')
    assert env["value"] == 1 and events(t) == [], events(t)
    tasks = slow_plugin.TASKS.pop(t)
    assert len(tasks) == 4 and all(isinstance(task, asyncio.Task) for task in tasks), tasks
    assert len(set(map(id, tasks))) == 4, "two calls ran as one task"


def test_a_tool_without_its_own_clock_runs_on_tool_timeout_seconds(client):
    """`slow_default` declares no timeout_s: it runs on the service's tool_timeout_seconds (1 here)."""
    t = tag()
    env = run(client, f'try {{ await slow_default({{s: 30, tag: "{t}"}}); return "answered"; }} {CATCH}')
    entry = env["pending_tool_calls"][0]  # the fixture makes slow_default wait for approval first
    assert entry["method"] == "approval", env
    done = client.post(f"/v1/cells/{env['cell_id']}/wait", json={"approvals": [{"id": entry["id"], "approve": True}]})
    err = done.json()["value"]
    assert err["code"] == "tool_timeout" and err["limit"] == 1, err
    assert events(t) == ["started", "cancelled"]


def test_a_timeout_counts_against_the_runs_failure_budget(client):
    """A tool_timeout is a counted (non-recoverable) failure: the run's counters show it for the tool."""
    session, run_id = "s-" + uuid.uuid4().hex[:12], "r1"
    code = f'try {{ await slow({{s: 30, tag: "{tag()}"}}); }} catch (e) {{ return e.code; }}'
    env = run_ok(client, code, session_id=session, run_id=run_id)
    assert env["value"] == "tool_timeout"
    counters = client.get(f"/v1/sessions/{session}/runs/{run_id}").json()
    assert counters["failures"] == {"slow": 1} and counters["total_failures"] == 1, counters


def test_a_tool_that_swallows_cancellation_does_not_hold_the_cell(client):
    """`stubborn` ignores its cancellation: the guest's promise still rejects with tool_timeout while the
    tool has not returned; what it returns later is dropped and charged to nobody."""
    t = tag()
    slow_plugin.RELEASE.clear()
    try:
        env = run_ok(client, f'try {{ await stubborn({{tag: "{t}"}}); return "answered"; }} {CATCH}')
        assert env["value"]["code"] == "tool_timeout" and env["value"]["tool"] == "stubborn", env
        assert "swallowed" in events(t) and "returned" not in events(t), events(t)
    finally:
        slow_plugin.RELEASE.set()
    poll_until(lambda: "returned" in events(t), "the stubborn tool returned once released")
    assert held(client) == 0


def test_cancelling_a_cell_cancels_its_running_tool_calls(client):
    """A cell parked on two calls (clocks of a minute) and cancelled by its caller: both calls see the
    cancellation; the one that ignores it returns later, and its result is dropped and charged to nobody."""
    t1, t2 = tag(), tag()
    code = f"""
    const a = sleeper({{s: 30, tag: "{t1}"}}).catch(e => e.code);
    const b = stubborn_long({{tag: "{t2}"}}).catch(e => e.code);
    return await Promise.all([a, b]);
    """
    slow_plugin.RELEASE.clear()
    try:
        env = run(client, code, timeout_ms=100)
        assert env["status"] == "waiting", env
        poll_until(lambda: events(t1) and events(t2), "both calls started")
        r = client.post(f"/v1/cells/{env['cell_id']}/cancel")
        assert r.json()["code"] == "aborted", r.text
        poll_until(lambda: "cancelled" in events(t1), "the sleeping call saw its cancellation")
        poll_until(lambda: "swallowed" in events(t2), "the stubborn call was cancelled too")
    finally:
        slow_plugin.RELEASE.set()
    poll_until(lambda: "returned" in events(t2), "the stubborn call returned late")
    assert "finished" not in events(t1)
    assert held(client) == 0


def test_a_failing_cell_cancels_its_running_tool_calls(client):
    """A cell that fails (its guest code runs past the leg's timeout) while a call runs: the call sees
    its cancellation.  (A guest that merely throws still waits for the calls it started.)"""
    t = tag()
    code = f"""
    const p = sleeper({{s: 30, tag: "{t}"}});
    await yield_control("let the call start");
    while (true) {{}}
    """
    env = run(client, code)
    assert env["status"] == "waiting", env
    poll_until(lambda: events(t), "the call started")
    done = client.post(f"/v1/cells/{env['cell_id']}/wait", json={"timeout_ms": 300}).json()
    assert done["status"] == "failed" and done["code"] == "timeout", done
    poll_until(lambda: "cancelled" in events(t), "the call of the failed cell saw its cancellation")
    assert "finished" not in events(t)


def test_an_expired_cell_cancels_its_running_tool_calls(tmp_path):
    """A parked cell that outlives cell_ttl_seconds expires, and the call it still had running sees
    its cancellation."""
    t = tag()
    with make_client(tmp_path, tools=ToolSettings(plugins=(PLUGIN,)), cell_ttl_seconds=1) as c:
        env = run(c, f'return await sleeper({{s: 600, tag: "{t}"}});', timeout_ms=100)
        assert env["status"] == "waiting", env
        poll_until(lambda: "cancelled" in events(t), "the expired cell's call saw its cancellation", timeout_s=30)
        assert c.get(f"/v1/cells/{env['cell_id']}").json()["code"] == "aborted"
        assert held(c) == 0


def test_cancelling_a_cell_waiting_for_an_approval_ends_the_wait(client):
    """A cell parked on an approval and cancelled: the approval is gone, the tool never ran, its input
    is no longer charged."""
    t = tag()
    env = run(client, f'return await slow_default({{s: 0, tag: "{t}", pad: "{"x" * 4096}"}});')
    assert env["pending_tool_calls"][0]["method"] == "approval", env
    assert held(client) > 4096
    r = client.post(f"/v1/cells/{env['cell_id']}/cancel")
    assert r.json()["code"] == "aborted", r.text
    assert held(client) == 0
    gone = client.post(
        f"/v1/cells/{env['cell_id']}/wait",
        json={"approvals": [{"id": env["pending_tool_calls"][0]["id"], "approve": True}]},
    )
    assert gone.status_code == 404, gone.text
    assert events(t) == []


def test_tool_wait_is_told_apart_from_wall_and_cpu(client):
    """telemetry.tool_wait_ms counts the time with a host request in flight: a call of `slow` that
    times out makes it positive and at most wall_ms; a cell without host work waits 0."""
    idle = run_ok(client, "let x = 0; for (let i = 0; i < 1000; i++) x += i; return x;")["telemetry"]
    assert idle["tool_wait_ms"] == 0 and idle["tool_wait_total_ms"] == 0, idle
    env = run_ok(client, f'try {{ await slow({{s: 30, tag: "{tag()}"}}); }} catch (e) {{ return e.code; }}')
    times = env["telemetry"]
    assert 0 < times["tool_wait_ms"] <= times["wall_ms"], times
    assert times["tool_wait_total_ms"] == times["tool_wait_ms"], times  # one leg: its wait is the cell's


def test_parallel_calls_count_their_overlap_once(client):
    """Three calls in flight together are one wait, not three: tool_wait_ms stays within wall_ms."""
    code = "\n".join(
        [
            "const calls = [0, 1, 2].map(i => slow({s: 30, tag: " + f'"{tag()}-"' + " + i}).catch(e => e.code));",
            "return await Promise.all(calls);",
        ]
    )
    env = run_ok(client, code)
    assert env["value"] == ["tool_timeout"] * 3
    times = env["telemetry"]
    assert 0 < times["tool_wait_ms"] <= times["wall_ms"], times


def test_a_timer_is_not_tool_wait(client):
    """`setTimeout` is the guest's own wait: it does not count as tool wait."""
    env = run_ok(client, "await new Promise(r => setTimeout(r, 50)); return 1;")
    assert env["telemetry"]["tool_wait_ms"] == 0, env["telemetry"]


# ---- configuration ---------------------------------------------------------------------------


async def _noop(call_id: str, params: dict[str, Any], ctx: Any) -> None:
    return None


def test_a_tool_declaring_more_than_the_cap_is_refused_at_load():
    """A tool whose timeout_s is over tool_timeout_cap_seconds is refused, naming the tool, its value and the cap."""
    spec = define_tool(name="forever", timeout_s=7200)(_noop)
    with pytest.raises(ToolConfigError) as info:
        ToolCatalog.build([spec], clocks=ToolClocks(default_s=600, cap_s=1800))
    message = str(info.value)
    assert '"forever"' in message and "7200" in message and "1800" in message and "tool_timeout_cap_seconds" in message


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "10"])
def test_timeout_s_must_be_a_positive_number(bad):
    """timeout_s that is not a positive finite number is refused when the tool is defined."""
    with pytest.raises(ToolConfigError, match="timeout_s must be a positive number"):
        define_tool(name="odd", timeout_s=bad)(_noop)


def test_the_default_clock_cannot_exceed_the_cap():
    """tool_timeout_seconds above tool_timeout_cap_seconds stops the service at start, naming the setting."""
    with pytest.raises(ConfigError, match="tool_timeout_seconds is above tool_timeout_cap_seconds"):
        Settings(tool_timeout_seconds=100, tool_timeout_cap_seconds=10).check()


def test_leg_spans_carry_where_the_time_went(tmp_path):
    """With tracing on, each leg's ``codemode.cell`` span carries wall_ms, guest_cpu_ms, tool_wait_ms and
    tool_wait_total_ms as its envelope's telemetry tells them."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from service.app import create_app
    from service.assembly import build_components
    from service.tracing import tracing_to
    from tests.support.tools import TEST_TOOLS

    exporter = InMemorySpanExporter()
    settings = Settings(workers=1, data_dir=str(tmp_path), kill_grace_ms=500).check()
    services = build_components(settings, extra_tools=TEST_TOOLS, tracing=tracing_to(exporter))
    with TestClient(create_app(settings, services)) as c:
        env = run_ok(c, "return (await echo({x: 1, delay: 0.05})).echo;")
        legs = [
            s
            for s in exporter.get_finished_spans()
            if s.name == "codemode.cell" and s.attributes["codemode.cell_id"] == env["cell_id"]
        ]
    assert len(legs) == 1
    times = env["telemetry"]
    for key in ("wall_ms", "guest_cpu_ms", "tool_wait_ms", "tool_wait_total_ms"):
        assert legs[0].attributes[f"codemode.{key}"] == pytest.approx(times[key], abs=0.01), key
    assert times["tool_wait_ms"] > 0
