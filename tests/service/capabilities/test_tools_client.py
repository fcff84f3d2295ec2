"""Client tools over HTTP: declared per exec, calls park the cell, `wait` with tool_results resumes it."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient

from tests.support.tools import CALLS

WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def exec_cell(client: TestClient, code: str, tools: list[dict[str, Any]] | None = None, **fields: Any) -> dict:
    """POST /v1/exec with client tools; returns the envelope."""
    declared = [WEATHER] if tools is None else tools
    r = client.post("/v1/exec", json={"code": code, "client_tools": declared, **fields})
    assert r.status_code == 200, r.text
    return r.json()


def wait(client: TestClient, cell_id: str, results: list[dict[str, Any]], status: int = 200) -> dict:
    """POST /v1/cells/{id}/wait with tool_results; asserts the HTTP status."""
    r = client.post(f"/v1/cells/{cell_id}/wait", json={"tool_results": results})
    assert r.status_code == status, r.text
    return r.json()


def test_client_tool_call_parks_with_pending_call_and_input(client):
    """Calling a client tool parks the cell: waiting/pending_tools with id, method, tool, name and input."""
    env = exec_cell(client, 'return await get_weather({city: "Oslo"})')
    assert env["status"] == "waiting", env
    assert env["reason"] == "pending_tools"
    [call] = env["pending_tool_calls"]
    assert call["id"].startswith("req_")
    assert call == {
        "id": call["id"],
        "method": "tool",
        "tool": "get_weather",
        "name": "get_weather",
        "input": {"city": "Oslo"},
    }
    client.post(f"/v1/cells/{env['cell_id']}/cancel")


def test_a_pending_client_call_names_the_tool_as_declared_beside_its_callable_name(client):
    """`name` is the declared name, whatever spelling the guest global got (`tool`): a caller dispatches on it."""
    env = exec_cell(
        client,
        "const cls = catalog.all().find(h => h.toolName === 'class').callableName;"
        "return await Promise.all([open_ticket({}), tool_9lives({}), globalThis[cls]({})])",
        tools=[{"name": "open-ticket"}, {"name": "9lives"}, {"name": "class"}],
    )
    assert env["status"] == "waiting", env
    named = {call["name"]: call["tool"] for call in env["pending_tool_calls"]}
    assert named.keys() == {"open-ticket", "9lives", "class"}, named
    assert named["open-ticket"] == "open_ticket" and named["9lives"] == "tool_9lives"
    assert re.fullmatch(r"class_[0-9a-f]{8}", named["class"]), named
    client.post(f"/v1/cells/{env['cell_id']}/cancel")


def test_wait_with_tool_result_resumes_and_value_reaches_guest(client):
    """`wait` with `{id, ok: true, value}` resumes the cell and the guest receives the value."""
    env = exec_cell(
        client,
        """
        const w = await get_weather({city: "Oslo"});
        text("temp " + w.temp);
        return {w, kind: typeof w.temp};
    """,
    )
    call_id = env["pending_tool_calls"][0]["id"]
    done = wait(client, env["cell_id"], [{"id": call_id, "ok": True, "value": {"temp": 21, "sky": "clear"}}])
    assert done["status"] == "completed", done
    assert done["value"] == {"w": {"temp": 21, "sky": "clear"}, "kind": "number"}
    assert done["output"] == [{"type": "text", "text": "temp 21"}]
    assert done["telemetry"]["call_count"] == 1


def test_client_tool_error_result_rejects_catchably(client):
    """An `{ok: false, error: "boom"}` result rejects the guest's call with an Error it can catch."""
    env = exec_cell(
        client,
        """
        try { await get_weather({city: "Oslo"}); return "resolved"; }
        catch (e) { return {isError: e instanceof Error, message: e.message, code: e.code}; }
    """,
    )
    call_id = env["pending_tool_calls"][0]["id"]
    done = wait(client, env["cell_id"], [{"id": call_id, "ok": False, "error": "boom"}])
    assert done["status"] == "completed", done
    assert done["value"]["isError"] is True
    assert done["value"]["message"] == "boom"
    assert isinstance(done["value"]["code"], str) and done["value"]["code"]


