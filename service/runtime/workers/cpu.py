"""CPU priority of worker processes: the workers of a tenant over its share of slots run lowest.

Workers start ``worker_nice`` steps below the service (``start_worker``).  While a tenant holds
more running slots than its share (``admission.py``), the processes running its legs are lowered:
niceness 19 and the ``SCHED_IDLE`` policy, so the kernel gives the CPU first to the other tenants'
legs (and to the service's event loop); they go back to the workers' own niceness and ``SCHED_OTHER``
when the tenant is within its share again.  ``SCHED_IDLE`` is what keeps the lowering strong with
workers at a high niceness: the kernel weighs an idle-policy task at 3 whatever its niceness, against
36 for niceness 15 (the default) and 15 for niceness 19, so it gets a twelfth of what a worker at 15
gets beside it (niceness 19 alone: two fifths).  A kernel or filter that refuses the policy leaves the
niceness alone doing the lowering.

Niceness and scheduling policy are attributes of each thread on Linux, so the lowering reaches every thread
of the worker and of its child processes (``worker_threads``): a worker that runs Python cells runs them in
its Monty child, and talks to it from its client's own thread.

Linux lets a process's owner raise a niceness but not lower it back without ``CAP_SYS_NICE``
(``setpriority(2)``, EACCES), and the same holds for leaving ``SCHED_IDLE``.  A service that could
lower a worker but never restore it would leave a tenant's processes slow for good, so the pool tries
both on its first (fresh, unused) worker (``probe``) and, if either is refused, never lowers anything
(and logs why once); a probed worker left lowered is ``stranded`` and the pool replaces it.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

log = logging.getLogger("codemode.workers")

#: The niceness of a worker whose tenant is over its share (the lowest priority there is).
LOWERED = 19
#: Threads lowered per worker at most: a Python worker has a handful (its own, its Monty client's, its child's);
#: one that made more (only an owned one could) has its first ones lowered, its others keep their niceness.
MAX_THREADS = 64
_PRIORITY_0 = os.sched_param(0)  # the only static priority SCHED_IDLE and SCHED_OTHER take


class Worker(Protocol):
    """What lowering reads of a worker process (``worker_process.Worker``)."""

    @property
    def pid(self) -> int: ...

    tenant: str | None
    busy: bool


def worker_niceness(nice: int) -> int:
    """The niceness workers start at: ``nice`` steps below this process, at most 19."""
    return min(LOWERED, os.getpriority(os.PRIO_PROCESS, 0) + nice)


class Priorities:
    """Sets worker processes to their normal or their lowered niceness, if the pool may."""

    def __init__(self, nice: int) -> None:
        self.normal = worker_niceness(nice)
        self.enabled = False  # until ``probe`` showed both directions work
        self.probed = False
        self.stranded = False  # the probe lowered its process and could not restore it
        self.idle_policy = False  # lowering also sets SCHED_IDLE (the probe left and restored it)

    def probe(self, pid: int) -> bool:
        """Lower and restore ``pid`` once; lowering is used only if both work."""
        if self.probed:
            return self.enabled
        self.probed = True
        if self.normal >= LOWERED:
            log.info("workers already run at niceness %d: tenants over their share are not lowered", self.normal)
            return False
        try:
            os.setpriority(os.PRIO_PROCESS, pid, LOWERED)
            self.stranded = True
            os.setpriority(os.PRIO_PROCESS, pid, self.normal)
            self.stranded = False
            restored = os.getpriority(os.PRIO_PROCESS, pid) == self.normal
            idle_policy = restored and self._idle_policy_works(pid)  # a refused way back raises: nothing enabled
            self.enabled, self.idle_policy = restored, idle_policy
        except ProcessLookupError:
            self.probed = False  # the worker died first: try again on the next one
        except OSError as exc:
            log.warning(
                "workers of a tenant over its share of running slots cannot be given a lower CPU priority "
                "(restoring a niceness needs CAP_SYS_NICE: %s); every worker keeps niceness %d",
                exc,
                self.normal,
            )
        return self.enabled

    def _idle_policy_works(self, pid: int) -> bool:
        """Whether ``pid`` can be put under SCHED_IDLE and taken back out (it ends as it started)."""
        try:
            os.sched_setscheduler(pid, os.SCHED_IDLE, _PRIORITY_0)
        except OSError as exc:
            log.info("workers of a tenant over its share get niceness %d only (SCHED_IDLE refused: %s)", LOWERED, exc)
            return False
        self.stranded = True
        os.sched_setscheduler(pid, os.SCHED_OTHER, _PRIORITY_0)  # refused: stranded, and the caller logs it
        self.stranded = False
        return os.sched_getscheduler(pid) == os.SCHED_OTHER

    def apply(self, pid: int, lowered: bool) -> None:
        """Give every thread of worker ``pid`` and of its children the lowered or the normal priority (a
        thread that has gone is ignored)."""
        if not self.enabled:
            return
        try:
            for tid in worker_threads(pid):
                try:
                    self._set(tid, lowered)
                except ProcessLookupError:
                    continue
        except OSError as exc:  # a restore refused after a good probe: stop lowering from now on
            self.enabled = False
            log.warning(
                "could not set a worker's CPU priority (%s); tenants over their share are no longer lowered", exc
            )

    def _set(self, tid: int, lowered: bool) -> None:
        if lowered:
            os.setpriority(os.PRIO_PROCESS, tid, LOWERED)
            if self.idle_policy:
                os.sched_setscheduler(tid, os.SCHED_IDLE, _PRIORITY_0)
        else:
            if self.idle_policy:
                os.sched_setscheduler(tid, os.SCHED_OTHER, _PRIORITY_0)
            os.setpriority(os.PRIO_PROCESS, tid, self.normal)


def worker_threads(pid: int) -> list[int]:
    """The threads of process ``pid`` and of its child processes, ``pid`` first, at most MAX_THREADS (read
    from ``/proc``: without it, ``pid`` alone).

    The worker may be owned by an attacker and start thousands of threads or children: the walk reads at
    most MAX_THREADS names of each directory and file, so the event loop's work is bounded whatever it made.
    """
    threads: list[int] = []
    processes = [pid]
    while processes and len(threads) < MAX_THREADS:
        process = processes.pop(0)
        for tid in _tasks(process, MAX_THREADS - len(threads)):
            threads.append(tid)
            processes.extend(_children(process, tid, MAX_THREADS - len(threads) - len(processes)))
    return threads


def _tasks(process: int, most: int) -> list[int]:
    """``process``'s main thread, then up to ``most - 1`` of its other threads (a gone process: itself)."""
    tids = [process]
    try:
        with os.scandir(f"/proc/{process}/task") as entries:
            for entry in entries:
                if len(tids) >= most:
                    break
                if entry.name.isdigit() and int(entry.name) != process:
                    tids.append(int(entry.name))
    except OSError:
        pass  # gone (setting its priority then finds nothing), or no /proc
    return tids


