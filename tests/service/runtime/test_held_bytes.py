"""What the service holds for a cell or a tenant is charged at its real cost (SPEC §11): guest JSON stays
encoded while it waits, a per-tenant held-bytes quota (``tenant_held_bytes``) bounds every tenant's
cells together, and one request carries at most ``max_request_values`` JSON values, counted before it
is parsed."""

from __future__ import annotations

import gc
import json
import tracemalloc
from typing import Any

import pytest

from service.runtime.registry import CellRegistry
from tests.conftest import make_client, run, wait
from tests.support.polling import poll_until

pytestmark = pytest.mark.slow

MiB = 1024 * 1024
SINK = {"name": "sink", "description": "Takes a payload from the guest."}


def registry(client: Any) -> CellRegistry:
    return client.app.state.services.cells  # type: ignore[no-any-return]


def held(client: Any, tenant: str = "local") -> int:
    """What the service holds for ``tenant``'s live cells (its ``tenant_held_bytes`` account)."""
    return registry(client).quotas.held_account(tenant).used


def _service_bytes() -> int:
    """Bytes allocated and still live from the service's own code (``service/``, ``bridge/``): what it holds,
    without the test's and other threads' allocations."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, "*/service/*"), tracemalloc.Filter(True, "*/bridge/*")]
    )
    return sum(stat.size for stat in snapshot.statistics("filename"))


def test_guest_arguments_over_max_request_values_reject_catchably(tmp_path):
    """Arguments holding more JSON values than the cap reject in the guest with a RangeError naming
    max_request_values; the same data as one string (one value) goes through, and the cell goes on."""
    with make_client(tmp_path, max_request_values=10_000) as c:
        code = """
        const pad = []; for (let i = 0; i < 6000; i++) pad.push([i % 10]);
        const refused = await echo({x: pad}).then(() => "sent", e => e.name + ": " + e.message);
        const asText = await echo({x: JSON.stringify(pad)});
        return [refused, asText.echo.length];
        """
        env = run(c, code)
        assert env["status"] == "completed", env
        refused, length = env["value"]
        assert refused.startswith("RangeError: request arguments hold more than 10000 JSON values"), refused
        assert "max_request_values" in refused
        assert length == len(json.dumps([[i % 10] for i in range(6000)], separators=(",", ":")))


def test_a_parked_approval_holds_its_input_encoded_only(tmp_path):
    """A call parked on an approval holds its input as bytes, charged at their size: the service's own
    memory grows by about those bytes, not by the parsed form (about 20 MB for 300,000 small arrays)."""
    with make_client(tmp_path, max_snapshot_bytes=64 * MiB) as c:
        run(c, "return await echo({x: 1})")  # warm: the tool path's own first-use allocations
        code = "const pad = []; for (let i = 0; i < 3e5; i++) pad.push([i % 10]); return (await echo({x: pad})).echo.length"
        encoded = len(json.dumps({"x": [[i % 10] for i in range(300_000)]}, separators=(",", ":")))
        gc.collect()
        tracemalloc.start()
        try:
            before = _service_bytes()
            env = run(c, code, require_approval=["echo"], timeout_ms=60_000, memory_limit_bytes=256 * MiB)
            assert env["status"] == "waiting" and env["pending_tool_calls"][0]["method"] == "approval", env
            cell = env["cell_id"]
            env.clear()  # the answer's own parsed copy is the test's, not the service's
            gc.collect()
            grown = _service_bytes() - before
        finally:
            tracemalloc.stop()
        assert held(c) == encoded
        assert grown < 3 * encoded + 2 * MiB, f"the service grew {grown} bytes for {encoded} bytes of input"
        r = c.post(f"/v1/cells/{cell}/wait", json={"approvals": [{"id": "req_1", "approve": True}]})
        assert r.status_code == 200 and r.json()["value"] == 300_000, r.text
        assert held(c) == 0


def test_tenant_quota_bounds_what_its_cells_hold_together(tmp_path):
    """Each cell's inputs fit its own allowance, but the tenant's cells together stop at
    tenant_held_bytes: the next call rejects catchably naming it, and a wait whose tool result would
    not fit is 429 naming it while the cell stays waiting; answering releases the bytes."""
    code = 'return await sink({s: "x".repeat(4e5)}).then(() => "sent", e => e.name + ": " + e.message)'
    with make_client(tmp_path, tenant_held_bytes=MiB) as c:
        first, second = (run(c, code, client_tools=[SINK]) for _ in range(2))
        assert first["status"] == second["status"] == "waiting", (first, second)
        third = run(c, code, client_tools=[SINK])
        assert third["status"] == "completed", third
        assert (
            third["value"].startswith("RangeError: held-bytes quota exceeded") and "tenant_held_bytes" in third["value"]
        )
        body = {"tool_results": [{"id": "req_1", "ok": True, "value": "y" * 300_000}]}
        r = c.post(f"/v1/cells/{first['cell_id']}/wait", json=body)
        assert r.status_code == 429 and "tenant_held_bytes" in r.json()["error"]["message"], r.text
        assert c.get(f"/v1/cells/{first['cell_id']}").json()["status"] == "waiting"
        for env in (first, second):
            done = wait(c, env["cell_id"], tool_results=[{"id": "req_1", "ok": True, "value": 1}])
            assert done["status"] == "completed" and done["value"] == "sent", done
        assert held(c) == 0


def test_background_output_waits_encoded_and_charged_until_collected(tmp_path):
    """Output of a background cell that nobody reads is charged to its tenant until a wait collects it;
    the wait answers it whole, and the charge goes back."""
    with make_client(tmp_path) as c:
        code = "const pad = []; for (let i = 0; i < 5e4; i++) pad.push([i % 10]); json(pad); return 7"
        r = c.post("/v1/exec", json={"code": code, "background": True, "max_output_bytes": MiB})
        cell = r.json()["cell_id"]
        poll_until(lambda: c.get(f"/v1/cells/{cell}").json()["status"] == "completed", "the background cell ends")
        entry = len(json.dumps({"type": "json", "value": [[i % 10] for i in range(50_000)]}, separators=(",", ":")))
        assert held(c) >= entry
        env = wait(c, cell)
        assert env["value"] == 7 and env["output"][0]["value"][:3] == [[0], [1], [2]], str(env)[:300]
        assert len(env["output"][0]["value"]) == 50_000
        assert held(c) == 0


def test_background_output_over_the_tenant_quota_ends_the_cell(tmp_path):
    """A background cell whose uncollected output takes its tenant over tenant_held_bytes is aborted,
    naming the setting; while the tenant is over its quota a new exec is 429 naming it."""
    with make_client(tmp_path, tenant_held_bytes=MiB) as c:
        code = (
            'for (let i = 0; i < 40; i++) { text("z".repeat(6e4)); await new Promise(r => setTimeout(r, 1)); } return 1'
        )
        r = c.post("/v1/exec", json={"code": code, "background": True, "max_output_bytes": 10 * MiB})
        cell = r.json()["cell_id"]

        def stopped() -> dict[str, Any] | None:
            snapshot: dict[str, Any] = c.get(f"/v1/cells/{cell}").json()
            return snapshot if snapshot["status"] != "running" else None

        status = poll_until(stopped, "the background cell stops")
        assert status["status"] == "failed" and status["code"] == "aborted", status
        assert "tenant_held_bytes" in status["error"]
        r = c.post("/v1/exec", json={"code": "return 1"})
        assert r.status_code == 429 and "tenant_held_bytes" in r.json()["error"]["message"], r.text
        env = wait(c, cell)
        assert env["code"] == "aborted" and len(env["output"]) > 10
        assert held(c) == 0
        assert c.post("/v1/exec", json={"code": "return 1"}).status_code == 200


def test_an_exec_body_of_many_values_is_refused_before_it_is_parsed(tmp_path):
    """A 1.8 MB exec body whose client-tool schema holds 600,000 empty arrays is 413 naming
    max_request_values: an exec body holds at most 100,000 values, counted before any parse."""
    schema = {"type": "object", "properties": {"x": {"enum": [[]] * 600_000}}}
    body = json.dumps(
        {"code": "return 1", "client_tools": [{"name": "t", "input_schema": schema}]}, separators=(",", ":")
    )
    with make_client(tmp_path) as c:
        r = c.post("/v1/exec", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 413, r.text
        assert "max_request_values" in r.json()["error"]["message"]
