"""Closing the worker pool closes the pipes of every process it started, retired ones too.

Real worker processes in a real event loop; the pool is driven directly so that a worker is retired
(killed) in the same breath as the pool closes, the case a request path only hits by chance.
"""

from __future__ import annotations

import asyncio
import gc
import sys

from service.runtime.workers.pool import WorkerPool
from service.runtime.workers.process import Worker


async def _retire_then_close() -> Worker:
    pool = WorkerPool(
        size=1,
        cap=2,
        max_cells=100,
        frame_cap=1 << 20,
        acquire_timeout_s=10.0,
        options={"rlimit_as_bytes": 0, "rlimit_cpu_seconds": 0, "stack_bytes": 1 << 20},
    )
    await pool.start()
    worker = await pool.acquire("t", "t")
    pool.release(worker, recycle=True, cell_id="c")  # retired: killed, and no longer one of the pool's
    await pool.close()
    return worker  # held past the loop's end, as a parked cell's record would hold it


def test_close_leaves_no_worker_pipe_for_the_garbage_collector(monkeypatch):
    """Every process has ended and its pipes are closed when close returns: no subprocess transport's
    ``__del__`` later runs into the closed loop ("Event loop is closed", as the suite used to print)."""
    unraisable: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: unraisable.append(f"{u.exc_value!r} in {u.object!r}"))
    for _ in range(3):
        worker = asyncio.run(_retire_then_close())  # the loop is closed when this returns
        assert worker.proc.returncode is not None
        del worker
        gc.collect()
    assert unraisable == []
