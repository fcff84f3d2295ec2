"""Where a worker's `return 1` goes: its fresh engine, measured apart from the pipes and the service.

In the bench process, no service and no pipes, with warm caches:

* **context**: a QuickJS runtime and context with an empty prelude, made and freed;
* **prelude**: the same with the shipped prelude (its bytecode read and its top level run), minus the above;
* **worker loop**: the worker's own loop (``guest_runtime.worker.Runtimes``) running `return 1` cells
  from an in-memory channel: the engine built for each cell, configure, compile, run, the done frame
  encoded, the engine freed;
* **TypeScript**: the same loop running a 10-line cell written three ways, in alternating rounds: as
  JavaScript (compiled as sent: most JavaScript never meets the TypeScript parser), as JavaScript with a
  ``<`` that a ``>`` and a ``(`` follow (read by the parser too, which finds nothing to strip) and as
  TypeScript (refused by the engine, read, its types blanked, compiled again), each as a ratio to the first.

Each figure is the median of ``rounds`` rounds of ``cells`` cells; making and freeing are timed apart.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bridge.framing import encode_frame
from bridge.messages import HostFrame, RunFrame, WorkerFrame, run_frame
from guest_runtime.quickjs import prelude_source
from guest_runtime.quickjs.engine import GuestEngine, compile_prelude
from guest_runtime.quickjs.prelude_source import PreludeSource
from guest_runtime.worker import Runtimes

#: A prelude that defines nothing: its function returns a hook that only deletes its own global.
_EMPTY_PRELUDE = PreludeSource("(function (hookSlot) { return function () { delete globalThis[hookSlot]; }; })", ())


def _make_and_free_us(prelude: bytes, cells: int) -> tuple[float, float]:
    made = freed = 0.0
    for _ in range(cells):
        t0 = time.perf_counter()
        engine = GuestEngine(prelude=prelude)
        t1 = time.perf_counter()
        del engine  # the runtime is freed with the object
        freed += time.perf_counter() - t1
        made += t1 - t0
    return made * 1e6 / cells, freed * 1e6 / cells


#: One cell, three ways (``run_engine_cycle``'s TypeScript figures).
JAVASCRIPT_CELL = """
const flights = [{ id: "a", price: 310, stops: 1 }, { id: "b", price: 270, stops: 0 }, { id: "c", price: 450 }];
function cheapest(items, limit) {
  const direct = items.filter((f) => (f.stops ?? 0) === 0 || limit > 1);
  return direct.reduce((best, f) => (best === undefined || f.price < best.price ? f : best), undefined);
}
const byStops = new Map();
for (const f of flights) byStops.set(f.stops ?? 0, [...(byStops.get(f.stops ?? 0) ?? []), f.id]);
const total = flights.reduce((sum, f) => sum + f.price, 0);
return { cheapest: cheapest(flights, 2)?.id, total, byStops: Object.fromEntries(byStops) };
"""
#: The same with a ``<`` that a ``>`` and a ``(`` follow: JavaScript the TypeScript parser reads (and leaves).
JAVASCRIPT_CELL_PARSED = JAVASCRIPT_CELL.replace(
    "(f.stops ?? 0) === 0 || limit > 1", "(f.stops ?? 0) < 1 || limit > (0)"
)
TYPESCRIPT_CELL = """
interface Flight { id: string; price: number; stops?: number }
const flights: Flight[] = [{ id: "a", price: 310, stops: 1 }, { id: "b", price: 270, stops: 0 }, { id: "c", price: 450 }];
function cheapest<T extends Flight>(items: T[], limit: number): T | undefined {
  const direct = items.filter((f: T): boolean => (f.stops ?? 0) === 0 || limit > 1);
  return direct.reduce<T | undefined>((best, f) => (best === undefined || f.price < best.price ? f : best), undefined);
}
const byStops = new Map<number, string[]>();
for (const f of flights) byStops.set(f.stops ?? 0, [...(byStops.get(f.stops ?? 0) ?? []), f.id]);
const total: number = flights.reduce((sum: number, f: Flight) => sum + f.price, 0);
return { cheapest: cheapest<Flight>(flights, 2)?.id, total, byStops: Object.fromEntries(byStops) } as const;
"""


class _Cells:
    """The worker's channel, in memory: ``cells`` run frames of ``code`` in, the frames out encoded and dropped."""

    def __init__(self, cells: int, code: str = "return 1") -> None:
        self.left = cells
        self.run: RunFrame = run_frame(
            cell_id="c",
            code=code,
            budget_ms=10_000,
            memory_limit_bytes=64 << 20,
            max_output_bytes=65_536,
            value_capture_bytes=65_536,
            config={"tools": [], "mcp": [], "maxRequestBytes": 1 << 20},
        )

    def read(self) -> HostFrame | None:
        if self.left == 0:
            return None
        self.left -= 1
        return {**self.run, "cell_id": f"c{self.left}"}

    def read_raw(self) -> str:
        raise AssertionError("a return 1 cell reads no payload")

    def write(self, message: WorkerFrame, attachments: object = ()) -> None:
        encode_frame(message)


def _worker_loop_us(cells: int, code: str = "return 1") -> float:
    # The loop only reads and writes frames: the in-memory channel stands in for the pipes.
    runtimes = Runtimes(_Cells(cells, code), 1 << 20, float("inf"))  # type: ignore[arg-type]
    started = time.perf_counter()
    runtimes.serve()
    return (time.perf_counter() - started) * 1e6 / cells


def run_engine_cycle(cells: int = 1000, rounds: int = 3) -> dict[str, Any]:
    empty = compile_prelude(_EMPTY_PRELUDE)
    shipped = compile_prelude(prelude_source.load())  # the bytecode every worker loads
    ways = {"javascript": JAVASCRIPT_CELL, "javascript_parsed": JAVASCRIPT_CELL_PARSED, "typescript": TYPESCRIPT_CELL}
    rows: dict[str, list[float]] = {
        k: [] for k in ("context_make", "context_free", "engine_make", "engine_free", "loop", *ways)
    }
    for _ in range(rounds):
        made, freed = _make_and_free_us(empty, cells)
        rows["context_make"].append(made)
        rows["context_free"].append(freed)
        made, freed = _make_and_free_us(shipped, cells)
        rows["engine_make"].append(made)
        rows["engine_free"].append(freed)
        rows["loop"].append(_worker_loop_us(cells))
        for way, code in ways.items():
            rows[way].append(_worker_loop_us(cells, code))
    med = {k: statistics.median(v) for k, v in rows.items()}
    return {
        "cells": cells,
        "rounds": rounds,
        "context_us": med["context_make"] + med["context_free"],
        "prelude_make_us": med["engine_make"] - med["context_make"],
        "prelude_free_us": med["engine_free"] - med["context_free"],
        "worker_loop_us": med["loop"],
        "typescript": {
            "javascript_cell_us": med["javascript"],
            "javascript_parsed_cell_us": med["javascript_parsed"],
            "typescript_cell_us": med["typescript"],
            "javascript_parsed_ratio": med["javascript_parsed"] / med["javascript"],
            "typescript_ratio": med["typescript"] / med["javascript"],
        },
    }
