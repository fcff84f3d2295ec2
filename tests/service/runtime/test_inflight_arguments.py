"""A native tool still running holds its arguments parsed, so they are charged at what they cost parsed to
the cell's inbox allowance and its tenant's ``tenant_held_bytes``, from the call's start until the tool
returns or the cell ends, reckoned before they are parsed, and refused catchably, unparsed, when they
do not fit."""

from __future__ import annotations

import gc
import json
import tracemalloc
from typing import Any

import pytest

from bridge.json_cost import parsed_cost
from service.runtime.registry import CellRegistry
from tests.conftest import make_client, run
from tests.support.tools import CALLS

pytestmark = pytest.mark.slow

MiB = 1024 * 1024
ARRAYS = 200_000
#: A cell whose echo call runs for a minute with ARRAYS one-digit arrays in its arguments; the cell then
#: asks its caller (a client tool), so it parks as soon as the call is under way, not at a leg's end.
RUNNING = f"""
let pad = []; for (let i = 0; i < {ARRAYS}; i++) pad.push([i % 10]);
const p = echo({{x: pad, delay: 60}}).then(() => "ran", e => e.name + ": " + e.message);
pad = null;
await ask({{}});
return await p;
"""
ASK = [{"name": "ask"}]
#: The same call, awaited at once: the cell ends when the call is refused (or after its minute).
AWAITED = RUNNING.replace("await ask({});\n", "")
#: What the parked ``ask({})`` holds: its input, kept encoded and charged at its size.
ASK_HELD = len(b"{}")
#: Room for the guest's own work on a loaded machine, where workers run at a lower priority than
#: the other processes: the cells below end or park on events, never at this limit.
LOADED = {"timeout_ms": 60_000, "memory_limit_bytes": 256 * MiB}


def arguments(arrays: int) -> bytes:
    """The echo call's arguments as the guest sends them."""
    value = ["echo", {"x": [[i % 10] for i in range(arrays)], "delay": 60}]
    return json.dumps(value, separators=(",", ":")).encode()


def held(client: Any, tenant: str = "local") -> int:
    """What the service holds for ``tenant``'s live cells (its ``tenant_held_bytes`` account)."""
    cells: CellRegistry = client.app.state.services.cells
    return cells.quotas.held_account(tenant).used


def service_bytes() -> int:
    """Bytes allocated and still live from the service's own code (``service/``, ``bridge/``)."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, "*/service/*"), tracemalloc.Filter(True, "*/bridge/*")]
    )
    return sum(stat.size for stat in snapshot.statistics("filename"))


def test_running_tools_are_charged_their_arguments_parsed_cost_which_bounds_their_memory(tmp_path):
    """Two cells parked while their echo call runs: each is charged its arguments' parsed cost (about 25
    times their bytes), and the service's own memory grew by less than twice what is charged; cancelling
    the cells ends the calls and gives every byte back."""
    cost = parsed_cost(arguments(ARRAYS))
    assert cost > 20 * len(arguments(ARRAYS))
    with make_client(tmp_path, max_snapshot_bytes=64 * MiB) as c:
        run(c, "return await echo({x: 1})")  # warm: the tool path's own first-use allocations
        gc.collect()
        tracemalloc.start()
        try:
            before = service_bytes()
            envs = [run(c, RUNNING, client_tools=ASK, **LOADED) for _ in range(2)]
            assert all(env["status"] == "waiting" for env in envs), [(e.get("code"), e.get("error")) for e in envs]
            assert [sorted(p["tool"] for p in env["pending_tool_calls"]) for env in envs] == [["ask", "echo"]] * 2
            gc.collect()
            grown = service_bytes() - before
        finally:
            tracemalloc.stop()
        assert grown < 2 * held(c), f"the service grew {grown} bytes, charged {held(c)}"
        assert held(c) == 2 * (cost + ASK_HELD)
        for env in envs:
            assert c.post(f"/v1/cells/{env['cell_id']}/cancel").status_code == 200
        assert held(c) == 0


def test_arguments_over_the_allowance_parsed_are_refused_unparsed(tmp_path):
    """At the default allowance (10 MiB) the issue's call, 1.8 MB of JSON that holds about 45 MB parsed, is
    refused in the guest before it is parsed, naming both sizes; the tool never runs and the cell goes on."""
    code = AWAITED.replace(str(ARRAYS), "450000")
    with make_client(tmp_path) as c:
        ran = CALLS.get("echo", 0)
        env = run(c, code, **LOADED)
        assert env["status"] == "completed", (env.get("code"), env.get("error"))
        size, cost = len(arguments(450_000)), parsed_cost(arguments(450_000))
        assert env["value"].startswith("RangeError: program-data budget exceeded"), env["value"]
        assert f"arguments are {size} bytes of JSON, held as about {cost} bytes" in env["value"]
        assert CALLS.get("echo", 0) == ran and held(c) == 0


def test_the_tenant_quota_bounds_its_running_tools_arguments_together(tmp_path):
    """Each cell's arguments fit its own allowance, but a second running call would take the tenant past
    tenant_held_bytes counted at the parsed cost: it is refused naming the setting."""
    cost = parsed_cost(arguments(ARRAYS))
    with make_client(tmp_path, max_snapshot_bytes=64 * MiB, tenant_held_bytes=cost + cost // 2) as c:
        first = run(c, RUNNING, client_tools=ASK, **LOADED)
        assert first["status"] == "waiting", (first.get("code"), first.get("error"))
        second = run(c, AWAITED, **LOADED)
        assert second["status"] == "completed", (second.get("code"), second.get("error"))
        assert second["value"].startswith("RangeError: held-bytes quota exceeded"), second["value"]
        assert "tenant_held_bytes" in second["value"] and held(c) == cost + ASK_HELD
        assert c.post(f"/v1/cells/{first['cell_id']}/cancel").status_code == 200
        assert held(c) == 0


def test_arguments_whose_bytes_alone_do_not_fit_are_refused_without_a_reckoning(tmp_path):
    """With a running call holding 6 MB of the 10 MiB allowance, a second call of 6 MB is refused on its
    bytes alone (its parsed cost is not reckoned), saying it would hold more than those bytes."""
    code = """
    const first = echo({x: "a".repeat(6e6), delay: 1});  // a cell ends once its calls settled
    await new Promise(r => setTimeout(r, 1));
    return await echo({x: "b".repeat(6e6)}).then(() => "ran", e => e.name + ": " + e.message);
    """
    with make_client(tmp_path) as c:
        env = run(c, code, **LOADED)
        assert env["status"] == "completed", (env.get("code"), env.get("error"))
        size = len(json.dumps(["echo", {"x": "b" * 6_000_000}], separators=(",", ":")))
        assert env["value"].startswith("RangeError: program-data budget exceeded"), env["value"]
        assert f"arguments are {size} bytes of JSON, held as more than {size} bytes" in env["value"]
        assert held(c) == 0
