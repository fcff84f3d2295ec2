"""The worker pool driven directly, with real worker processes: slots, priorities, process starts.

No cells run here: the tests take and give back processes the way a cell's legs do (``acquire`` for
a new cell, ``lend`` while it waits for host work, ``reserve`` to resume, ``release`` at its end) and
look at what the pool and the kernel say (held slots, the processes' niceness).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from service.errors import Overloaded, TooManyRequests
from service.runtime.workers.cpu import LOWERED, Priorities
from service.runtime.workers.pool import WorkerPool
from service.runtime.workers.process import WorkerState
from service.runtime.workers.replacements import WorkerReplacements
from tests.support.polling import apoll_until


def make_pool(**kw: Any) -> WorkerPool:
    settings: dict[str, Any] = {
        "size": 1,
        "cap": 16,
        "max_cells": 1000,
        "frame_cap": 1 << 20,
        "acquire_timeout_s": 20.0,  # room for a process start on a loaded machine
        "options": {"rlimit_as_bytes": 0, "rlimit_cpu_seconds": 0, "stack_bytes": 1 << 20},
        "nice": 5,
    }
    return WorkerPool(**{**settings, **kw})


def with_pool(body: Callable[[WorkerPool], Awaitable[Any]], **kw: Any) -> Any:
    async def main() -> Any:
        pool = make_pool(**kw)
        await pool.start()
        try:
            return await body(pool)
        finally:
            await pool.close()

    return asyncio.run(main())


def nice_of(pid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, pid)


# ---- running slots --------------------------------------------------------------------------------


def test_a_tenant_holding_no_slot_gets_a_burst_slot_and_others_wait():
    """size 1, burst 1: a's leg holds the slot, b's first leg gets the burst slot, a third tenant queues
    until a's leg lends its process (it waits for host work)."""

    async def body(pool: WorkerPool) -> None:
        a = await pool.acquire("a", "a")
        b = await pool.acquire("b", "b")
        assert a is not b and pool.stats()["slots"] == 2
        waiting = asyncio.ensure_future(pool.acquire("c", "c"))
        await apoll_until(lambda: pool.admission.queued("c") == 1, "c queues: every slot, the burst one too, is held")
        pool.hand_back(a)  # a's leg waits for host work: its slot goes on
        c = await waiting
        assert pool.stats()["slots"] == 2 and pool.stats()["slots_peak"] == 2
        for w, cell in ((b, "b1"), (c, "c1")):
            pool.release(w, recycle=False, cell_id=cell)
        pool.release(a, recycle=False, cell_id="a1", holding=False)
        assert pool.stats()["slots"] == 0

    with_pool(body, burst=1)


def test_a_resumed_leg_takes_a_slot_before_it_runs():
    """A leg resuming in its own process waits for a running slot like a new cell: False at its budget,
    True once one frees; an abort ends the wait at once."""

    async def body(pool: WorkerPool) -> None:
        a = await pool.acquire("a", "a")
        pool.attach(a, "a1", lambda reason: None)
        pool.hand_back(a)
        b = await pool.acquire("b", "b")  # takes the only slot while a waits for host work
        assert not await pool.reacquire(a, "a1", 0.05, asyncio.Event())
        assert not a.busy, "a process whose resume gave up is free for its tenant's other legs"
        abort = asyncio.Event()
        waiting = asyncio.ensure_future(pool.reacquire(a, "a1", 10.0, abort))
        await asyncio.sleep(0.01)
        abort.set()
        assert not await waiting
        resumed = asyncio.ensure_future(pool.reacquire(a, "a1", 10.0, asyncio.Event()))
        await asyncio.sleep(0.01)
        assert not resumed.done(), "the resume waits while b's leg runs"
        pool.release(b, recycle=False, cell_id="b1")
        assert await resumed and pool.admission.running_slots("a") == 1
        pool.release(a, recycle=False, cell_id="a1")

    with_pool(body)


# ---- CPU priority ---------------------------------------------------------------------------------


