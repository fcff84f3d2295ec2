"""Capacity is shared (SPEC §11) through the real service: burst slots, priorities, counted legs, starts.

Each test drives the app with real worker processes and two API keys.  None times anything: each
asserts an order of events (B's cell answered while A's cells still ran), a kernel fact (the
niceness of A's processes), or a count (slots, processes started, overlapping guest stretches).
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from bench.capacity import most_at_once
from service.runtime.workers.cpu import LOWERED
from tests.conftest import make_client
from tests.service.runtime.test_tenant_quotas import exec_ok, post
from tests.service.runtime.test_tenants_isolation import ALPHA, BETA, KEYS
from tests.support.polling import poll_until

pytestmark = pytest.mark.slow

BUSY = "while (true) {}"


def busy_loops(pool: ThreadPoolExecutor, client: TestClient, n: int, timeout_ms: int) -> list[Future[Any]]:
    return [pool.submit(post, client, ALPHA, "/v1/exec", {"code": BUSY, "timeout_ms": timeout_ms}) for _ in range(n)]


def test_busy_loops_in_every_slot_do_not_make_another_tenant_wait(tmp_path):
    """A's busy loops hold both slots (workers = 2); B's trivial cells get a burst slot and complete while
    every one of A's loops still runs, none of them 503."""
    with make_client(tmp_path, api_keys=KEYS, workers=2, burst_slots=1) as client:
        pool = client.app.state.services.pool
        with ThreadPoolExecutor(2) as threads:
            # A's loops outlast B's work even on a busy machine, where workers get a few % of a CPU.
            loops = busy_loops(threads, client, 2, timeout_ms=20_000)
            poll_until(lambda: pool.admission.running_slots("alpha") == 2, "A's loops hold every slot")
            # A's cells took the two JavaScript spares (the Python spare is another kind, not counted here).
            js_spares = lambda: sum(not w.python for w in pool.supply.fresh)  # noqa: E731
            poll_until(lambda: js_spares() == 2, "the spare processes A took are replaced")
            answers = [exec_ok(client, BETA, f"return {i}") for i in range(5)]
            still_running = pool.admission.running_slots("alpha") == 2 and not any(f.done() for f in loops)
            ended = [f.result().json() for f in loops]
    assert [a["status"] for a in answers] == ["completed"] * 5 and [a["value"] for a in answers] == list(range(5))
    assert still_running, "B was served only after A's loops ended"
    assert [e["code"] for e in ended] == ["timeout", "timeout"]


def test_the_processes_of_a_tenant_over_its_share_get_the_lowest_cpu_priority(tmp_path):
    """While B's loop runs in a burst slot, A (holding both slots, share 1) has its processes at niceness 19
    and B's process keeps the workers' niceness; when B's cell ends, A's processes are restored."""
    with make_client(tmp_path, api_keys=KEYS, workers=2, burst_slots=1) as client:
        pool = client.app.state.services.pool
        if not pool.priorities.enabled:
            pytest.skip("this machine refuses restoring a niceness (no CAP_SYS_NICE): priorities are off")
        normal = pool.priorities.normal
        with ThreadPoolExecutor(3) as threads:
            loops = busy_loops(threads, client, 2, timeout_ms=20_000)  # outlasting B's loop on a busy machine
            poll_until(lambda: pool.admission.running_slots("alpha") == 2, "A's loops hold every slot")
            b_loop = threads.submit(post, client, BETA, "/v1/exec", {"code": BUSY, "timeout_ms": 1500})
            b_procs = poll_until(
                lambda: [w for w in pool.workers() if w.tenant == "beta" and w.busy], "B's loop runs in the burst slot"
            )
            a_procs = [w for w in pool.workers() if w.tenant == "alpha" and w.busy]
            lowered = sorted(os.getpriority(os.PRIO_PROCESS, w.pid) for w in a_procs)
            b_nice = [os.getpriority(os.PRIO_PROCESS, w.pid) for w in b_procs]
            assert b_loop.result().json()["code"] == "timeout"
            poll_until(lambda: pool.stats()["lowered"] == 0, "A's processes are restored once B's cell ended")
            restored = sorted(os.getpriority(os.PRIO_PROCESS, w.pid) for w in a_procs if not w.dead)
            still_running = not any(f.done() for f in loops)
            [f.result() for f in loops]
    assert lowered == [LOWERED, LOWERED]
    assert b_nice == [normal]
    assert still_running and restored == [normal, normal]


