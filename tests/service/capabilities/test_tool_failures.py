"""Tool failures the way the tool failure contract defines them (SPEC §10), through HTTP with real plugin tools:
the failure envelope and fake-success flip, the per-run failure budget, transient retries, the run endpoint."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.settings import ApiKey
from service.stores import StoreLimits, open_store, sqlite_url
from tests.conftest import make_client, run, value_of
from tests.stores.conftest import redis_url  # noqa: F401 - session fixture: a real redis-server
from tests.support.tools import CALLS, FAILURE_TOOLS, TEST_TOOLS

TOOLS = [*TEST_TOOLS, *FAILURE_TOOLS]
KEYS = (ApiKey("key-alpha", "alpha"), ApiKey("key-beta", "beta"))
ALPHA = {"Authorization": "Bearer key-alpha"}
BETA = {"Authorization": "Bearer key-beta"}

# Calls `tool` with `input(i)` n times (each with other arguments, so the loop guard stays out of
# it) and returns what each call gave: the value, or the rejected Error's fields.
LOOP = """
const out = [];
for (let i = 0; i < %(n)d; i++) {
  try { out.push({value: await %(tool)s(%(input)s)}); }
  catch (e) { out.push({code: e.code, message: e.message, tool: e.tool, details: e.details,
                        errorType: e.errorType, needParam: e.needParam, nonRetriable: e.nonRetriable,
                        userMessage: e.userMessage, redirect: e.redirect, upstream: e.upstream}); }
}
return out;
"""


def loop(tool: str, n: int, reply: Any = None) -> str:
    if tool == "fail":
        given = '{message: "attempt " + i}'
    else:
        given = "{reply: %s, n: i}" % json.dumps(reply)
    return LOOP % {"n": n, "tool": tool, "input": given}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with make_client(tmp_path_factory.mktemp("failures"), extra_tools=TOOLS, api_keys=KEYS) as c:
        yield c


def exec_run(
    client: TestClient, code: str, session: str | None, run_id: str | None = None, headers: dict[str, str] = ALPHA
) -> dict[str, Any]:
    fields: dict[str, Any] = {"code": code}
    if session is not None:
        fields["session_id"] = session
    if run_id is not None:
        fields["run_id"] = run_id
    r = client.post("/v1/exec", json=fields, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def counters(client: TestClient, session: str, run_id: str, headers: dict[str, str] = ALPHA) -> dict[str, Any]:
    r = client.get(f"/v1/sessions/{session}/runs/{run_id}", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def new_session() -> str:
    return "s-" + uuid.uuid4().hex[:16]


def runs_of(tool: str) -> int:
    return CALLS.get(tool, 0)


def test_failing_tool_in_a_loop_gets_four_tool_errors_then_tool_blocked(client):
    """Four honest tool_errors, then tool_blocked (nonRetriable) without the tool running again — also in
    the run's next cell, whose handle says blocked; the run endpoint shows the count and the reason."""
    sid = new_session()
    before = runs_of("fail")
    got = value_of(exec_run(client, loop("fail", 7), sid, "r1"))
    assert [g["code"] for g in got] == ["tool_error"] * 4 + ["tool_blocked"] * 3
    assert got[0]["message"] == "fail failed in the tool: ValueError: attempt 0"
    assert runs_of("fail") - before == 4
    assert got[4]["nonRetriable"] is True and "failed 4 times" in got[4]["message"]
    assert "use another tool or report the problem" in got[4]["message"]
    nxt = value_of(
        exec_run(
            client,
            """
        const handle = catalog.all().find(h => h.callableName === "fail");
        const found = await catalog.search("fails with the given message");
        let code; try { await fail({message: "again"}); } catch (e) { code = e.code; }
        return {handle: handle.blocked, found: found.find(h => h.callableName === "fail").blocked,
                echo: catalog.all().find(h => h.callableName === "echo").blocked, code};
    """,
            sid,
            "r1",
        )
    )
    assert nxt == {"handle": True, "found": True, "code": "tool_blocked"}  # echo's handle has no `blocked`
    assert runs_of("fail") - before == 4
    report = counters(client, sid, "r1")
    assert report["failures"] == {"fail": 4} and report["total_failures"] == 4
    assert report["blocked"] == [{"tool": "fail", "reason": "it failed 4 times in this run (limit 4 per tool per run)"}]
    assert report["budget_exhausted"] is False and report["saved_results"] == {"count": 0, "bytes": 0}