def test_uncaught_client_tool_error_fails_the_cell(client):
    """An uncaught client tool error fails the cell with the error's message."""
    env = exec_cell(client, 'return await get_weather({city: "Oslo"})')
    call_id = env["pending_tool_calls"][0]["id"]
    done = wait(client, env["cell_id"], [{"id": call_id, "ok": False, "error": "boom"}])
    assert done["status"] == "failed", done
    assert done["error"].startswith("Error: boom")
    assert done["failure_phase"] == "bridge"


def test_unknown_tool_results_id_is_422_and_cell_stays_waiting(client):
    """A tool_results id that is not pending -> 422 naming tool_results; the right id still works."""
    env = exec_cell(client, 'return await get_weather({city: "Oslo"})')
    body = wait(client, env["cell_id"], [{"id": "req_999", "ok": True, "value": 1}], status=422)
    assert body["error"]["need_param"] == "tool_results"
    assert "req_999" in body["error"]["message"]
    status = client.get(f"/v1/cells/{env['cell_id']}").json()
    assert status["status"] == "waiting"
    call_id = env["pending_tool_calls"][0]["id"]
    done = wait(client, env["cell_id"], [{"id": call_id, "ok": True, "value": {"temp": 3}}])
    assert done["value"] == {"temp": 3}


def test_parallel_client_calls_are_answered_in_one_wait(client):
    """Two client calls under Promise.all are both pending and resolve from one wait, in any order."""
    env = exec_cell(
        client,
        """
        const [a, b] = await Promise.all([get_weather({city: "Oslo"}), get_weather({city: "Rome"})]);
        return [a.temp, b.temp];
    """,
    )
    calls = env["pending_tool_calls"]
    assert sorted(c["input"]["city"] for c in calls) == ["Oslo", "Rome"]
    temps = {"Oslo": 2, "Rome": 25}
    results = [{"id": c["id"], "ok": True, "value": {"temp": temps[c["input"]["city"]]}} for c in reversed(calls)]
    done = wait(client, env["cell_id"], results)
    assert done["value"] == [2, 25]


def test_client_tool_input_is_validated_before_parking(client):
    """Arguments that break the declared input_schema reject with invalid_input; nothing is pending."""
    env = exec_cell(client, "try { await get_weather({town: 1}); } catch (e) { return [e.code, e.message]; }")
    assert env["status"] == "completed", env
    code, message = env["value"]
    assert code == "invalid_input" and "city" in message


def test_client_tool_is_in_catalog_with_source_client_and_unknown_types(client):
    """catalog.all() lists the client tool with source "client", input "unknown" and no output hint."""
    env = exec_cell(
        client,
        """
        const mine = catalog.all().find(h => h.callableName === "get_weather");
        const found = await catalog.search("get_weather");
        return {mine, found: found.map(h => h.source), d: await get_weather.describe()};
    """,
    )
    assert env["status"] == "completed", env
    mine = env["value"]["mine"]
    assert mine == {
        "callableName": "get_weather",
        "toolName": "get_weather",
        "description": "Current weather for a city.",
        "source": "client",
        "input": "unknown",
    }
    assert env["value"]["found"] == ["client"]
    d = env["value"]["d"]
    assert d["source"] == "client" and "outputSchema" not in d
    assert d["parameters"] == WEATHER["input_schema"]


def test_client_tool_declaration_uses_unknown(client):
    """`tools/get_weather.d.ts` declares the client tool with `unknown` input and output."""
    env = exec_cell(client, 'return (await API.read("tools/get_weather.d.ts")).content')
    assert env["status"] == "completed", env
    content = env["value"]
    assert "declare function get_weather(" in content
    assert "Promise<unknown>" in content
    assert "city" not in content.split("declare function get_weather(", 1)[1]


