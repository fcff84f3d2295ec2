"""``python -m bench clocks``: what a tool call's wall clock adds to a no-op native tool call.

A real ``CallSession`` over a real catalog calls a no-op tool in rounds that alternate the entry as
built (on its clock: a ``CallClock`` on its event loop's shared timer, as a cell's call runs) with the
same entry off any clock (the call before clocks existed), so machine noise hits both alike; the
median per-call time of each side is reported.  Then the whole path for context: a cell making
sequential no-op calls through the in-process service (worker process, frame pipe, dispatcher),
clock on, in microseconds per call.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import replace
from typing import Any

from service.tools import ToolContext, ToolSpec
from service.tools.catalog import CatalogView, ToolCatalog
from service.tools.session import CallSession

from . import loops

ROUNDS = 7
CALLS = 5_000
CELL_CALLS = 500


async def _nop(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
    return {"ok": True}


def _views() -> tuple[CatalogView, CatalogView]:
    spec = ToolSpec(name="nop", description="Returns {ok: true}.", execute=_nop, input_schema={"type": "object"})
    catalog = ToolCatalog.build([spec])
    clocked = catalog.view()
    unclocked = CatalogView(catalog, [replace(entry, timeout_s=None) for entry in clocked.entries()])
    return clocked, unclocked


async def _per_call_us(view: CatalogView) -> float:
    session = CallSession(view, max_calls=CALLS)
    ctx = ToolContext(tenant="bench", session_id=None, run_id=None, cell_id="cell_bench", call_id="c")
    abandoned: list[Any] = []
    started = time.perf_counter()
    for i in range(CALLS):
        # Other arguments each time: the loop guard refuses the 4th identical call.
        await session.call_detailed("nop", {"i": i}, ctx, overdue=abandoned.append)
    return (time.perf_counter() - started) * 1e6 / CALLS


async def _session_figures() -> dict[str, float]:
    clocked, unclocked = _views()
    on: list[float] = []
    off: list[float] = []
    for _ in range(ROUNDS):
        off.append(await _per_call_us(unclocked))
        on.append(await _per_call_us(clocked))
    return {"off_us": statistics.median(off), "on_us": statistics.median(on)}


async def _cell_figure() -> float:
    from service.assembly import build_components
    from service.settings import Settings

    from .inproc import CellRunner

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(workers=1, data_dir=tmp, max_calls_per_cell=CELL_CALLS + 10).check()
        spec = ToolSpec(name="nop", description="Returns {ok: true}.", execute=_nop, input_schema={"type": "object"})
        svc = build_components(settings, extra_tools=[spec])
        await svc.start()
        try:
            runner = CellRunner(svc)
            code = f"const t0 = Date.now(); for (let i = 0; i < {CELL_CALLS}; i++) await nop({{i}}); return Date.now() - t0;"
            await runner.run(code)  # warm-up
            times = [(await runner.run(code))[0] for _ in range(3)]
        finally:
            await svc.close()
    return float(statistics.median(times)) * 1000 / CELL_CALLS


def main() -> int:
    session = loops.run(_session_figures())
    extra = session["on_us"] - session["off_us"]
    print(f"no-op native call in CallSession, median of {ROUNDS} alternating rounds of {CALLS} calls:")
    print(f"  off any clock  {session['off_us']:8.2f} µs/call")
    print(f"  on its clock   {session['on_us']:8.2f} µs/call   ({extra:+.2f} µs, {extra / session['off_us']:+.1%})")
    print(f"whole path (cell -> worker -> host -> tool), clock on: {loops.run(_cell_figure()):.1f} µs/call")
    return 0
