"""Caller-declared client tool schemas over HTTP: refused up front when unsafe, cheap when legitimate."""

from __future__ import annotations

import json
import re
import socket
import time
from collections import OrderedDict
from typing import Any

from fastapi.testclient import TestClient

from service.tools import schema_checks
from tests.conftest import run, wait
from tests.support.counters import BACKTRACKING_DEADLINE_S

OK_TOOL = {"name": "ok", "input_schema": {"type": "object"}}


def declare(client: TestClient, schema: Any, code: str = "return 1") -> Any:
    """POST /v1/exec with `schema` as the second client tool's input_schema."""
    tools = [OK_TOOL, {"name": "t", "input_schema": schema}]
    return client.post("/v1/exec", json={"code": code, "client_tools": tools})


def refused(client: TestClient, schema: Any) -> str:
    r = declare(client, schema, code="return await t({})")
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["need_param"] == "client_tools[1].input_schema"
    assert error["error_type"] == "recoverable"
    return str(error["message"])


def test_remote_ref_is_refused_before_anything_runs_and_nothing_connects(client):
    """A $ref to a URL is a 422 naming the field; the service never connects to the URL."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        ref = f"http://127.0.0.1:{listener.getsockname()[1]}/x.json"
        message = refused(client, {"type": "object", "properties": {"a": {"$ref": ref}}})
        assert "points outside the schema" in message
        try:
            listener.accept()[0].close()
            raise AssertionError("the service connected to the $ref URL")
        except BlockingIOError:
            pass


def test_file_refs_get_the_same_answer_whether_or_not_the_file_exists(client, tmp_path):
    """file: references are refused without being read: existing and missing files answer alike."""
    existing = tmp_path / "schema.json"
    existing.write_text('{"type": "integer"}')
    answers = set()
    for ref in (existing.as_uri(), (tmp_path / "missing.json").as_uri(), "file:///dev/zero"):
        answers.add(re.sub(r"'[^']*'", "REF", refused(client, {"$ref": ref})))
    assert len(answers) == 1, answers


def test_redos_pattern_validates_fast_and_correctly(client):
    """`^(a+)+$` against 40 a's and `!`: invalid_input without backtracking; 40 a's alone reach the caller."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}
    started = time.perf_counter()
    r = declare(client, schema, code=f'return await t({{s: "{"a" * 40}!"}})')
    assert r.status_code == 200, r.text
    env = r.json()
    assert env["status"] == "failed" and env["code"] == "invalid_input", env
    assert time.perf_counter() - started < BACKTRACKING_DEADLINE_S
    r = declare(client, schema, code=f'return await t({{s: "{"a" * 40}"}})')
    env = r.json()
    assert env["status"] == "waiting", env
    assert env["pending_tool_calls"][0]["input"] == {"s": "a" * 40}
    client.post(f"/v1/cells/{env['cell_id']}/cancel")


def test_all_of_bomb_is_refused_quickly(client):
    """1 KB of $defs, each allOf two references to the previous one, 16 deep: 422 naming the cap.
    (The check may run in the decoder's helper process, so the bound on its work, each subschema
    entered once, is counted where it runs: tests/tools/test_schema_guard.py.)"""
    defs: dict = {"d0": {"type": "integer"}}
    for i in range(1, 17):
        defs[f"d{i}"] = {"allOf": [{"$ref": f"#/$defs/d{i - 1}"}, {"$ref": f"#/$defs/d{i - 1}"}]}
    message = refused(client, {"$defs": defs, "$ref": "#/$defs/d16"})
    assert "more than 20000 subschemas (cap 20000)" in message


def test_huge_and_deep_schemas_are_refused_naming_the_cap(client):
    """Over 64 KiB of schema, or nesting past 64 levels, is a 422 that names the cap."""
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5000)}}
    assert "over the cap of 65536 per schema" in refused(client, huge)
    deep: dict = {"type": "object"}
    for _ in range(40):  # 80 levels of JSON: within the body's nesting cap (128), over the schema's (64)
        deep = {"type": "object", "properties": {"a": deep}}
    assert "(cap 64)" in refused(client, deep)
    for _ in range(60):  # past the body's cap the whole request is refused before any field is read
        deep = {"type": "object", "properties": {"a": deep}}
    r = declare(client, deep, code="return await t({})")
    assert r.status_code == 422 and r.json()["error"]["need_param"] == "body", r.text
    assert "cap 2048" in refused(client, {"type": "string", "pattern": "(" * 2000 + ")" * 2000})


TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "label": {"$ref": "#/$defs/label"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["label"],
            "additionalProperties": False,
        },
        "label": {"type": "string", "minLength": 1},
    },
    "$ref": "#/$defs/node",
}


def test_recursive_defs_schema_works_end_to_end(client):
    """A recursive $defs schema is accepted; the guest's call parks with the exact input, bad input fails."""
    tree = {"label": "root", "children": [{"label": "a", "children": [{"label": "b"}]}, {"label": "c"}]}
    env = run(
        client, f"return await t({json.dumps(tree)})", client_tools=[OK_TOOL, {"name": "t", "input_schema": TREE}]
    )
    assert env["status"] == "waiting", env
    [call] = env["pending_tool_calls"]
    assert call["tool"] == "t" and call["input"] == tree
    done = wait(client, env["cell_id"], tool_results=[{"id": call["id"], "ok": True, "value": 7}])
    assert done["status"] == "completed" and done["value"] == 7, done
    bad = run(
        client,
        'return await t({label: "root", children: [{label: ""}]})',
        client_tools=[{"name": "t", "input_schema": TREE}],
    )
    assert bad["status"] == "failed" and bad["code"] == "invalid_input", bad
    assert "$.children[0].label" in bad["error"]


def test_client_schemas_compile_once_per_exec(client, monkeypatch):
    """Two calls and a resume use the contract compiled when the exec arrived; a repeat exec reuses it."""
    monkeypatch.setattr(schema_checks, "_vetted", OrderedDict())
    compiled: list[Any] = []
    real = schema_checks.ToolContract

    def counting(*args: Any, **kwargs: Any) -> Any:
        compiled.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(schema_checks, "ToolContract", counting)
    env = run(
        client,
        "const [a, b] = await Promise.all([t({label: 'x'}), t({label: 'y'})]); return [a, b]",
        client_tools=[{"name": "t", "input_schema": TREE}],
    )
    assert env["status"] == "waiting", env
    results = [{"id": c["id"], "ok": True, "value": c["input"]["label"]} for c in env["pending_tool_calls"]]
    done = wait(client, env["cell_id"], tool_results=results)
    assert done["value"] == ["x", "y"], done
    again = run(client, "return await t({label: 'z'})", client_tools=[{"name": "t", "input_schema": TREE}])
    assert again["pending_tool_calls"][0]["input"] == {"label": "z"}
    client.post(f"/v1/cells/{again['cell_id']}/cancel")
    assert compiled == [TREE]


def test_request_wide_caps_name_the_cap(client, monkeypatch):
    """More than 128 client tools, more than 128 KiB of schemas together, or more than 2,000 JSON objects in
    them, is a 422 naming the cap."""
    monkeypatch.setattr(schema_checks, "_vetted", OrderedDict())
    compiled: list[Any] = []
    monkeypatch.setattr(schema_checks, "ToolContract", lambda *args, **kwargs: compiled.append(args))
    r = client.post("/v1/exec", json={"code": "return 1", "client_tools": [{"name": f"t{i}"} for i in range(129)]})
    assert r.status_code == 422 and "at most 128" in r.json()["error"]["message"], r.text
    wordy = {f"p{i}": {"type": "string", "description": "d" * 80} for i in range(500)}  # ~50 KiB, 501 objects
    many = {f"p{i}": {} for i in range(800)}  # ~9 KiB, 801 objects
    for properties, cap in ((wordy, "(cap 131072 per request)"), (many, "JSON objects (cap 2000 per request)")):
        schema = {"type": "object", "properties": properties}
        r = client.post(
            "/v1/exec",
            json={"code": "return 1", "client_tools": [{"name": f"t{i}", "input_schema": schema} for i in range(3)]},
        )
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert error["need_param"] == "client_tools[2].input_schema"
        assert cap in error["message"], error
    assert compiled == []  # refused before any schema is compiled
