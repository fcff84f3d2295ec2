"""Parked cells cost their heap, not a process: one tenant's parked runtimes share worker processes.

Everything here goes through the real service: HTTP, the cell registry, the pool and real worker
processes holding real QuickJS runtimes.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import pytest

from service.auth import ApiKey
from tests.conftest import make_client, run
from tests.support.polling import poll_until
from tests.support.tools import TEST_TOOLS, held_tool

pytestmark = pytest.mark.slow

PARK = "globalThis.mine = [{n}, 'x'.repeat({n})]; await yield_control('p'); return [mine[0], mine[1].length]"
KEYS = (ApiKey("ka", "ta"), ApiKey("kb", "tb"))


def _wait(client, cell_id: str, **body: Any) -> dict[str, Any]:
    r = client.post(f"/v1/cells/{cell_id}/wait", json=body)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def _park(client, n: int, code: str = PARK, **fields: Any) -> str:
    env = run(client, code.format(n=n), **fields)
    assert env["status"] == "waiting", env
    return env["cell_id"]  # type: ignore[no-any-return]


def _holders(client) -> dict[int, set[str]]:
    """pid -> ids of the cells whose runtimes that worker process holds."""
    pool = client.app.state.services.pool
    return {w.pid: set(w.cells) for w in pool.workers() if w.cells}


def _settled(pool) -> bool:
    return pool.stats()["spawning"] == 0


def test_parked_cells_of_one_tenant_share_a_process_and_resume_with_their_own_state(tmp_path):
    """40 parked cells live in one process; parking them starts none; each resumes with its own state."""
    with make_client(tmp_path, workers=2) as c:
        pool = c.app.state.services.pool
        first = _park(c, 0)
        poll_until(lambda: _settled(pool), "the replacement for the first worker taken is started")
        spawned = pool.stats()["spawned"]
        ids = [first] + [_park(c, n) for n in range(1, 40)]
        assert pool.stats()["spawned"] == spawned, "parking started a worker process"
        holders = _holders(c)
        assert len(holders) == 1 and set(ids) == next(iter(holders.values())), holders
        assert pool.stats()["runtimes"] == 40
        for n, cell_id in reversed(list(enumerate(ids))):
            env = _wait(c, cell_id)
            assert env["status"] == "completed" and env["value"] == [n, n], env
        assert pool.stats()["runtimes"] == 0
        assert run(c, "return 'still serving'")["value"] == "still serving"


def test_two_tenants_never_share_a_process(tmp_path):
    """Parked cells of two tenants end up in disjoint processes; each process holds one tenant's runtimes."""
    with make_client(tmp_path, workers=2, api_keys=KEYS) as c:
        cells = c.app.state.services.cells
        ids = {}
        for i in range(6):
            key = ("ka", "kb")[i % 2]
            r = c.post("/v1/exec", json={"code": PARK.format(n=i)}, headers={"Authorization": f"Bearer {key}"})
            assert r.status_code == 200 and r.json()["status"] == "waiting", r.text
            ids[r.json()["cell_id"]] = key
        holders = _holders(c)
        tenants_of = {pid: {cells._cells[cid].spec.tenant for cid in held} for pid, held in holders.items()}
        assert all(len(t) == 1 for t in tenants_of.values()), tenants_of
        assert {t for ts in tenants_of.values() for t in ts} == {"ta", "tb"}
        assert len(holders) == 2  # packed: one process per tenant
        for cell_id, key in ids.items():
            r = c.post(f"/v1/cells/{cell_id}/wait", json={}, headers={"Authorization": f"Bearer {key}"})
            assert r.status_code == 200 and r.json()["status"] == "completed", r.text