def test_processes_of_a_tenant_over_its_share_run_at_the_lowest_priority():
    """a holds both slots; when b's leg takes a burst slot a is over its share (1 of 2): a's busy
    processes go to niceness 19 and SCHED_IDLE, b's stays normal; when b's leg ends a's are restored."""

    async def body(pool: WorkerPool) -> None:
        if not pool.priorities.enabled:
            pytest.skip("this machine refuses restoring a niceness (no CAP_SYS_NICE): priorities are off")
        normal = pool.priorities.normal
        a1, a2 = await pool.acquire("a", "a"), await pool.acquire("a", "a")
        assert {nice_of(a1.pid), nice_of(a2.pid)} == {normal}
        b = await pool.acquire("b", "b")
        assert (nice_of(a1.pid), nice_of(a2.pid), nice_of(b.pid)) == (LOWERED, LOWERED, normal)
        assert pool.priorities.idle_policy  # root here: SCHED_IDLE can be left again
        assert [os.sched_getscheduler(w.pid) for w in (a1, a2, b)] == [os.SCHED_IDLE, os.SCHED_IDLE, os.SCHED_OTHER]
        assert pool.stats()["lowered"] == 2
        pool.release(b, recycle=False, cell_id="b1")
        assert (nice_of(a1.pid), nice_of(a2.pid)) == (normal, normal)
        assert [os.sched_getscheduler(w.pid) for w in (a1, a2)] == [os.SCHED_OTHER, os.SCHED_OTHER]
        for w, cell in ((a1, "a1"), (a2, "a2")):
            pool.release(w, recycle=False, cell_id=cell)

    with_pool(body, size=2, burst=1)


