"""Session store through cells (SPEC §6, reference items 56-59, 62) on both backends: SQLite and Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.stores import sqlite_url
from tests.conftest import make_client, run, wait
from tests.conftest import value_of as ok
from tests.stores.conftest import (
    redis_url,  # noqa: F401 - session fixture: a real redis-server
    start_redis_server,
    stop_redis_server,
)
from tests.support.polling import poll_until

CELL_TTL_SECONDS = 60
NOW = [0.0]  # the registry's clock for this module's services: the expiry test moves it


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def store_client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A running service whose session store is a SQLite file in tmp or a loopback redis-server."""
    tmp = tmp_path_factory.mktemp(f"store-{request.param}")
    url = sqlite_url(tmp / "store.sqlite3") if request.param == "sqlite" else request.getfixturevalue("redis_url")
    with make_client(tmp, store_url=url, cell_ttl_seconds=CELL_TTL_SECONDS, cells_clock=lambda: NOW[0]) as c:
        yield c


def session() -> str:
    return "s-" + uuid.uuid4().hex[:16]


def committed(client: TestClient, sid: str) -> dict[str, int]:
    """The session's committed keys and byte sizes, from GET /v1/sessions/{sid}/store."""
    r = client.get(f"/v1/sessions/{sid}/store")
    assert r.status_code == 200, r.text
    return {entry["key"]: entry["bytes"] for entry in r.json()["keys"]}


LOAD_K = 'const v = await load("k"); return v === undefined ? "missing" : v;'


def test_store_and_load_across_cells(store_client):
    """Values reach later cells as detached copies; null is kept; missing is undefined; undefined deletes."""
    sid = session()
    ok(
        run(
            store_client,
            """
    const obj = JSON.parse('{"a": [1, 2], "__proto__": {"kept": true}}');  // an own "__proto__" key
    await store("obj", obj);
    obj.a.push(3);  // mutating the original after store() does not change the stored copy
    await store("nul", null);
    return null;
    """,
            session_id=sid,
        )
    )
    v = ok(
        run(
            store_client,
            """
    const first = await load("obj");
    first.a.push(99);
    const second = await load("obj");
    const nul = await load("nul");
    const missing = await load("never-stored");
    return {second, protoKept: Object.keys(second).includes("__proto__") && second["__proto__"].kept === true,
            nulIsNull: nul === null, missingIsUndefined: missing === undefined};
    """,
            session_id=sid,
        )
    )
    assert v["second"]["a"] == [1, 2]
    assert v["protoKept"] is True
    assert v["nulIsNull"] is True and v["missingIsUndefined"] is True
    assert set(committed(store_client, sid)) == {"obj", "nul"}
    ok(run(store_client, 'await store("obj", undefined); return null;', session_id=sid))
    assert ok(run(store_client, 'return (await load("obj")) === undefined;', session_id=sid)) is True
    assert set(committed(store_client, sid)) == {"nul"}


def test_ten_invalid_keys_are_type_errors(store_client):
    """Ten invalid keys make store() and load() reject with TypeError; 256-character keys are fine."""
    v = ok(
        run(
            store_client,
            """
    const bad = ["", "k".repeat(257), 1, null, undefined, {}, [], true, Symbol("s"), 1n];
    const names = [];
    for (const key of bad) {
      for (const call of [() => store(key, 1), () => load(key)]) {
        try { await call(); names.push("accepted"); }
        catch (e) { names.push(e instanceof TypeError ? "TypeError" : e.name); }
      }
    }
    await store("k".repeat(256), "long");
    await store("𝄞".repeat(128), "astral");
    return {names, long: await load("k".repeat(256)), astral: await load("𝄞".repeat(128))};
    """,
            session_id=session(),
        )
    )
    assert v["names"] == ["TypeError"] * 20
    assert v["long"] == "long" and v["astral"] == "astral"


