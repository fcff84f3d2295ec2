"""``python -m bench capacity``: what one tenant's load costs another, scenario by scenario.

Starts ``codemode serve`` (4 workers, the soak's API keys) and, per scenario, has tenant ``alpha``
load the service while tenant ``beta`` (the victim) sends ``return 1`` every 50 ms for
``--seconds``:

* ``idle``: no load (the victim's baseline);
* ``busy_loops``: 4 ``while (true) {}`` cells at a time (the default 10 s timeout), one per worker;
* ``memory_bombs``: 4 cells at a time that grow an array past an 8 MiB heap (processes started
  during the scenario are counted);
* ``search_heavy``: 8 cells at a time, each making 200 ``catalog.search`` calls;
* ``background_legs``: 32 background cells, each running guest code in 15 ms stretches between
  timers; the most stretches that ran at once (by the guests' own clocks) is reported.

It prints the victim's p50/p99/max and HTTP statuses per scenario.  ``--compare PATH`` runs every
scenario on another source tree too, alternating with this one, so both see the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.tenant_server import ROOT, TENANT_KEYS, LiveServer, percentile

MiB = 1024 * 1024
VICTIM_EVERY_S = 0.05
STRETCHES = (
    "const marks = [];\n"
    "for (let i = 0; i < 8; i++) {\n"
    "  await new Promise(r => setTimeout(r, 1));\n"
    "  const t0 = Date.now(); while (Date.now() - t0 < 15) {}\n"
    "  marks.push([t0, Date.now()]);\n"
    "}\n"
    "return marks;"
)
#: scenario -> (the hog's exec body, how many at a time)
LOADS: dict[str, tuple[dict[str, Any], int]] = {
    "idle": ({}, 0),
    "busy_loops": ({"code": "while (true) {}"}, 4),
    "memory_bombs": (
        {"code": 'const a = []; while (true) a.push("x".repeat(1e5) + a.length)', "memory_limit_bytes": 8 * MiB},
        4,
    ),
    "search_heavy": (
        {
            "code": "for (let i = 0; i < 200; i++) await catalog.search('ship quote ' + i); return 1",
            "timeout_ms": 30000,
        },
        8,
    ),
    "background_legs": ({"code": STRETCHES, "background": True, "timeout_ms": 30000}, 32),
}


@dataclass
class Outcome:
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    spawned: float = 0.0
    most_at_once: int = 0
    hog_runs: int = 0


def _auth(tenant: str) -> dict[str, str]:
    return {"authorization": "Bearer " + TENANT_KEYS[tenant]}


async def _spawned(http: httpx.AsyncClient) -> float:
    text = (await http.get("/metrics", headers=_auth("alpha"))).text
    found = re.search(r"^codemode_workers_spawned_total (\S+)$", text, re.M)
    return float(found.group(1)) if found else float("nan")


def most_at_once(intervals: list[tuple[int, int]]) -> int:
    """The most half-open [start, end) intervals that overlap at one instant (at a tie, an end comes first)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


async def _hog(http: httpx.AsyncClient, body: dict[str, Any], stop: float, out: Outcome) -> None:
    while time.monotonic() < stop:
        r = await http.post("/v1/exec", json=body, headers=_auth("alpha"), timeout=90.0)
        out.hog_runs += 1
        if r.status_code in (429, 503):
            await asyncio.sleep(float(r.headers.get("retry-after", "1")))


async def _background(http: httpx.AsyncClient, body: dict[str, Any], n: int, out: Outcome) -> None:
    ids = []
    for _ in range(n):
        r = await http.post("/v1/exec", json=body, headers=_auth("alpha"), timeout=90.0)
        if r.status_code == 200:
            ids.append(r.json()["cell_id"])
    marks: list[tuple[int, int]] = []
    for cell_id in ids:
        r = await http.post(f"/v1/cells/{cell_id}/wait", json={"timeout_ms": 60000}, headers=_auth("alpha"), timeout=90)
        value = r.json().get("value") if r.status_code == 200 else None
        marks += [tuple(m) for m in value or []]  # type: ignore[misc]
    out.hog_runs = len(ids)
    out.most_at_once = most_at_once(marks)


async def _scenario(server: LiveServer, name: str, seconds: float) -> Outcome:
    body, n = LOADS[name]
    out = Outcome()
    async with httpx.AsyncClient(base_url=server.base, timeout=60.0) as http:
        for _ in range(3):
            await http.post("/v1/exec", json={"code": "return 1"}, headers=_auth("beta"))
        spawned = await _spawned(http)
        stop = time.monotonic() + seconds
        if name == "background_legs":
            hogs = [asyncio.ensure_future(_background(http, body, n, out))]
        else:
            hogs = [asyncio.ensure_future(_hog(http, body, stop, out)) for _ in range(n)]
        while time.monotonic() < stop:
            t0 = time.monotonic()
            r = await http.post("/v1/exec", json={"code": "return 1"}, headers=_auth("beta"))
            out.latencies.append(time.monotonic() - t0)
            out.statuses[r.status_code] += 1
            await asyncio.sleep(VICTIM_EVERY_S)
        out.spawned = await _spawned(http) - spawned
        await asyncio.gather(*hogs)
    return out


def run_capacity(root: Path, seconds: float, workers: int, scenarios: list[str]) -> dict[str, Outcome]:
    results = {}
    for name in scenarios:
        server = LiveServer(Path(tempfile.mkdtemp(prefix="codemode-capacity-")), workers=workers, root=root)
        server.start()
        try:
            results[name] = asyncio.run(_scenario(server, name, seconds))
        finally:
            server.stop()
    return results


def render(rows: list[tuple[str, str, Outcome]]) -> str:
    lines = [
        "scenario         tree            victim  p50 ms   p99 ms   max ms  statuses          "
        "spawned  hog cells  most legs at once"
    ]
    for name, tree, o in rows:
        lat = o.latencies
        lines.append(
            f"{name:16} {tree[:14]:14} {len(lat):7} {percentile(lat, 0.5) * 1000:7.1f} "
            f"{percentile(lat, 0.99) * 1000:8.1f} {max(lat, default=0) * 1000:8.0f}  "
            f"{str(dict(sorted(o.statuses.items()))):16} {o.spawned:8.0f} {o.hog_runs:10} "
            f"{o.most_at_once if name == 'background_legs' else '':>18}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench capacity", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10.0, help="victim traffic per scenario (default 10)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--compare", default="", help="another source tree, run alternately with this one")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--only", default="", help="comma-separated scenarios (default: all)")
    args = p.parse_args(argv)
    scenarios = [s for s in args.only.split(",") if s] or list(LOADS)
    trees = [Path(args.compare).resolve(), ROOT] if args.compare else [ROOT]
    rows: list[tuple[str, str, Outcome]] = []
    for _ in range(max(1, args.rounds)):
        for name in scenarios:
            for tree in trees:
                print(f"capacity: {name} on {tree} ...", flush=True)
                rows.append((name, tree.name, run_capacity(tree, args.seconds, args.workers, [name])[name]))
    rows.sort(key=lambda r: scenarios.index(r[0]))
    print(render(rows))
    return 0
