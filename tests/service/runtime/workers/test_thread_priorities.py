"""A worker over its tenant's share is lowered thread by thread, its Monty child's threads included.

Niceness and scheduling policy belong to each thread on Linux; a Python cell runs in the worker's Monty
child, driven from the client's own thread, so lowering the worker's main thread alone left the cell's
computation at full priority.  Real parts: a Python worker started as the pool starts them (kernel sandbox,
its real ``monty`` child), the pool's own ``Priorities``, and each thread's niceness read from ``/proc``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from service.runtime.workers.cpu import LOWERED, MAX_THREADS, Priorities, worker_threads
from service.runtime.workers.process import start_worker
from tests.conftest import make_client
from tests.support.polling import poll_until


def _nice(tid: int) -> int:
    """A thread's niceness (field 19 of its stat line, counted after the command's parentheses)."""
    stat = Path(f"/proc/{tid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[16])


def _with_child_running(pid: int) -> list[int] | None:
    """The threads of worker ``pid`` once its Monty child runs its interpreter thread, else None."""
    threads = worker_threads(pid)
    names = [Path(f"/proc/{tid}/comm").read_text().strip() for tid in threads]
    return threads if "monty-worker" in names else None


def test_every_thread_of_a_python_worker_and_its_child_is_lowered_and_restored(tmp_path: Path):
    with make_client(tmp_path / "svc") as client:
        supply = client.app.state.services.pool.supply  # type: ignore[attr-defined]
        options, frame_cap, nice = supply.python_options, supply.frame_cap, supply.nice

    async def scenario() -> tuple[list[int], list[int], list[int], list[int]]:
        worker = await start_worker(options, frame_cap, nice=nice)
        try:
            # Its Monty child is started in the background: wait until it and its thread exist.
            threads = poll_until(lambda: _with_child_running(worker.pid), "the worker's Monty child runs")
            priorities = Priorities(nice)
            if not priorities.probe(worker.pid):
                pytest.skip("this machine refuses restoring a niceness (no CAP_SYS_NICE): priorities are off")
            priorities.apply(worker.pid, True)
            lowered = [_nice(tid) for tid in threads]
            priorities.apply(worker.pid, False)
            return threads, lowered, [_nice(tid) for tid in threads], [priorities.normal]
        finally:
            worker.kill()
            await worker.proc.wait()

    threads, lowered, restored, (normal,) = asyncio.run(scenario())
    # The worker's main thread and its client's threads, the child's two.
    assert len(set(threads)) == len(threads) >= 4
    assert lowered == [LOWERED] * len(threads)
    assert restored == [normal] * len(threads)


def test_the_threads_of_this_process_and_its_children_are_found_and_capped():
    """This test process and a child it starts: every thread of both, this one's main thread first."""
    child = os.posix_spawn("/bin/sleep", ["sleep", "30"], os.environ)
    try:
        threads = worker_threads(os.getpid())
        own = {int(t) for t in os.listdir("/proc/self/task")}
        assert threads[0] == os.getpid()
        assert own <= set(threads) and child in threads
        assert worker_threads(2**22 + 12345) == [2**22 + 12345]  # no such process: the pid alone
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)


def test_a_process_with_more_threads_and_children_than_the_cap_is_read_only_up_to_it():
    """As an owned worker could make them: MAX_THREADS threads of this process's beside its main one, and as
    many children: the walk stops at MAX_THREADS, this process's main thread first."""
    stop = threading.Event()
    extra = [threading.Thread(target=stop.wait) for _ in range(MAX_THREADS)]
    children = [os.posix_spawn("/bin/sleep", ["sleep", "30"], os.environ) for _ in range(MAX_THREADS)]
    for thread in extra:
        thread.start()
    try:
        threads = worker_threads(os.getpid())
        assert len(threads) == len(set(threads)) == MAX_THREADS and threads[0] == os.getpid()
    finally:
        stop.set()
        for thread in extra:
            thread.join()
        for child in children:
            os.kill(child, 9)
            os.waitpid(child, 0)
