"""What this machine charges for the primitives a nested call is made of, to compare two machines' figures.

The service's CPU per nested call is mostly system calls and process wake-ups (a pipe write, an epoll
wait, a pipe read on each side), so it moves with what the machine charges for those, which differs
between machines "of the same kind" far more than the interpreter's speed does: a microVM that traps
system calls and context switches (nested virtualisation) pays several times a bare-metal kernel's
price for each, while the pure-Python work costs the same.  Three figures, each the median of a few
repeats, CPU time (``time.process_time``, this process; the echo child's read from /proc):

* ``python_loop_ns``: one iteration of a fixed pure-Python loop — the interpreter's speed;
* ``syscall_ns``: one ``getppid()`` — the price of entering and leaving the kernel;
* ``pipe_round_trip_cpu_us``: one byte each way between this process and a child, both on one CPU —
  the CPU both sides spend on two pipe writes, two reads and two context switches;
* ``pipe_round_trip_cpu_us_two_cpus``: the same with the two on different CPUs, where each write wakes
  a CPU that went idle: on a VM that wake-up (an inter-processor interrupt, the idle CPU's halt) is
  trapped by the hypervisor and part of its price is charged to the processes as their CPU time.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from service.cpus import idle_state

from .servers import cpu_ns

_ECHO = "import os\nwhile os.read(0, 1):\n    os.write(1, b'.')\n"


def python_loop_ns(n: int = 200_000) -> float:
    c0 = time.process_time()
    total = 0
    for i in range(n):
        total += i & 7
    return (time.process_time() - c0) * 1e9 / n


def syscall_ns(n: int = 200_000) -> float:
    getppid = os.getppid
    c0 = time.process_time()
    for _ in range(n):
        getppid()
    return (time.process_time() - c0) * 1e9 / n - python_loop_ns(n)


def pipe_round_trip_cpu_us(n: int = 5_000, two_cpus: bool = False) -> float:
    """CPU of both processes per one-byte round trip, pinned to one CPU (no cross-CPU wake-up) or two."""
    allowed = os.sched_getaffinity(0)
    cpu = min(allowed)
    other = max(allowed) if two_cpus else cpu
    child = subprocess.Popen([sys.executable, "-I", "-c", _ECHO], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    w, r = child.stdin.fileno(), child.stdout.fileno()
    try:
        os.sched_setaffinity(0, {cpu})
        os.sched_setaffinity(child.pid, {other})
        os.write(w, b".")
        os.read(r, 1)  # the child is up
        c0, k0 = time.process_time(), cpu_ns(child.pid)
        for _ in range(n):
            os.write(w, b".")
            os.read(r, 1)
        spent = (time.process_time() - c0) + (cpu_ns(child.pid) - k0) / 1e9
    finally:
        os.sched_setaffinity(0, allowed)
        child.stdin.close()
        child.wait()
    return spent * 1e6 / n


def machine_costs(repeats: int = 5) -> dict[str, float | str]:
    return {
        "cpuidle": cpuidle(),
        "python_loop_ns": statistics.median(python_loop_ns() for _ in range(repeats)),
        "syscall_ns": statistics.median(syscall_ns() for _ in range(repeats)),
        "pipe_round_trip_cpu_us": statistics.median(pipe_round_trip_cpu_us() for _ in range(repeats)),
        "pipe_round_trip_cpu_us_two_cpus": statistics.median(
            pipe_round_trip_cpu_us(two_cpus=True) for _ in range(repeats)
        ),
    }


def cpuidle() -> str:
    """The guest's idle driver and, for ``haltpoll``, its halt-polling window: what a cross-CPU wake-up costs
    depends on it (docs/operations/benchmarks.md, what a figure needs)."""
    state = idle_state()
    if state is None:
        return "not exposed"
    driver, poll_ns = state
    return driver if poll_ns is None else f"{driver}, halt-poll {poll_ns:,} ns"


if __name__ == "__main__":
    print(machine_costs())
