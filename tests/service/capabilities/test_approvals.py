"""Approvals without replay: calls that need a person park the cell; approved they run once, denied never.

One service per module with `[tools] approve = ["echo"]`, the payments plugin (its before-hook asks
for approval of payments over 100) and two keys of one tenant, one of which adds `blob` to the
approvals.  Runs are counted by the tools themselves (tests/support/tools.py CALLS).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator

from service.assembly import build_components
from service.errors import ConfigError
from service.settings import ApiKey, Settings, ToolSettings
from tests.conftest import make_client
from tests.support.polling import poll_until
from tests.support.tools import CALLS, TEST_TOOLS

PLAIN = {"authorization": "Bearer k-plain"}
STRICT = {"authorization": "Bearer k-strict"}
PLUGIN = "tests.support.approval_plugin"
WEATHER = {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    keys = (ApiKey("k-plain", "acme"), ApiKey("k-strict", "acme", tools={"approve": ["blob"]}))
    with make_client(
        tmp_path_factory.mktemp("approvals"), tools=ToolSettings(plugins=(PLUGIN,), approve=("echo",)), api_keys=keys
    ) as c:
        yield c


def exec_cell(client: TestClient, code: str, headers: dict[str, str] = PLAIN, **fields: Any) -> dict[str, Any]:
    r = client.post("/v1/exec", json={"code": code, **fields}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def wait(client: TestClient, cell_id: str, status: int = 200, **body: Any) -> dict[str, Any]:
    r = client.post(f"/v1/cells/{cell_id}/wait", json=body, headers=PLAIN)
    assert r.status_code == status, r.text
    return r.json()  # type: ignore[no-any-return]


def runs(tool: str) -> int:
    return CALLS.get(tool, 0)


def one_approval(env: dict[str, Any]) -> dict[str, Any]:
    assert env["status"] == "waiting" and env["reason"] == "pending_tools", env
    [entry] = env["pending_tool_calls"]
    assert entry["method"] == "approval", entry
    return entry  # type: ignore[no-any-return]


# A cell that shows one of its own values before and after the call: the same value after the
# approval proves the guest's heap was kept (the cell was not run again).
ECHO_CELL = """
    const mark = Math.random();
    text("before " + mark);
    const r = await echo({x: 41});
    text("after " + mark);
    return {r, mark};