def test_without_the_right_to_restore_a_niceness_nothing_is_lowered():
    """As an unprivileged user the probe can lower its own process but not restore it: priorities stay off
    (a worker lowered for good would stay slow) and the probed process is reported stranded, for the pool
    to replace.  Run in a forked child that drops to uid 65534, probing a process of that user."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to another user in a forked child")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing but system calls, then _exit
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            target = os.fork()
            if target == 0:
                os.pause()
                os._exit(0)
            p = Priorities(5)
            enabled = p.probe(target)
            niceness = os.getpriority(os.PRIO_PROCESS, target)
            os.kill(target, 9)
            os.write(write_end, f"{enabled} {p.stranded} {niceness}".encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    answer = os.read(read_end, 100).decode().split()
    os.close(read_end)
    assert os.waitstatus_to_exitcode(status) == 0
    assert answer == ["False", "True", str(LOWERED)]


def test_the_probe_enables_priorities_where_restoring_is_allowed():
    """With the right to restore (here: root), the probe lowers and restores a real process (niceness and
    SCHED_IDLE) and enables both; lowering then sets both and restoring undoes both."""
    if os.geteuid() != 0:
        pytest.skip("restoring a niceness needs CAP_SYS_NICE; this test runs as an unprivileged user")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        p = Priorities(5)
        assert p.probe(child.pid) is True
        assert (p.idle_policy, p.stranded) == (True, False)
        assert (nice_of(child.pid), os.sched_getscheduler(child.pid)) == (p.normal, os.SCHED_OTHER)
        p.apply(child.pid, True)
        assert (nice_of(child.pid), os.sched_getscheduler(child.pid)) == (LOWERED, os.SCHED_IDLE)
        p.apply(child.pid, False)
        assert (nice_of(child.pid), os.sched_getscheduler(child.pid)) == (p.normal, os.SCHED_OTHER)
    finally:
        child.kill()
        child.wait()


def test_where_sched_idle_is_refused_niceness_alone_does_the_lowering(monkeypatch, caplog):
    """A kernel or seccomp filter that refuses SCHED_IDLE (a mock here: as root this kernel never refuses
    it) leaves lowering on, by niceness 19 alone, and says so once in the log."""
    if os.geteuid() != 0:
        pytest.skip("restoring a niceness needs CAP_SYS_NICE; this test runs as an unprivileged user")

    def refuse(pid: int, policy: int, param: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        p = Priorities(5)
        with caplog.at_level("INFO", logger="codemode.workers"):
            assert p.probe(child.pid) is True
        assert (p.idle_policy, p.stranded) == (False, False)
        assert "SCHED_IDLE refused" in caplog.text
        p.apply(child.pid, True)
        assert (nice_of(child.pid), os.sched_getscheduler(child.pid)) == (LOWERED, os.SCHED_OTHER)
        p.apply(child.pid, False)
        assert nice_of(child.pid) == p.normal
    finally:
        child.kill()
        child.wait()


# ---- processes retired per tenant -----------------------------------------------------------------

# per minute, seconds before each retirement, whether a fresh process may be had after it
REPLACEMENTS = [
    (2, [0, 0, 0], [True, False, False]),  # the bucket starts full and holds per_minute
    (2, [0, 0, 30], [True, False, False]),  # half a minute brings back one, which the third retirement uses
    (2, [0, 0, 60], [True, False, True]),  # a minute refills the bucket
    (60, [0] * 60 + [2], [True] * 59 + [False, True]),  # one a second
]


@pytest.mark.parametrize(("per_minute", "gaps", "allowed"), REPLACEMENTS)
def test_retired_processes_per_tenant_are_a_token_bucket(per_minute, gaps, allowed):
    """A tenant may have its cells retire ``per_minute`` processes at once, then one every 60 / per_minute
    seconds; past that it may not take a fresh one; other tenants have their own buckets."""
    now = [0.0]
    budget = WorkerReplacements(per_minute, clock=lambda: now[0])
    seen = []
    for gap in gaps:
        now[0] += gap
        budget.charge("a")
        seen.append(budget.wait_s("a") == 0)
    assert seen == allowed
    assert budget.wait_s("b") == 0


def test_the_table_of_budgets_stays_bounded_by_active_tenants():
    """Buckets that refilled are dropped by a sweep at most once a minute: 10,000 tenants charged two
    minutes ago leave one entry (the last one charged) after the next charge."""
    now = [0.0]
    budget = WorkerReplacements(60, clock=lambda: now[0])
    for i in range(10_000):
        budget.charge(f"t{i}")
    now[0] += 120.0
    budget.charge("last")
    assert len(budget._buckets) == 1 and budget.wait_s("t1") == 0


def test_a_tenant_whose_cells_retire_processes_is_refused_fresh_ones():
    """With 2 replacements a minute, after two of a tenant's cells retired their process its next new cell
    gets 429 naming the setting, while another tenant is served, and a process the pool retires for its own
    reasons (its cell budget) is charged to nobody."""

    async def body(pool: WorkerPool) -> None:
        for cell in ("a1", "a2"):
            w = await pool.acquire("a", "a")
            pool.release(w, recycle=True, cell_id=cell)  # e.g. the cell timed out
        with pytest.raises(TooManyRequests) as refused:
            await pool.acquire("a", "a")
        assert "tenant_worker_replacements_per_minute=2" in refused.value.message
        assert refused.value.retry_after >= 1
        for cell in ("b1", "b2", "b3"):
            b = await pool.acquire("b", "b")
            b.max_cells = 1  # worn out after one cell: retired, not b's doing
            pool.release(b, recycle=False, cell_id=cell)
        assert pool.stats()["replacements_refused"] == 1

    with_pool(body, replacements_per_minute=2, size=2)


def test_a_new_cell_whose_process_is_ready_takes_no_vacancy_lock():
    """Nobody waits for a vacancy: ``acquire`` hands out the ready process without entering the vacancy
    condition (its lock would make the caller wait for nobody)."""

    async def body(pool: WorkerPool) -> tuple[bool, bool]:
        entered: list[bool] = []
        changed = pool._vacancies.changed

        class Watched(type(changed)):  # type: ignore[misc]
            async def __aenter__(self) -> None:
                entered.append(True)
                await super().__aenter__()

        pool._vacancies.changed = Watched()
        worker = await pool.acquire("a", "a")
        first = bool(entered)
        pool.release(worker, recycle=False, cell_id="none")
        return first, pool.admission.held == 0

    assert with_pool(body) == (False, True)


# ---- processes by principal -----------------------------------------------------------------------


def test_a_process_serves_only_the_principal_of_its_first_cell():
    """Two keys of one tenant: the narrow key's idle process is never handed to the admin key's cell, which
    gets a fresh one; the narrow key's next cell packs into its own process again."""

    async def body(pool: WorkerPool) -> None:
        narrow = await pool.acquire("acme", "acme/narrow")
        pool.release(narrow, recycle=False, cell_id="n1")
        admin = await pool.acquire("acme", "acme/admin")
        assert admin is not narrow and (narrow.principal, admin.principal) == ("acme/narrow", "acme/admin")
        pool.release(admin, recycle=False, cell_id="a1")
        assert await pool.acquire("acme", "acme/narrow") is narrow
        pool.release(narrow, recycle=False, cell_id="n2")
        assert pool.stats()["principals"] == 2

    with_pool(body, burst=1)  # keeps two idle processes