def test_recoverable_failures_never_block(client):
    """error_type recoverable / a need_param key: tool_error with the fields, never counted, never blocked."""
    sid = new_session()
    before = runs_of("report")
    reply = {"success": False, "error": "date must be YYYY-MM-DD", "error_type": "recoverable", "need_param": "date"}
    got = value_of(exec_run(client, loop("report", 10, reply), sid, "r1"))
    assert [g["code"] for g in got] == ["tool_error"] * 10
    assert got[9]["errorType"] == "recoverable" and got[9]["needParam"] == "date"
    assert got[9]["message"] == "report failed: date must be YYYY-MM-DD"
    assert runs_of("report") - before == 10
    keyed = value_of(
        exec_run(client, loop("report", 6, {"ok": False, "error": "which city?", "need_param": "city"}), sid, "r1")
    )
    assert [g["errorType"] for g in keyed] == ["recoverable"] * 6
    assert counters(client, sid, "r1")["total_failures"] == 0


def test_ok_false_is_a_failure_and_counts(client):
    """{"ok": false} rejects even without is_error; its reason is error -> msg; it counts against the run."""
    sid = new_session()
    got = value_of(exec_run(client, loop("report", 1, {"ok": False, "msg": "quota used up"}), sid, "r1"))
    assert got[0]["code"] == "tool_error" and got[0]["tool"] == "report"
    assert got[0]["message"] == "report failed: quota used up"
    assert got[0]["details"] == {"ok": False, "msg": "quota used up"}
    assert counters(client, sid, "r1")["failures"] == {"report": 1}


def test_reason_order_default_and_seed_fields(client):
    """success: false takes stderr before error; an empty reason gets a default naming the tool; the
    seed's fields reach the guest in camelCase; a code field alone never flips a success."""
    sid = new_session()
    reply = {
        "success": False,
        "stderr": "exit 2: no such table",
        "error": "query failed",
        "error_type": "config",
        "user_message": "The report database is not set up.",
        "redirect": "report_b",
        "upstream": {"status": 500},
    }
    got = value_of(exec_run(client, loop("report", 1, reply), sid, "r1"))[0]
    assert got["message"] == "report failed: exit 2: no such table"
    assert got["errorType"] == "config" and got["userMessage"] == "The report database is not set up."
    assert got["redirect"] == "report_b" and got["upstream"] == {"status": 500}
    empty = value_of(exec_run(client, loop("report_b", 1, {"success": False}), sid, "r1"))[0]
    assert empty["code"] == "tool_error" and empty["message"].startswith("report_b failed: report_b reported a failure")
    fine = value_of(exec_run(client, loop("report_c", 1, {"code": 500, "success": None}), sid, "r1"))[0]
    assert fine == {"value": {"code": 500, "success": None}}


def test_non_retriable_failure_blocks_at_once(client):
    """A non-recoverable failure with non_retriable: true blocks the tool after one run."""
    sid = new_session()
    before = runs_of("report_d")
    reply = {"success": False, "error": "no API key configured", "error_type": "config", "non_retriable": True}
    got = value_of(exec_run(client, loop("report_d", 3, reply), sid, "r1"))
    assert [g["code"] for g in got] == ["tool_error", "tool_blocked", "tool_blocked"]
    assert got[0]["nonRetriable"] is True and "non_retriable" in got[1]["message"]
    assert runs_of("report_d") - before == 1
    # With a recoverable error_type the flag is ignored: the tool stays usable.
    ignored = {**reply, "error_type": "recoverable"}
    again = value_of(exec_run(client, loop("report_d", 2, ignored), new_session(), "r1"))
    assert [g["code"] for g in again] == ["tool_error"] * 2 and again[0]["nonRetriable"] is False


def test_run_budget_exhausted_refuses_every_tool(client):
    """At failures_per_run (8) counted failures every further call rejects with failure_budget_exhausted."""
    sid = new_session()
    code = "\n".join(
        [
            "const codes = [];",
            "async function attempt(f, input) { try { await f(input); codes.push('ok'); } catch (e) { codes.push(e.code); } }",
            "for (let i = 0; i < 3; i++) await attempt(fail, {message: 'f' + i});",
            "for (let i = 0; i < 3; i++) await attempt(report, {reply: {ok: false, error: 'x'}, n: i});",
            "for (let i = 0; i < 2; i++) await attempt(report_b, {reply: {success: false, error: 'y'}, n: i});",
            "await attempt(echo, {x: 1});",
            "let message; try { await report_c({reply: 1}); } catch (e) { message = e.message; }",
            "return {codes, message};",
        ]
    )
    got = value_of(exec_run(client, code, sid, "r1"))
    assert got["codes"] == ["tool_error"] * 8 + ["failure_budget_exhausted"]
    assert "Stop calling tools" in got["message"]
    report = counters(client, sid, "r1")
    assert report["total_failures"] == 8 and report["budget_exhausted"] is True