"""


def test_configured_approval_parks_then_approved_runs_once_without_replay(client):
    """`[tools] approve` parks the call (tool not run, bridge_dispatch_started false); approved, it runs once
    and the same guest continues (its own random mark survives; the earlier output is not repeated)."""
    before = runs("echo")
    env = exec_cell(client, ECHO_CELL)
    entry = one_approval(env)
    assert entry["tool"] == "echo" and entry["input"] == {"x": 41}
    assert "[tools] approve" in entry["reason"] and "'echo'" in entry["reason"]
    assert (env["bridge_dispatch_started"], env["replay_safe"]) == (False, True)
    assert runs("echo") == before
    [first] = env["output"]
    mark = first["text"].removeprefix("before ")
    status = client.get(f"/v1/cells/{env['cell_id']}", headers=PLAIN).json()
    assert status["status"] == "waiting" and status["pending_tool_calls"] == [entry]
    done = wait(client, env["cell_id"], approvals=[{"id": entry["id"], "approve": True}])
    assert done["status"] == "completed", done
    assert done["value"]["r"]["echo"] == 41 and str(done["value"]["mark"]) == mark
    assert done["output"] == [{"type": "text", "text": "after " + mark}]
    assert runs("echo") == before + 1
    assert (done["bridge_dispatch_started"], done["replay_safe"]) == (True, False)
    assert done["telemetry"]["legs"] == 2


def test_denied_call_rejects_catchably_with_reason_and_never_runs(client):
    """Denied: the guest's await rejects with code approval_denied and the approver's reason; the tool never ran."""
    before = runs("echo")
    env = exec_cell(
        client,
        """
        try { await echo({x: 1}); return "ran"; }
        catch (e) { return {code: e.code, message: e.message, effect: e.effectStatus, isError: e instanceof Error}; }
    """,
    )
    entry = one_approval(env)
    done = wait(client, env["cell_id"], approvals=[{"id": entry["id"], "approve": False, "reason": "not on a Friday"}])
    assert done["status"] == "completed", done
    assert done["value"]["code"] == "approval_denied" and done["value"]["isError"] is True
    assert "not on a Friday" in done["value"]["message"] and done["value"]["effect"] == "not_started"
    assert runs("echo") == before
    assert (done["bridge_dispatch_started"], done["replay_safe"]) == (False, True)


def test_uncaught_denial_fails_the_cell_naming_the_code(client):
    env = exec_cell(client, "return await echo({x: 2})")
    entry = one_approval(env)
    done = wait(client, env["cell_id"], approvals=[{"id": entry["id"], "approve": False}])
    assert done["status"] == "failed" and "approval was denied" in done["error"], done


def test_key_adds_approvals_and_cannot_remove_the_servers(client):
    """A key's `tools.approve` adds `blob` for its cells only; the server's `echo` still needs approval."""
    plain = exec_cell(client, "return (await blob({size: 3})).data")
    assert plain["value"] == "xxx"
    strict = exec_cell(client, "return (await blob({size: 3})).data", headers=STRICT)
    entry = one_approval(strict)
    assert entry["tool"] == "blob" and "API key's tools.approve" in entry["reason"]
    client.post(f"/v1/cells/{strict['cell_id']}/cancel", headers=STRICT)
    echo = exec_cell(client, "return await echo({x: 3})", headers=STRICT)
    assert one_approval(echo)["tool"] == "echo"
    client.post(f"/v1/cells/{echo['cell_id']}/cancel", headers=STRICT)


def test_exec_require_approval_shows_the_input_that_will_run(client):
    """`require_approval` adds tools for one exec; the entry shows the input after the before-hooks."""
    before = runs("pay")
    env = exec_cell(client, 'return await pay({amount: 5, to: "shorthand"})', require_approval=["pay"])
    entry = one_approval(env)
    assert entry["input"] == {"amount": 5, "to": "Shorthand Ltd"} and "require_approval" in entry["reason"]
    done = wait(client, env["cell_id"], approvals=[{"id": entry["id"], "approve": True}])
    assert done["value"] == {"paid": 5, "to": "Shorthand Ltd"} and runs("pay") == before + 1
    assert exec_cell(client, 'return await pay({amount: 5, to: "x"})')["value"] == {"paid": 5, "to": "x"}


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        (["paay"], "require_approval[0]: 'paay' names no tool"),
        (["mcp:nowhere"], "names no MCP server"),
        (["mcp:bad/"], "is not an MCP entry"),
        (["group:nope"], "unknown group"),
        ([" pay"], "surrounding spaces"),
    ],
)
def test_bad_require_approval_entries_are_422_naming_the_entry(client, entries, problem):
    r = client.post("/v1/exec", json={"code": "return 1", "require_approval": entries}, headers=PLAIN)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["need_param"] == "require_approval" and problem in r.json()["error"]["message"]


def test_require_approval_is_bounded(client):
    r = client.post("/v1/exec", json={"code": "return 1", "require_approval": ["pay"] * 65}, headers=PLAIN)
    assert r.status_code == 422 and "require_approval" in r.text


def test_before_hook_asks_for_one_call(client):
    """The hook asks only for payments over 100: a small one runs at once, a large one waits with the hook's reason."""
    before = runs("pay")
    env = exec_cell(
        client,
        """
        const small = await pay({amount: 10, to: "ann"});
        const large = await pay({amount: 500, to: "bob"});
        return [small, large];
    """,
    )
    entry = one_approval(env)
    assert runs("pay") == before + 1
    assert entry["input"] == {"amount": 500, "to": "bob"}
    assert entry["reason"] == "pay needs approval: payments over 100 need a person (this one is 500)"
    done = wait(client, env["cell_id"], approvals=[{"id": entry["id"], "approve": True}])
    assert done["value"] == [{"paid": 10, "to": "ann"}, {"paid": 500, "to": "bob"}] and runs("pay") == before + 2


def test_a_blocking_hook_wins_over_approval(client):
    """A call a hook blocks is refused at once: nobody is asked to approve it."""
    env = exec_cell(
        client, 'try { await pay({amount: 500, to: "nobody"}); } catch (e) { return e.code; }', require_approval=["pay"]
    )
    assert env["status"] == "completed" and env["value"] == "blocked", env


def test_wait_answers_client_tools_and_approvals_together(client):
    """One wait carries tool_results for a client tool and an approval for a native call."""
    env = exec_cell(
        client, "return await Promise.all([get_weather({city: 'Oslo'}), echo({x: 7})])", client_tools=[WEATHER]
    )
    pending = {p["method"]: p for p in env["pending_tool_calls"]}
    assert set(pending) == {"tool", "approval"}, env
    done = wait(
        client,
        env["cell_id"],
        tool_results=[{"id": pending["tool"]["id"], "ok": True, "value": 21}],
        approvals=[{"id": pending["approval"]["id"], "approve": True}],
    )
    assert done["status"] == "completed", done
    assert done["value"][0] == 21 and done["value"][1]["echo"] == 7


