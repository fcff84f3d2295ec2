"""Tenants stay isolated under load: fair admission and per-tenant quotas, two real API keys."""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi.testclient import TestClient

from service.app import create_app
from service.assembly import build_components
from service.capabilities.session_store import store_limits
from service.runtime.finished import FinishedCells
from service.settings import Settings
from service.stores import open_store, sqlite_url
from service.stores.results_backend import LocalResults
from tests.conftest import make_client, value_of
from tests.service.runtime.test_tenants_isolation import ALPHA, BETA, KEYS
from tests.support.polling import poll_until
from tests.support.tools import TEST_TOOLS

MiB = 1024 * 1024


def post(client: TestClient, headers: dict[str, str], path: str, body: dict[str, Any]) -> Any:
    return client.post(path, json=body, headers=headers)


def exec_ok(client: TestClient, headers: dict[str, str], code: str, **fields: Any) -> dict[str, Any]:
    r = post(client, headers, "/v1/exec", {"code": code, **fields})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def assert_quota_refusal(r: Any, setting: str) -> None:
    """A quota refusal: 429, a numeric Retry-After, and a message naming the setting that raises it."""
    assert r.status_code == 429, r.text
    assert r.headers.get("Retry-After", "").isdigit(), r.headers
    assert setting in r.json()["error"]["message"], r.text


# ---- fair admission ----------------------------------------------------------------------------


def test_a_flood_of_busy_loops_delays_another_tenant_by_about_one_cell(tmp_path):
    """Without burst slots, tenant A queues 6 `while(true){}` cells on 2 workers; B's cell waits for one of
    A's cells, not for all.

    First-come-first-served admission would start B only after five of A's cells ended; fair admission
    hands B the first slot that frees, so B is answered while A's second round still runs: at most
    three of A's cells (a round of slack for a loaded machine) have answered by then, counted, not
    timed.  (With burst slots B does not wait at all: tests/service/runtime/test_capacity_sharing.py.)
    """
    a_timeout_ms = 1500
    with make_client(tmp_path, api_keys=KEYS, workers=2, burst_slots=0, acquire_timeout_ms=30000) as client:
        pool = client.app.state.services.pool
        with ThreadPoolExecutor(6) as flood:
            floods = [
                flood.submit(post, client, ALPHA, "/v1/exec", {"code": "while (true) {}", "timeout_ms": a_timeout_ms})
                for _ in range(6)
            ]
            poll_until(
                lambda: pool.admission.running_slots("alpha") == 2 and pool.admission.queued("alpha") >= 3,
                "A holds every worker and has cells queued",
            )
            answer = exec_ok(client, BETA, "return 40 + 2")
            a_answered = sum(f.done() for f in floods)
            outcomes = [f.result() for f in floods]
        assert value_of(answer) == 42
        assert a_answered <= 3, f"B was answered after {a_answered} of A's 6 cells: it queued behind A's flood"
        assert all(r.status_code == 200 and r.json()["code"] == "timeout" for r in outcomes), [r.text for r in outcomes]


# ---- parked cells and waits ---------------------------------------------------------------------


def test_one_tenant_cannot_take_every_parked_slot(tmp_path):
    """A's parked cells stop at tenant_max_parked_cells (429 naming it); B still parks and runs."""
    with make_client(tmp_path, api_keys=KEYS, max_parked_cells=4, tenant_max_parked_cells=2) as client:
        parked = [exec_ok(client, ALPHA, "await yield_control(); return 'a';") for _ in range(2)]
        assert [env["status"] for env in parked] == ["waiting", "waiting"]
        refused = post(client, ALPHA, "/v1/exec", {"code": "return 1"})
        assert_quota_refusal(refused, "tenant_max_parked_cells")
        b = exec_ok(client, BETA, "await yield_control(); return 'b';")
        assert b["status"] == "waiting"
        assert value_of(exec_ok(client, BETA, "return 1")) == 1
        r = post(client, BETA, f"/v1/cells/{b['cell_id']}/wait", {})
        assert r.status_code == 200 and r.json()["value"] == "b", r.text
        # Finishing one of A's parked cells gives A its slot back.
        r = post(client, ALPHA, f"/v1/cells/{parked[0]['cell_id']}/wait", {})
        assert r.status_code == 200 and r.json()["value"] == "a", r.text
        assert value_of(exec_ok(client, ALPHA, "return 2")) == 2


