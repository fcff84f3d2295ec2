"""Python cells beside JavaScript cells: the same figures, measured in the same run, alternating.

``python -m bench python [--cells N] [--calls N]``.  An in-process service (real worker processes)
runs, block after block (ten cells of one language, then ten of the other), a trivial cell in each language (``return 1`` / ``1``) and a cell of N
sequential tool calls (``await nop({i})`` / ``await nop(i=i)``); each figure is the median host wall
time of its cells, so startup, the worker round trip and the envelope are all counted.  A third figure
is the cost of a parked cell: the heap a parked JavaScript cell keeps in its worker against the bytes of
a parked Python cell's snapshot (``telemetry.heap_bytes`` of each).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

from service.assembly import Components, build_components
from service.auth import LOCAL_KEY, LOCAL_TENANT
from service.runtime.envelopes import plain
from service.runtime.spec import CellSpec
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


async def _cell(svc: Components, code: str, language: str, **fields: Any) -> tuple[dict[str, Any], float]:
    limits = svc.cells.limits(timeout_ms=60000, memory_limit_bytes=None, max_output_bytes=None)
    spec = CellSpec(code=code, tenant=LOCAL_TENANT, limits=limits, headless=True, language=language, **fields)
    t0 = time.perf_counter()
    env = plain(await svc.cells.exec(spec))
    return env, (time.perf_counter() - t0) * 1000


async def _figures(tmp: str, cells: int, calls: int) -> dict[str, Any]:
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
        } | {"cells": cells, "calls": calls}
    finally:
        await svc.close()


def run_python_cells(cells: int = 200, calls: int = 200) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        return loops.run(_figures(tmp, cells, calls))


def render(r: dict[str, Any]) -> str:
    rows = [("figure", "javascript", "python")]
    rows.append(("trivial cell, host wall ms (median)", *(f"{r[lang]['trivial_cell_ms']:.2f}" for lang in TRIVIAL)))
    rows.append(("sequential tool call, µs per call", *(f"{r[lang]['tool_call_us']:.0f}" for lang in TRIVIAL)))
    rows.append(("parked cell with 1000 ints, bytes", *(str(r[lang]["parked_bytes"]) for lang in TRIVIAL)))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines) + f"\n({r['cells']} trivial cells and {r['calls']}-call cells per language, alternating)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench python", description=__doc__)
    p.add_argument("--cells", type=int, default=200, help="trivial cells per language")
    p.add_argument("--calls", type=int, default=200, help="sequential tool calls per call cell")
    args = p.parse_args(argv)
    print(render(run_python_cells(args.cells, args.calls)))
    return 0
