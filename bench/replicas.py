"""``python -m bench replicas``: the service through HAProxy with 1 and with 3 replicas sharing Redis.

Prints exec throughput through the front (round robin, 16 connections) for each, and what relaying a
``wait`` to the cell's holder costs: the median latency of a wait sent to another replica over one
sent to the holder itself (each wait hands a client-tool result to the cell, which calls the tool
again and parks).  The cluster is the tests' own (tests/support/cluster.py, deploy/haproxy.cfg).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.cluster import Cluster, running_cluster

from .load import run_load, wrk_available

EXEC_BODY = {"code": "return 1"}
TOOL = {"name": "next_item", "input_schema": {"type": "object"}}
LOOP = "for (let i = 0; ; i++) { await next_item({i}); }"
# A cell may make max_calls_per_cell (200) tool calls: a fresh cell after this many waits.
WAITS_PER_CELL = 150


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench replicas", description=__doc__)
    p.add_argument("--seconds", type=float, default=4.0, help="duration of each throughput phase")
    p.add_argument("--workers", type=int, default=2, help="worker processes per replica")
    p.add_argument("--waits", type=int, default=300, help="waits of each kind (local, relayed)")
    p.add_argument("--client", choices=("auto", "wrk", "python"), default="auto")
    return p


def _throughput(cluster: Cluster, client: str, seconds: float) -> dict[str, Any]:
    url = cluster.front + "/v1/exec"
    run_load(client, url, EXEC_BODY, 16, 1.0)  # warm-up
    return run_load(client, url, EXEC_BODY, 16, seconds).as_dict()


def _wait_ms(http: httpx.Client, base: str, cell: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    [call] = cell["pending_tool_calls"]
    body = {"tool_results": [{"id": call["id"], "ok": True, "value": 1}]}
    t0 = time.perf_counter()
    r = http.post(f"{base}/v1/cells/{cell['cell_id']}/wait", json=body)
    elapsed = (time.perf_counter() - t0) * 1000
    env = r.json()
    assert r.status_code == 200 and env["status"] == "waiting", r.text
    return elapsed, env


def _wait_costs(cluster: Cluster, waits: int) -> dict[str, float]:
    holder, other = cluster.replicas[0].base, cluster.replicas[1].base
    local: list[float] = []
    relayed: list[float] = []
    cell: dict[str, Any] = {}
    with httpx.Client(timeout=30.0) as http:
        for i in range(2 * waits + 20):
            if i % WAITS_PER_CELL == 0:
                if cell:
                    http.post(f"{holder}/v1/cells/{cell['cell_id']}/cancel")
                cell = http.post(holder + "/v1/exec", json={"code": LOOP, "client_tools": [TOOL]}).json()
            base = holder if i % 2 == 0 else other  # interleaved, so drift in the machine's load hits both
            ms, cell = _wait_ms(http, base, cell)
            if i >= 20:  # warm-up: connections, first relays
                (local if base == holder else relayed).append(ms)
        http.post(f"{holder}/v1/cells/{cell['cell_id']}/cancel")
    local_ms, relayed_ms = statistics.median(local), statistics.median(relayed)
    return {
        "local_wait_p50_ms": local_ms,
        "relayed_wait_p50_ms": relayed_ms,
        "ratio": relayed_ms / local_ms,
        "relay_cost_ms": relayed_ms - local_ms,
    }


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    client = args.client if args.client != "auto" else ("wrk" if wrk_available() else "python")
    print(
        f"bench replicas: {os.cpu_count()} CPUs, {args.workers} workers per replica, load generator {client}",
        flush=True,
    )
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="codemode-bench-replicas-") as tmp:
        for n in (1, 3):
            with running_cluster(Path(tmp) / f"n{n}", n, workers=args.workers) as cluster:
                figures[n] = _throughput(cluster, client, args.seconds)
                if n == 3:
                    figures["waits"] = _wait_costs(cluster, args.waits)
    for n in (1, 3):
        f = figures[n]
        print(
            f"  {n} replica{'s' if n > 1 else ' '} through HAProxy, exec c16: {f['rps']:7.0f} req/s   "
            f"p50 {f['p50_ms']:6.2f} ms   p99 {f['p99_ms']:6.2f} ms   bad {f['bad']}"
        )
    w = figures["waits"]
    print(
        f"  wait on the holder: p50 {w['local_wait_p50_ms']:.2f} ms; relayed through another replica: "
        f"p50 {w['relayed_wait_p50_ms']:.2f} ms; ratio {w['ratio']:.2f} (+{w['relay_cost_ms']:.2f} ms)"
    )
    return 0
