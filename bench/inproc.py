"""In-process figures: host round trips, a 10 MiB tool reply, sequential pages under the inbox.

The service runs inside this process (``build_components`` with the bench tools), so the guest's
requests travel the real path: worker process -> frame pipe -> cell -> dispatcher -> tool and back.
Guest-side times come from ``Date.now()`` inside the cell, so cell startup is not counted.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from typing import Any

from service.assembly import Components, build_components
from service.auth import LOCAL_TENANT
from service.runtime.envelopes import plain
from service.runtime.spec import CellSpec
from service.settings import Settings

from . import loops
from .pipe_floor import measure_pipe_floor
from .placement import placed, placements
from .servers import cpu_ns, proc_stat
from .tools import BIG_JS_BUILDER, PAGE_BYTES, BenchTools

MiB = 1024 * 1024
INBOX_BYTES = 16 * MiB


class CellRunner:
    """Runs cells on one in-process service."""

    def __init__(self, svc: Components) -> None:
        self.svc = svc

    async def run(self, code: str, *, memory_limit_bytes: int | None = None) -> tuple[Any, float]:
        """The completed cell's value and its host wall time in ms (raises if it did not complete)."""
        limits = self.svc.cells.limits(timeout_ms=60000, memory_limit_bytes=memory_limit_bytes, max_output_bytes=None)
        t0 = time.perf_counter()
        env = await self.svc.cells.exec(CellSpec(code=code, tenant=LOCAL_TENANT, limits=limits, headless=True))
        wall = (time.perf_counter() - t0) * 1000
        if env["status"] != "completed":
            raise RuntimeError(f"bench cell did not complete: {env.get('code')}: {env.get('error')}")
        return plain(env)["value"], wall


def _round_trip_code(n: int) -> str:
    return f"""
const N = {n};
const out = {{}};
let t = Date.now();
for (let i = 0; i < N; i++) await new Promise(r => setTimeout(r, 0));
out.timer_seq = Date.now() - t;
t = Date.now();
await Promise.all(Array.from({{length: N}}, () => new Promise(r => setTimeout(r, 0))));
out.timer_batch = Date.now() - t;
t = Date.now();
for (let i = 0; i < N; i++) await nop({{i}});
out.tool_seq = Date.now() - t;
t = Date.now();
await Promise.all(Array.from({{length: N}}, (_, i) => nop({{i: N + i}})));
out.tool_batch = Date.now() - t;
return out;
"""


BIG_TOOL_CODE = """
const t = Date.now();
const v = await big();
const ms = Date.now() - t;
return {ms, length: JSON.stringify(v).length};
"""


def _guest_parse_code(rows: int) -> str:
    return (
        BIG_JS_BUILDER
        + f"""
const text = JSON.stringify(makeBig({rows}));
const t = Date.now();
const v = JSON.parse(text);
const ms = Date.now() - t;
return {{ms, length: text.length, rows: v.length}};
"""
    )


def _sequential_calls_code(n: int) -> str:
    return f"for (let i = 0; i < {n}; i++) await nop({{i}});\nreturn 1"


async def _cpu_per_call_us(runner: CellRunner, n: int, repeats: int) -> tuple[float, float]:
    """The service's and the workers' CPU per sequential no-op call: a cell of ``n`` calls minus a ``return 1``.

    The worker runs in its own process, so this process's CPU time is the service's share alone; the
    workers' is read from the kernel's account of each."""
    pids = [w.pid for w in runner.svc.pool.workers()]
    service, workers = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), sum(map(cpu_ns, pids))
        await runner.run("return 1")
        c1, w1 = time.process_time(), sum(map(cpu_ns, pids))
        await runner.run(_sequential_calls_code(n))
        c2, w2 = time.process_time(), sum(map(cpu_ns, pids))
        service.append(((c2 - c1) - (c1 - c0)) * 1e6 / n)
        workers.append(((w2 - w1) - (w1 - w0)) / 1000 / n)
    return statistics.median(service), statistics.median(workers)


