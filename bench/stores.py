"""``python -m bench stores``: the failure budget under a burst, and what a stalled store costs cells.

Starts ``codemode serve`` (2 workers, API keys, a plugin with an always-failing idempotent read and a
failing write) and measures, per served source tree (``--compare DIR`` alternates this tree with
another checkout, e.g. ``git archive main``, round by round):

* **burst**: one cell runs ``Promise.all`` over 100 calls of the failing read (``tool_failures_per_run``
  4): how many times the tool ran;
* **hung redis** (a redis-server the bench SIGSTOPs): how long ``/readyz``, a session cell and a store
  cell take, and how tenant beta's session-less cells fare (503s, slowest) while tenant alpha sends
  six session cells;
* **failure flood** (SQLite): tenant beta's session cells (one store read each) and reads of its
  session's store (``GET /v1/sessions/{id}/store``, no cell), p50/p99 while idle and while tenant
  alpha's cells in four loops each count eight tool failures in a new run, and the run counters the
  store holds afterwards (rows and bytes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sqlite3
import statistics
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.stores.conftest import start_redis_server, stop_redis_server
from tests.support.tenant_server import ROOT, TENANT_KEYS, LiveServer, percentile

ALPHA = {"authorization": "Bearer " + TENANT_KEYS["alpha"]}
BETA = {"authorization": "Bearer " + TENANT_KEYS["beta"]}
PLUGIN = textwrap.dedent(
    '''
    """Tools of ``python -m bench stores``."""
    from service.tools import ToolRegistry, ToolSpec

    RUNS = {"flaky": 0}

    async def _flaky(call_id, params, ctx):
        RUNS["flaky"] += 1
        raise ConnectionError("connection reset by peer")

    async def _broken(call_id, params, ctx):
        raise ValueError("the backend said no")

    async def _broken_too(call_id, params, ctx):
        raise ValueError("the other backend said no")

    async def _runs(call_id, params, ctx):
        return dict(RUNS)

    def register(registry: ToolRegistry) -> None:
        schema = {"type": "object"}
        registry.add_tool(ToolSpec(name="flaky", description="always resets", execute=_flaky,
                                   idempotent=True, input_schema=schema))
        registry.add_tool(ToolSpec(name="broken", description="always fails", execute=_broken, input_schema=schema))
        registry.add_tool(ToolSpec(name="broken_too", description="always fails", execute=_broken_too,
                                   input_schema=schema))
        registry.add_tool(ToolSpec(name="runs", description="how often flaky ran", execute=_runs, input_schema=schema))
    '''
)
BURST = "await Promise.all(Array.from({length: 100}, (_, i) => flaky({i}).catch(e => e.code))); return 1;"
#: Eight counted failures (the run's whole budget: four per tool), one store write each before batching.
FLOOD_CELL = """
for (let i = 0; i < 4; i++) {
  await Promise.all([broken({i}).catch(e => e.code), broken_too({i}).catch(e => e.code)]);
}
return 1;
"""
STORE_CELL = 'const v = await load("k"); return v === undefined ? 1 : v;'


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench stores", description=__doc__.split("\n\n")[0])
    p.add_argument("--compare", type=Path, help="another source tree to serve, alternating with this one")
    p.add_argument("--rounds", type=int, default=2, help="rounds per tree (default 2)")
    p.add_argument("--flood-seconds", type=float, default=8.0, help="length of each flood window (default 8)")
    return p


def _server(tmp: Path, root: Path, plugin_dir: Path, env: dict[str, str] | None = None) -> LiveServer:
    tmp.mkdir()
    pythonpath = f"{root}{os.pathsep}{plugin_dir}"
    return LiveServer(
        tmp, workers=2, env={"PYTHONPATH": pythonpath, **(env or {})}, plugins=("bench_store_tools",), root=root
    )


async def _exec(http: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, float, Any]:
    started = time.monotonic()
    r = await http.post("/v1/exec", json=body, headers=headers)
    return r.status_code, time.monotonic() - started, r.json()


async def _burst(base: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        before = (await _exec(http, {"code": "return (await runs({})).flaky"}, ALPHA))[2]["value"]
        status, elapsed, _ = await _exec(http, {"code": BURST}, ALPHA)
        after = (await _exec(http, {"code": "return (await runs({})).flaky"}, ALPHA))[2]["value"]
    return {"executions": after - before, "status": status, "cell_s": elapsed}


async def _hung(base: str) -> dict[str, Any]:
    """Everything at once in one stalled window (the caller SIGSTOPs the store around this)."""
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:

        async def readyz() -> float:
            started = time.monotonic()
            await http.get("/readyz")
            return time.monotonic() - started

        def session(code: str) -> dict[str, Any]:
            return {"code": code, "session_id": "s-" + uuid.uuid4().hex}

        async def victims() -> list[tuple[int, float, Any]]:
            return [await _exec(http, {"code": "return 1"}, BETA) for _ in range(8)]

        attackers = [_exec(http, session("return 1"), ALPHA) for _ in range(6)]
        ready, plain, stored, beta, *_ = await asyncio.gather(
            readyz(),
            _exec(http, session("return 1"), ALPHA),
            _exec(http, session('await store("k", 1); return 1;'), ALPHA),
            victims(),
            *attackers,
        )
    return {
        "readyz_s": ready,
        "session_cell_s": plain[1],
        "store_cell_s": stored[1],
        "victim_503": sum(1 for s, _, _ in beta if s == 503),
        "victim_slowest_s": max(t for _, t, _ in beta),
    }


async def _flood(base: str, seconds: float) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        sid = "s-beta-" + uuid.uuid4().hex

        async def beta_window(deadline: float) -> list[float]:
            latencies = []
            while time.monotonic() < deadline:
                status, elapsed, env = await _exec(http, {"code": STORE_CELL, "session_id": sid}, BETA)
                if status == 200 and env.get("status") == "completed":
                    latencies.append(elapsed)
            return latencies

        async def store_window(deadline: float) -> list[float]:
            latencies = []
            while time.monotonic() < deadline:
                started = time.monotonic()
                if (await http.get(f"/v1/sessions/{sid}/store", headers=BETA)).status_code == 200:
                    latencies.append(time.monotonic() - started)
            return latencies

        until = time.monotonic() + seconds / 2
        idle, idle_reads = await asyncio.gather(beta_window(until), store_window(until))
        failures = 0

        async def alpha_loop(n: int, deadline: float) -> None:
            nonlocal failures
            while time.monotonic() < deadline:
                body = {"code": FLOOD_CELL, "session_id": f"s-alpha-{n}", "run_id": "r-" + uuid.uuid4().hex}
                status, _, env = await _exec(http, body, ALPHA)
                failures += 8 if status == 200 else 0

        deadline = time.monotonic() + seconds
        flooded, flooded_reads, *_ = await asyncio.gather(
            beta_window(deadline), store_window(deadline), *(alpha_loop(n, deadline) for n in range(4))
        )
    return {
        "beta_cell_idle_p50_ms": 1000 * statistics.median(idle),
        "beta_cell_idle_p99_ms": 1000 * percentile(idle, 0.99),
        "beta_cell_flood_p50_ms": 1000 * statistics.median(flooded),
        "beta_cell_flood_p99_ms": 1000 * percentile(flooded, 0.99),
        "beta_read_idle_p50_ms": 1000 * statistics.median(idle_reads),
        "beta_read_flood_p50_ms": 1000 * statistics.median(flooded_reads),
        "beta_read_flood_p99_ms": 1000 * percentile(flooded_reads, 0.99),
        "alpha_failures_per_s": failures / seconds,
    }


def _counter_rows(store_file: Path) -> dict[str, Any]:
    with sqlite3.connect(store_file) as conn:
        rows, size = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(length(CAST(tenant || session_id || run_id || tool AS BLOB))"
            " + COALESCE(length(CAST(block_reason AS BLOB)), 0)), 0) FROM run_failures"
        ).fetchone()
    return {"counter_rows": rows, "counter_text_bytes": size}


def _one_round(root: Path, plugin_dir: Path, flood_seconds: float) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-stores-") as tmp:
        server = _server(Path(tmp) / "sqlite", root, plugin_dir)
        server.start()
        try:
            figures["burst"] = asyncio.run(_burst(server.base))
            figures["flood"] = asyncio.run(_flood(server.base, flood_seconds))
        finally:
            server.stop()
        figures["flood"].update(_counter_rows(Path(tmp) / "sqlite" / "data" / "store.sqlite3"))
        port, redis = start_redis_server(Path(tmp) / "redis")
        server = _server(Path(tmp) / "hung", root, plugin_dir, {"CODEMODE_STORE_URL": f"redis://127.0.0.1:{port}/0"})
        try:
            server.start()
            os.kill(redis.pid, signal.SIGSTOP)
            try:
                figures["hung_redis"] = asyncio.run(_hung(server.base))
            finally:
                os.kill(redis.pid, signal.SIGCONT)
        finally:
            server.stop()
            stop_redis_server(redis)
    return figures


def _merged(rounds: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per scenario and figure, the median over rounds."""
    return {
        scenario: {k: statistics.median(r[scenario][k] for r in rounds) for k in rounds[0][scenario]}
        for scenario in rounds[0]
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    trees = {"this tree": ROOT} | ({"compared": args.compare.resolve()} if args.compare else {})
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="bench-store-tools-") as plugin_dir:
        (Path(plugin_dir) / "bench_store_tools.py").write_text(PLUGIN)
        for n in range(args.rounds):
            for name, root in trees.items():
                print(f"round {n + 1}: {name} ({root})", flush=True)
                results[name].append(_one_round(root, Path(plugin_dir), args.flood_seconds))
    print(f"\nmedians of {args.rounds} rounds (loadavg {os.getloadavg()[0]:.1f}):")
    merged = {name: _merged(rounds) for name, rounds in results.items()}
    first = next(iter(merged.values()))
    for scenario, figures in first.items():
        print(f"  {scenario}")
        for key in figures:
            shown = "  ".join(f"{name}: {merged[name][scenario][key]:10.2f}" for name in merged)
            print(f"    {key:24s} {shown}")
    return 0
