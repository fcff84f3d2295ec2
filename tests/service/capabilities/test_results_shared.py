"""Saved results shared by two service instances through one real redis-server (replicas share saved results).

Each instance is a whole app (its own worker processes, event loop and Redis connections) as a
replica would be; a result saved by a cell on one loads in a cell on the other with the same
(tenant, session, run), and the TTL, the run's end and the byte caps hold across both.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from tests.conftest import make_client, value_of
from tests.service.runtime.test_tenant_quotas import SAVE_MIB
from tests.service.runtime.test_tenants_isolation import ALPHA, BETA, KEYS
from tests.stores.conftest import redis_url, start_redis_server, stop_redis_server  # noqa: F401 - session fixture

MiB = 1024 * 1024
UNAVAILABLE = "saved result is unavailable or expired; fetch fresh data if needed"
SAVE = "return await results.save(%s);"
LOAD = "try { return await results.load(%s); } catch (e) { return 'ERR ' + e.code + ': ' + e.message; }"


def fresh_db(base_url: str, db: int) -> str:
    url = f"{base_url.rsplit('/', 1)[0]}/{db}"
    redis.Redis.from_url(url).flushdb()
    return url


def exec_as(client: TestClient, headers: dict[str, str], code: str, **fields: Any) -> dict[str, Any]:
    r = client.post("/v1/exec", json={"code": code, **fields}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def run_scope() -> dict[str, str]:
    tag = uuid.uuid4().hex[:10]
    return {"session_id": f"s-{tag}", "run_id": f"r-{tag}"}


class Pair:
    """Two instances on one Redis database, dating saved results by one clock the test moves."""

    def __init__(self, tmp: Path, url: str, **overrides: Any) -> None:
        self.now = [time.time()]
        self.a, self.b = (
            make_client(
                tmp / name, store_url=url, api_keys=KEYS, workers=1, results_clock=lambda: self.now[0], **overrides
            )
            for name in ("a", "b")
        )

    def __enter__(self) -> Pair:
        self.a.__enter__()
        self.b.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.b.__exit__(*exc)
        self.a.__exit__(*exc)


@pytest.fixture(scope="module")
def pair(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:  # noqa: F811
    with Pair(tmp_path_factory.mktemp("pair"), fresh_db(redis_url, 5), results_ttl_seconds=600) as both:
        yield both


@pytest.mark.slow
def test_a_result_saved_on_one_instance_loads_on_the_other(pair: Pair) -> None:
    """A saves; B (same tenant, session and run) loads the same value, and the network mark travels."""
    ids = run_scope()
    ref = value_of(exec_as(pair.a, ALPHA, SAVE % '{rows: [1, 2, 3], name: "é"}', **ids))
    loaded = exec_as(pair.b, ALPHA, LOAD % json.dumps(ref["id"]), **ids)
    assert value_of(loaded) == {"rows": [1, 2, 3], "name": "é"}
    usage = pair.b.get(f"/v1/sessions/{ids['session_id']}/runs/{ids['run_id']}", headers=ALPHA).json()
    assert usage["saved_results"] == {"count": 1, "bytes": ref["bytes"]}


@pytest.mark.parametrize("elsewhere", ["tenant", "session", "run"])
def test_another_scope_on_the_other_instance_cannot_load(pair: Pair, elsewhere: str) -> None:
    """Another tenant, session or run on B gets the generic unavailable error for A's reference."""
    ids = run_scope()
    ref = value_of(exec_as(pair.a, ALPHA, SAVE % "[1, 2]", **ids))
    headers = BETA if elsewhere == "tenant" else ALPHA
    other = {**ids, f"{elsewhere}_id": "other"} if elsewhere != "tenant" else ids
    got = value_of(exec_as(pair.b, headers, LOAD % json.dumps(ref["id"]), **other))
    assert got == f"ERR result_unavailable: {UNAVAILABLE}"
    assert value_of(exec_as(pair.b, ALPHA, LOAD % json.dumps(ref["id"]), **ids)) == [1, 2]


@pytest.mark.slow
def test_an_oversized_final_value_kept_on_one_instance_loads_on_the_other(pair: Pair) -> None:
    """A's cell returns more than its output budget: the reference it shows loads on B."""
    ids = run_scope()
    env = exec_as(pair.a, ALPHA, "return Array.from({length: 20000}, (_, i) => ({i}));", **ids)
    reference = value_of(env)["reference"]
    got = value_of(exec_as(pair.b, ALPHA, f"return (await results.load({json.dumps(reference['id'])})).length;", **ids))
    assert got == 20000


def test_ttl_expiry_holds_on_both_instances(pair: Pair) -> None:
    """Past results_ttl_seconds (on the shared clock), neither instance loads the reference."""
    ids = run_scope()
    ref = value_of(exec_as(pair.a, ALPHA, SAVE % "[7]", **ids))
    pair.now[0] += 599
    assert value_of(exec_as(pair.b, ALPHA, LOAD % json.dumps(ref["id"]), **ids)) == [7]
    pair.now[0] += 1
    for client in (pair.a, pair.b):
        assert value_of(exec_as(client, ALPHA, LOAD % json.dumps(ref["id"]), **ids)).startswith(
            "ERR result_unavailable"
        )


