"""Tenants, API keys, idle TTL and the parked-cell cap, each on a service with its own settings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.settings import ApiKey
from tests.conftest import make_client, run
from tests.support.polling import poll_until

K1 = {"Authorization": "Bearer k1"}
K2 = {"Authorization": "Bearer k2"}
SLOW = {"code": "await echo({x: 1, delay: 30}); return 1", "timeout_ms": 100}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """A service with two API keys for two tenants."""
    with make_client(tmp_path_factory.mktemp("keyed"), api_keys=(ApiKey("k1", "t1"), ApiKey("k2", "t2"))) as c:
        yield c


def test_missing_or_unknown_key_is_401(keyed):
    """With keys configured, no key or an unknown key answers 401 with the error body."""
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic k1"}):
        r = keyed.post("/v1/exec", json={"code": "return 1"}, headers=headers)
        assert r.status_code == 401, r.text
        err = r.json()["error"]
        assert err["code"] and err["message"] and err["error_type"] == "config"
    ok = keyed.post("/v1/exec", json={"code": "return 1"}, headers=K1)
    assert ok.status_code == 200 and ok.json()["value"] == 1


def test_other_tenants_cell_is_404_and_owner_still_completes(keyed):
    """wait/cancel/status of another tenant's cell are 404; the owner's wait still completes."""
    env = keyed.post(
        "/v1/exec", json={"code": "await echo({x: 3, delay: 0.4}); return 3", "timeout_ms": 100}, headers=K1
    ).json()
    assert env["status"] == "waiting", env
    cid = env["cell_id"]
    for r in (
        keyed.post(f"/v1/cells/{cid}/wait", json={}, headers=K2),
        keyed.post(f"/v1/cells/{cid}/cancel", headers=K2),
        keyed.get(f"/v1/cells/{cid}", headers=K2),
    ):
        assert r.status_code == 404, r.text
        assert r.json()["error"]["message"] == "cell is unavailable or expired"
    done = keyed.post(f"/v1/cells/{cid}/wait", json={"timeout_ms": 5000}, headers=K1).json()
    assert done["status"] == "completed" and done["value"] == 3, done
    assert keyed.get(f"/v1/cells/{cid}", headers=K2).status_code == 404


def test_tenants_do_not_share_globals_or_workers(keyed):
    """A global set by one tenant's cell is invisible to the next cell of another tenant."""
    keyed.post("/v1/exec", json={"code": "globalThis.secret = 42; return 1"}, headers=K1)
    r = keyed.post("/v1/exec", json={"code": "return typeof globalThis.secret"}, headers=K2)
    assert r.json()["value"] == "undefined"


@pytest.mark.slow
def test_parked_cell_expires_after_idle_ttl(tmp_path):
    """A parked cell idle past cell_ttl_seconds (by the registry's clock) expires: later wait is 404, status aborted."""
    now = [0.0]
    with make_client(tmp_path, cell_ttl_seconds=60, cells_clock=lambda: now[0]) as c:
        env = c.post("/v1/exec", json=SLOW).json()
        assert env["status"] == "waiting", env
        now[0] += 59
        assert c.get(f"/v1/cells/{env['cell_id']}").json()["status"] == "waiting", "expired before its TTL"
        now[0] += 2
        status = poll_until(
            lambda: (s := c.get(f"/v1/cells/{env['cell_id']}").json())["status"] != "waiting" and s, "the cell expires"
        )
        assert status["status"] == "failed" and status["code"] == "aborted", status
        r = c.post(f"/v1/cells/{env['cell_id']}/wait", json={})
        assert r.status_code == 404
        message = r.json()["error"]["message"]
        assert message.startswith("cell is unavailable or expired")
        assert c.post("/v1/exec", json={"code": "return 1"}).json()["value"] == 1
        assert "delivered" not in message  # nobody ever received this cell's result
        assert "it expired after 60s idle" in message  # the end reason, not a plain finish


