"""Where a Python-cells worker talks to its Monty child: on one CPU, the child's.

The worker and its ``monty`` child call each other in strict turns (a checkout, a feed, a resume, a dump:
each a request and its answer), and the Monty client does its half from its own threads (a tokio
runtime).  When the three wait on different CPUs, every turn wakes an idle CPU: on a 2-core VM a turn
then costs ~120 us and ~55 us of CPU; on one CPU it is a switch there, ~14 us and ~8 us (measured with
Monty 1.4, ``feed_start("1")`` in a loop).

So the service names a CPU per Python worker (``WorkerOptions.monty_cpu``, spread over its CPUs) and the
pool starts the client's threads and the child pinned to it: they inherit the mask of the thread that
makes them, the worker's main thread while it is placed there.  The main thread itself is placed there
only while it uses the child (``placed``): the worker's other work (reading and writing frames) runs
wherever the kernel likes.  Pinning asks only ``sched_setaffinity`` of the
calling thread (the worker's filter allows nothing wider); if the kernel refuses, placement is dropped
and everything runs as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


class Placement:
    """The CPU a worker's Monty child and client threads run on, and the main thread's visits there."""

    def __init__(self, cpu: int | None = None) -> None:
        self.cpu = cpu  # None: not placed
        self._home: set[int] = set()  # the main thread's own CPUs, between visits
        self._depth = 0

    def check(self) -> None:
        """Keep ``cpu`` only if this thread may run there (the service and the worker agree on CPUs)."""
        home = os.sched_getaffinity(0)
        if self.cpu is not None and self.cpu not in home:
            self.cpu = None
        self._home = home

    @contextmanager
    def placed(self) -> Iterator[None]:
        """Run the block on the child's CPU (a nested block stays there), then go back home."""
        cpu = self.cpu
        pin = cpu is not None and self._depth == 0 and self._move({cpu})
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if pin:
                self._move(self._home)

    def _move(self, cpus: set[int]) -> bool:
        try:
            os.sched_setaffinity(0, cpus)
        except OSError:  # refused (a filter, a cpuset that changed): run unplaced from now on
            self.cpu = None
            return False
        return True
