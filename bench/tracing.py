"""Tracing on versus off: in-process cells per second and service CPU per cell, same service, same workers.

Rounds rotate between four modes on one service, so machine noise hits them alike:

- ``off``: ``NO_TRACING``, the default (no SDK imported, no provider);
- ``spans only``: spans made and batched, then dropped by the exporter unserialised (the SDK's own cost);
- ``console``: the SDK's console exporter writing JSON to ``/dev/null`` through the batch processor (what
  ``OTEL_TRACES_EXPORTER=console`` sets up, minus the terminal);
- ``otlp``: the OTLP/HTTP exporter posting protobuf to a loopback sink in this process (what
  ``OTEL_TRACES_EXPORTER=otlp`` sets up; the sink's CPU is counted too, so this is an upper bound).

Two cells: ``return 1`` (one leg span) and ten sequential no-op tool calls (a leg span and ten call spans).
The console-based exporters count what they get and the sink counts the bytes it receives, so the traced
rounds prove their spans were really made and exported.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from service.assembly import build_components
from service.auth import LOCAL_TENANT
from service.runtime.spec import CellSpec
from service.settings import Settings
from service.tracing import NO_TRACING, Tracing, tracing_to

from . import loops
from .report import TRACING_CELLS, TRACING_MODES, tracing_rows
from .servers import otlp_collector
from .tools import BenchTools

CODE = {"return 1": "return 1", "10 tool calls": "for (let i = 0; i < 10; i++) await nop({i}); return 1"}
SPANS_PER_CELL = {"return 1": 1, "10 tool calls": 11}
assert tuple(CODE) == TRACING_CELLS


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
    counted = 0

    def counting(serialise: bool) -> Any:
        def formatter(span: Any) -> str:
            nonlocal counted
            counted += 1
            return str(span.to_json()) + "\n" if serialise else ""

        return formatter

    with open(os.devnull, "w") as devnull, otlp_collector() as (collector, posts):
        tracings: dict[str, Tracing] = {
            "off": NO_TRACING,
            "spans only": tracing_to(ConsoleSpanExporter(out=devnull, formatter=counting(False)), batch=True),
            "console": tracing_to(ConsoleSpanExporter(out=devnull, formatter=counting(True)), batch=True),
            "otlp": tracing_to(OTLPSpanExporter(endpoint=collector + "/v1/traces"), batch=True),
        }
        assert tuple(tracings) == TRACING_MODES
        modes = list(tracings.items())
        settings = Settings().replace(data_dir=tmp, workers=2, log_level="warning").check()
        svc = build_components(settings, extra_tools=BenchTools().specs(), tracing=NO_TRACING)
        await svc.start()
        rates: dict[str, dict[str, list[tuple[float, float]]]] = {c: {m: [] for m in tracings} for c in CODE}
        try:
            for name, code in CODE.items():
                svc.cells.tracing = NO_TRACING
                await _rate(svc, code, 20)  # warm both workers and the code paths
                for i in range(rounds):
                    for mode, tracing in modes[i % len(modes) :] + modes[: i % len(modes)]:
                        svc.cells.tracing = tracing  # same workers, same warm state: only tracing differs
                        rates[name][mode].append(await _rate(svc, code, cells))
        finally:
            svc.cells.tracing = NO_TRACING
            await svc.close()
            for tracing in tracings.values():
                await tracing.close()  # flushes: every span is counted or posted by now
    expected = sum(2 * rounds * cells * SPANS_PER_CELL[name] for name in CODE)  # the two console modes
    posted = [len(body) for _, _, body in posts]
    if counted != expected or not posted:
        raise RuntimeError(
            f"traced rounds exported {counted} spans to the console exporters (expected "
            f"{expected}) and {len(posted)} OTLP posts"
        )
    result: dict[str, Any] = {
        "cells_per_round": cells,
        "rounds": rounds,
        "console_spans": counted,
        "otlp_posts": len(posted),
        "otlp_bytes": sum(posted),
    }
    for name in CODE:
        figure: dict[str, Any] = {"rounds": rates[name]}
        for mode in tracings:
            figure[mode] = {
                "cells_per_s": statistics.median(r for r, _ in rates[name][mode]),
                "cpu_us_per_cell": statistics.median(c for _, c in rates[name][mode]),
            }
        result[name] = figure
    return result


def run_tracing(*, cells: int = 100, rounds: int = 8) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="codemode-bench-tracing-") as tmp:
        return loops.run(_figures(tmp, cells=cells, rounds=rounds))


def main() -> int:
    t = run_tracing()
    for row in tracing_rows(t):
        print("  ".join(cell for cell in row if cell))
    print(
        f"({t['rounds']} rotating rounds of {t['cells_per_round']} sequential cells per mode, medians; "
        f"{t['console_spans']} spans through the console exporters, {t['otlp_posts']} OTLP posts "
        f"of {t['otlp_bytes']} bytes)"
    )
    return 0