@pytest.mark.slow
def test_parked_cell_cap_answers_429_with_retry_after(tmp_path):
    """With max_parked_cells=1 a second cell is refused with 429 + Retry-After; cancel frees the slot."""
    with make_client(tmp_path, max_parked_cells=1) as c:
        first = c.post("/v1/exec", json=SLOW).json()
        assert first["status"] == "waiting", first
        r = c.post("/v1/exec", json=SLOW)
        assert r.status_code == 429, r.text
        assert r.headers["Retry-After"].isdigit()
        err = r.json()["error"]
        assert err["error_type"] == "transient" and err["message"]
        c.post(f"/v1/cells/{first['cell_id']}/cancel")
        again = c.post("/v1/exec", json=SLOW).json()
        assert again["status"] == "waiting", again
        c.post(f"/v1/cells/{again['cell_id']}/cancel")


@pytest.mark.slow
def test_no_free_worker_answers_503_with_retry_after(tmp_path):
    """When the only slot runs guest code past acquire_timeout_ms, exec answers 503 + Retry-After instead of hanging."""
    import threading

    # The busy cell runs far longer than the refusal needs, even on a loaded machine.
    busy_loop = "const t = Date.now(); while (Date.now() - t < 5000) {} return 1"
    with make_client(tmp_path, workers=1, max_workers=1, burst_slots=0, acquire_timeout_ms=200) as c:
        first: dict = {}
        busy = threading.Thread(target=lambda: first.update(run(c, busy_loop, timeout_ms=30000)))
        busy.start()
        poll_until(lambda: c.app.state.services.pool.stats()["slots"] == 1, "the first cell runs guest code")
        r = c.post("/v1/exec", json={"code": "return 2"})
        refused_while_busy = not first  # the refusal came before the busy cell finished
        busy.join()
    assert r.status_code == 503, r.text
    assert r.headers["Retry-After"] == "1"
    assert r.json()["error"]["code"] == "overloaded" and r.json()["error"]["error_type"] == "transient"
    assert refused_while_busy
    assert first["status"] == "completed" and first["value"] == 1


@pytest.mark.slow
def test_tenants_take_turns_on_a_one_worker_pool(tmp_path):
    """With one warm worker, three tenants in turn each get a worker (idle ones of others are retired),
    instead of waiting out acquire_timeout_ms (then answered 503 ``overloaded``); the timeout is long
    enough for worker starts on a loaded machine."""
    keys = (ApiKey("ka", "ta"), ApiKey("kb", "tb"), ApiKey("kc", "tc"))
    with make_client(tmp_path, workers=1, burst_slots=1, api_keys=keys, acquire_timeout_ms=20000) as c:
        pool = c.app.state.services.pool
        for key in ("ka", "kb", "kc", "ka", "kb", "kc"):
            r = c.post("/v1/exec", json={"code": "return 1"}, headers={"Authorization": f"Bearer {key}"})
            assert r.status_code == 200, f"tenant {key} waited out acquire_timeout_ms: {r.text}"
            assert r.json()["value"] == 1, r.text
        # Idle workers assigned to tenants never outnumber the running slots (workers + burst_slots).
        assert pool.stats()["idle"] <= 2


@pytest.mark.slow
def test_a_parked_cell_does_not_starve_running_cells(tmp_path):
    """A parked cell keeps its worker, so the pool starts another one for running cells instead of making
    them wait out acquire_timeout_ms (then answered 503 ``overloaded``, which ``run`` refuses)."""
    with make_client(tmp_path, workers=1, acquire_timeout_ms=20000) as c:
        parked = run(c, "await yield_control('later'); return 'resumed'")
        assert parked["status"] == "waiting"
        other = run(c, "return 2")
        assert other["status"] == "completed" and other["value"] == 2
        r = c.post(f"/v1/cells/{parked['cell_id']}/wait", json={})
        assert r.json()["value"] == "resumed"
