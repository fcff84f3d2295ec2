"""``python -m bench sandbox``: what kernel confinement costs, sandbox = "off" against "auto" on one machine.

Two in-process services (2 workers each, one per mode) run side by side; each round times, for
each mode in turn, ``--cells`` sequential ``return 1`` cells (host wall time per cell) and
``--starts`` worker starts through ``start_worker`` with that service's own options (spawn to
``ready``, the confinement included).  Rounds alternate the modes, so the machine's drift hits
both alike; the medians over all rounds are printed, with the ratio auto / off.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from typing import Any

from service.assembly import Components, build_components
from service.runtime.workers.process import start_worker
from service.settings import Settings

from .inproc import CellRunner

MODES = ("off", "auto")


async def _worker_start_ms(svc: Components) -> float:
    pool = svc.pool
    t0 = time.perf_counter()
    worker = await start_worker(pool.supply.options, pool.supply.frame_cap, nice=pool.supply.nice)
    elapsed = (time.perf_counter() - t0) * 1000
    worker.kill()
    await worker.proc.wait()
    return elapsed


async def run_sandbox(rounds: int, cells: int, starts: int) -> dict[str, Any]:
    services: dict[str, Components] = {}
    samples: dict[str, dict[str, list[float]]] = {mode: {"cell_ms": [], "start_ms": []} for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for mode in MODES:
                settings = Settings().replace(data_dir=f"{tmp}/{mode}", workers=2, sandbox=mode).check()
                services[mode] = build_components(settings)
                await services[mode].start()
            runners = {mode: CellRunner(svc) for mode, svc in services.items()}
            for runner in runners.values():  # warm: first cells, first engines
                for _ in range(20):
                    await runner.run("return 1")
            for _ in range(rounds):
                for mode in MODES:
                    for _ in range(cells):
                        samples[mode]["cell_ms"].append((await runners[mode].run("return 1"))[1])
                    for _ in range(starts):
                        samples[mode]["start_ms"].append(await _worker_start_ms(services[mode]))
            layers = {mode: svc.sandbox.as_json()["layers"] for mode, svc in services.items()}
        finally:
            for svc in services.values():
                await svc.close()
    medians = {mode: {k: statistics.median(v) for k, v in s.items()} for mode, s in samples.items()}
    return {
        "rounds": rounds,
        "medians": medians,
        "p99_cell_ms": {mode: statistics.quantiles(s["cell_ms"], n=100)[98] for mode, s in samples.items()},
        "ratio_auto_over_off": {k: medians["auto"][k] / medians["off"][k] for k in ("cell_ms", "start_ms")},
        "layers": layers,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench sandbox", description=__doc__)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--cells", type=int, default=200, help="return 1 cells per mode per round")
    p.add_argument("--starts", type=int, default=10, help="worker starts per mode per round")
    args = p.parse_args(sys.argv[2:] if argv is None else argv)
    result = asyncio.run(run_sandbox(args.rounds, args.cells, args.starts))
    m, r = result["medians"], result["ratio_auto_over_off"]
    print(f"sandbox cost over {args.rounds} alternating rounds (medians)")
    print(
        f"  return 1 cell, host wall : off {m['off']['cell_ms']:.3f} ms   auto {m['auto']['cell_ms']:.3f} ms   ×{r['cell_ms']:.2f}"
    )
    print(
        f"  return 1 cell, p99       : off {result['p99_cell_ms']['off']:.3f} ms   auto {result['p99_cell_ms']['auto']:.3f} ms"
    )
    print(
        f"  worker start to ready    : off {m['off']['start_ms']:.1f} ms   auto {m['auto']['start_ms']:.1f} ms   ×{r['start_ms']:.2f}"
    )
    on = [layer for layer, v in result["layers"]["auto"].items() if v]
    print(f"  layers in force (auto)   : {', '.join(on)}")
    return 0