def test_wait_refuses_bad_approval_answers_and_the_cell_stays_waiting(client):
    """Unknown id, an approval answer for a client tool call, an approval id in tool_results, the same id twice:
    each is a 422 naming the field and index, and the cell still waits for a good answer."""
    env = exec_cell(
        client, "return await Promise.all([get_weather({city: 'Oslo'}), echo({x: 8})])", client_tools=[WEATHER]
    )
    pending = {p["method"]: p["id"] for p in env["pending_tool_calls"]}
    cell = env["cell_id"]
    bad = [
        (
            {"approvals": [{"id": pending["approval"], "approve": True}, {"id": "req_999", "approve": True}]},
            "approvals",
            "approvals[1].id 'req_999' is not a pending approval",
        ),
        ({"approvals": [{"id": pending["tool"], "approve": True}]}, "approvals", "approvals[0].id"),
        ({"tool_results": [{"id": pending["approval"], "ok": True, "value": 1}]}, "tool_results", "tool_results[0].id"),
        (
            {
                "approvals": [
                    {"id": pending["approval"], "approve": True},
                    {"id": pending["approval"], "approve": False},
                ]
            },
            "approvals",
            "approvals[1].id",
        ),
    ]
    before = runs("echo")
    for body, field, message in bad:
        error = wait(client, cell, status=422, **body)["error"]
        assert error["need_param"] == field and message in error["message"], (body, error)
    assert runs("echo") == before
    assert client.get(f"/v1/cells/{cell}", headers=PLAIN).json()["status"] == "waiting"
    done = wait(
        client,
        cell,
        tool_results=[{"id": pending["tool"], "ok": True, "value": 1}],
        approvals=[{"id": pending["approval"], "approve": True}],
    )
    assert done["status"] == "completed" and runs("echo") == before + 1


def test_wait_without_an_answer_stays_parked_on_the_approval(client):
    env = exec_cell(client, "return await echo({x: 9})")
    entry = one_approval(env)
    again = wait(client, env["cell_id"], timeout_ms=200)
    assert again["status"] == "waiting" and again["pending_tool_calls"] == [entry]
    client.post(f"/v1/cells/{env['cell_id']}/cancel", headers=PLAIN)


def test_cancelled_cell_never_runs_its_pending_call(client):
    before = runs("echo")
    env = exec_cell(client, "return await echo({x: 10})")
    one_approval(env)
    final = client.post(f"/v1/cells/{env['cell_id']}/cancel", headers=PLAIN).json()
    assert final["code"] == "aborted" and final["bridge_dispatch_started"] is False
    assert runs("echo") == before
    r = client.post(
        f"/v1/cells/{env['cell_id']}/wait", json={"approvals": [{"id": "req_1", "approve": True}]}, headers=PLAIN
    )
    assert r.status_code == 404 and runs("echo") == before


@pytest.mark.slow
def test_expired_cell_never_runs_its_pending_call(tmp_path):
    """A parked approval expires with its cell (cell_ttl_seconds): the call is discarded, never run."""
    now = [0.0]
    with make_client(
        tmp_path, tools=ToolSettings(approve=("echo",)), cell_ttl_seconds=60, cells_clock=lambda: now[0]
    ) as c:
        before = runs("echo")
        env = c.post("/v1/exec", json={"code": "return await echo({x: 11})"}).json()
        one_approval(env)
        now[0] += 59  # not idle long enough yet: still parked
        assert c.get(f"/v1/cells/{env['cell_id']}").json()["status"] == "waiting"
        now[0] += 2
        poll_until(lambda: c.get(f"/v1/cells/{env['cell_id']}").json()["status"] == "failed", "the cell expired")
        assert c.get(f"/v1/cells/{env['cell_id']}").json()["code"] == "aborted"
        assert runs("echo") == before


@pytest.mark.parametrize(
    ("tools", "keys", "where"),
    [
        (ToolSettings(approve=("ehco",)), (), "tools.approve[0]: 'ehco' names no tool"),
        (ToolSettings(approve=("mcp:nowhere",)), (), "tools.approve[0]: 'mcp:nowhere' names no MCP server"),
        (ToolSettings(), (ApiKey("k", "t", tools={"approve": ["echo", "blbo"]}),), "api_keys[0].tools.approve[1]"),
        (ToolSettings(), (ApiKey("k", "t", tools={"approve": "echo"}),), "api_keys[0].tools.approve must be a list"),
    ],
)
def test_misspelt_configured_approvals_stop_the_service_at_start(tmp_path, tools, keys, where):
    """An approval entry that names nothing would let calls run unasked: it is refused at start."""
    settings = Settings(workers=1, data_dir=str(tmp_path)).replace(tools=tools, api_keys=keys)
    with pytest.raises(ConfigError) as info:
        build_components(settings, extra_tools=TEST_TOOLS, store=False)
    assert where in str(info.value)


def test_approval_envelopes_match_the_published_schema(client):
    """A waiting envelope with an approval entry (reason included) and its GET snapshot validate against
    `CellEnvelope` from /openapi.json, which forbids fields it does not name."""
    doc = client.get("/openapi.json").json()
    validator = Draft202012Validator({"$ref": "#/components/schemas/CellEnvelope", "components": doc["components"]})
    env = exec_cell(client, "return await echo({x: 12})")
    status = client.get(f"/v1/cells/{env['cell_id']}", headers=PLAIN).json()
    for envelope in (env, status):
        assert list(validator.iter_errors(envelope)) == [], envelope
    assert "reason" in one_approval(env)
    assert "approvals" in doc["components"]["schemas"]["WaitRequest"]["properties"]
    client.post(f"/v1/cells/{env['cell_id']}/cancel", headers=PLAIN)
