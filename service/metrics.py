"""Prometheus exposition (the only importer of prometheus_client).

Gauges are read from the live objects at scrape time, so the hot path pays nothing.  No metric
carries a tenant label: the exposition is the same whoever may read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric


class Counted(Protocol):
    """A live part whose counters are read at scrape time (the cells, the worker pool)."""

    def stats(self) -> dict[str, int]: ...


class _Collector:
    def __init__(self, cells: Counted, pool: Counted) -> None:
        self.cells = cells
        self.pool = pool

    def collect(self) -> Iterator[Metric]:
        cells = self.cells.stats()
        pool = self.pool.stats()
        outcomes = CounterMetricFamily("codemode_cells", "Cells by final status", labels=["status"])
        for status in ("completed", "failed"):
            outcomes.add_metric([status], cells[status])
        yield outcomes
        parks = CounterMetricFamily("codemode_cell_parks", "Times a cell parked (waiting)")
        parks.add_metric([], cells["waiting"])
        yield parks
        live = GaugeMetricFamily("codemode_cells_live", "Cells running or parked", labels=["state"])
        live.add_metric(["parked"], cells["parked"])
        live.add_metric(["running"], cells["live"] - cells["parked"])
        yield live
        held = GaugeMetricFamily(
            "codemode_cell_held_bytes",
            "Program data held for live cells: pending request arguments, unconsumed replies, "
            "uncollected background output and results",
        )
        held.add_metric([], cells["held_bytes"])
        yield held
        workers = GaugeMetricFamily("codemode_workers", "Worker processes", labels=["state"])
        for state in ("fresh", "idle", "holding", "busy", "spawning"):
            workers.add_metric([state], pool[state])
        yield workers
        spawned = CounterMetricFamily("codemode_workers_spawned", "Worker processes started")
        spawned.add_metric([], pool["spawned"])
        yield spawned
        recycled = CounterMetricFamily("codemode_workers_recycled", "Worker processes retired")
        recycled.add_metric([], pool["recycled"])
        yield recycled
        by_cells = CounterMetricFamily(
            "codemode_workers_retired_by_cells",
            "Worker processes retired because of a cell (a limit hit, a crash, a kill), not by the pool's own upkeep",
        )
        by_cells.add_metric([], pool["retired_by_cells"])
        yield by_cells
        slots = GaugeMetricFamily(
            "codemode_running_slots", "Running slots held: legs running guest code (at most workers + burst_slots)"
        )
        slots.add_metric([], pool["slots"])
        yield slots
        yield from _autoscaling_gauges(pool)
        lowered = GaugeMetricFamily(
            "codemode_workers_lowered", "Worker processes at the lowest CPU priority (their tenant is over its share)"
        )
        lowered.add_metric([], pool["lowered"])
        yield lowered
        yield from _principal_gauges(pool)
        refused = CounterMetricFamily(
            "codemode_worker_replacements_refused",
            "New cells refused because their tenant's cells retired too many worker processes",
        )
        refused.add_metric([], pool["replacements_refused"])
        yield refused


def _autoscaling_gauges(pool: dict[str, int]) -> Iterator[Metric]:
    """The autoscaler's signals (deploy/kubernetes/monitoring/prometheus-adapter.yaml): busy slots over this
    size, and legs waiting for a slot."""
    size = GaugeMetricFamily(
        "codemode_running_slots_size", "Running slots of this replica before burst slots (running_slots)"
    )
    size.add_metric([], pool["slots_size"])
    queue = GaugeMetricFamily(
        "codemode_admission_queue", "Legs waiting for a running slot (every slot this tenant may take is held)"
    )
    queue.add_metric([], pool["slots_waiting"])
    return iter((size, queue))


def _principal_gauges(pool: dict[str, int]) -> Iterator[Metric]:
    """Who the worker processes serve (``worker_isolation``): principals holding one, processes of one cell."""
    principals = GaugeMetricFamily(
        "codemode_worker_principals",
        "Principals (worker_isolation: tenants, key policies or sessions) holding worker processes",
    )
    principals.add_metric([], pool["principals"])
    single_use = GaugeMetricFamily(
        "codemode_workers_single_use",
        "Worker processes serving one cell alone (worker_isolation cell, or session without a session id)",
    )
    single_use.add_metric([], pool["single_use"])
    return iter((principals, single_use))


class Confinement(Protocol):
    """The workers' sandbox as the service knows it (``service.runtime.workers.sandbox.SandboxStatus``)."""

    @property
    def mode(self) -> str: ...

    def layers(self) -> dict[str, bool]: ...


class _SandboxCollector:
    def __init__(self, sandbox: Confinement) -> None:
        self.sandbox = sandbox

    def collect(self) -> Iterator[Metric]:
        layers = GaugeMetricFamily(
            "codemode_sandbox_layer",
            "Kernel confinement layers of worker processes: 1 in force, 0 missing",
            labels=["layer", "mode"],
        )
        for layer, on in self.sandbox.layers().items():
            layers.add_metric([layer, self.sandbox.mode], 1 if on else 0)
        yield layers


LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
LAG_INTERVAL_S = 0.1


class Metrics:
    """A private registry bound to one service instance."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._bound = False
        self._sandbox_bound = False
        self.loop_lag = Histogram(
            "codemode_event_loop_lag_seconds",
            "How late the event loop ran a timer (how long something held the loop)",
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        self.loop_busy = Histogram(
            "codemode_event_loop_busy_seconds",
            "CPU time the event loop's thread spent between two wakes of a 100 ms timer: the loop's own work, "
            "which a busy machine does not inflate (the lag beside it is wall time)",
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )

    def watch_sandbox(self, sandbox: Confinement) -> None:
        """Report the workers' confinement layers (read at scrape time); once per service."""
        if not self._sandbox_bound:
            self.registry.register(_SandboxCollector(sandbox))
            self._sandbox_bound = True

    def render(self, cells: Counted, pool: Counted) -> tuple[bytes, str]:
        if not self._bound:
            self.registry.register(_Collector(cells, pool))
            self._bound = True
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class LoopLagMonitor:
    """A task that sleeps ``interval`` seconds at a time and records how late it woke up (wall time), and
    how much CPU the loop's thread spent meanwhile (what held the loop, whatever else the machine ran)."""

    def __init__(self, metrics: Metrics, interval: float = LAG_INTERVAL_S) -> None:
        self.metrics = metrics
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="codemode-loop-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()  # uvloop's loop.time() only has millisecond resolution
            cpu_before = time.thread_time()
            await asyncio.sleep(self.interval)
            self.metrics.loop_lag.observe(max(0.0, time.perf_counter() - before - self.interval))
            self.metrics.loop_busy.observe(time.thread_time() - cpu_before)