def test_a_crash_of_a_shared_process_fails_each_parked_cell_cleanly(tmp_path):
    """SIGKILL of the shared process: every parked cell in it fails runtime_unavailable with its own replay_safe."""
    with make_client(tmp_path, workers=2) as c:
        quiet = [_park(c, n) for n in range(3)]
        # This one dispatched a tool before parking, so replaying it could repeat a side effect.
        env = run(c, "await echo({x: 1}); await yield_control('p'); return 'never'")
        assert env["status"] == "waiting" and env["bridge_dispatch_started"] and not env["replay_safe"], env
        dispatched = env["cell_id"]
        holders = _holders(c)
        assert len(holders) == 1
        pid = next(iter(holders))
        assert holders[pid] == {*quiet, dispatched}
        os.kill(pid, signal.SIGKILL)

        def failed(cell_id: str) -> dict[str, Any] | None:
            status = c.get(f"/v1/cells/{cell_id}").json()
            return status if status["status"] == "failed" else None

        for cell_id in [*quiet, dispatched]:
            status = poll_until(lambda cid=cell_id: failed(cid), f"cell {cell_id} fails after the crash")
            assert status["code"] == "runtime_unavailable", status
            assert "SIGKILL" in status["error"], status
            assert status["replay_safe"] is (cell_id != dispatched), status
        assert run(c, "return 'still serving'")["value"] == "still serving"
        assert pid not in {w.pid for w in c.app.state.services.pool.workers()}


def test_a_resume_waits_for_its_busy_process_then_runs(tmp_path):
    """A wait whose process runs another cell's leg waits for that leg, then resumes on the same process."""
    with make_client(tmp_path, workers=1) as c:
        pool = c.app.state.services.pool
        # Both cells read the clock of the process they share: the resumed cell's reading is after the busy leg's end.
        parked = _park(c, 7, code="await yield_control('p'); return Date.now()")
        pid = next(iter(_holders(c)))
        results: dict[str, Any] = {}

        def busy() -> None:
            results["busy"] = run(c, "const end = Date.now() + 1500; while (Date.now() < end) {} return Date.now()")

        thread = threading.Thread(target=busy)
        thread.start()
        poll_until(
            lambda: any(w.pid == pid and w.busy and len(w.cells) == 2 for w in pool.workers()),
            "the busy cell runs in the parked cell's process",
        )
        resumed = _wait(c, parked, timeout_ms=30000)
        thread.join()
        assert resumed["status"] == "completed", resumed
        assert resumed["value"] >= results["busy"]["value"], "the resume ran beside the busy leg, not after it"


def test_a_resume_whose_process_stays_busy_returns_still_waiting(tmp_path):
    """A wait that cannot get its process within its timeout answers waiting again; the cell stays resumable."""
    with make_client(tmp_path, workers=1) as c:
        pool = c.app.state.services.pool
        parked = _park(c, 3)
        pid = next(iter(_holders(c)))
        # The busy leg outlasts the wait's 300 ms by far, even on a loaded machine.
        thread = threading.Thread(target=run, args=(c, "const end = Date.now() + 6000; while (Date.now() < end) {}"))
        thread.start()
        poll_until(lambda: any(w.pid == pid and w.busy for w in pool.workers()), "the busy cell runs")
        again = _wait(c, parked, timeout_ms=300)
        assert again["status"] == "waiting", again
        thread.join()
        done = _wait(c, parked)
        assert done["status"] == "completed" and done["value"] == [3, 3], done