def test_new_run_starts_with_a_clean_budget(client):
    """Another run of the session, and every session-less cell (its own run), starts from zero."""
    sid = new_session()
    first = value_of(exec_run(client, loop("fail", 5), sid, "r1"))
    assert first[-1]["code"] == "tool_blocked"
    second = value_of(exec_run(client, loop("fail", 1), sid, "r2"))
    assert second[0]["code"] == "tool_error"
    for _ in range(2):
        alone = value_of(exec_run(client, loop("fail", 5), None))
        assert [g["code"] for g in alone] == ["tool_error"] * 4 + ["tool_blocked"]


def test_ending_a_run_forgets_its_counters(client):
    """DELETE /v1/sessions/{sid}/runs/{run} drops the run's counters with its saved results."""
    sid = new_session()
    value_of(exec_run(client, loop("fail", 4), sid, "r1"))
    assert counters(client, sid, "r1")["blocked"]
    assert client.delete(f"/v1/sessions/{sid}/runs/r1", headers=ALPHA).status_code == 200
    assert counters(client, sid, "r1")["failures"] == {}


def test_run_counters_are_tenant_scoped_and_ids_checked(client):
    """Another tenant's view of the same session and run is empty; a bad id is a 422."""
    sid = new_session()
    value_of(exec_run(client, loop("fail", 1), sid, "r1"))
    assert counters(client, sid, "r1")["failures"] == {"fail": 1}
    assert counters(client, sid, "r1", headers=BETA)["failures"] == {}
    assert client.get(f"/v1/sessions/{sid}/runs/bad%20id", headers=ALPHA).status_code == 422


def test_idempotent_read_survives_two_connection_resets(client):
    """Two ConnectionErrors, then an answer: three attempts, the cell sees the value, telemetry counts 2 retries."""
    key = uuid.uuid4().hex
    env = exec_run(client, f'return await flaky_read({{key: "{key}", resets: 2}});', None)
    assert value_of(env) == {"key": key, "attempts": 3}
    assert env["telemetry"]["retries"] == 2


def test_transient_failure_after_three_attempts_is_transient(client):
    """Three resets in a row: tool_error with errorType transient after exactly three attempts."""
    key = uuid.uuid4().hex
    got = value_of(
        exec_run(client, LOOP % {"n": 1, "tool": "flaky_read", "input": f'{{key: "{key}", resets: 9}}'}, None)
    )[0]
    assert got["code"] == "tool_error" and got["errorType"] == "transient"
    assert "ConnectionError: connection reset by peer" in got["message"]
    assert CALLS[f"flaky_read:{key}"] == 3


def test_non_idempotent_tool_is_never_retried(client):
    """A write not marked idempotent runs once, even on a connection reset."""
    key = uuid.uuid4().hex
    env = exec_run(client, LOOP % {"n": 1, "tool": "flaky_write", "input": f'{{key: "{key}", resets: 1}}'}, None)
    assert value_of(env)[0]["errorType"] == "transient"
    assert CALLS[f"flaky_write:{key}"] == 1 and env["telemetry"]["retries"] == 0


def test_breaker_gives_one_attempt_after_two_failed_calls(client):
    """When a tool's last two calls for the tenant failed, the next call gets one attempt, no retries."""
    keys = [uuid.uuid4().hex for _ in range(3)]
    for key in keys[:2]:
        value_of(exec_run(client, LOOP % {"n": 1, "tool": "flaky_feed", "input": f'{{key: "{key}", resets: 9}}'}, None))
        assert CALLS[f"flaky_feed:{key}"] == 3
    env = exec_run(client, LOOP % {"n": 1, "tool": "flaky_feed", "input": f'{{key: "{keys[2]}", resets: 1}}'}, None)
    assert value_of(env)[0]["errorType"] == "transient"
    assert CALLS[f"flaky_feed:{keys[2]}"] == 1 and env["telemetry"]["retries"] == 0
    # A success closes it again: the next call gets its three attempts.
    value_of(exec_run(client, f'return await flaky_feed({{key: "{keys[2]}"}});', None))
    key = uuid.uuid4().hex
    env = exec_run(client, f'return await flaky_feed({{key: "{key}", resets: 2}});', None)
    assert value_of(env) == {"key": key, "attempts": 3}


