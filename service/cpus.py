"""How many CPUs this service may use: its CPU affinity, capped by its cgroup's CPU quota.

``os.cpu_count()`` counts the machine's CPUs.  A container limited to two CPUs on a 64-core host
(``docker run --cpus 2``, a Kubernetes CPU limit) still sees 64 there, and the kernel throttles it to
two CPUs' worth of time every period.  Guests are CPU-bound while they hold a running slot, so the
default number of running slots follows what the service can actually run at once: the CPUs in its
affinity mask, capped by ``ceil(quota / period)`` of the cgroup it runs in (v2 ``cpu.max``, or v1
``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``) when one is set.  Read once per process.

And what a wake-up costs here (``idle_halt``): in a VM guest whose idle CPUs halt at once, every frame that
wakes a worker or the service on another CPU costs a hypervisor exit, which the processes pay as CPU time.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

#: Where a container's own cgroup is mounted (cgroup namespaces put the container's group there).
CGROUP_ROOT = Path("/sys/fs/cgroup")
SYSFS = Path("/sys")
#: The guest's halt-polling window, where its cpuidle driver is ``haltpoll`` (a KVM or Firecracker guest).
HALT_POLL = "module/haltpoll/parameters/guest_halt_poll_ns"
IDLE_HALT_NOTE = (
    "this VM's idle CPUs halt at once (cpuidle driver haltpoll, {path} = 0): every frame that wakes a worker "
    "or the service on another CPU costs a hypervisor exit, paid as CPU time (a host call: about twice the CPU "
    "and three times the wait of the same machine with 200000 there); see docs/operations/deploy.md"
)


@functools.cache
def usable_cpus() -> int:
    """CPUs this process may run on at once (at least 1)."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = cgroup_cpu_quota(CGROUP_ROOT)
    return max(1, min(affinity, quota) if quota is not None else affinity)


def cgroup_cpu_quota(root: Path) -> int | None:
    """``ceil(quota / period)`` of the cgroup mounted at ``root``, or None when it sets no quota."""
    try:
        v2 = (root / "cpu.max").read_text().split()
    except OSError:
        v2 = None
    if v2 is not None:
        return _ceil_ratio(v2[0], v2[1]) if len(v2) == 2 and v2[0] != "max" else None
    try:
        quota = (root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
        period = (root / "cpu" / "cpu.cfs_period_us").read_text().strip()
    except OSError:
        return None
    return _ceil_ratio(quota, period)


def _ceil_ratio(quota: str, period: str) -> int | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return math.ceil(q / p) if q > 0 and p > 0 else None  # v1 writes -1 for "no quota"


def idle_state(root: Path = SYSFS) -> tuple[str, int | None] | None:
    """The cpuidle driver and, where it has one, its halt-polling window in ns; None: not exposed."""
    try:
        driver = (root / "devices/system/cpu/cpuidle/current_driver").read_text().strip()
    except OSError:
        return None
    try:
        return driver, int((root / HALT_POLL).read_text())
    except (OSError, ValueError):
        return driver, None


def idle_halt(root: Path = SYSFS) -> str | None:
    """Why wake-ups are dear on this machine (``IDLE_HALT_NOTE``), or None: a guest whose cpuidle driver is
    ``haltpoll`` with halt-polling off.  Anything else (bare metal, polling on, no such files) is None."""
    halts = idle_state(root) == ("haltpoll", 0)
    return IDLE_HALT_NOTE.format(path=f"/sys/{HALT_POLL}") if halts else None