def test_value_over_256kib_is_range_error_and_store_unchanged(store_client):
    """A value over 256 KiB rejects with RangeError and leaves the key's previous value in place."""
    sid = session()
    v = ok(
        run(
            store_client,
            """
    await store("k", "old");
    await store("exact", "x".repeat(262142));  // 262144 bytes of JSON: exactly the limit
    let name = null;
    try { await store("k", "x".repeat(262143)); } catch (e) { name = e.name; }
    return {name, now: await load("k")};
    """,
            session_id=sid,
        )
    )
    assert v == {"name": "RangeError", "now": "old"}
    assert committed(store_client, sid) == {"k": 5, "exact": 262144}
    assert ok(run(store_client, LOAD_K, session_id=sid)) == "old"


def test_total_over_1mib_is_range_error_and_delete_frees_room(store_client):
    """A write that takes the session over 1 MiB rejects with RangeError; deleting a key frees room."""
    sid = session()
    ok(
        run(
            store_client,
            'for (const k of ["a", "b", "c", "d"]) await store(k, "x".repeat(250000)); return null;',
            session_id=sid,
        )
    )
    v = ok(
        run(
            store_client,
            """
    let first = null;
    try { await store("e", "y".repeat(250000)); } catch (e) { first = e.name; }
    const absent = (await load("e")) === undefined;
    await store("a", undefined);
    await store("e", "y".repeat(250000));
    return {first, absent, e: (await load("e")).length};
    """,
            session_id=sid,
        )
    )
    assert v == {"first": "RangeError", "absent": True, "e": 250000}
    sizes = committed(store_client, sid)
    assert set(sizes) == {"b", "c", "d", "e"}
    assert sum(len(k) + n for k, n in sizes.items()) <= 1024 * 1024


def test_writes_are_buffered_per_cell_until_completion(store_client):
    """Writes are visible in the cell and after its wait, invisible to a sibling, and committed at completion."""
    sid = session()
    first = run(
        store_client,
        """
    await store("k", "mine");
    const same = await load("k");
    await yield_control("pause");
    const afterWait = await load("k");
    return {same, afterWait};
    """,
        session_id=sid,
    )
    assert first["status"] == "waiting", first
    assert ok(run(store_client, LOAD_K, session_id=sid)) == "missing"  # sibling cell
    assert committed(store_client, sid) == {}
    final = wait(store_client, first["cell_id"])
    assert ok(final) == {"same": "mine", "afterWait": "mine"}
    assert ok(run(store_client, LOAD_K, session_id=sid)) == "mine"
    assert committed(store_client, sid) == {"k": len('"mine"')}


def test_failed_cell_discards_writes(store_client):
    """A cell that throws after store() commits nothing."""
    sid = session()
    env = run(store_client, 'await store("k", 1); throw new Error("after store");', session_id=sid)
    assert env["status"] == "failed"
    assert ok(run(store_client, LOAD_K, session_id=sid)) == "missing"
    assert committed(store_client, sid) == {}


def test_timed_out_cell_discards_writes(store_client):
    """A cell that parks, then times out in its wait leg, commits nothing."""
    sid = session()
    env = run(
        store_client, 'await store("k", 1); await yield_control(); while (true) {}', session_id=sid, timeout_ms=300
    )
    assert env["status"] == "waiting", env
    env = wait(store_client, env["cell_id"])
    assert env["status"] == "failed" and env["code"] == "timeout", env
    assert ok(run(store_client, LOAD_K, session_id=sid)) == "missing"


def test_cancelled_cell_discards_writes(store_client):
    """A parked cell that is cancelled commits nothing."""
    sid = session()
    env = run(store_client, 'await store("k", 1); await yield_control(); return 1;', session_id=sid)
    assert env["status"] == "waiting"
    r = store_client.post(f"/v1/cells/{env['cell_id']}/cancel")
    assert r.status_code == 200 and r.json()["code"] == "aborted", r.text
    assert ok(run(store_client, LOAD_K, session_id=sid)) == "missing"
    assert committed(store_client, sid) == {}


def test_expired_cell_discards_writes(store_client):
    """A parked cell that expires after cell_ttl_seconds idle commits nothing."""
    sid = session()
    env = run(store_client, 'await store("k", 1); await yield_control(); return 1;', session_id=sid)
    assert env["status"] == "waiting"
    cell_id = env["cell_id"]
    NOW[0] += CELL_TTL_SECONDS + 1
    poll_until(lambda: store_client.get(f"/v1/cells/{cell_id}").json()["status"] == "failed", "the cell expires")
    assert store_client.post(f"/v1/cells/{cell_id}/wait", json={}).status_code == 404
    assert ok(run(store_client, LOAD_K, session_id=sid)) == "missing"
    assert committed(store_client, sid) == {}


