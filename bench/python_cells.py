"""Python cells beside JavaScript cells: the same figures, measured in the same run, alternating.

``python -m bench python [--cells N] [--calls N]``.  An in-process service (real worker processes)
runs, block after block (ten cells of one language, then ten of the other), a trivial cell in each language (``return 1`` / ``1``) and a cell of N
sequential tool calls (``await nop({i})`` / ``await nop(i=i)``); each figure is the median host wall
time of its cells, so startup, the worker round trip and the envelope are all counted.  A third figure
is the cost of a parked cell: the heap a parked JavaScript cell keeps in its worker against the bytes of
a parked Python cell's snapshot (``telemetry.heap_bytes`` of each).

What Python cells cost a worker that never runs one: ``--starts`` workers are started with the service's own
options (confined, as the pool starts them), alternating ``python`` on (Monty loaded, as with the default
``python_cells = true``) and off (``python_cells = false``); each is timed from spawn to its ``ready`` frame,
and its resident and proportional set sizes are read once it is ready.

Beside them, in the same run, the stock Monty 1.4 pool used directly (``pydantic_monty.AsyncMonty`` with
its own ``monty`` binary, as FastMCP's default sandbox uses it): a fresh session running ``1``, a session
answering one host call, sessions per second at ``CONCURRENT`` at once (the pool's default size, one
worker per CPU), and a parked session's dumped bytes; codemode's Python cells at ``CONCURRENT`` at once
through the service; and each codemode figure over the stock one as a ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from service.assembly import Components, build_components
from service.auth import LOCAL_KEY, LOCAL_TENANT
from service.runtime.envelopes import plain
from service.runtime.spec import CellSpec
from service.runtime.workers.process import start_worker
from service.settings import Settings

from . import loops
from .tools import BenchTools

TRIVIAL = {"javascript": "return 1", "python": "1"}
CALLS = {
    "javascript": "for (let i = 0; i < {n}; i++) await nop({{i}}); return {n}",
    "python": "for i in range({n}):\n    await nop(i=i)\n{n}",
}
PARKED = {
    "javascript": "const keep = Array.from({length: 1000}, (_, i) => i); await waiter({}); return keep.length",
    "python": "keep = list(range(1000))\nawait waiter()\nlen(keep)",
}
#: Cells of one language in a row: a worker builds its next QuickJS engine after a JavaScript cell, which a
#: Python cell right behind it would wait for (and be charged) if the languages alternated cell by cell.
BLOCK = 10
WAITER = {"name": "waiter", "input_schema": {"type": "object"}}
#: Cells (sessions) run at once for the throughput figures.
CONCURRENT = 16
ONE_CALL = {"codemode": "await nop(i=1)\n1", "stock": "await nop(1)\n1"}


async def _stock_pool(cells: int) -> dict[str, float]:
    """The stock pydantic-monty 1.4 pool, used directly: the same cells as codemode's Python figures."""
    import pydantic_monty as monty  # the bench's own use of the library, beside the service's

    async def nop(i: object) -> object:
        return {"ok": i}

    async with monty.AsyncMonty() as pool:

        async def one(code: str) -> float:
            calls: dict[int, tuple[object, ...]] = {}
            t0 = time.perf_counter()
            async with pool.checkout(script_name="cell.py") as session:
                snapshot = await session.feed_start(code)
                while not isinstance(snapshot, monty.MontyComplete):
                    if isinstance(snapshot, monty.AsyncFunctionSnapshot):  # a host call: a future, as codemode's
                        calls[snapshot.call_id] = snapshot.args
                        snapshot = await snapshot.resume({"future": ...})
                    elif isinstance(snapshot, monty.AsyncFutureSnapshot):
                        ids = snapshot.pending_call_ids
                        snapshot = await snapshot.resume({i: {"return_value": await nop(*calls.pop(i))} for i in ids})
                    else:
                        raise AssertionError(snapshot)
            return (time.perf_counter() - t0) * 1000

        for _ in range(5):
            await one("1")
        trivial = [await one("1") for _ in range(cells)]
        call = [await one(ONE_CALL["stock"]) for _ in range(cells)]
        t0 = time.perf_counter()
        await asyncio.gather(*(one("1") for _ in range(cells)))
        per_s = cells / (time.perf_counter() - t0)
        async with pool.checkout(script_name="cell.py") as session:
            snapshot = await session.feed_start(PARKED["python"].replace("await waiter()", "await nop(0)"))
            assert isinstance(snapshot, monty.AsyncFunctionSnapshot)
            snapshot = await snapshot.resume({"future": ...})
            parked = len(snapshot.dump())
    return {
        "trivial_cell_ms": statistics.median(trivial),
        "one_call_cell_ms": statistics.median(call),
        "cells_per_s": per_s,
        "parked_bytes": parked,
    }