def test_a_cell_of_no_principal_gets_a_fresh_process_that_ends_with_it():
    """``cell`` isolation: each cell takes a pre-started spare; while one is parked its process serves
    nobody else, and once a cell ends its process is stopped, never handed out again."""

    async def body(pool: WorkerPool) -> None:
        parked = await pool.acquire("acme", None)
        pool.attach(parked, "c1", lambda reason: None)
        pool.park(parked, "c1", 1000, holding=True)
        second = await pool.acquire("acme", None)
        assert second is not parked
        pool.release(second, recycle=False, cell_id="c2")
        assert second.state is WorkerState.RETIRED
        assert await asyncio.wait_for(second.proc.wait(), 10) is not None
        third = await pool.acquire("acme", None)
        assert third not in (parked, second)
        pool.release(third, recycle=False, cell_id="c3")
        pool.release(parked, recycle=False, cell_id="c1", holding=False, drop=True)
        assert parked.state is WorkerState.RETIRED
        assert pool.stats()["single_use"] == 0 and pool.stats()["retired_by_cells"] == 0

    with_pool(body, size=2)


def test_at_the_cap_an_idle_process_of_another_key_of_the_same_tenant_makes_room():
    """cap 2: the tenant's keys k1 and k2 each left an idle process; a cell of k3 (same tenant) retires the
    one idle longest and gets a fresh process, instead of waiting for a process no cell of k3 may use."""

    async def body(pool: WorkerPool) -> None:
        k1 = await pool.acquire("acme", "k1")
        pool.release(k1, recycle=False, cell_id="1")
        await apoll_until(
            lambda: pool.stats()["fresh"] == 1, "k1's spare is replaced (a start under way counts at the cap)"
        )
        k2 = await pool.acquire("acme", "k2")
        pool.release(k2, recycle=False, cell_id="2")
        assert {k1.state, k2.state} == {WorkerState.SERVING}
        k3 = await pool.acquire("acme", "k3")
        assert k3 not in (k1, k2) and k1.state is WorkerState.RETIRED and k2.state is WorkerState.SERVING
        pool.release(k3, recycle=False, cell_id="3")

    with_pool(body, size=1, cap=2, burst=1)


def test_at_the_cap_with_every_process_holding_parked_cells_a_new_cell_is_told_which_settings_to_change():
    """``cell`` isolation, cap 1: the only process holds a parked cell; another cell waits its
    ``acquire_timeout_ms`` and gets 503 naming ``max_workers`` and ``worker_isolation``."""

    async def body(pool: WorkerPool) -> None:
        parked = await pool.acquire("acme", None)
        pool.attach(parked, "c1", lambda reason: None)
        pool.park(parked, "c1", 1000, holding=True)
        with pytest.raises(Overloaded) as refused:
            await pool.acquire("globex", None)
        message = refused.value.message
        assert "all 1 worker processes (max_workers)" in message and "1 of them holding parked cells" in message
        assert "worker_isolation" in message and "acquire_timeout_ms" in message
        pool.release(parked, recycle=False, cell_id="c1", holding=False, drop=True)

    with_pool(body, size=1, cap=1, acquire_timeout_s=0.5)