# A leg that runs guest code for a while between host work, and records when (wall clock, ms).
STRETCHES = """
const marks = [];
for (let i = 0; i < 4; i++) {
  await new Promise(r => setTimeout(r, 1));
  const t0 = Date.now();
  while (Date.now() - t0 < 15) {}
  marks.push([t0, Date.now()]);
}
return marks;
"""


def test_background_legs_and_resumed_waits_run_within_the_slots(tmp_path):
    """8 background cells and 4 resumed cells, spread over 6 processes (2 runtimes each), each running guest
    code in stretches between timers, never have more than `workers` stretches running at once (their own
    clocks say so), and the pool never held more slots than that."""
    with make_client(tmp_path, workers=2, burst_slots=1, worker_max_runtimes=2) as client:
        pool = client.app.state.services.pool
        parked = [
            exec_ok(client, {}, "await yield_control();" + STRETCHES, timeout_ms=20000)["cell_id"] for _ in range(4)
        ]
        background = [exec_ok(client, {}, STRETCHES, background=True, timeout_ms=20000)["cell_id"] for _ in range(8)]
        with ThreadPoolExecutor(12) as threads:
            waits = [
                threads.submit(post, client, {}, f"/v1/cells/{cell}/wait", {"timeout_ms": 30000})
                for cell in parked + background
            ]
            answers = [f.result().json() for f in waits]
        peak = pool.stats()["slots_peak"]
    assert [a["status"] for a in answers] == ["completed"] * 12, [a.get("error") for a in answers]
    stretches = [tuple(m) for a in answers for m in a["value"]]
    assert len(stretches) == 48
    assert most_at_once(stretches) <= 2, "more legs ran guest code at once than there are slots"
    assert peak == 2  # one tenant never gets a burst slot: it holds some already


def test_cells_that_hit_their_memory_limit_keep_their_process(tmp_path):
    """Engine memory-limit failures (several shapes of memory bomb) fail only the cell: no process is
    retired or started for them, and the same process runs the next cell."""
    bombs = [
        'const a = []; while (true) a.push("x".repeat(1e5) + a.length)',
        "const a = []; while (true) a.push([a.length, {x: a.length}])",
        "const m = new Map(); for (let i = 0;; i++) m.set(i, {i, s: 'y' + i})",
        "const a = []; for (;;) a.push(new ArrayBuffer(1 << 20))",
    ]
    with make_client(tmp_path, workers=1) as client:
        pool = client.app.state.services.pool
        exec_ok(client, {}, "return 1")
        poll_until(lambda: pool.stats()["spawning"] == 0, "the spare worker is started")
        before = pool.stats()
        [pid] = {w.pid for w in pool.workers() if w.tenant}
        codes = [exec_ok(client, {}, code, memory_limit_bytes=8 << 20)["code"] for code in bombs * 3]
        after_cell = exec_ok(client, {}, "return 2")
        after = pool.stats()
        pids = {w.pid for w in pool.workers() if w.tenant}
    assert codes == ["memory_limit_exceeded"] * 12
    assert after_cell["value"] == 2
    assert (after["spawned"], after["recycled"]) == (before["spawned"], before["recycled"])
    assert pids == {pid}


def test_a_tenant_whose_cells_keep_timing_out_is_refused_fresh_processes(tmp_path):
    """Each timed-out cell retires its process; with 2 replacements a minute, A's next cell after two such
    cells is 429 naming tenant_worker_replacements_per_minute, and B is served meanwhile."""
    with make_client(tmp_path, api_keys=KEYS, workers=1, tenant_worker_replacements_per_minute=2) as client:
        first = [exec_ok(client, ALPHA, BUSY, timeout_ms=200)["code"] for _ in range(2)]
        refused = post(client, ALPHA, "/v1/exec", {"code": "return 1"})
        other = exec_ok(client, BETA, "return 3")
    assert first == ["timeout", "timeout"]
    assert refused.status_code == 429, refused.text
    assert "tenant_worker_replacements_per_minute=2" in refused.json()["error"]["message"]
    assert refused.headers["Retry-After"].isdigit()
    assert other["value"] == 3