def test_a_burst_of_concurrent_calls_runs_no_more_than_the_budget(client):
    """`Promise.all` over 100 calls of an idempotent tool that always raises ConnectionError, in a
    session-less cell (a run of its own): 4 calls run (tool_failures_per_run), at most 2 of them
    retried (the breaker's bound), so at most 8 executions; the other 96 reject tool_blocked unrun."""
    key = uuid.uuid4().hex
    code = (
        "return await Promise.all(Array.from({length: 100}, (_, i) =>"
        f' flaky_read({{key: "{key}-" + i, resets: 1000000}}).catch(e => e.code)));'
    )
    codes = value_of(exec_run(client, code, None))
    assert codes.count("tool_error") == 4 and codes.count("tool_blocked") == 96
    executions = sum(n for name, n in CALLS.items() if name.startswith(f"flaky_read:{key}-"))
    assert 4 <= executions <= 2 * 3 + 2 * 1, executions


def test_partial_success_resolves_with_a_warning(client):
    """success: true with completed: false (or a warning) resolves and adds a line to the envelope's warnings."""
    env = exec_run(
        client,
        """
        const a = await report({reply: {success: true, completed: false, rows: 3}});
        const b = await report_b({reply: {success: true, warning: "2 of 5 rows failed"}});
        return [a.rows, b.warning];
    """,
        None,
    )
    assert value_of(env) == [3, "2 of 5 rows failed"]
    assert any(w.startswith("report succeeded only in part (completed: false)") for w in env["warnings"])
    assert "report_b succeeded only in part: 2 of 5 rows failed" in env["warnings"]


def test_counters_count_against_the_tenants_store_bytes(tmp_path):
    """Failure counters of many runs are charged to tenant_store_bytes: past it, new runs' counters stay
    in the process (their tools are still blocked there) and the store holds no more than the quota."""
    quota = 4096
    with make_client(tmp_path, extra_tools=TOOLS, workers=1, tenant_store_bytes=quota) as svc:
        sid = new_session()
        for i in range(30):
            got = value_of(run(svc, loop("fail", 5), session_id=sid, run_id=f"r{i:03d}-" + "x" * 56))
            assert got[-1]["code"] == "tool_blocked"
    store = open_store(sqlite_url(tmp_path / "store.sqlite3"), StoreLimits())
    try:
        used, sessions = asyncio.run(store.usage("local"))
    finally:
        asyncio.run(store.close())
    assert quota - 200 < used <= quota and sessions == 0


def test_counters_survive_a_service_restart(tmp_path):
    """A blocked tool stays blocked after the service restarts on the same SQLite store."""
    sid = new_session()
    with make_client(tmp_path, extra_tools=TOOLS, workers=1) as first:
        assert run(first, loop("fail", 5), session_id=sid, run_id="r1")["value"][-1]["code"] == "tool_blocked"
    before = runs_of("fail")
    with make_client(tmp_path, extra_tools=TOOLS, workers=1) as second:
        got = value_of(run(second, loop("fail", 1), session_id=sid, run_id="r1"))
        assert got[0]["code"] == "tool_blocked" and runs_of("fail") == before
        assert second.get(f"/v1/sessions/{sid}/runs/r1").json()["failures"] == {"fail": 4}


def test_counters_are_shared_by_replicas_on_redis(tmp_path, request):
    """Two services on one Redis store are replicas of one run: a block made through one holds on the other."""
    url = request.getfixturevalue("redis_url")
    sid = new_session()
    with (
        make_client(tmp_path / "a", extra_tools=TOOLS, workers=1, store_url=url) as first,
        make_client(tmp_path / "b", extra_tools=TOOLS, workers=1, store_url=url) as second,
    ):
        value_of(run(first, loop("fail", 2), session_id=sid, run_id="r1"))
        got = value_of(run(second, loop("fail", 3), session_id=sid, run_id="r1"))
        assert [g["code"] for g in got] == ["tool_error", "tool_error", "tool_blocked"]
        assert first.get(f"/v1/sessions/{sid}/runs/r1").json()["failures"] == {"fail": 4}
