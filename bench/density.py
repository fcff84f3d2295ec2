"""Density: how much memory parked cells cost, and how fast they park and resume.

Starts the real service (one tenant, default settings except the per-tenant parked cap, raised so
one tenant can park them all), parks cells that each keep their own state in their heap, reads the
PSS of the service process and every worker process from ``/proc/<pid>/smaps_rollup`` at 0, 256 and
1,000 parked cells, then resumes every cell and checks it returns its own state.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from .servers import Server, codemode_server, descendants

#: Each cell keeps an id and a 1 KiB string of its own in its heap; the resume returns both.
PARK = (
    "globalThis.state = {{id: {n}, tag: 'cell-{n}-'.padEnd(1024, 'x')}}; await yield_control('park'); "
    "return [state.id, state.tag.length, state.tag.startsWith('cell-{n}-')]"
)
STEPS = (256, 1000)
#: The default of ``worker_max_runtimes`` (the bench runs with default settings).
RUNTIMES_PER_PROCESS = 64


def pss_kib(pid: int) -> int:
    """Proportional set size of one process (shared pages split among their users)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def total_pss_mib(server: Server) -> tuple[float, int]:
    """PSS of the service process and all its worker processes, in MiB, and the number of workers."""
    children = descendants(server.proc.pid)
    kib = pss_kib(server.proc.pid) + sum(pss_kib(c) for c in children)
    return kib / 1024, len(children)


def metric(client: httpx.Client, name: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "_total "):
            return float(line.split()[-1])
    return float("nan")


def _exec_ms(client: httpx.Client, code: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    r = client.post("/v1/exec", json={"code": code})
    took = (time.perf_counter() - started) * 1000
    r.raise_for_status()
    return took, r.json()


def _new_cells(client: httpx.Client, n: int = 200) -> dict[str, float]:
    """Latency of ``return 1`` cells: at the client, and the leg inside the service (telemetry wall_ms).

    The service-side figure is what parked cells could slow down; the client figure also carries
    HTTP and whatever else the machine runs.
    """
    client_ms, leg_ms = [], []
    for _ in range(n):
        took, env = _exec_ms(client, "return 1")
        client_ms.append(took)
        leg_ms.append(env["telemetry"]["wall_ms"])
    return {**_pcts(client_ms), "leg_p50_ms": statistics.median(leg_ms)}


def _pcts(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50_ms": statistics.median(ordered), "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]}


def settle(client: httpx.Client) -> None:
    """Let background spawns finish so PSS is read on a quiet pool."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and metric(client, 'codemode_workers{state="spawning"}') > 0:
        time.sleep(0.1)


def run_density(workers: int = 0) -> dict[str, Any]:
    # exec refuses a tenant at its parked cap even for a cell that will not park: leave room for one more.
    env = {"CODEMODE_TENANT_MAX_PARKED_CELLS": str(max(STEPS) + 1)}
    out: dict[str, Any] = {"steps": {}, "runtimes_per_process": RUNTIMES_PER_PROCESS}
    with codemode_server(workers, env=env) as server, httpx.Client(base_url=server.base, timeout=60) as client:
        for _ in range(20):
            _exec_ms(client, "return 1")  # warm: first cells, imports
        settle(client)
        beside_none = _new_cells(client)
        base_mib, base_workers = total_pss_mib(server)
        out["baseline"] = {"pss_mib": base_mib, "processes": base_workers + 1}
        spawned_before = metric(client, "codemode_workers_spawned")
        ids: list[str] = []
        park_ms: list[float] = []
        for target in STEPS:
            while len(ids) < target:
                took, env_ = _exec_ms(client, PARK.format(n=len(ids)))
                if env_["status"] != "waiting":
                    raise RuntimeError(f"cell {len(ids)} did not park: {env_}")
                park_ms.append(took)
                ids.append(env_["cell_id"])
            settle(client)
            mib, nworkers = total_pss_mib(server)
            out["steps"][str(target)] = {
                "pss_mib": mib,
                "processes": nworkers + 1,
                "pss_per_parked_kib": (mib - base_mib) * 1024 / target,
            }
        out["spawned_while_parking"] = metric(client, "codemode_workers_spawned") - spawned_before
        beside_parked = _new_cells(client)
        resume_ms: list[float] = []
        wrong = 0
        for n, cell_id in enumerate(ids):
            started = time.perf_counter()
            r = client.post(f"/v1/cells/{cell_id}/wait", json={})
            resume_ms.append((time.perf_counter() - started) * 1000)
            env_ = r.json()
            if r.status_code != 200 or env_.get("status") != "completed" or env_.get("value") != [n, 1024, True]:
                wrong += 1
        out["park"] = _pcts(park_ms)
        out["resume"] = _pcts(resume_ms)
        out["resumed"] = len(ids)
        out["resumed_wrong"] = wrong
        out["new_cell_beside_none"] = beside_none
        out["new_cell_beside_parked"] = {**beside_parked, "parked": len(ids)}
    if wrong:
        raise AssertionError(f"{wrong} of {len(ids)} parked cells did not resume with their own state")
    return out


def main() -> int:
    from .report import render_density

    print(render_density(run_density()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