def test_concurrent_waits_are_capped_per_tenant(tmp_path):
    """With tenant_max_waits=1 A's second concurrent wait is 429 naming the setting; B's wait is not affected."""
    with make_client(tmp_path, api_keys=KEYS, tenant_max_waits=1) as client:
        cells = client.app.state.services.cells
        slow = "await yield_control(); await echo({x: 1, delay: 1.5}); return 'slow';"
        a1, a2 = (exec_ok(client, ALPHA, slow) for _ in range(2))
        b1 = exec_ok(client, BETA, "await yield_control(); return 'b';")
        first: dict[str, Any] = {}

        def wait_first() -> None:
            first["r"] = post(client, ALPHA, f"/v1/cells/{a1['cell_id']}/wait", {"timeout_ms": 10000})

        thread = threading.Thread(target=wait_first)
        thread.start()
        try:
            poll_until(lambda: cells.quotas.usage("alpha")["waits"] == 1, "A's first wait is in progress")
            assert_quota_refusal(post(client, ALPHA, f"/v1/cells/{a2['cell_id']}/wait", {}), "tenant_max_waits")
            r = post(client, BETA, f"/v1/cells/{b1['cell_id']}/wait", {})
            assert r.status_code == 200 and r.json()["value"] == "b", r.text
        finally:
            thread.join(timeout=15)
        assert first["r"].status_code == 200 and first["r"].json()["value"] == "slow", first["r"].text
        r = post(client, ALPHA, f"/v1/cells/{a2['cell_id']}/wait", {"timeout_ms": 10000})
        assert r.status_code == 200 and r.json()["value"] == "slow", r.text


def test_running_cells_quota_names_its_setting(tmp_path):
    """The existing running-cells cap answers 429 with a message naming tenant_max_concurrency."""
    with make_client(tmp_path, api_keys=KEYS, tenant_max_concurrency=1) as client:
        with ThreadPoolExecutor(1) as one:
            slow = one.submit(post, client, ALPHA, "/v1/exec", {"code": "await echo({x: 1, delay: 1.5}); return 1"})
            cells = client.app.state.services.cells
            poll_until(lambda: cells.quotas.usage("alpha")["running"] == 1, "A's slow cell runs")
            assert_quota_refusal(post(client, ALPHA, "/v1/exec", {"code": "return 2"}), "tenant_max_concurrency")
            assert value_of(exec_ok(client, BETA, "return 3")) == 3
            assert slow.result().json()["value"] == 1


# ---- saved results -----------------------------------------------------------------------------

SAVE_MIB = """
const saved = [];
for (let i = 0; i < %d; i++) {
  try { saved.push((await results.save("x".repeat(1 << 20))).bytes); }
  catch (e) { saved.push(e.name + ": " + e.message); }
}
return saved;
"""


