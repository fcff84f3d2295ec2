"""Which process a new cell packs into, by principal: ``AssignedWorkers`` on its own.

``AssignedWorkers`` is bookkeeping over ``Worker`` objects (no process is started or read here: the
workers are built over no process, the way the pool's tables see them), so each rule is a table: the
processes assigned so far (principal, tenant, runtimes held, what they are doing), who asks, and which
process it gets.  The pool with real processes is in ``test_worker_pool.py``; the whole path, with an
attacker's worker, in ``test_process_principals.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from service.runtime.workers.assigned_workers import AssignedWorkers
from service.runtime.workers.process import Worker, WorkerState

NARROW, ADMIN, OTHER = "acme/narrow", "acme/admin", "globex/key"


def tenant_of(principal: str | None) -> str:
    return "acme" if principal is None else principal.split("/")[0]


def table(*processes: tuple[str | None, int, str]) -> tuple[AssignedWorkers, list[Worker]]:
    """Processes assigned in order, each ``(principal, runtimes held, "idle" | "busy" | "draining" | "parked")``.

    "idle" processes went idle in the order given (the first one longest ago).
    """
    assigned = AssignedWorkers(max_runtimes=4, max_parked_bytes=100, snapshot_bytes=10)
    workers = []
    for n, (principal, runtimes, doing) in enumerate(processes):
        worker = Worker(proc=None, frame_cap=0, output=None)  # type: ignore[arg-type]
        assigned.assign(worker, tenant_of(principal), principal)
        worker.cells = {f"cell{n}.{i}": lambda reason: None for i in range(runtimes)}
        worker.busy = doing == "busy"
        if doing == "draining":
            worker.state = WorkerState.DRAINING
        if doing == "parked":
            worker.parked_heaps = {cell: 95 for cell in worker.cells}  # no room for one more heap
        if doing == "idle":
            assigned.went_idle(worker, keep=len(processes))
        workers.append(worker)
    return assigned, workers


# the processes assigned, the principal of the new cell, the index of the process it packs into (None: a fresh one)
PICKS: list[tuple[list[tuple[str | None, int, str]], str | None, int | None]] = [
    # One tenant, two keys: the admin key's cell never goes to the narrow key's process, however full.
    ([(NARROW, 3, "holding")], ADMIN, None),
    ([(NARROW, 3, "holding"), (ADMIN, 0, "idle")], ADMIN, 1),
    ([(NARROW, 0, "idle")], NARROW, 0),
    ([(NARROW, 0, "idle")], OTHER, None),
    # Among its own principal's processes, the one holding the most runtimes (parked cells gather).
    ([(NARROW, 1, "holding"), (NARROW, 3, "holding"), (ADMIN, 3, "holding")], NARROW, 1),
    # ... that still takes new cells: not busy, not draining, under max_runtimes and the parked bytes.
    ([(NARROW, 3, "busy"), (NARROW, 1, "holding")], NARROW, 1),
    ([(NARROW, 3, "draining"), (NARROW, 1, "holding")], NARROW, 1),
    ([(NARROW, 4, "holding"), (NARROW, 1, "holding")], NARROW, 1),
    ([(NARROW, 2, "parked"), (NARROW, 1, "holding")], NARROW, 1),
    ([(NARROW, 4, "holding")], NARROW, None),
    # A cell of no principal (``cell`` isolation) packs into nothing, not even another one of no principal.
    ([(None, 0, "idle"), (NARROW, 0, "idle")], None, None),
    ([(None, 1, "holding")], None, None),
]


@pytest.mark.parametrize(("processes", "principal", "expected"), PICKS)
def test_a_new_cell_packs_only_into_a_process_of_its_own_principal(processes, principal, expected):
    assigned, workers = table(*processes)
    picked = assigned.pick(principal)
    assert (None if picked is None else workers.index(picked)) == expected


# the processes assigned (idle ones went idle in this order), the principal asking at the cap, the index
# of the process retired to make room (None: none is)
AT_THE_CAP: list[tuple[list[tuple[str | None, int, str]], str | None, int | None]] = [
    # Another tenant's idle empty process, as before principals ...
    ([(OTHER, 0, "idle")], NARROW, 0),
    # ... and the same tenant's, of another key: it is of no more use to this cell (without this the
    # narrow key's idle processes would keep the admin key out for good).
    ([(NARROW, 0, "idle")], ADMIN, 0),
    ([(NARROW, 0, "idle"), (OTHER, 0, "idle")], ADMIN, 0),  # the one idle longest
    ([(OTHER, 0, "idle"), (NARROW, 0, "idle")], ADMIN, 0),
    # Never one holding a runtime or running a leg.
    ([(NARROW, 1, "holding"), (OTHER, 0, "busy")], ADMIN, None),
    # A cell of no principal may retire any idle empty process.
    ([(NARROW, 1, "holding"), (ADMIN, 0, "idle")], None, 1),
]


@pytest.mark.parametrize(("processes", "principal", "expected"), AT_THE_CAP)
def test_at_the_cap_the_longest_idle_process_of_another_principal_makes_room(processes, principal, expected):
    assigned, workers = table(*processes)
    idle = assigned.idle_of_another(principal)
    assert (None if idle is None else workers.index(idle)) == expected


def test_a_process_is_assigned_once_and_never_to_a_second_principal():
    """Nothing re-assigns a process: asking to is a broken invariant, refused loudly."""
    assigned, [worker] = table((NARROW, 0, "idle"))
    with pytest.raises(RuntimeError, match="never assigned again"):
        assigned.assign(worker, "acme", ADMIN)
    assert (worker.principal, assigned.pick(ADMIN), assigned.pick(NARROW)) == (NARROW, None, worker)


def test_forgetting_a_process_removes_it_by_tenant_and_by_principal_and_the_stats_count_principals():
    assigned, [narrow, admin, single] = table((NARROW, 1, "holding"), (ADMIN, 0, "idle"), (None, 1, "busy"))
    stats: dict[str, Any] = assigned.stats()
    assert (stats["principals"], stats["single_use"], stats["runtimes"]) == (2, 1, 2)
    assert assigned.of("acme") == [narrow, admin, single]
    assigned.forget(admin)
    assigned.forget(single)
    assert assigned.of("acme") == [narrow] and assigned.pick(ADMIN) is None
    assert (assigned.stats()["principals"], assigned.stats()["single_use"]) == (1, 0)