def test_session_store_endpoints(store_client):
    """GET /v1/sessions/{sid}/store lists keys and sizes; DELETE /v1/sessions/{sid} removes them."""
    sid = session()
    ok(run(store_client, 'await store("b", [1, 2]); await store("a", "é"); return null;', session_id=sid))
    r = store_client.get(f"/v1/sessions/{sid}/store")
    assert r.status_code == 200
    body = r.json()
    assert body["keys"] == [{"key": "a", "bytes": len('"é"'.encode())}, {"key": "b", "bytes": 5}]
    assert body["total_bytes"] == 4 + 5
    r = store_client.delete(f"/v1/sessions/{sid}")
    assert r.status_code == 200, r.text
    assert committed(store_client, sid) == {}
    assert ok(run(store_client, 'return (await load("a")) === undefined;', session_id=sid)) is True
    assert store_client.delete(f"/v1/sessions/{sid}").status_code == 404


@pytest.mark.parametrize(
    "fields", [{}, {"headless": True}, {"restart_safe": True}], ids=["no-session", "headless", "restart-safe"]
)
def test_store_unavailable_rejects_catchably(store_client, fields):
    """Without a session, and in headless or restart-safe cells, store/load reject catchably."""
    sid = session()
    request = dict(fields, session_id=sid) if fields else {}
    v = ok(
        run(
            store_client,
            """
    const out = [];
    for (const call of [() => store("k", 1), () => load("k")]) {
      try { await call(); out.push("allowed"); } catch (e) { out.push(e.message); }
    }
    return out;
    """,
            **request,
        )
    )
    assert all(m != "allowed" for m in v), v
    assert committed(store_client, sid) == {}


@pytest.mark.slow
def test_commit_failure_completes_with_warning_and_persists_nothing(tmp_path):
    """If the backend fails at commit the cell still completes, with a persistence warning; nothing is saved."""
    redis_dir = tmp_path / "redis"
    port, proc = start_redis_server(redis_dir)
    try:
        with make_client(tmp_path, store_url=f"redis://127.0.0.1:{port}/0", workers=1) as client:
            sid = session()
            env = run(client, 'await store("k", 1); await yield_control(); return "done";', session_id=sid)
            assert env["status"] == "waiting", env
            stop_redis_server(proc, hard=True)
            env = wait(client, env["cell_id"], timeout_ms=15000)
            assert env["status"] == "completed" and env["value"] == "done", env
            assert any("persistence could not be confirmed" in w for w in env.get("warnings", [])), env
            port, proc = start_redis_server(redis_dir, port=port)
            assert ok(run(client, LOAD_K, session_id=sid)) == "missing"
    finally:
        stop_redis_server(proc)


def test_network_provenance_survives_persistence(store_client):
    """Writes committed by a cell that saw network data mark later cells that load them as untrusted."""
    tainted, clean = session(), session()
    env = run(store_client, "const n = await news(); await store('h', n.headline); return 1;", session_id=tainted)
    assert ok(env) == 1 and env["untrusted_content"] is True
    ok(run(store_client, "await store('h', 'local'); return 1;", session_id=clean))
    later = run(store_client, "text('got'); return await load('h');", session_id=tainted)
    assert ok(later) == "remote says hi"
    assert later["untrusted_content"] is True and "got" in later["output"][0]["text"]
    plain = run(store_client, "text('got'); return await load('h');", session_id=clean)
    assert ok(plain) == "local" and "untrusted_content" not in plain
    assert plain["output"] == [{"type": "text", "text": "got"}]
    # The provenance mark is internal: not a key the session lists, and guests cannot forge it.
    assert set(committed(store_client, tainted)) == {"h"}
    forged = run(
        store_client,
        "try { await store('\\u0000codemode:network', 1); return 'stored'; } catch (e) { return e.name; }",
        session_id=clean,
    )
    assert ok(forged) == "TypeError"