def test_saved_result_bytes_are_bounded_per_tenant_and_globally(tmp_path):
    """Fresh run_ids do not escape tenant_results_bytes; results_max_bytes bounds all tenants; refusals are
    catchable RangeErrors naming the setting, and the cell goes on."""
    one = (1 << 20) + 2
    with make_client(tmp_path, api_keys=KEYS, tenant_results_bytes=int(2.5 * MiB), results_max_bytes=4 * MiB) as client:
        got = [value_of(exec_ok(client, ALPHA, SAVE_MIB % 1, session_id="s", run_id=f"run-{i}")) for i in range(3)]
        assert got[:2] == [[one], [one]]
        assert got[2][0].startswith("RangeError: saved-results quota reached") and "tenant_results_bytes" in got[2][0]
        b = value_of(exec_ok(client, BETA, SAVE_MIB % 2, session_id="s", run_id="b-run"))
        assert b[0] == one and "results_max_bytes" in b[1], b
        # Ending A's runs frees room for everyone.
        for i in range(2):
            r = client.delete(f"/v1/sessions/s/runs/run-{i}", headers=ALPHA)
            assert r.json()["expired_results"] == 1, r.text
        assert value_of(exec_ok(client, BETA, SAVE_MIB % 1, session_id="s", run_id="b-run-2")) == [one]


def test_saved_results_expire_on_the_injected_clock(tmp_path):
    """Saved results leave the tenant's quota when their TTL passes (ResultsStore clock, no sleeping)."""
    settings = (
        Settings(workers=1, data_dir=str(tmp_path))
        .replace(api_keys=KEYS, tenant_results_bytes=int(1.5 * MiB), results_ttl_seconds=60)
        .check()
    )
    now = [1000.0]
    services = build_components(settings, extra_tools=TEST_TOOLS, results_clock=lambda: now[0])
    with TestClient(create_app(settings, services)) as client:
        assert isinstance(services.results, LocalResults)
        results = services.results.store
        assert value_of(exec_ok(client, ALPHA, SAVE_MIB % 2, session_id="s", run_id="r"))[1].startswith("RangeError")
        now[0] += 61
        results.expire()
        assert results.tenant_bytes("alpha") == 0
        assert value_of(exec_ok(client, ALPHA, SAVE_MIB % 1, session_id="s", run_id="r2")) == [(1 << 20) + 2]


# ---- session store -----------------------------------------------------------------------------

STORE_KIB = """
try { await store(%r, "y".repeat(%d * 1024)); return "stored"; }
catch (e) { return e.name + ": " + e.message; }
"""


def test_session_store_bytes_and_sessions_are_bounded_per_tenant(tmp_path):
    """A cannot fill the store across sessions; refusals are catchable RangeErrors naming the setting."""
    with make_client(tmp_path, api_keys=KEYS, tenant_store_bytes=600 * 1024, tenant_max_sessions=2) as client:
        for key in ("a", "b"):
            assert value_of(exec_ok(client, ALPHA, STORE_KIB % (key, 250), session_id="s1")) == "stored"
        answer = value_of(exec_ok(client, ALPHA, STORE_KIB % ("c", 250), session_id="s2"))
        assert answer.startswith("RangeError: session-store quota reached") and "tenant_store_bytes" in answer
        assert value_of(exec_ok(client, ALPHA, STORE_KIB % ("c", 1), session_id="s2")) == "stored"
        answer = value_of(exec_ok(client, ALPHA, STORE_KIB % ("c", 1), session_id="s3"))
        assert answer.startswith("RangeError") and "tenant_max_sessions" in answer, answer
        # B has its own quota.
        for sid in ("s1", "s2"):
            assert value_of(exec_ok(client, BETA, STORE_KIB % ("a", 250), session_id=sid)) == "stored"
        # Deleting a session gives the quota back.
        assert client.delete("/v1/sessions/s1", headers=ALPHA).status_code == 200
        assert value_of(exec_ok(client, ALPHA, STORE_KIB % ("c", 250), session_id="s3")) == "stored"


