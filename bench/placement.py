"""Where the two processes of a nested-call figure run: on two CPUs, or both on one.

A round trip between two processes costs very different amounts by where the kernel runs them.  On
one CPU, a wake-up is a context switch; on two, the reader's CPU has gone idle and must wake (about
50 us a round trip on the 2-core VM the figures in docs/ come from, against about 15 on one CPU).
Left to the scheduler, the floor's echo child, which does almost nothing, mostly shares its parent's
CPU, while a worker busy with a guest runs on the other one: an unpinned floor and an unpinned call
figure were measured in different placements, and their ratio moved between 2x and 6x from run to
run.  So each nested-call figure is measured in both placements, pinned, and divided by the floor
measured in the same one:

* ``two CPUs``: the service on one CPU, its child processes (workers, the echo child) on another:
  what a nested call costs when each side has a CPU of its own (the floor of the issue that set the
  targets, 52-70 us idle, was this one);
* ``one CPU``: everything on one CPU: what it costs when the two sides take turns on one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Placement:
    """The service process on ``parent``, its children on ``child`` (CPU numbers)."""

    name: str
    parent: int
    child: int

    def pin_children(self, pids: Iterable[int]) -> None:
        for pid in pids:
            os.sched_setaffinity(pid, {self.child})


def placements() -> list[Placement]:
    """Both placements where this system can pin processes to CPUs (the first two it lets us use)."""
    if not hasattr(os, "sched_setaffinity"):
        return []
    cpus = sorted(os.sched_getaffinity(0))
    found = [Placement("one CPU", cpus[0], cpus[0])]
    if len(cpus) >= 2:
        found.insert(0, Placement("two CPUs", cpus[0], cpus[1]))
    return found


@contextmanager
def placed(placement: Placement, children: Iterable[int]) -> Iterator[Placement]:
    """Pin this process and ``children`` as ``placement`` says; afterwards they may run anywhere again."""
    allowed = os.sched_getaffinity(0)
    pids = list(children)
    os.sched_setaffinity(0, {placement.parent})
    placement.pin_children(pids)
    try:
        yield placement
    finally:
        os.sched_setaffinity(0, allowed)
        for pid in pids:
            try:
                os.sched_setaffinity(pid, allowed)
            except ProcessLookupError:
                pass  # a worker that ended meanwhile
