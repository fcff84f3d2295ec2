"""Fresh worker processes: started ahead of need, in the background, never on a request's path.

The supply starts processes (``start_worker``) and keeps the ones nobody has taken yet; the pool
(``pool.py``) decides how many it wants and hands them out.  Processes are of two kinds: those that run
JavaScript and TypeScript cells only, confined by the strict profile, and those that run Python cells
(``python``: they start a Monty child, so their profile lets them start that one binary and map it
executable).  A kind is fixed at start: a JavaScript cell never runs in a process whose filter was
loosened for Monty.  Each process draws its own cell
budget, 80-100% of ``worker_max_cells``: processes started together are then not all replaced at
once (a burst of process starts in the middle of serving).

A Python process is told the CPU its Monty child runs on (``monty_cpu``: the one of this service's CPUs the
fewest live Python processes use).  The process and its child call each other in strict turns, several
times per cell and per host call; on one CPU each turn is a switch on that CPU, across two it wakes the
other one (measured on a 2-core VM: ~14 us against ~120 us per turn, and a fifth of the CPU).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter, deque
from collections.abc import Coroutine

from bridge.messages import SandboxReport, WorkerOptions

from .process import Worker, start_worker


class WorkerSupply:
    """Processes being started, fresh ones waiting to be taken, and every one not yet seen to end."""

    def __init__(self, options: WorkerOptions, frame_cap: int, *, nice: int, max_cells: int) -> None:
        self.options: WorkerOptions = {**options, "frame_cap": frame_cap, "python": False}
        self.python_options: WorkerOptions = {**options, "frame_cap": frame_cap, "python": True}
        self.frame_cap = frame_cap
        self.nice = nice
        self.max_cells = max_cells
        self.fresh: deque[Worker] = deque()
        self.starting = {False: 0, True: 0}  # by kind (``python``)
        self.started = 0
        self.alive: set[Worker] = set()  # every process started and not yet seen to end
        # The confinement layers the first worker reported (kept: that worker may be retired at once).
        self.sandbox: SandboxReport | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._placing: Counter[int] = Counter()  # the CPUs of the Python processes being started

    async def spawn(self, python: bool) -> Worker:
        """Start one worker process of the kind ``python`` names and wait for its ``ready`` frame."""
        cpu = self._monty_cpu() if python else None
        options = self.python_options if python else self.options
        if cpu is not None:
            options = {**options, "monty_cpu": cpu}
            self._placing[cpu] += 1
        try:
            worker = await start_worker(options, self.frame_cap, nice=self.nice)
        finally:
            if cpu is not None:
                self._placing[cpu] -= 1
        worker.monty_cpu = cpu
        worker.python = python
        self.alive.add(worker)
        worker.max_cells = random.randint(max(1, self.max_cells * 4 // 5), self.max_cells)
        self.started += 1
        if self.sandbox is None and not python:  # the strict profile's layers are the ones reported
            self.sandbox = worker.sandbox
        return worker

    def _monty_cpu(self) -> int | None:
        """The CPU for a new Python process's Monty child: of this service's, the one the fewest live ones
        use; None on one CPU (nothing to choose)."""
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            return None
        used = Counter(w.monty_cpu for w in self.alive if w.python and not w.dead) + self._placing
        return min(cpus, key=lambda cpu: used[cpu])

    def take(self, python: bool) -> Worker | None:
        """The oldest fresh process of the kind still alive, if any."""
        for worker in list(self.fresh):
            if worker.dead:
                self.fresh.remove(worker)
            elif worker.python == python:
                self.fresh.remove(worker)
                return worker
        return None

    def count(self, python: bool | None = None) -> int:
        """Fresh processes and those being started (of one kind, or of both)."""
        if python is None:
            return len(self.fresh) + sum(self.starting.values())
        return sum(w.python == python for w in self.fresh) + self.starting[python]

    def background(self, coro: Coroutine[object, None, None]) -> None:
        """Run ``coro`` as a task the supply keeps referenced and cancels at ``close``."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> list[Worker]:
        """Cancel the background tasks and hand back every process still alive (to be stopped)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.fresh.clear()
        return list(self.alive)