async def _workers_asleep(pids: list[int], timeout_s: float = 1.0) -> None:
    """Wait until every worker is blocked reading its pipe (state S in /proc), at most ``timeout_s``.

    After a cell a worker frees its engine and builds the next one (about 0.2 ms of CPU). At niceness 15
    on the floor's CPU that work, deferred by the two busy processes of the floor, ran into the floor's
    own timed trips: the one-CPU floor read 12-13 us against 11 at niceness 10, which flattered the
    one-CPU ratios."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(fields[0] == "S" for fields in map(proc_stat, pids) if fields):  # a process gone is asleep
            return
        await asyncio.sleep(0.001)


async def nested_call_figures(runner: CellRunner, n: int, repeats: int) -> dict[str, dict[str, Any]]:
    """The pipe floor and the nested-call figures in each placement (``bench/placement.py``), by placement name.

    In each, ``repeats`` rounds alternate a floor and a cell of round trips in this loop, so load and the
    CPUs' idle states skew both alike; each figure is the median of its rounds.
    """
    figures: dict[str, dict[str, Any]] = {}
    for placement in placements():
        pids = [w.pid for w in runner.svc.pool.workers()]
        with placed(placement, pids):
            floors, trips = [], []
            for _ in range(repeats):
                await _workers_asleep(pids)
                floors.append(await measure_pipe_floor(rounds=1, place=lambda pid, p=placement: p.pin_children([pid])))
                rt, _ = await runner.run(_round_trip_code(n))
                trips.append(rt)
            service_cpu, worker_cpu = await _cpu_per_call_us(runner, n, repeats)
            figures[placement.name] = {
                "pipe_floor": {key: statistics.median(f[key] for f in floors) for key in floors[0]},
                # ms for n calls -> µs per call
                "round_trip_us": {key: statistics.median(t[key] for t in trips) * 1000 / n for key in trips[0]},
                "service_cpu_per_call_us": service_cpu,
                "worker_cpu_per_call_us": worker_cpu,
            }
    return figures


SMALL_TOOL_CODE = """
const t = Date.now();
const v = await nop({x: 1});
return {ms: Date.now() - t};
"""


def _pages_code(pages: int) -> str:
    return f"""
const t = Date.now();
let total = 0;
for (let i = 0; i < {pages}; i++) {{ const p = await page({{page: i}}); total += p.data.length; }}
return {{ms: Date.now() - t, total}};
"""


async def _figures(tmp: str, *, n_round_trips: int, repeats: int, pages: int) -> dict[str, Any]:
    tools = BenchTools()
    settings = (
        Settings()
        .replace(
            data_dir=tmp,
            workers=2,
            log_level="warning",
            max_snapshot_bytes=INBOX_BYTES,
            # Room for N calls in flight at once and 2N calls per cell; the defaults are 128 and 200.
            max_pending_requests=max(128, n_round_trips),
            max_calls_per_cell=max(200, 2 * n_round_trips + 10),
        )
        .check()
    )
    svc = build_components(settings, extra_tools=tools.specs())
    await svc.start()
    try:
        runner = CellRunner(svc)
        await runner.run("return 1")  # warm both workers' first cell
        await runner.run("return 1")

        nested = await nested_call_figures(runner, n_round_trips, repeats)

        big_mem = 512 * MiB
        tool_ms, parse_ms, small_ms = [], [], []
        tool_wall, parse_wall, small_wall = [], [], []
        for _ in range(repeats):
            v, w = await runner.run(BIG_TOOL_CODE, memory_limit_bytes=big_mem)
            assert v["length"] == tools.big_bytes, (v["length"], tools.big_bytes)
            tool_ms.append(v["ms"])
            tool_wall.append(w)
            v, w = await runner.run(_guest_parse_code(tools.big_count), memory_limit_bytes=big_mem)
            assert v["length"] == tools.big_bytes, (v["length"], tools.big_bytes)
            parse_ms.append(v["ms"])
            parse_wall.append(w)
            v, w = await runner.run(SMALL_TOOL_CODE, memory_limit_bytes=big_mem)
            small_ms.append(v["ms"])
            small_wall.append(w)
        big = {
            "reply_bytes": tools.big_bytes,
            "rows": tools.big_count,
            "tool_reply_ms": statistics.median(tool_ms),
            "guest_parse_ms": statistics.median(parse_ms),
            "small_reply_ms": statistics.median(small_ms),
            "tool_cell_wall_ms": statistics.median(tool_wall),
            "small_cell_wall_ms": statistics.median(small_wall),
            "repeats": repeats,
        }
        big["ratio"] = big["tool_reply_ms"] / max(big["guest_parse_ms"], 1)

        v, wall = await runner.run(_pages_code(pages))
        assert v["total"] == pages * PAGE_BYTES, v
        paging = {
            "pages": pages,
            "page_bytes": PAGE_BYTES,
            "inbox_bytes": INBOX_BYTES,
            "guest_ms": v["ms"],
            "cell_wall_ms": wall,
            "per_page_ms": v["ms"] / pages,
        }
    finally:
        await svc.close()
    return {
        "loop": loops.loop_name(),
        "round_trips": n_round_trips,
        "placements": nested,
        "big_reply": big,
        "paging": paging,
    }


def run_inproc(*, n_round_trips: int = 1000, repeats: int = 3, pages: int = 36) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="codemode-bench-inproc-") as tmp:
        return loops.run(_figures(tmp, n_round_trips=n_round_trips, repeats=repeats, pages=pages))