async def _concurrent(svc: Components, cells: int) -> float:
    """Python cells per second through the service, CONCURRENT at once."""
    gate = asyncio.Semaphore(CONCURRENT)

    async def one() -> None:
        async with gate:
            env, _ = await _cell(svc, "1", "python")
            assert env["value"] == 1, env

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(cells)))
    return cells / (time.perf_counter() - t0)


async def _cell(svc: Components, code: str, language: str, **fields: Any) -> tuple[dict[str, Any], float]:
    limits = svc.cells.limits(timeout_ms=60000, memory_limit_bytes=None, max_output_bytes=None)
    spec = CellSpec(code=code, tenant=LOCAL_TENANT, limits=limits, headless=True, language=language, **fields)
    t0 = time.perf_counter()
    env = plain(await svc.cells.exec(spec))
    return env, (time.perf_counter() - t0) * 1000


def _memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of a process in KiB; (0, 0) where its /proc entries cannot be read (not as root)."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return 0, 0
    fields = {line.split(":")[0]: int(line.split()[1]) for line in rollup if line.endswith(" kB")}
    return fields.get("Rss", 0), fields.get("Pss", 0)


async def _worker_costs(svc: Components, starts: int) -> dict[str, dict[str, float]]:
    """Median start-to-ready ms, RSS and PSS of fresh workers, with Monty loaded (python) and without."""
    supply = svc.pool.supply
    samples: dict[bool, list[tuple[float, int, int]]] = {True: [], False: []}
    for _ in range(starts):
        for python in (True, False):  # alternating, so load drifts hit both alike
            t0 = time.perf_counter()
            worker = await start_worker({**supply.options, "python": python}, supply.frame_cap, nice=supply.nice)
            elapsed = (time.perf_counter() - t0) * 1000
            samples[python].append((elapsed, *_memory_kib(worker.pid)))
            worker.kill()
            await worker.proc.wait()
    return {
        "with_python" if python else "javascript_only": {
            "start_ms": statistics.median(s[0] for s in rows),
            "rss_kib": statistics.median(s[1] for s in rows),
            "pss_kib": statistics.median(s[2] for s in rows),
        }
        for python, rows in samples.items()
    }


