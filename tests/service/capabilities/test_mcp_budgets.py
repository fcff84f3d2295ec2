"""MCP tool calls are tool calls: the cell's call budget, the loop guard and the run's failure budget
count them exactly like native tools, against the real SDK test server over stdio (`docs`)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.settings_mcp import McpServerConfig
from tests.conftest import make_client, run_ok
from tests.mcp.conftest import SERVER_SCRIPT

MAX_CALLS = 5


@pytest.fixture(scope="module")
def budget_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A service with the test server over stdio and `max_calls_per_cell` = 5."""
    servers = (McpServerConfig(name="docs", command=sys.executable, args=(SERVER_SCRIPT, "stdio"), timeout_ms=10000),)
    with make_client(tmp_path_factory.mktemp("mcpbudget"), mcp_servers=servers, max_calls_per_cell=MAX_CALLS) as c:
        yield c


# Calls `expr` (an expression of `i`) `n` times one after the other; each result is "ok" or the error code.
LOOP = """
const out = [];
for (let i = 0; i < {n}; i++) {{
  try {{ const r = await ({expr}); out.push(r && r.isError ? "isError" : "ok"); }} catch (e) {{ out.push(e.code); }}
}}
return out;
"""


def outcomes(client: TestClient, expr: str, n: int, **fields: Any) -> tuple[list[str], dict[str, Any]]:
    # Generous: every `crash` restarts the server, which takes seconds on a loaded machine.
    env = run_ok(client, LOOP.format(n=n, expr=expr), timeout_ms=60000, **fields)
    return env["value"], env["telemetry"]


def fresh_run() -> dict[str, str]:
    return {"session_id": "s-" + uuid.uuid4().hex[:12], "run_id": "r1"}


@pytest.mark.slow
def test_thirty_identical_mcp_calls_stop_at_the_loop_guard(budget_client):
    """The 4th `MCP.docs.echo` with the same arguments is refused (`loop_guard`), as a native tool's would be."""
    got, telemetry = outcomes(budget_client, 'MCP.docs.echo({text: "same"})', 30)
    assert got[:3] == ["ok"] * 3 and got[3] == "loop_guard", got
    assert set(got[4:]) == {"loop_guard", "call_budget_exceeded"}, got


def test_mcp_calls_spend_the_cells_call_budget(budget_client):
    """With max_calls_per_cell = 5, the 6th MCP call (distinct arguments) is `call_budget_exceeded`; telemetry counts 5."""
    got, telemetry = outcomes(budget_client, "MCP.docs.echo({text: String(i)})", 30)
    assert got[:MAX_CALLS] == ["ok"] * MAX_CALLS and set(got[MAX_CALLS:]) == {"call_budget_exceeded"}, got
    assert telemetry["call_count"] == MAX_CALLS


def test_native_and_mcp_calls_share_one_budget(budget_client):
    """Three native calls and then MCP calls: only two MCP calls fit the budget of five."""
    env = run_ok(
        budget_client,
        """
        for (let i = 0; i < 3; i++) await echo({x: "n" + i});
        const out = [];
        for (let i = 0; i < 4; i++) { try { await MCP.docs.echo({text: "m" + i}); out.push("ok"); } catch (e) { out.push(e.code); } }
        let native;
        try { await echo({x: "late"}); native = "ok"; } catch (e) { native = e.code; }
        return {out, native};
    """,
    )
    assert env["value"] == {
        "out": ["ok", "ok", "call_budget_exceeded", "call_budget_exceeded"],
        "native": "call_budget_exceeded",
    }
    assert env["telemetry"]["call_count"] == MAX_CALLS


def test_refusals_carry_the_tool_and_name_it(budget_client):
    """A loop-guard refusal of an MCP call names `MCP.docs.echo` in its message and `tool` field."""
    env = run_ok(
        budget_client,
        """
        for (let i = 0; i < 3; i++) await MCP.docs.echo({text: "x"});
        try { await MCP.docs.echo({text: "x"}); } catch (e) { return {code: e.code, tool: e.tool, message: e.message}; }
    """,
    )
    got = env["value"]
    assert got["code"] == "loop_guard" and got["tool"] == "MCP.docs.echo" and "MCP.docs.echo" in got["message"]


@pytest.mark.slow
def test_server_failures_count_and_block_the_tool_for_the_run(budget_client):
    """A call the server cannot answer (`crash` kills it) counts like a native exception: the 5th is `tool_blocked`
    across cells of one run; the run report lists it and its search handle says `blocked`."""
    run = fresh_run()
    first, _ = outcomes(budget_client, "MCP.docs.crash({n: i})", 3, **run)
    second, _ = outcomes(budget_client, "MCP.docs.crash({n: 10 + i})", 2, **run)
    assert first + second == ["mcp_unavailable"] * 4 + ["tool_blocked"], (first, second)
    report = budget_client.get(f"/v1/sessions/{run['session_id']}/runs/r1").json()
    assert report["failures"] == {"MCP.docs.crash": 4}
    assert [b["tool"] for b in report["blocked"]] == ["MCP.docs.crash"]
    found = run_ok(
        budget_client,
        'return (await catalog.search("Kills its own server")).map(h => [h.callableName, h.blocked])',
        **run,
    )
    assert ["MCP.docs.crash", True] in found["value"], found["value"]


def test_bad_input_and_unknown_tools_do_not_count(budget_client):
    """Input the tool refuses (missing `title`) and unknown tools are the caller's to fix: no failures recorded."""
    run = fresh_run()
    got, _ = outcomes(budget_client, "MCP.docs.createIssue({body: String(i)})", 5, **run)
    assert set(got) == {"mcp_invalid_input"}, got
    report = budget_client.get(f"/v1/sessions/{run['session_id']}/runs/r1").json()
    assert report["total_failures"] == 0, report


@pytest.mark.slow
def test_the_run_failure_budget_stops_mcp_calls_too(budget_client):
    """After `failures_per_run` (8) counted failures across tools, native and MCP calls reject with
    `failure_budget_exhausted` without running."""
    run = fresh_run()
    run_ok(budget_client, "for (let i = 0; i < 4; i++) await MCP.docs.fail({n: i});", **run)
    crashes = "for (let i = 0; i < 4; i++) { try { await MCP.docs.crash({n: i}); } catch (e) {} }"
    run_ok(budget_client, crashes, timeout_ms=60000, **run)
    env = run_ok(
        budget_client,
        """
        const codes = [];
        for (const f of [() => MCP.docs.echo({text: "x"}), () => echo({x: "y"})]) {
          try { await f(); codes.push("ok"); } catch (e) { codes.push(e.code); }
        }
        return codes;
    """,
        **run,
    )
    assert env["value"] == ["failure_budget_exhausted", "failure_budget_exhausted"]
