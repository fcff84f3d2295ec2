"""``python -m bench``: run every figure in one go, print the table, write ``bench/results.json``.

``python -m bench soak [--seconds N]``: the mixed benign/hostile soak of ``bench/soak.py`` instead.
``python -m bench held``: what held guest data and many small values cost (``bench/held.py``).
``python -m bench capacity``: what one tenant's load costs another, per scenario (``bench/capacity.py``).
``python -m bench density``: only the density figures (``bench/density.py``).
``python -m bench replicas``: 1 vs 3 replicas behind HAProxy, and the cost of relaying a wait (``bench/replicas.py``).
``python -m bench tracing``: only tracing on versus off (``bench/tracing.py``).
``python -m bench gate``: the cost of the Host and Origin check per request (``bench/gate.py``).
``python -m bench stores [--compare DIR]``: the failure budget under a burst, a hung and a busy store (``bench/stores.py``).
``python -m bench sandbox``: kernel confinement of workers off versus auto (``bench/sandbox.py``).
``python -m bench helpers``: a helper process per principal, reused, versus a fresh one per body (``bench/helpers.py``).
``python -m bench clocks``: a no-op tool call on its wall clock versus off any clock (``bench/clocks.py``).
``python -m bench python``: Python cells beside JavaScript cells, alternating (``bench/python_cells.py``).
``python -m bench calls``: only the nested-call figures, as one JSON line (``bench/calls.py``).
``python -m bench http [--compare DIR]``: only figure 1's HTTP phases, in rounds, alternating with another tree (``bench/http_figures.py``).
``python -m bench isolation``: only the per-``worker_isolation`` figures (``bench/isolation.py``).
``python -m bench fastmcp``: FastMCP CodeMode's execute on its default sandbox versus codemode's (``bench/fastmcp_provider.py``).
``python -m bench monty_launcher``: a stock pydantic-monty 1.x pool with and without ``codemode-monty`` (``bench/monty_launcher.py``).
``python -m bench monty_ws``: pydantic-ai CodeMode on harness's local pool versus codemode's /v1/monty (``bench/monty_ws.py``).
``python -m bench peers [--rounds N] [--write-docs]``: codemode beside its peers, each through its own API (``bench/peer_table.py``).
``python -m bench large_values``: a 1 MiB value leaving a JavaScript cell, the C plain-data check on and off (``bench/large_values.py``).
``python -m bench python_values``: a 1 MiB value leaving a Python cell, written by the Monty child or converted (``bench/python_values.py``).
``python -m bench starts``: how long ``codemode mcp`` takes to answer initialize, and ``scripts/serve`` /healthz (``bench/starts.py``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from service.settings import Settings

from .density import run_density
from .engine_cycle import run_engine_cycle
from .http_figures import http_figures, ratio_rounds
from .inproc import run_inproc
from .isolation import run_isolation
from .load import wrk_available
from .report import render
from .servers import bare_server, codemode_server
from .tracing import run_tracing


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument(
        "--client",
        choices=("auto", "wrk", "python"),
        default="auto",
        help="HTTP load generator (auto: wrk when installed, else the Python client)",
    )
    p.add_argument("--seconds", type=float, default=4.0, help="duration of each HTTP load phase")
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        help="CODEMODE_WORKERS of the served service (default: the service's own, 4)",
    )
    p.add_argument("--round-trips", type=int, default=1000, help="host round trips per kind in figure 2")
    p.add_argument(
        "--ratio-rounds",
        type=int,
        default=3,
        help="alternating codemode / bare rounds at concurrency 16 behind the throughput ratio",
    )
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results.json"))
    return p


def _loadavg() -> float:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


#: ``python -m bench NAME [args]`` runs one figure's module instead of the whole table: its module and
#: whether its ``main`` takes the remaining arguments. Imported on demand: each pulls in its own parts.
SUBCOMMANDS: dict[str, tuple[str, bool]] = {
    "soak": ("soak", True),
    "held": ("held", True),
    "capacity": ("capacity", True),
    "replicas": ("replicas", True),
    "density": ("density", False),
    "gate": ("gate", False),
    "stores": ("stores", True),
    "tracing": ("tracing", False),
    "clocks": ("clocks", False),
    "python": ("python_cells", True),
    "calls": ("calls", False),
    "http": ("http_figures", True),
    "sandbox": ("sandbox", True),
    "isolation": ("isolation", True),
    "helpers": ("helpers", True),
    "starts": ("starts", False),
    "peers": ("peer_table", True),
    "fastmcp": ("fastmcp_provider", True),
    "monty_launcher": ("monty_launcher", True),
    "monty_ws": ("monty_ws", True),
    "large_values": ("large_values", True),
    "python_values": ("python_values", True),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in SUBCOMMANDS:
        module_name, takes_args = SUBCOMMANDS[argv[0]]
        run = importlib.import_module(f".{module_name}", __package__).main
        return int(run(argv[1:]) if takes_args else run())
    args = _parser().parse_args(argv)
    client = args.client
    if client == "auto":
        client = "wrk" if wrk_available() else "python"
    elif client == "wrk" and not wrk_available():
        print("bench: wrk is not installed; use --client python", file=sys.stderr)
        return 2
    started = time.perf_counter()
    print(f"bench: load generator = {client}; {os.cpu_count()} CPUs; running (about four minutes)...", flush=True)
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "client": client,
        "seconds_per_phase": args.seconds,
        "service_workers": args.workers or Settings().workers,
        "service_running_slots": Settings().running_slot_count,
        "loadavg_before": _loadavg(),
    }
    with codemode_server(args.workers) as svc, bare_server() as bare:
        results["codemode"] = http_figures(svc, client, args.seconds)
        results["bare"] = http_figures(bare, client, args.seconds)
        results["ratio"] = ratio_rounds(svc, bare, client, args.seconds, args.ratio_rounds)
    results["inproc"] = run_inproc(n_round_trips=args.round_trips)
    results["engine_cycle"] = run_engine_cycle()
    results["density"] = run_density(args.workers)
    results["tracing"] = run_tracing()
    results["isolation"] = run_isolation(args.workers, rounds=2, client=client)
    results["loadavg_after"] = _loadavg()
    results["total_seconds"] = time.perf_counter() - started
    Path(args.out).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    print(render(results))
    print(f"\nwrote {args.out} ({results['total_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