def test_client_tools_are_per_request(client):
    """A client tool declared by one exec is not visible to the next exec without it."""
    env = exec_cell(client, "return typeof get_weather", tools=[])
    assert env["value"] == "undefined"


def test_client_tool_shadows_a_native_tool_of_the_same_name(client):
    """A client tool named `echo` wins: the call parks, the native echo does not run, search finds one."""
    start = CALLS.get("echo", 0)
    env = exec_cell(
        client,
        """
        const found = await catalog.search("echo");
        text(JSON.stringify(found.map(h => h.source)));
        return await echo({x: 1});
    """,
        tools=[{"name": "echo", "description": "client echo"}],
    )
    assert env["status"] == "waiting", env
    assert env["output"] == [{"type": "text", "text": '["client"]'}]
    [call] = env["pending_tool_calls"]
    assert call["tool"] == "echo" and call["input"] == {"x": 1}
    done = wait(client, env["cell_id"], [{"id": call["id"], "ok": True, "value": "from client"}])
    assert done["value"] == "from client"
    assert CALLS.get("echo", 0) == start


def test_invalid_client_tool_declaration_is_422(client):
    """Two client tools with the same name are refused before the cell runs (422 naming the second name)."""
    r = client.post("/v1/exec", json={"code": "return 1", "client_tools": [WEATHER, WEATHER]})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["need_param"] == "client_tools[1].name"


def test_client_tool_callable_names_are_safe_and_identical_everywhere(client):
    """Unsafe client tool names get safe callable names, the same in globals, catalog and API files."""
    tools = [{"name": "open-ticket"}, {"name": "9lives"}, {"name": "class"}, {"name": "__openclawX"}]
    env = exec_cell(
        client,
        """
        const names = catalog.all().filter(h => h.source === "client").map(h => [h.toolName, h.callableName]);
        const files = (await API.list("tools")).files.map(f => f.path);
        return {names, files, types: names.map(([, c]) => typeof globalThis[c])};
    """,
        tools=tools,
    )
    assert env["status"] == "completed", env
    names = dict(env["value"]["names"])
    assert names["open-ticket"] == "open_ticket"
    assert names["9lives"] == "tool_9lives"
    assert re.fullmatch(r"class_[0-9a-f]{8}", names["class"]), names
    assert names["__openclawX"] == "tool___openclawX"
    assert env["value"]["types"] == ["function"] * 4
    for callable_name in names.values():
        assert f"tools/{callable_name}.d.ts" in env["value"]["files"]


def test_wait_bodies_with_too_many_or_odd_tool_results_are_refused_naming_the_field(client):
    """4,097 tool_results, an id of 5,000 digits, or one id answered twice: 422 naming tool_results; the
    cell still waits with its call, and a right answer afterwards completes it."""
    env = exec_cell(client, 'return await get_weather({city: "Oslo"})')
    [call] = env["pending_tool_calls"]
    cid = env["cell_id"]
    many = [{"id": f"req_{i}", "ok": True, "value": i} for i in range(4097)]
    r = client.post(f"/v1/cells/{cid}/wait", json={"tool_results": many})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["need_param"] == "tool_results"
    assert "4097 entries, over the cap of 4096 per wait" in r.json()["error"]["message"]
    r = client.post(f"/v1/cells/{cid}/wait", json={"tool_results": [{"id": "req_" + "9" * 5000, "ok": True}]})
    assert r.status_code == 422 and r.json()["error"]["need_param"] == "tool_results.0.id", r.text
    twice = [{"id": call["id"], "ok": True, "value": 1}, {"id": call["id"], "ok": True, "value": 2}]
    r = client.post(f"/v1/cells/{cid}/wait", json={"tool_results": twice})
    assert r.status_code == 422 and r.json()["error"]["need_param"] == "tool_results", r.text
    assert "answered twice in this body" in r.json()["error"]["message"]
    assert client.get(f"/v1/cells/{cid}").json()["status"] == "waiting"
    done = wait(client, cid, [{"id": call["id"], "ok": True, "value": "sunny"}])
    assert done["status"] == "completed" and done["value"] == "sunny", done
