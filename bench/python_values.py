"""A large value leaving a Python cell: written as JSON by the Monty child against converted from its objects.

``python -m bench python_values [--rounds N] [--rows N]``.  In the bench process, no service and no pipes:
the peers table's 1 MiB workload (``bench/peer_workloads.py``: rows of objects, ~120k JSON values) runs in
a fresh ``PythonEngine`` on one Monty child, its value written by the child's ``json.dumps`` and checked by
the strict C scan (``guest_runtime/monty/cell_source.py``, the default) and handed over as objects that the
worker converts (``value_in_child=False``), alternating, and prints the wall time of the cell from its
source to its value's text and the CPU this process spent on it (the child's is not counted), as medians
over rounds with the child-written figure over the other's in the same round.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bridge import jsoncodec
from guest_runtime.engine import Returned
from guest_runtime.monty.engine import MontyPool, PythonEngine

from .peer_workloads import BIG_ROWS, workloads

MiB = 1024 * 1024


def _one(pool: MontyPool, code: str, in_child: bool) -> tuple[float, float, int]:
    """(wall ms, this process's CPU ms, text length) of ``code`` from its source to its value's JSON text."""
    engine = PythonEngine(pool, value_in_child=in_child)
    engine.configure(jsoncodec.dumps_text({"tools": [], "mcp": [], "maxRequestBytes": MiB}), 256 * MiB)
    wall, cpu = time.perf_counter(), time.process_time()
    engine.compile(code, 60.0)
    assert isinstance(engine.start(time.monotonic() + 60.0), Returned)
    text = engine.final_value(16 * MiB, time.monotonic() + 60.0)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    engine.close()
    pool.tidy()
    return wall * 1e3, cpu * 1e3, len(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench python_values", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--rows", type=int, default=BIG_ROWS, help="rows in the value (default: just under 1 MiB)")
    args = p.parse_args(argv)
    code = workloads(1, args.rows)["big"].python
    pool = MontyPool()
    walls: dict[bool, list[float]] = {True: [], False: []}
    cpus: dict[bool, list[float]] = {True: [], False: []}
    ratios: list[float] = []
    size = 0
    try:
        _one(pool, code, True)  # the child starts
        for _ in range(args.rounds):
            for in_child in (False, True):
                wall, cpu, size = _one(pool, code, in_child)
                walls[in_child].append(wall)
                cpus[in_child].append(cpu)
            ratios.append(walls[True][-1] / walls[False][-1])
    finally:
        pool.close()
    print(f"a {size:,}-character value ({args.rows:,} rows), {args.rounds} alternating rounds, ms (median)")
    print(f"{'':34}{'objects':>10}{'child text':>12}{'text / objects':>16}")
    print(
        f"{'wall, source to value text':34}{statistics.median(walls[False]):>10.1f}"
        f"{statistics.median(walls[True]):>12.1f}{statistics.median(ratios):>16.2f}"
    )
    print(f"{'CPU of the worker side':34}{statistics.median(cpus[False]):>10.1f}{statistics.median(cpus[True]):>12.1f}")
    return 0
