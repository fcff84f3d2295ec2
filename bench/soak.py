"""``python -m bench soak``: benign and hostile traffic from four tenants against the real service.

Starts ``codemode serve`` (4 workers, four API keys, the shipping example plugin, SQLite in a temp
dir) on loopback.  For ``--seconds`` each tenant runs benign loops (``return 1``, a small tool call,
a short timer) and one hostile loop cycling through the soak subset of the hostile corpus
(``tests/support/hostile.py``); a probe asks ``/healthz`` throughout.  It prints benign p50/p99 per
tenant, the 5xx count (must be 0), ``/healthz`` latency, and the RSS of the service and its workers
at the start and the end.  Exit status 1 when any 5xx was answered.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.hostile import Caller, soak_cases
from tests.support.tenant_server import TENANT_KEYS, HealthProbe, LiveServer, percentile

MiB = 1024 * 1024
BENIGN = (
    ("return_1", "return 1", 1),
    ("tool_call", 'return (await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2})).currency', "USD"),
    ("short_timer", "await new Promise(r => setTimeout(r, 5)); return 3", 3),
)


@dataclass
class TenantStats:
    latencies: list[float] = field(default_factory=list)
    benign_bad: Counter[str] = field(default_factory=Counter)  # status or outcome -> count
    hostile_runs: int = 0
    hostile_violations: Counter[str] = field(default_factory=Counter)  # case id -> count
    statuses: Counter[int] = field(default_factory=Counter)
    unanswered: int = 0  # requests that timed out or lost their connection


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=30.0, help="how long traffic runs (default 30)")
    p.add_argument("--workers", type=int, default=4, help="CODEMODE_WORKERS of the served service")
    p.add_argument("--benign-loops", type=int, default=2, help="concurrent benign loops per tenant")
    p.add_argument("--no-hostile", action="store_true", help="benign traffic only (a baseline)")
    p.add_argument("--skip", default="", help="comma-separated case id prefixes to leave out of the hostile mix")
    return p


async def _benign_loop(http: httpx.AsyncClient, tenant: str, deadline: float, stats: TenantStats, start: int) -> None:
    headers = {"authorization": "Bearer " + TENANT_KEYS[tenant]}
    for name, code, want in itertools.islice(itertools.cycle(BENIGN), start, None):
        if time.monotonic() >= deadline:
            return
        t0 = time.monotonic()
        try:
            r = await http.post("/v1/exec", json={"code": code}, headers=headers, timeout=30.0)
        except httpx.HTTPError as exc:
            stats.benign_bad[f"{name}: {type(exc).__name__}"] += 1
            stats.unanswered += 1
            continue
        stats.latencies.append(time.monotonic() - t0)
        stats.statuses[r.status_code] += 1
        if r.status_code != 200:
            stats.benign_bad[f"{name}: HTTP {r.status_code}"] += 1
        elif r.json().get("status") != "completed" or r.json().get("value") != want:
            stats.benign_bad[f"{name}: {r.json().get('status')} {str(r.json().get('error', ''))[:60]}"] += 1


def _mix(skip: tuple[str, ...]) -> list[Any]:
    return [c for c in soak_cases() if not (skip and c.id.startswith(skip))]


async def _hostile_loop(
    http: httpx.AsyncClient,
    tenant: str,
    deadline: float,
    stats: TenantStats,
    start: int,
    server: LiveServer,
    cases: list[Any],
) -> None:
    for case in itertools.islice(itertools.cycle(cases), start, None):
        if time.monotonic() >= deadline:
            return
        caller = Caller(http, TENANT_KEYS, tenant=tenant, server_rss=lambda: server.rss_bytes()[0])
        try:
            await case.run(caller)
        except AssertionError:
            stats.hostile_violations[case.id] += 1
        except httpx.HTTPError as exc:
            stats.hostile_violations[f"{case.id} ({type(exc).__name__})"] += 1
            stats.unanswered += 1
        stats.hostile_runs += 1
        stats.statuses.update(a.status for a in caller.answers)


async def _traffic(server: LiveServer, seconds: float, benign_loops: int, cases: list[Any]) -> dict[str, TenantStats]:
    stats = {tenant: TenantStats() for tenant in TENANT_KEYS}
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=server.base, limits=limits) as http:
        loops = []
        for i, tenant in enumerate(TENANT_KEYS):
            loops += [_benign_loop(http, tenant, deadline, stats[tenant], j) for j in range(benign_loops)]
            if cases:
                # Each tenant starts at a different case so the mix is spread over the run.
                loops.append(_hostile_loop(http, tenant, deadline, stats[tenant], i * 5, server, cases))
        await asyncio.gather(*loops)
    return stats


async def _warm(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base, timeout=30.0) as http:
        for tenant, key in TENANT_KEYS.items():
            for _, code, _ in BENIGN:
                await http.post("/v1/exec", json={"code": code}, headers={"authorization": "Bearer " + key})


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f}"


def run_soak(
    seconds: float = 30.0, workers: int = 4, benign_loops: int = 2, hostile: bool = True, skip: tuple[str, ...] = ()
) -> dict[str, Any]:
    cases = _mix(skip) if hostile else []
    tmp = Path(tempfile.mkdtemp(prefix="codemode-soak-"))
    server = LiveServer(tmp, workers=workers)
    server.start()
    try:
        asyncio.run(_warm(server))
        rss_start = server.rss_bytes()
        probe = HealthProbe(server, interval_s=0.05).start()
        started = time.monotonic()
        stats = asyncio.run(_traffic(server, seconds, benign_loops, cases))
        elapsed = time.monotonic() - started
        probe.stop()
        # Let recycled workers be replaced before the final reading.
        time.sleep(1.0)
        rss_end = server.rss_bytes()
        alive = server.answers(2.0)
    finally:
        server.stop()
    health = [lat for _, lat in probe.samples]
    return {
        "seconds": elapsed,
        "stats": stats,
        "rss_start": rss_start,
        "rss_end": rss_end,
        "alive": alive,
        "healthz": health,
        "healthz_failures": probe.failures,
        "cases": [c.id for c in cases],
        "hostile": hostile,
        "workers": workers,
    }


def render(result: dict[str, Any]) -> str:
    stats: dict[str, TenantStats] = result["stats"]
    lines = [
        f"soak: {result['seconds']:.1f} s, 4 tenants, {result['workers']} workers; hostile mix "
        f"({len(result['cases'])} cases): {'on' if result['hostile'] else 'off'}",
        "",
        "tenant   benign      p50 ms   p99 ms   max ms  benign-bad  hostile-runs  hostile-violations",
    ]
    total = Counter[int]()
    for tenant, s in stats.items():
        lat = s.latencies
        total.update(s.statuses)
        lines.append(
            f"{tenant:8} {len(lat):6}  {_ms(percentile(lat, 0.5))} {_ms(percentile(lat, 0.99))} "
            f"{_ms(max(lat, default=float('nan')))}  {sum(s.benign_bad.values()):10}  {s.hostile_runs:12}  "
            f"{sum(s.hostile_violations.values()):18}"
        )
    five = sum(n for status, n in total.items() if status >= 500)
    unanswered = sum(s.unanswered for s in stats.values())
    lines += [
        "",
        f"HTTP statuses: {dict(sorted(total.items()))}",
        f"5xx answers: {five}" + ("" if five == 0 else "   <-- must be 0"),
        f"requests without an answer (timeout/connection lost): {unanswered}"
        + ("" if unanswered == 0 else "   <-- must be 0"),
    ]
    health = result["healthz"]
    lines.append(
        f"/healthz: {len(health)} probes, p50 {percentile(health, 0.5) * 1000:.1f} ms, "
        f"p99 {percentile(health, 0.99) * 1000:.1f} ms, max {max(health, default=0) * 1000:.0f} ms, "
        f"failed probes {result['healthz_failures']}"
    )
    (s0, w0), (s1, w1) = result["rss_start"], result["rss_end"]
    lines.append(
        f"RSS service {s0 / MiB:.0f} -> {s1 / MiB:.0f} MiB ({(s1 - s0) / MiB:+.0f}); workers {w0 / MiB:.0f} -> "
        f"{w1 / MiB:.0f} MiB ({(w1 - w0) / MiB:+.0f}); total {(s1 + w1 - s0 - w0) / MiB:+.0f} MiB"
    )
    lines.append(f"service answered /healthz after the run: {result['alive']}")
    bad = Counter[str]()
    violations = Counter[str]()
    for s in stats.values():
        bad.update(s.benign_bad)
        violations.update(s.hostile_violations)
    if bad:
        lines.append("benign failures: " + ", ".join(f"{k} x{n}" for k, n in bad.most_common(8)))
    if violations:
        lines.append(
            "hostile cases answered against the contract: "
            + ", ".join(f"{k} x{n}" for k, n in violations.most_common())
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    print(f"soak: starting the service and running traffic for {args.seconds:.0f} s...", flush=True)
    skip = tuple(p.strip() for p in args.skip.split(",") if p.strip())
    result = run_soak(args.seconds, args.workers, args.benign_loops, not args.no_hostile, skip)
    print(render(result))
    five = sum(n for s in result["stats"].values() for status, n in s.statuses.items() if status >= 500)
    unanswered = sum(s.unanswered for s in result["stats"].values())
    return 0 if five == 0 and unanswered == 0 and result["alive"] else 1
