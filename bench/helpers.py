"""``python -m bench helpers``: a helper per principal, reused, against a fresh helper per job.

Two in-process services run side by side, one with ``worker_isolation = "key"`` (a body's helper is its
principal's, reused) and one with ``"cell"`` (a fresh helper per body, taken from a spare, stopped after
it); requests go through the whole HTTP stack in-process (``httpx.ASGITransport``: the request gate, its
decoding, the exec route, a real worker).  Each round times, for each service in turn, ``--requests``
sequential execs of ``return 1`` whose body is 1 KiB (decoded inline: the baseline) or 300 KiB (decoded
inline with ``INLINE_BYTES`` raised for the run, the same cell without a helper; and over the inline
limit: decoded in a helper; for ``cell`` both back to back and one at a time once its spare
is ready), and ``--starts`` helper starts (spawn to ``ready``, confinement
included) with the CPU they cost and a started helper's resident memory.  Rounds alternate the two
services, so the machine's drift hits both alike; medians over all rounds are printed, each as a ratio
to the 1 KiB exec measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from service.app import create_app
from service.assembly import Components, build_components
from service.helpers.helper import start_helper
from service.http import request_json
from service.http.request_json import INLINE_BYTES
from service.settings import Settings

MODES = ("key", "cell")
SMALL = {"code": "return 1"}
LARGE = {"code": "return 1 // " + "x" * (INLINE_BYTES + 44 * 1024)}  # 300 KiB: decoded in a helper


async def _exec_ms(client: httpx.AsyncClient, body: dict[str, str]) -> float:
    t0 = time.perf_counter()
    r = await client.post("/v1/exec", json=body)
    elapsed = (time.perf_counter() - t0) * 1000
    if r.status_code != 200 or r.json().get("value") != 1:
        raise RuntimeError(f"bench exec failed: {r.status_code} {r.text[:300]}")
    return elapsed


async def _spare_ready(svc: Components) -> None:
    while not svc.helpers.spares:
        await asyncio.sleep(0.01)


async def _start_figures(svc: Components, starts: int) -> tuple[list[float], list[float], list[float]]:
    """Per start: wall ms to ready, CPU ms of the started process, its resident MiB once ready."""
    walls, cpus, rss = [], [], []
    for _ in range(starts):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        helper = await start_helper(svc.helpers.options)
        walls.append((time.perf_counter() - t0) * 1000)
        status = Path(f"/proc/{helper.pid}/status").read_text()
        rss.append(int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024)
        helper.stop()
        await helper.wait()  # reaped: its CPU is now the children's
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)) * 1000)
    return walls, cpus, rss


async def run_helpers(rounds: int, requests: int, starts: int) -> dict[str, Any]:
    services: dict[str, Components] = {}
    clients: dict[str, httpx.AsyncClient] = {}
    samples: dict[str, list[float]] = {
        name: [] for name in ("small", "inline", "key", "cell", "cell_spare", "start", "start_cpu", "rss")
    }
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for mode in MODES:
                settings = Settings().replace(data_dir=f"{tmp}/{mode}", workers=2, worker_isolation=mode).check()
                svc = services[mode] = build_components(settings, store=False)
                await svc.start()
                transport = httpx.ASGITransport(app=create_app(settings, svc))
                clients[mode] = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=60)
            for client in clients.values():  # warm: first cells, each service's first helper
                for body in (SMALL, LARGE, SMALL, LARGE):
                    await _exec_ms(client, body)
            for _ in range(rounds):
                for _ in range(requests):
                    samples["small"].append(await _exec_ms(clients["key"], SMALL))
                request_json.INLINE_BYTES = 2 * len(LARGE["code"])  # the same body, decoded on the loop
                try:
                    for _ in range(requests):
                        samples["inline"].append(await _exec_ms(clients["key"], LARGE))
                finally:
                    request_json.INLINE_BYTES = INLINE_BYTES
                for mode in MODES:
                    for _ in range(requests):
                        samples[mode].append(await _exec_ms(clients[mode], LARGE))
                for _ in range(requests):  # one body at a time, each after the spare it takes is ready
                    await _spare_ready(services["cell"])
                    samples["cell_spare"].append(await _exec_ms(clients["cell"], LARGE))
                walls, cpus, rss = await _start_figures(services["key"], starts)
                samples["start"] += walls
                samples["start_cpu"] += cpus
                samples["rss"] += rss
            started = {mode: svc.helpers.started for mode, svc in services.items()}
        finally:
            for client in clients.values():
                await client.aclose()
            for svc in services.values():
                await svc.close()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return {
        "rounds": rounds,
        "requests_per_round": requests,
        "medians_ms": medians,
        "ratio_to_small": {
            name: medians[name] / medians["small"] for name in ("inline", "key", "cell", "cell_spare", "start")
        },
        "helpers_started": started,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench helpers", description=__doc__)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--requests", type=int, default=20, help="sequential execs per body size and mode per round")
    p.add_argument("--starts", type=int, default=3, help="helper starts per round")
    args = p.parse_args(sys.argv[2:] if argv is None else argv)
    result = asyncio.run(run_helpers(args.rounds, args.requests, args.starts))
    m, r = result["medians_ms"], result["ratio_to_small"]
    print(f"helper processes over {args.rounds} alternating rounds (medians; ratios to the 1 KiB exec)")
    print(f"  exec, 1 KiB body, decoded inline           : {m['small']:.2f} ms   ×1.00")
    print(
        f"  exec, 300 KiB body, decoded inline         : {m['inline']:.2f} ms   ×{r['inline']:.2f}"
        "   (INLINE_BYTES raised for the run: what the helper's round trip adds to)"
    )
    print(f"  exec, 300 KiB body, principal's helper     : {m['key']:.2f} ms   ×{r['key']:.2f}   (key isolation)")
    print(
        f"  exec, 300 KiB body, fresh helper per body  : {m['cell']:.2f} ms   ×{r['cell']:.2f}"
        "   (cell isolation, back to back: each waits for its spare's start)"
    )
    print(
        f"  the same, one at a time, spare ready       : {m['cell_spare']:.2f} ms   ×{r['cell_spare']:.2f}"
        "   (cell isolation)"
    )
    print(
        f"  helper start to ready                      : {m['start']:.1f} ms   ×{r['start']:.1f}"
        f"   (CPU {m['start_cpu']:.0f} ms, resident {m['rss']:.0f} MiB)"
    )
    print(f"  helpers started                            : {result['helpers_started']}")
    return 0