def test_cancel_and_expiry_free_a_parked_runtime_inside_the_shared_process(tmp_path):
    """Cancel and expiry drop one runtime; the process, and the other cells parked in it, carry on."""
    now = [0.0]
    with make_client(tmp_path, workers=1, cell_ttl_seconds=60, cells_clock=lambda: now[0]) as c:
        pool = c.app.state.services.pool
        keep = _park(c, 1)
        gone = _park(c, 2)
        pid = next(iter(_holders(c)))
        r = c.post(f"/v1/cells/{gone}/cancel")
        assert r.status_code == 200 and r.json()["code"] == "aborted", r.text
        assert _holders(c) == {pid: {keep}}
        assert run(c, "return 1")["value"] == 1
        # The one left expires (moved past its TTL) and is dropped the same way; the process stays for this tenant.
        now[0] += 61
        poll_until(lambda: c.get(f"/v1/cells/{keep}").json()["status"] == "failed", "the parked cell expires")
        assert _holders(c) == {}
        assert pid in {w.pid for w in pool.workers()}, "expiry killed the shared process"
        spawned = pool.stats()["spawned"]
        again = _park(c, 9)
        assert next(iter(_holders(c))) == pid and pool.stats()["spawned"] == spawned
        assert _wait(c, again)["value"] == [9, 9]


def test_replacements_are_started_ahead_of_need(tmp_path):
    """Workers retired after every cell are replaced in the background: no new cell waits for a process start."""
    with make_client(tmp_path, workers=2, worker_max_cells=1) as c:
        pool = c.app.state.services.pool
        for n in range(6):
            assert run(c, f"return {n}")["value"] == n
            # The replacement is already starting when the cell's answer arrives, not when the next one asks.
            assert pool.stats()["fresh"] + pool.stats()["spawning"] >= 2
            poll_until(lambda: _settled(pool), "the replacement is ready")
        assert pool.recycled >= 6 and pool.starved == 0


def test_processes_started_together_are_not_retired_together(tmp_path):
    """Each process draws its own cell budget in 80-100% of worker_max_cells: no burst of replacements."""
    with make_client(tmp_path, workers=4, worker_max_cells=1000) as c:
        budgets = [w.max_cells for w in c.app.state.services.pool.workers()]
        assert len(budgets) >= 4 and all(800 <= b <= 1000 for b in budgets), budgets
        # 201 possible budgets each: four equal draws happen about once in 8 million runs.
        assert len(set(budgets)) > 1, budgets