#: Bytes of a thread's ``children`` file read: a pid and its separator take at most 8.
_CHILDREN_BYTES = 8 * MAX_THREADS


def _children(process: int, tid: int, most: int) -> list[int]:
    """Up to ``most`` child processes thread ``tid`` of ``process`` started."""
    if most <= 0:
        return []
    try:
        with open(f"/proc/{process}/task/{tid}/children", "rb") as file:
            data = file.read(_CHILDREN_BYTES)
    except OSError:
        return []  # gone, or a kernel without the file: its children keep their priority
    words = data.split()
    if len(data) == _CHILDREN_BYTES and not data.endswith(b" "):
        words = words[:-1]  # cut inside a pid: not a pid
    return [int(word) for word in words[:most] if word.isdigit()]


class Lowering:
    """Which worker processes run lowered: those busy for a tenant over its share of slots."""

    def __init__(self, priorities: Priorities, over_share: Callable[[str], bool]) -> None:
        self.priorities = priorities
        self._over_share = over_share
        self.lowered: set[Worker] = set()  # processes at the lowered niceness

    def apply(self, worker: Worker) -> None:
        """Give ``worker`` the niceness its tenant's share calls for (a system call only on a change)."""
        lowered = self._over_share(worker.tenant or "")
        if lowered != (worker in self.lowered) and self.priorities.enabled:
            self.priorities.apply(worker.pid, lowered)
            if lowered:
                self.lowered.add(worker)
            else:
                self.lowered.discard(worker)

    def reconsider(self, workers: Iterable[Worker]) -> None:
        """A tenant went over its share or back within it: its busy (or lowered) processes follow."""
        for worker in workers:
            if worker.busy or worker in self.lowered:
                self.apply(worker)

    def forget(self, worker: Worker) -> None:
        self.lowered.discard(worker)
