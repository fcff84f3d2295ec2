"""``python -m bench calls``: only the nested-call figures, quickly, as one JSON line.

In each placement of the two processes (``bench/placement.py``): the pipe floor, ``setTimeout(0)`` and
no-op tool round trips (sequential and in ``Promise.all``, µs per call) and the service's CPU per
sequential tool call; then a ``return 1`` cell's service CPU and wall time, unpinned; all from one
in-process service (``bench/inproc.py``'s parts); last what this machine charges for the parts a call is
made of (``bench/machine_costs.py``), so two machines' figures can be told apart from two trees'.  Run it alternately on two trees
to compare a change: the whole table takes minutes, this about ten seconds.
"""

from __future__ import annotations

import tempfile
import time

import orjson

from service.assembly import build_components
from service.settings import Settings

from . import loops
from .inproc import CellRunner, nested_call_figures
from .machine_costs import machine_costs
from .tools import BenchTools

ROUND_TRIPS = 1000
EMPTY_CELLS = 200


async def _figures(tmp: str) -> dict[str, object]:
    settings = Settings().replace(
        data_dir=tmp,
        workers=2,
        log_level="warning",
        max_pending_requests=ROUND_TRIPS,
        max_calls_per_cell=3 * ROUND_TRIPS,
    )
    svc = build_components(settings.check(), extra_tools=BenchTools().specs())
    await svc.start()
    try:
        runner = CellRunner(svc)
        for _ in range(3):  # both workers' first cells
            await runner.run("return 1")
        nested = await nested_call_figures(runner, ROUND_TRIPS, 3)
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(EMPTY_CELLS):
            await runner.run("return 1")
        cell_cpu_us = (time.process_time() - c0) * 1e6 / EMPTY_CELLS
        cell_wall_us = (time.perf_counter() - t0) * 1e6 / EMPTY_CELLS
    finally:
        await svc.close()
    return {
        "loop": loops.loop_name(),
        "placements": nested,
        "return1_service_cpu_us": cell_cpu_us,
        "return1_wall_us": cell_wall_us,
        "machine_costs": machine_costs(),
    }


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="codemode-bench-calls-") as tmp:
        print(orjson.dumps(loops.run(_figures(tmp))).decode())
    return 0