def test_a_process_takes_new_cells_only_within_its_runtime_and_heap_caps(tmp_path):
    """worker_max_runtimes and worker_max_parked_bytes spread parked cells over more processes."""
    with make_client(tmp_path, workers=2, worker_max_runtimes=3) as c:
        ids = [_park(c, n) for n in range(7)]
        assert sorted(len(held) for held in _holders(c).values()) == [1, 3, 3]
        for n, cell_id in enumerate(ids):
            assert _wait(c, cell_id)["value"] == [n, n]
    mib = 1024 * 1024
    with make_client(tmp_path, workers=2, max_snapshot_bytes=mib // 2, worker_max_parked_bytes=mib) as c:
        pool = c.app.state.services.pool
        ids = [_park(c, n) for n in range(6)]
        holders = [w for w in pool.workers() if w.cells]
        assert len(holders) > 1
        # A process took each new cell only while its parked heaps plus max_snapshot_bytes fitted.
        assert all(w.parked_bytes <= mib for w in holders), [w.parked_bytes for w in holders]
        for n, cell_id in enumerate(ids):
            assert _wait(c, cell_id)["value"] == [n, n]


def _failed_status(client, cell_id: str) -> dict[str, Any] | None:
    status = client.get(f"/v1/cells/{cell_id}").json()
    return status if status["status"] == "failed" else None


def test_an_interrupted_runaway_leaves_the_cells_parked_beside_it(tmp_path):
    """A busy loop stopped by the engine interrupt fails only its cell: no kill, the parked one resumes."""
    # The engine's limit counts CPU time; a long grace keeps a loaded machine from turning it into a kill.
    with make_client(tmp_path, workers=1, kill_grace_ms=5000) as c:
        parked = _park(c, 4)
        pid = next(iter(_holders(c)))
        env = run(c, "while (true) {}", timeout_ms=300)
        assert env["status"] == "failed" and env["code"] == "timeout", env
        assert pid in {w.pid for w in c.app.state.services.pool.workers()}
        assert _wait(c, parked)["value"] == [4, 4]


def test_a_kill_at_deadline_plus_grace_also_ends_the_cells_parked_beside_it(tmp_path):
    """A native operation that ignores the interrupt gets its process SIGKILLed; its parked neighbours fail cleanly."""
    with make_client(tmp_path, workers=1) as c:
        neighbours = [_park(c, n) for n in range(2)]
        env = run(c, "for (;;) (10n ** 300000n).toString()", timeout_ms=200)
        assert env["status"] == "failed" and env["code"] == "timeout", env
        for cell_id in neighbours:
            status = poll_until(lambda cid=cell_id: _failed_status(c, cid), "the parked neighbour fails")
            assert status["code"] == "runtime_unavailable" and status["replay_safe"] is True, status
            assert "ignored its deadline" in status["error"], status
        assert run(c, "return 'still serving'")["value"] == "still serving"


def test_a_cell_waiting_inline_for_host_work_lends_its_process(tmp_path):
    """While one cell awaits a slow tool inside its leg, a cell parked in the same process resumes and completes."""
    release = (
        threading.Event()
    )  # the slow tool answers only after the resume has: a resume that waited for it would not
    with make_client(tmp_path, workers=1, extra_tools=[*TEST_TOOLS, held_tool(release)]) as c:
        pool = c.app.state.services.pool
        parked = _park(c, 5)
        pid = next(iter(_holders(c)))
        results: dict[str, Any] = {}
        slow = threading.Thread(
            target=lambda: results.setdefault(
                "slow", run(c, "const v = await held({x: 'slow'}); return v.held", timeout_ms=60000)
            )
        )
        slow.start()
        try:
            poll_until(
                lambda: any(w.pid == pid and len(w.cells) == 2 for w in pool.workers()),
                "the slow cell runs in the parked cell's process",
            )
            resumed = _wait(c, parked, timeout_ms=30000)
            assert resumed["status"] == "completed", f"the resume waited for the slow tool: {resumed}"
            assert resumed["value"] == [5, 5], resumed
        finally:
            release.set()
            slow.join()
        assert results["slow"]["status"] == "completed" and results["slow"]["value"] == "slow", results


def test_requests_that_settle_at_once_keep_the_process_in_the_leg(tmp_path, monkeypatch):
    """Host work whose handler finishes without waiting settles within the leg: the process is not lent out for it.

    The handlers of a worker's requests start as soon as its frame is read, a turn of the event loop
    before the leg runs, and the leg gives them one more turn: a tool that yields to the loop once
    (``echo`` awaits ``sleep(0)``) settles within the leg too.  A tool that waits for a timer is host
    work the leg waits for, and the process is lent to other cells meanwhile, once per call.
    """
    with make_client(tmp_path, workers=1) as c:
        pool = c.app.state.services.pool
        lent: list[int] = []
        hand_back = pool.hand_back
        monkeypatch.setattr(pool, "hand_back", lambda worker: (lent.append(worker.pid), hand_back(worker))[-1])
        env = run(c, "for (let i = 0; i < 20; i++) await echo.describe(); return 1")
        assert env["status"] == "completed" and env["telemetry"]["host_requests"] == 20, env
        assert len(lent) == 1, f"lent {len(lent)} times; only the cell's end should give the process back"
        lent.clear()
        env = run(c, "let n = 0; for (let i = 0; i < 20; i++) n += (await echo({x: i})).echo; return n")
        assert env["status"] == "completed" and env["value"] == sum(range(20)), env
        assert len(lent) == 1, f"lent {len(lent)} times; a tool that yields once settles within the leg"
        lent.clear()
        code = "let n = 0; for (let i = 0; i < 20; i++) n += (await echo({x: i, delay: 0.002})).echo; return n"
        env = run(c, code)
        assert env["status"] == "completed" and env["value"] == sum(range(20)), env
        assert len(lent) == 21, f"lent {len(lent)} times: once per call that waited, and at the end"
