"""Worker isolation: what each ``worker_isolation`` mode costs, as ratios against ``tenant`` in the same run.

Starts the real service once per mode, the four side by side (default settings besides the mode), and
measures them in rounds that alternate the modes (each round starting with the next mode, every
service's spare processes started before each phase), so the machine's drift hits them alike:

* ``return 1`` at concurrency 1, back to back for ``seconds`` (p50 at the client): under ``cell`` each
  cell takes a pre-started spare and the spares are replaced no faster than processes start;
* the same, one cell at a time with the spares ready before each (what one caller between its other
  work sees), the modes taking turns cell by cell;
* cells/s at concurrency 16 for ``seconds``.

Every cell carries one ``session_id`` (an agent's session), so ``session`` isolation packs like ``key``
here.  Then, per mode, parked-cell density: ``PARKED`` cells spread over ``SESSIONS`` sessions park; the
worker processes holding them are counted (``codemode_workers{state="holding"}``) and the PSS of the
service and its workers read before and after; every parked cell then resumes to completion.  Parked
cells per process times ``max_workers`` is how many parked cells the process cap holds at that density.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterable
from typing import Any

import httpx

from service.settings import Settings

from .density import metric, settle, total_pss_mib
from .load import run_load, wrk_available
from .servers import Server, codemode_server

MODES = ("tenant", "key", "session", "cell")
SESSION = "bench-session"
BODY = {"code": "return 1", "session_id": SESSION}
PARKED = 64
SESSIONS = 8
PARK = "globalThis.n = {n}; await yield_control('park'); return n"
SPACED_CELLS = 30


def settle_all(clients: Iterable[httpx.Client]) -> None:
    """Let every service's background process starts finish (a ``cell`` phase leaves some behind)."""
    for client in clients:
        settle(client)


def _spaced_p50_ms(clients: dict[str, httpx.Client]) -> dict[str, float]:
    """``return 1`` latency at the client per mode, one cell at a time, each once the pool's spares are
    ready; the modes take turns cell by cell."""
    took: dict[str, list[float]] = {m: [] for m in clients}
    for _ in range(SPACED_CELLS):
        for m, client in clients.items():
            settle(client)
            started = time.perf_counter()
            client.post("/v1/exec", json=BODY).raise_for_status()
            took[m].append((time.perf_counter() - started) * 1000)
    return {m: statistics.median(t) for m, t in took.items()}


def _density(client: httpx.Client, server: Server, cap: int) -> dict[str, Any]:
    """Park ``PARKED`` cells over ``SESSIONS`` sessions: processes holding them, PSS per parked cell; resume all."""
    settle(client)
    base_mib, _ = total_pss_mib(server)
    ids = []
    for n in range(PARKED):
        r = client.post("/v1/exec", json={"code": PARK.format(n=n), "session_id": f"s{n % SESSIONS}"})
        if r.status_code != 200 or r.json()["status"] != "waiting":
            raise RuntimeError(f"cell {n} did not park: {r.status_code} {r.text[:300]}")
        ids.append(r.json()["cell_id"])
    settle(client)
    holding = metric(client, 'codemode_workers{state="holding"}')
    mib, _ = total_pss_mib(server)
    wrong = 0
    for n, cell_id in enumerate(ids):
        r = client.post(f"/v1/cells/{cell_id}/wait", json={})
        wrong += r.status_code != 200 or r.json().get("value") != n
    if wrong:
        raise AssertionError(f"{wrong} of {PARKED} parked cells did not resume with their own value")
    per_process = PARKED / holding
    return {
        "parked": PARKED,
        "sessions": SESSIONS,
        "processes_holding": holding,
        "parked_per_process": per_process,
        "fit_in_cap": per_process * cap,
        "pss_per_parked_kib": (mib - base_mib) * 1024 / PARKED,
    }


def run_isolation(workers: int = 0, seconds: float = 2.0, rounds: int = 2, client: str = "auto") -> dict[str, Any]:
    if client == "auto":
        client = "wrk" if wrk_available() else "python"
    settings = Settings(workers=workers) if workers else Settings()
    cap = settings.worker_cap
    samples: dict[str, dict[str, list[float]]] = {m: {"c1_p50_ms": [], "cells_per_s": [], "bad": []} for m in MODES}
    out: dict[str, Any] = {"client": client, "seconds": seconds, "rounds": rounds, "max_workers": cap, "modes": {}}
    with contextlib.ExitStack() as stack:
        servers = {
            m: stack.enter_context(codemode_server(workers, env={"CODEMODE_WORKER_ISOLATION": m})) for m in MODES
        }
        clients = {m: stack.enter_context(httpx.Client(base_url=s.base, timeout=60)) for m, s in servers.items()}
        for m in MODES:
            for _ in range(20):
                clients[m].post("/v1/exec", json=BODY).raise_for_status()  # warm: imports, first cells
        for n in range(rounds):
            for m in MODES[n % len(MODES) :] + MODES[: n % len(MODES)]:  # each round starts with another mode
                url = servers[m].base + "/v1/exec"
                settle_all(clients.values())
                c1 = run_load(client, url, BODY, 1, seconds)
                settle_all(clients.values())
                c16 = run_load(client, url, BODY, 16, seconds)
                samples[m]["c1_p50_ms"].append(c1.p50_ms)
                samples[m]["cells_per_s"].append(c16.rps)
                samples[m]["bad"].append(c1.bad + c16.bad)
        spaced = _spaced_p50_ms(clients)
        for m in MODES:
            out["modes"][m] = {
                "c1_p50_ms": statistics.median(samples[m]["c1_p50_ms"]),
                "cells_per_s": statistics.median(samples[m]["cells_per_s"]),
                "bad": sum(samples[m]["bad"]),
                "spaced_p50_ms": spaced[m],
                "spawned": metric(clients[m], "codemode_workers_spawned"),
                **_density(clients[m], servers[m], cap),
            }
    tenant = out["modes"]["tenant"]
    for figures in out["modes"].values():
        figures["vs_tenant"] = {
            "c1_p50": figures["c1_p50_ms"] / tenant["c1_p50_ms"],
            "spaced_p50": figures["spaced_p50_ms"] / tenant["spaced_p50_ms"],
            "cells_per_s": figures["cells_per_s"] / tenant["cells_per_s"],
            "density": figures["parked_per_process"] / tenant["parked_per_process"],
        }
    return out


def main(argv: list[str]) -> int:
    import argparse

    from .report import render_isolation

    parser = argparse.ArgumentParser(prog="python -m bench isolation", description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0, help="each load phase")
    parser.add_argument("--rounds", type=int, default=3, help="rounds alternating the four modes")
    parser.add_argument("--workers", type=int, default=0, help="CODEMODE_WORKERS of each service (default 4)")
    args = parser.parse_args(argv)
    print(render_isolation(run_isolation(args.workers, args.seconds, args.rounds)))
    return 0