async def _figures(tmp: str, cells: int, calls: int, starts: int) -> dict[str, Any]:
    tools = BenchTools()
    settings = Settings().replace(data_dir=tmp, workers=2, log_level="warning").check()
    svc = build_components(settings, extra_tools=tools.specs())
    await svc.start()
    try:
        walls: dict[str, dict[str, list[float]]] = {lang: {"trivial": [], "calls": []} for lang in TRIVIAL}
        for lang in TRIVIAL:  # warm both workers for both languages
            for _ in range(2):
                await _cell(svc, TRIVIAL[lang], lang)
        for _ in range(max(cells // BLOCK, 1)):
            for lang in TRIVIAL:  # alternating blocks, so load drifts hit both languages alike
                for _ in range(BLOCK):
                    env, wall = await _cell(svc, TRIVIAL[lang], lang)
                    assert env["value"] == 1, env
                    walls[lang]["trivial"].append(wall)
        for _ in range(max(cells // 20, 3)):
            for lang in CALLS:
                env, wall = await _cell(svc, CALLS[lang].format(n=calls), lang)
                assert env["value"] == calls, env
                walls[lang]["calls"].append(wall * 1000 / calls)
        one_call = [(await _cell(svc, ONE_CALL["codemode"], "python"))[1] for _ in range(max(cells // 4, 10))]
        concurrent = await _concurrent(svc, cells)
        stock = await _stock_pool(cells)
        parked = {}
        for lang in PARKED:
            client_tools = tuple(await svc.access.client_tools([WAITER], LOCAL_KEY))
            env, _ = await _cell(svc, PARKED[lang], lang, client_tools=client_tools)
            assert env["status"] == "waiting", env
            parked[lang] = env["telemetry"]["heap_bytes"]
            await svc.cells.cancel(env["cell_id"], LOCAL_TENANT)
        return {
            lang: {
                "trivial_cell_ms": statistics.median(w["trivial"]),
                "tool_call_us": statistics.median(w["calls"]),
                "parked_bytes": parked[lang],
            }
            for lang, w in walls.items()
        } | {
            "cells": cells,
            "calls": calls,
            "starts": starts,
            "workers": await _worker_costs(svc, starts),
            "codemode_python": {
                "trivial_cell_ms": statistics.median(walls["python"]["trivial"]),
                "one_call_cell_ms": statistics.median(one_call),
                "cells_per_s": concurrent,
                "parked_bytes": parked["python"],
            },
            "stock_pool": stock,
        }
    finally:
        await svc.close()


def run_python_cells(cells: int = 200, calls: int = 200, starts: int = 20) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        return loops.run(_figures(tmp, cells, calls, starts))


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def render(r: dict[str, Any]) -> str:
    rows = [("figure", "javascript", "python")]
    rows.append(("trivial cell, host wall ms (median)", *(f"{r[lang]['trivial_cell_ms']:.2f}" for lang in TRIVIAL)))
    rows.append(("sequential tool call, µs per call", *(f"{r[lang]['tool_call_us']:.0f}" for lang in TRIVIAL)))
    rows.append(("parked cell with 1000 ints, bytes", *(str(r[lang]["parked_bytes"]) for lang in TRIVIAL)))
    workers = [("fresh worker (median)", "javascript only", "with python")]
    for figure, key in (("start to ready, ms", "start_ms"), ("RSS, KiB", "rss_kib"), ("PSS, KiB", "pss_kib")):
        workers.append((figure, *(f"{r['workers'][k][key]:.0f}" for k in ("javascript_only", "with_python"))))
    ours, stock = r["codemode_python"], r["stock_pool"]
    versus = [("Python cells", "codemode", "stock AsyncMonty", "codemode / stock")]
    for figure, key, fmt in (
        ("fresh cell `1`, ms (median)", "trivial_cell_ms", "{:.2f}"),
        ("cell with one host call, ms (median)", "one_call_cell_ms", "{:.2f}"),
        (f"cells/s, {CONCURRENT} at once", "cells_per_s", "{:.0f}"),
        ("parked cell with 1000 ints, bytes", "parked_bytes", "{:.0f}"),
    ):
        versus.append((figure, fmt.format(ours[key]), fmt.format(stock[key]), f"{ours[key] / stock[key]:.2f}"))
    return (
        f"{_table(rows)}\n({r['cells']} trivial cells and {r['calls']}-call cells per language, alternating)\n\n"
        f"{_table(workers)}\n({r['starts']} starts each, alternating: python_cells = false / true)\n\n"
        f"{_table(versus)}\n(the same run; codemode through the service, host wall time; the stock pool in this "
        "process, one worker per CPU)"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench python", description=__doc__)
    p.add_argument("--cells", type=int, default=200, help="trivial cells per language")
    p.add_argument("--calls", type=int, default=200, help="sequential tool calls per call cell")
    p.add_argument("--starts", type=int, default=20, help="worker starts with and without Monty, each")
    args = p.parse_args(argv)
    print(render(run_python_cells(args.cells, args.calls, args.starts)))
    return 0