def test_ending_a_run_on_one_instance_ends_it_on_both(pair: Pair) -> None:
    """DELETE .../runs/{r} on B drops what A saved (and counts it); A's cell no longer loads it."""
    ids = run_scope()
    refs = value_of(exec_as(pair.a, ALPHA, "return [await results.save(1), await results.save(2)];", **ids))
    path = f"/v1/sessions/{ids['session_id']}/runs/{ids['run_id']}"
    r = pair.b.delete(path, headers=ALPHA)
    assert r.status_code == 200 and r.json()["expired_results"] == 2, r.text
    assert value_of(exec_as(pair.a, ALPHA, LOAD % json.dumps(refs[0]["id"]), **ids)).startswith(
        "ERR result_unavailable"
    )
    assert pair.a.get(path, headers=ALPHA).json()["saved_results"] == {"count": 0, "bytes": 0}


@pytest.mark.slow
def test_byte_caps_hold_across_instances(redis_url: str, tmp_path: Path) -> None:  # noqa: F811
    """tenant_results_bytes and results_max_bytes count what both instances saved; each refusal is a
    catchable RangeError naming its setting, and ending a run on one instance makes room on the other."""
    one = (1 << 20) + 2
    with Pair(tmp_path, fresh_db(redis_url, 6), tenant_results_bytes=int(2.5 * MiB), results_max_bytes=4 * MiB) as p:
        assert value_of(exec_as(p.a, ALPHA, SAVE_MIB % 1, session_id="s", run_id="run-0")) == [one]
        assert value_of(exec_as(p.b, ALPHA, SAVE_MIB % 1, session_id="s", run_id="run-1")) == [one]
        refused = value_of(exec_as(p.a, ALPHA, SAVE_MIB % 1, session_id="s", run_id="run-2"))[0]
        assert refused.startswith("RangeError: saved-results quota reached") and "tenant_results_bytes" in refused
        b = value_of(exec_as(p.b, BETA, SAVE_MIB % 2, session_id="s", run_id="b-run"))
        assert b[0] == one and b[1].startswith("RangeError") and "results_max_bytes" in b[1], b
        r = p.b.delete("/v1/sessions/s/runs/run-0", headers=ALPHA)
        assert r.json()["expired_results"] == 1, r.text
        assert value_of(exec_as(p.a, BETA, SAVE_MIB % 1, session_id="s", run_id="b-run-2")) == [one]


@pytest.mark.slow
def test_redis_down_rejects_catchably_and_routes_answer_503(tmp_path: Path) -> None:
    """With the server stopped, results.save/load/delete reject with a transient store_unavailable the cell
    catches (quickly, no hang), an oversized value is a plain marker saying why it was not kept, and the
    run routes answer 503 with Retry-After."""
    port, server = start_redis_server(tmp_path / "redis")
    try:
        with make_client(tmp_path / "svc", store_url=f"redis://127.0.0.1:{port}/0", workers=1) as client:
            ref = value_of(exec_as(client, {}, SAVE % "[1]"))
            stop_redis_server(server)
            code = (
                "const out = [];"
                "for (const f of [() => results.save([2]), () => results.load(%s), () => results.delete(%s)]) {"
                "  try { await f(); out.push('ok'); } catch (e) { out.push([e.code, e.errorType, e.message]); }"
                "} return out;"
            ) % (json.dumps(ref["id"]), json.dumps(ref["id"]))
            # Completed, so no call hung: the service ends a cell at its timeout_ms (failed, code timeout).
            got = value_of(exec_as(client, {}, code))
            for error_code, error_type, message in got:
                assert (error_code, error_type) == ("store_unavailable", "transient")
                assert message.startswith("saved results are unavailable for now: Redis saved-results store at")
                assert message.endswith("retry shortly")
            big = value_of(exec_as(client, {}, "return Array.from({length: 20000}, (_, i) => ({i}));"))
            assert big["truncated"] is True and "reference" not in big
            assert big["guidance"].startswith("Not retained: saved results unavailable: Redis saved-results store")
            for method in ("get", "delete"):
                r = getattr(client, method)("/v1/sessions/s/runs/r")
                assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
                assert r.json()["error"]["code"] == "store_unavailable"
    finally:
        stop_redis_server(server)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_a_value_saved_for_retention_but_shown_whole_is_deleted(request: pytest.FixtureRequest, backend: str) -> None:
    """The value is saved before the envelope is built when it may need a reference; when truncating the
    output leaves it room after all, it goes out whole and the saved copy is deleted (the run holds nothing)."""
    client, headers = (
        (request.getfixturevalue("client"), {}) if backend == "memory" else (request.getfixturevalue("pair").a, ALPHA)
    )
    ids = run_scope()
    code = 'text("o".repeat(63000)); return Array.from({length: 1000}, (_, i) => i);'  # 64 KiB budget
    env = exec_as(client, headers, code, **ids)
    assert value_of(env) == list(range(1000))
    assert env["output"][-1]["truncated"] is True
    r = client.get(f"/v1/sessions/{ids['session_id']}/runs/{ids['run_id']}", headers=headers)
    assert r.json()["saved_results"] == {"count": 0, "bytes": 0}, r.text