def test_expired_sessions_are_empty_and_their_data_removed(tmp_path):
    """session_ttl_seconds after its last write a session reads as empty and the sweep deletes its rows."""
    settings = (
        Settings(workers=2, data_dir=str(tmp_path), kill_grace_ms=500)
        .replace(api_keys=KEYS, session_ttl_seconds=3600)
        .check()
    )
    now = [1_700_000_000.0]
    path = tmp_path / "clocked.sqlite3"
    store = open_store(sqlite_url(path), store_limits(settings), lambda: now[0])
    services = build_components(settings, extra_tools=TEST_TOOLS, store=store)
    with TestClient(create_app(settings, services)) as client:
        assert value_of(exec_ok(client, ALPHA, 'await store("k", 1); return null;', session_id="old")) is None
        assert value_of(exec_ok(client, BETA, 'await store("k", 2); return null;', session_id="old")) is None
        now[0] += 1800
        assert value_of(exec_ok(client, BETA, 'await store("k", 3); return null;', session_id="old")) is None
        now[0] += 1801
        assert value_of(exec_ok(client, ALPHA, 'return await load("k");', session_id="old")) is None
        assert client.get("/v1/sessions/old/store", headers=ALPHA).json()["keys"] == []
        assert value_of(exec_ok(client, BETA, 'return await load("k");', session_id="old")) == 3
        assert client.portal.call(store.expire) == 1
    rows = sqlite3.connect(path).execute("SELECT tenant FROM session_entries").fetchall()
    assert rows == [("beta",)]


# ---- finished cells ----------------------------------------------------------------------------


def test_finished_cells_are_kept_per_tenant(tmp_path):
    """A finishing many cells evicts only its own summaries; B's finished cell still answers its status."""
    with make_client(tmp_path, api_keys=KEYS, tenant_finished_kept=3) as client:
        b_cell = exec_ok(client, BETA, "return 'b'")["cell_id"]
        a_cells = [exec_ok(client, ALPHA, f"return {i}")["cell_id"] for i in range(5)]
        r = client.get(f"/v1/cells/{b_cell}", headers=BETA)
        assert r.status_code == 200 and r.json()["status"] == "completed", r.text
        assert client.get(f"/v1/cells/{a_cells[0]}", headers=ALPHA).status_code == 404
        assert client.get(f"/v1/cells/{a_cells[-1]}", headers=ALPHA).status_code == 200


def test_finished_cells_track_a_bounded_number_of_tenants():
    """Past max_tenants_tracked, the tenant that finished a cell least recently is forgotten."""
    finished = FinishedCells(per_tenant=2, max_tenants=2)
    finished.add("a", "c1", {"n": 1})
    finished.add("b", "c2", {"n": 2})
    finished.add("a", "c3", {"n": 3})  # a is now the most recent
    finished.add("c", "c4", {"n": 4})
    assert finished.get("b", "c2") is None
    assert finished.get("a", "c1") == {"n": 1} and finished.get("c", "c4") == {"n": 4}
    assert len(finished) == 3


def test_a_new_tenant_gets_a_worker_at_once_after_a_parked_cell_finishes(tmp_path):
    """Regression: with 2 workers, the idle workers of other tenants (one of them the extra worker of a
    parked cell that resumed) are retired for a new tenant, instead of making it wait out acquire_timeout_ms
    (then answered 503 ``overloaded``). The timeout is long enough for worker starts on a loaded machine."""
    from service.settings import ApiKey

    keys = tuple(ApiKey(f"k{i}", f"t{i}") for i in range(5))
    headers = [{"Authorization": f"Bearer k{i}"} for i in range(5)]
    with make_client(tmp_path, api_keys=keys, workers=2, acquire_timeout_ms=20000) as client:
        for i in range(4):
            exec_ok(client, headers[i], "return 1")
        parked = exec_ok(client, headers[1], "await yield_control(); return 2", timeout_ms=300)
        assert parked["status"] == "waiting"
        exec_ok(client, headers[0], "return 1")
        r = post(client, headers[1], f"/v1/cells/{parked['cell_id']}/wait", {})
        assert r.json()["status"] == "completed", r.text
        r = post(client, headers[4], "/v1/exec", {"code": "return 40+2"})
        assert r.status_code == 200, f"the new tenant waited out acquire_timeout_ms: {r.text}"
        assert value_of(r.json()) == 42
