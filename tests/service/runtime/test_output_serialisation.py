"""Serialisation of returned and emitted values (reference items 37-40, 42) through the real service."""

from __future__ import annotations

import json

from tests.conftest import run

UNAWAITED = "[Unawaited Promise: use await or Promise.all(...) before emitting or returning values.]"


def test_unawaited_promise_becomes_diagnostic_string(client):
    """A Promise inside a returned or emitted structure appears as the unawaited-promise diagnostic."""
    env = run(client, "json({p: Promise.resolve(1)}); return [Promise.resolve(2), 3];")
    assert env["status"] == "completed"
    assert env["value"] == [UNAWAITED, 3]
    assert env["output"] == [{"type": "json", "value": {"p": UNAWAITED}}]


def test_errors_serialise_without_tojson(client):
    """Errors (also allSettled reasons) serialise as name, message and custom fields; toJSON is not called."""
    env = run(
        client,
        """
    const e = new RangeError("bad range"); e.code = "E1"; e.toJSON = () => "toJSON was called";
    const [settled] = await Promise.allSettled([Promise.reject(Object.assign(new TypeError("why"), {detail: 7}))]);
    return {e, reason: settled.reason};
    """,
    )
    assert env["status"] == "completed"
    assert env["value"]["e"] == {"name": "RangeError", "message": "bad range", "code": "E1"}
    assert env["value"]["reason"] == {"name": "TypeError", "message": "why", "detail": 7}


def test_literal_proto_keys_survive_value_json_results_and_store(client):
    """An own "__proto__" key survives the return value, json(), results.save/load and store/load."""
    env = run(
        client,
        """
    const v = JSON.parse('{"__proto__": {"x": 1}, "y": 2}');
    json(v);
    const ref = await results.save(v);
    await store("p", v);
    return {value: v, loaded: await results.load(ref.id), stored: await load("p"), preview: ref.preview};
    """,
        session_id="proto-session",
    )
    assert env["status"] == "completed", env.get("error")
    expected = {"__proto__": {"x": 1}, "y": 2}
    assert env["output"] == [{"type": "json", "value": expected}]
    for name in ("value", "loaded", "stored", "preview"):
        assert env["value"][name] == expected, name


def test_typed_arrays_serialise_as_index_keyed_objects(client):
    """Typed arrays serialise as index-keyed objects; Array.from gives arrays."""
    env = run(client, "return {typed: new Uint8Array([1, 2]), arr: Array.from(new Float64Array([0.5]))};")
    assert env["value"] == {"typed": {"0": 1, "1": 2}, "arr": [0.5]}


def test_console_is_bounded_with_one_truncation_entry(client):
    """Console output is capped: one '[console output truncated]' entry, later console calls dropped, text kept."""
    env = run(
        client,
        """
    for (let i = 0; i < 100; i++) console.log("m".repeat(400));
    text("after");
    console.log("dropped");
    return 1;
    """,
    )
    assert env["status"] == "completed"
    texts = [entry["text"] for entry in env["output"]]
    assert texts.count("[console output truncated]") == 1
    assert texts[-1] == "after"
    assert "dropped" not in texts
    assert len(json.dumps(env["output"], separators=(",", ":"))) <= 65536
