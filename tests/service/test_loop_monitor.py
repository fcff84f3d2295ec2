"""The event loop's monitor tells the loop's own work from a busy machine: lag is wall time, busy is CPU."""

from __future__ import annotations

import asyncio
import time

from service.metrics import LoopLagMonitor, Metrics


def _observed(metrics: Metrics, name: str) -> list[float]:
    """The bucket counts of one of the monitor's histograms above 0.5 s (how often it went over)."""
    for family in metrics.registry.collect():
        if family.name == name:
            buckets = {s.labels["le"]: s.value for s in family.samples if s.name.endswith("_bucket")}
            return [buckets["+Inf"] - buckets["0.5"]]
    raise AssertionError(name)


def _hold_the_loop(work: str) -> Metrics:
    """Run the monitor on a loop that one callback holds for 0.6 s, spinning (CPU) or sleeping (waiting)."""
    metrics = Metrics()

    async def scenario() -> None:
        monitor = LoopLagMonitor(metrics, interval=0.05)
        monitor.start()
        await asyncio.sleep(0.12)  # a wake or two before
        end = time.thread_time() + 0.6
        if work == "spin":
            while time.thread_time() < end:
                pass
        else:
            time.sleep(0.6)  # the thread holds the loop without running: as if the machine gave it no CPU
        await asyncio.sleep(0.12)  # the monitor wakes after the hold and records it
        await monitor.stop()

    asyncio.run(scenario())
    return metrics


def test_cpu_spent_holding_the_loop_is_busy_and_late():
    metrics = _hold_the_loop("spin")
    assert _observed(metrics, "codemode_event_loop_busy_seconds") == [1]
    assert _observed(metrics, "codemode_event_loop_lag_seconds") == [1]


def test_a_thread_that_is_not_running_makes_the_loop_late_but_not_busy():
    """A stretch the loop's thread did not run (another process had the CPU) is lag, not the loop's work."""
    metrics = _hold_the_loop("sleep")
    assert _observed(metrics, "codemode_event_loop_busy_seconds") == [0]
    assert _observed(metrics, "codemode_event_loop_lag_seconds") == [1]
