"""Figure 1's HTTP phases, and ``python -m bench http``: only those, in rounds, against another tree too.

``python -m bench http [--compare DIR ...] [--rounds N] [--seconds S]`` starts the real service (from
this tree, and from each ``DIR`` with ``--compare``, e.g. ``git archive main | tar -x -C DIR``) and the
bare FastAPI route, all side by side, and runs rounds that alternate the trees (each round starting with
the next one): per tree a warm-up, ``return 1`` at concurrency 1 (p50, p99), at 16 (p50, p99, cells/s,
the service's CPU per cell), then the bare route at 16 (cells/s ÷ bare req/s of that pair). It prints
each figure's min / median / max over the rounds per tree.  The served tree's service runs from its own
directory; its workers start with ``python -I`` and so run the installed code (this venv's), which is
what a comparison of two HTTP layers wants: the same workers behind both.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from pathlib import Path
from typing import Any

import orjson

from .load import run_load, wrk_available
from .servers import ROOT, Server, bare_server, codemode_server

EXEC_BODY = {"code": "return 1"}


def http_figures(server: Server, client: str, seconds: float) -> dict[str, Any]:
    """``return 1`` (or the bare route) at concurrency 1 and 16, with the CPU each side used at 16."""
    url = server.base + "/v1/exec"
    run_load(client, url, EXEC_BODY, 16, 1.0)  # warm-up: imports, first cells, connection setup
    c1 = run_load(client, url, EXEC_BODY, 1, seconds)
    cpu0, t0 = server.cpu(), time.perf_counter()
    c16 = run_load(client, url, EXEC_BODY, 16, seconds)
    cpu1, t1 = server.cpu(), time.perf_counter()
    span = t1 - t0
    n = max(1, c16.requests)
    return {
        "c1": c1.as_dict(),
        "c16": c16.as_dict(),
        # During the c16 phase: the uvicorn process and its live worker children (workers recycled
        # mid-phase take their CPU with them, so the workers' figure is a lower bound).
        "server_cpu_pct": 100 * (cpu1[0] - cpu0[0]) / span,
        "workers_cpu_pct": 100 * (cpu1[1] - cpu0[1]) / span,
        "server_cpu_ms_per_req": 1000 * (cpu1[0] - cpu0[0]) / n,
        "workers_cpu_ms_per_req": 1000 * (cpu1[1] - cpu0[1]) / n,
    }


def ratio_rounds(svc: Server, bare: Server, client: str, seconds: float, rounds: int) -> dict[str, Any]:
    """cells/s over bare req/s at 16, from rounds that alternate the two servers.

    The machine's speed drifts by tens of percent within minutes (other tenants of the host), so
    one codemode phase followed by one bare phase compares two different machines; alternating
    and taking the median lets the drift hit both sides alike.
    """
    ratios: list[float] = []
    for _ in range(rounds):
        cells = run_load(client, svc.base + "/v1/exec", EXEC_BODY, 16, seconds)
        plain = run_load(client, bare.base + "/v1/exec", EXEC_BODY, 16, seconds)
        ratios.append(cells.rps / plain.rps)
    return {"ratios": ratios, "median": statistics.median(ratios)}


#: Each figure of a round: its label and how it is printed.
FIGURES = {
    "p50_c1_ms": ("p50 @1 (ms)", "{:.3f}"),
    "p99_c1_ms": ("p99 @1 (ms)", "{:.3f}"),
    "p50_c16_ms": ("p50 @16 (ms)", "{:.2f}"),
    "tail_c16": ("p99 / p50 @16", "{:.2f}"),
    "cells_per_s_c16": ("cells/s @16", "{:.0f}"),
    "ratio_c16": ("cells/s / bare req/s @16", "{:.3f}"),
    "service_cpu_ms_c16": ("service CPU per cell @16 (ms)", "{:.3f}"),
}


def one_round(svc: Server, bare: Server, client: str, seconds: float) -> dict[str, float]:
    """One tree's figures of one round (the bare phase right after its own phase at 16)."""
    figures = http_figures(svc, client, seconds)
    plain = run_load(client, bare.base + "/v1/exec", EXEC_BODY, 16, seconds)
    c1, c16 = figures["c1"], figures["c16"]
    return {
        "p50_c1_ms": c1["p50_ms"],
        "p99_c1_ms": c1["p99_ms"],
        "p50_c16_ms": c16["p50_ms"],
        "tail_c16": c16["p99_ms"] / c16["p50_ms"],
        "cells_per_s_c16": c16["rps"],
        "ratio_c16": c16["rps"] / plain.rps,
        "service_cpu_ms_c16": figures["server_cpu_ms_per_req"],
        "bad": c1["bad"] + c16["bad"],
    }


def spread(values: list[float], fmt: str) -> str:
    return " / ".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench http", description=__doc__)
    p.add_argument("--compare", type=Path, nargs="+", default=[], help="other source trees, alternating with this one")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=4.0, help="duration of each load phase")
    p.add_argument("--workers", type=int, default=0, help="CODEMODE_WORKERS (default: the service's own)")
    p.add_argument("--out", type=Path, help="write every round's figures here as JSON")
    args = p.parse_args(argv)
    client = "wrk" if wrk_available() else "python"
    trees = {"this tree": ROOT} | {str(tree): tree.resolve() for tree in args.compare}
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    print(f"bench http: {client}; {len(trees)} tree(s) x {args.rounds} rounds...", flush=True)
    with contextlib.ExitStack() as stack:
        served = {name: stack.enter_context(codemode_server(args.workers, root=root)) for name, root in trees.items()}
        bare = stack.enter_context(bare_server())
        order = list(served)
        for number in range(args.rounds):
            for name in order[number % len(order) :] + order[: number % len(order)]:
                rounds[name].append(one_round(served[name], bare, client, args.seconds))
                print(f"  round {number + 1}, {name}: " + orjson.dumps(rounds[name][-1]).decode(), flush=True)
    print(f"\nmin / median / max over {args.rounds} rounds")
    for name in trees:
        print(f"{name}:")
        for key, (label, fmt) in FIGURES.items():
            print(f"  {label:32}{spread([r[key] for r in rounds[name]], fmt)}")
    bad = {name: sum(r["bad"] for r in rounds[name]) for name in trees}
    print("bad answers: " + ", ".join(f"{name} {n}" for name, n in bad.items()))
    if args.out:
        args.out.write_bytes(orjson.dumps({str(trees[n]): r for n, r in rounds.items()}, option=orjson.OPT_INDENT_2))
    return 0 if not any(bad.values()) else 1
