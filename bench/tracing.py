"""Tracing on versus off: in-process cells per second with the same service and the same workers.

Rounds rotate between three modes on the same service, so machine noise hits them alike: ``off``
(``NO_TRACING``, the default: no SDK, no provider), ``on`` (the SDK's console exporter writing JSON to
``/dev/null`` through the batch processor: what ``OTEL_TRACES_EXPORTER=console`` sets up, minus the
terminal) and ``spans only`` (the same, but the exporter drops each span unformatted: the cost of making
and batching spans, without serialising them).  Two cells: ``return 1`` (one leg span) and ten sequential
no-op tool calls (a leg span and ten call spans).  The exporters count what they get, so the traced
rounds prove their spans were really made and exported.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from service.assembly import build_components
from service.auth import LOCAL_TENANT
from service.cells.spec import CellSpec
from service.settings import Settings
from service.tracing import NO_TRACING, Tracing, tracing_to

from .report import tracing_rows
from .tools import BenchTools

CELLS = {"return 1": "return 1", "10 tool calls": "for (let i = 0; i < 10; i++) await nop({i}); return 1"}
SPANS_PER_CELL = {"return 1": 1, "10 tool calls": 11}


async def _rate(svc: Any, code: str, cells: int) -> tuple[float, float]:
    """Cells per second, and CPU µs per cell of this process (event loop and exporter threads; not the workers)."""
    limits = svc.cells.limits(timeout_ms=10000, memory_limit_bytes=None, max_output_bytes=None)
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(cells):
        env = await svc.cells.exec(CellSpec(code=code, tenant=LOCAL_TENANT, limits=limits, headless=True))
        if env["status"] != "completed":
            raise RuntimeError(f"bench cell did not complete: {env.get('code')}: {env.get('error')}")
    return cells / (time.perf_counter() - started), (time.process_time() - cpu) * 1e6 / cells


async def _figures(tmp: str, *, cells: int, rounds: int) -> dict[str, Any]:
    exported = 0

    def formatted(span: Any) -> str:
        nonlocal exported
        exported += 1
        return str(span.to_json()) + "\n"

    def dropped(span: Any) -> str:
        nonlocal exported
        exported += 1
        return ""

    devnull = open(os.devnull, "w")  # noqa: SIM115 - closed below, after the exporters' last flush
    on = tracing_to(ConsoleSpanExporter(out=devnull, formatter=formatted), batch=True)
    spans_only = tracing_to(ConsoleSpanExporter(out=devnull, formatter=dropped), batch=True)
    modes: list[tuple[str, Tracing]] = [("off", NO_TRACING), ("on", on), ("spans only", spans_only)]
    settings = Settings().replace(data_dir=tmp, workers=2, log_level="warning").check()
    svc = build_components(settings, extra_tools=BenchTools().specs(), tracing=NO_TRACING)
    await svc.start()
    rates: dict[str, dict[str, list[tuple[float, float]]]] = {name: {mode: [] for mode, _ in modes} for name in CELLS}
    try:
        for name, code in CELLS.items():
            svc.cells.tracing = NO_TRACING
            await _rate(svc, code, 20)  # warm both workers and the code paths
            for i in range(rounds):
                for mode, tracing in modes[i % 3:] + modes[:i % 3]:
                    svc.cells.tracing = tracing  # same workers, same warm state: only tracing differs
                    rates[name][mode].append(await _rate(svc, code, cells))
    finally:
        svc.cells.tracing = NO_TRACING
        await svc.close()
        await on.close()
        await spans_only.close()
        devnull.close()
    expected = sum(2 * rounds * cells * SPANS_PER_CELL[name] for name in CELLS)
    if exported != expected:
        raise RuntimeError(f"tracing on exported {exported} spans, expected {expected}")
    result: dict[str, Any] = {"cells_per_round": cells, "rounds": rounds, "spans_exported": exported}
    for name in CELLS:
        result[name] = figure = {"rounds": rates[name]}
        for mode, _ in modes:
            key = mode.replace(" ", "_")
            figure[f"{key}_cells_per_s"] = statistics.median(r for r, _ in rates[name][mode])
            figure[f"{key}_cpu_us_per_cell"] = statistics.median(c for _, c in rates[name][mode])
    return result


def run_tracing(*, cells: int = 100, rounds: int = 9) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="codemode-bench-tracing-") as tmp:
        return asyncio.run(_figures(tmp, cells=cells, rounds=rounds))


def main() -> int:
    t = run_tracing()
    for row in tracing_rows(t):
        print("  ".join(cell for cell in row if cell))
    print(f"({t['rounds']} rotating rounds of {t['cells_per_round']} sequential cells per mode, medians; "
          f"{t['spans_exported']} spans exported while on)", file=sys.stdout)
    return 0
