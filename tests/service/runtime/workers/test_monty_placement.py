"""A Python worker's Monty child and its client's threads run on one CPU, the service's choice per worker
(the one the fewest live Python workers use).

The worker and its child call each other in strict turns; on one CPU each turn is a switch there instead of
a wake-up of another CPU (``guest_runtime/monty/placement.py``).  Real parts: the service (its pool and
supply), worker processes under the kernel sandbox, their real ``monty`` children, the kernel's CPU masks
read from ``/proc``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from service.runtime.workers.supply import WorkerSupply
from tests.conftest import make_client
from tests.support.polling import poll_until

CPUS = sorted(os.sched_getaffinity(0))
pytestmark = pytest.mark.skipif(len(CPUS) < 2, reason="placement needs two CPUs to choose from")


def _cpus(task: Path) -> set[int]:
    """The CPUs a thread may run on (``Cpus_allowed_list``: ``0-1,3``)."""
    line = next(line for line in (task / "status").read_text().splitlines() if line.startswith("Cpus_allowed_list"))
    cpus: set[int] = set()
    for part in line.split(":", 1)[1].strip().split(","):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def _threads(pid: int) -> dict[int, set[int]]:
    return {int(task.name): _cpus(task) for task in Path(f"/proc/{pid}/task").iterdir()}


def _children(pid: int) -> list[int]:
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]


def test_each_python_workers_child_and_client_threads_share_its_cpu(tmp_path: Path):
    with make_client(tmp_path, workers=2) as client:
        for i in range(4):  # Python cells with a host call each, so each worker has used its child
            answer = client.post("/v1/exec", json={"code": f"await sleep(0)\n{i} * 2", "language": "python"}).json()
            assert (answer["status"], answer["value"]) == ("completed", i * 2)
        supply = client.app.state.services.pool.supply  # type: ignore[attr-defined]
        assert client.portal is not None
        client.portal.call(supply.spawn, True)  # one more, as the pool starts them
        workers = [w for w in supply.alive if w.python and not w.dead]
        assert len(workers) >= 2
        for worker in workers:
            assert worker.monty_cpu in CPUS
            # The main thread goes back home after each use of the child (the last: handing back a finished
            # cell's session, after its answer); the client's threads never move.
            pid = worker.pid
            poll_until(lambda: _threads(pid)[pid] == set(CPUS), "the worker's main thread is home")  # noqa: B023 - called at once
            threads = _threads(worker.pid)
            del threads[worker.pid]
            assert threads and set(map(frozenset, threads.values())) == {frozenset({worker.monty_cpu})}
            (child,) = _children(worker.pid)
            assert set(map(frozenset, _threads(child).values())) == {frozenset({worker.monty_cpu})}


@dataclass(eq=False)
class _Started:
    """What the supply reads of a live worker when it places a new one (``Worker``'s three fields)."""

    monty_cpu: int | None
    python: bool = True
    dead: bool = False


def test_a_new_python_worker_goes_to_the_cpu_the_fewest_live_ones_use():
    supply = WorkerSupply({}, 1 << 20, nice=0, max_cells=10)
    assert supply._monty_cpu() == CPUS[0], "no live worker: the first CPU"
    supply.alive = {_Started(CPUS[0]), _Started(CPUS[0], dead=True), _Started(None, python=False)}  # type: ignore[arg-type]
    assert supply._monty_cpu() == CPUS[1], "a dead worker and a JavaScript one count for nothing"
    supply.alive.add(_Started(CPUS[1]))  # type: ignore[arg-type]
    supply._placing[CPUS[0]] += 1  # one being started there
    assert supply._monty_cpu() == CPUS[1]
