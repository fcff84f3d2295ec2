"""The worker's main thread visits its Monty child's CPU only while it uses the child, then goes back home.

Real parts: the kernel's own CPU masks (``sched_setaffinity`` on a thread of this process started for the
test, so the suite's thread keeps its CPUs).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import pytest

from guest_runtime.monty.placement import Placement

CPUS = sorted(os.sched_getaffinity(0))
TWO_CPUS = pytest.mark.skipif(len(CPUS) < 2, reason="placing a thread on one of its CPUs needs two of them")


def _in_thread(body: Callable[[], object]) -> object:
    """``body``'s result, run on a thread of its own (its CPU mask dies with it)."""
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(body()))
    thread.start()
    thread.join()
    return result[0]


@TWO_CPUS
def test_the_thread_runs_on_the_childs_cpu_only_inside_placed_nested_or_not():
    def body() -> list[set[int]]:
        placement = Placement(CPUS[-1])
        placement.check()
        seen = [os.sched_getaffinity(0)]
        with placement.placed():
            seen.append(os.sched_getaffinity(0))
            with placement.placed():  # a nested use stays there
                seen.append(os.sched_getaffinity(0))
            seen.append(os.sched_getaffinity(0))
        seen.append(os.sched_getaffinity(0))
        return seen

    home, child = set(CPUS), {CPUS[-1]}
    assert _in_thread(body) == [home, child, child, child, home]


def test_a_cpu_this_thread_may_not_run_on_is_not_used():
    def body() -> tuple[int | None, set[int]]:
        placement = Placement(max(CPUS) + 1)
        placement.check()
        with placement.placed():
            inside = os.sched_getaffinity(0)
        return placement.cpu, inside

    assert _in_thread(body) == (None, set(CPUS))


def test_a_pin_the_kernel_refuses_drops_placement_for_good():
    """A CPU past the kernel's mask size is refused (EINVAL): the block runs unplaced, and so does every later one."""

    def body() -> tuple[int | None, set[int], set[int]]:
        placement = Placement(1 << 20)  # not checked: the kernel is the one to refuse it
        with placement.placed():
            first = os.sched_getaffinity(0)
        with placement.placed():
            second = os.sched_getaffinity(0)
        return placement.cpu, first, second

    assert _in_thread(body) == (None, set(CPUS), set(CPUS))


def test_without_a_cpu_nothing_moves():
    def body() -> set[int]:
        placement = Placement()
        placement.check()
        with placement.placed():
            return os.sched_getaffinity(0)

    assert _in_thread(body) == set(CPUS)
