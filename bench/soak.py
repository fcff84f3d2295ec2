"""``python -m bench soak``: benign tenants beside hostile ones, against the real service.

Starts ``codemode serve`` (4 workers, eight API keys, the shipping example plugin, SQLite in a
temp dir) on loopback.  For ``--seconds``:

* four *benign* tenants each run benign loops (``return 1``, a small tool call, a short timer);
* two *hostile* tenants each run loops cycling through the soak subset of the hostile corpus
  (``tests/support/hostile.py``);
* a *long-burner* tenant keeps more busy loops (``while (true) {}``, the default timeout) running
  than there are workers, so it would hold every running slot if it could;
* a *many-small-values* tenant runs cells that pass a million one-element arrays (about 4 MB of
  JSON) to a tool, four times each;

while a probe asks ``/healthz`` and a sampler reads the service's RSS.  It prints, per benign
tenant, the benign cells' p50/p99/max and 5xx answers (must be 0), what the attackers got, the
``/healthz`` latency, and the service's peak RSS against the quotas that bound it.  Exit status 1
when a benign tenant got a 5xx or a request went unanswered.

``--compare PATH`` serves another source tree (e.g. an export of the main branch) in alternating
rounds with this one, and prints both side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import re
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from service.settings import Settings
from tests.support.hostile import Caller, soak_cases
from tests.support.tenant_server import ROOT, TENANT_KEYS, HealthProbe, LiveServer, percentile

MiB = 1024 * 1024
BENIGN = (
    ("return_1", "return 1", 1),
    ("tool_call", 'return (await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2})).currency', "USD"),
    ("short_timer", "await new Promise(r => setTimeout(r, 5)); return 3", 3),
)
BENIGN_TENANTS = ("alpha", "beta", "gamma", "delta")
HOSTILE_TENANTS = ("eta", "theta")
BURNER = "zeta"
SMALL_VALUES = "epsilon"
#: A cell of the many-small-values tenant: ~4 MB of JSON in a million tiny values, sent four times
#: (the tool refuses the extra field; the service has decoded it by then).
SMALL_VALUES_CELL = {
    "code": "const pad = []; for (let i = 0; i < 2e5; i++) pad.push([i % 10]);\n"
    "for (let i = 0; i < 4; i++) { try { await quote_shipping("
    '{origin: "DE", destination: "FR", weight_kg: 2, pad}) } catch (e) {} }\n'
    "return pad.length",
    "memory_limit_bytes": 256 * MiB,
    "timeout_ms": 30000,
}
BURNER_CELL = {"code": "while (true) {}"}


@dataclass
class TenantStats:
    latencies: list[float] = field(default_factory=list)
    benign_bad: Counter[str] = field(default_factory=Counter)  # status or outcome -> count
    statuses: Counter[int] = field(default_factory=Counter)
    unanswered: int = 0  # requests that timed out or lost their connection


@dataclass
class HostileStats:
    runs: int = 0
    violations: Counter[str] = field(default_factory=Counter)  # case id -> count
    statuses: Counter[int] = field(default_factory=Counter)
    unanswered: int = 0


@dataclass
class AttackerStats:
    runs: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)  # envelope status/code, or the HTTP error code
    unanswered: int = 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=30.0, help="how long traffic runs per round (default 30)")
    p.add_argument("--workers", type=int, default=4, help="CODEMODE_WORKERS of the served service")
    p.add_argument("--benign-loops", type=int, default=2, help="concurrent benign loops per benign tenant")
    p.add_argument("--hostile-loops", type=int, default=2, help="corpus loops per hostile tenant")
    p.add_argument("--burners", type=int, default=0, help="busy loops of the long-burner tenant (0: workers + 2)")
    p.add_argument("--small-values-loops", type=int, default=2, help="loops of the many-small-values tenant")
    p.add_argument("--no-hostile", action="store_true", help="benign traffic only (a baseline)")
    p.add_argument("--skip", default="", help="comma-separated case id prefixes to leave out of the hostile mix")
    p.add_argument("--compare", default="", help="another source tree to serve in alternating rounds")
    p.add_argument("--rounds", type=int, default=1, help="rounds per tree with --compare (default 1)")
    return p


def _auth(tenant: str) -> dict[str, str]:
    return {"authorization": "Bearer " + TENANT_KEYS[tenant]}


async def _benign_loop(http: httpx.AsyncClient, tenant: str, deadline: float, stats: TenantStats, start: int) -> None:
    for name, code, want in itertools.islice(itertools.cycle(BENIGN), start, None):
        if time.monotonic() >= deadline:
            return
        t0 = time.monotonic()
        try:
            r = await http.post("/v1/exec", json={"code": code}, headers=_auth(tenant), timeout=60.0)
        except httpx.HTTPError as exc:
            stats.benign_bad[f"{name}: {type(exc).__name__}"] += 1
            stats.unanswered += 1
            continue
        stats.latencies.append(time.monotonic() - t0)
        stats.statuses[r.status_code] += 1
        if r.status_code != 200:
            message = str(r.json().get("error", {}).get("message", ""))[:40]
            stats.benign_bad[f"{name}: HTTP {r.status_code} {message}"] += 1
        elif r.json().get("status") != "completed" or r.json().get("value") != want:
            stats.benign_bad[f"{name}: {r.json().get('status')} {str(r.json().get('error', ''))[:60]}"] += 1


def _mix(skip: tuple[str, ...]) -> list[Any]:
    return [c for c in soak_cases() if not (skip and c.id.startswith(skip))]


async def _hostile_loop(
    http: httpx.AsyncClient,
    tenant: str,
    deadline: float,
    stats: HostileStats,
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
            stats.violations[case.id] += 1
        except httpx.HTTPError as exc:
            stats.violations[f"{case.id} ({type(exc).__name__})"] += 1
            stats.unanswered += 1
        finally:
            await caller.close_open_cells()
        stats.runs += 1
        stats.statuses.update(a.status for a in caller.answers)


async def _attack_loop(
    http: httpx.AsyncClient, tenant: str, body: dict[str, Any], deadline: float, stats: AttackerStats
) -> None:
    while time.monotonic() < deadline:
        try:
            r = await http.post("/v1/exec", json=body, headers=_auth(tenant), timeout=90.0)
        except httpx.HTTPError:
            stats.unanswered += 1
            continue
        stats.runs += 1
        stats.statuses[r.status_code] += 1
        answer = r.json()
        if r.status_code == 200:
            stats.outcomes[f"{answer.get('status')} {answer.get('code', '')}".strip()] += 1
        else:
            stats.outcomes[str(answer.get("error", {}).get("code"))] += 1
            if r.status_code in (429, 503):
                await asyncio.sleep(float(r.headers.get("retry-after", "1")))  # a well-behaved attacker backs off


async def _traffic(
    server: LiveServer,
    seconds: float,
    benign_loops: int,
    cases: list[Any],
    hostile_loops: int,
    burners: int,
    small_loops: int,
) -> tuple[dict[str, TenantStats], HostileStats, dict[str, AttackerStats]]:
    stats = {tenant: TenantStats() for tenant in BENIGN_TENANTS}
    hostile = HostileStats()
    attackers = {BURNER: AttackerStats(), SMALL_VALUES: AttackerStats()}
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=server.base, limits=limits) as http:
        loops = []
        for tenant in BENIGN_TENANTS:
            loops += [_benign_loop(http, tenant, deadline, stats[tenant], j) for j in range(benign_loops)]
        if cases:
            for i, (tenant, _j) in enumerate(itertools.product(HOSTILE_TENANTS, range(hostile_loops))):
                # Each loop starts at a different case so the mix is spread over the run.
                loops.append(_hostile_loop(http, tenant, deadline, hostile, i * 5, server, cases))
        loops += [_attack_loop(http, BURNER, BURNER_CELL, deadline, attackers[BURNER]) for _ in range(burners)]
        loops += [
            _attack_loop(http, SMALL_VALUES, SMALL_VALUES_CELL, deadline, attackers[SMALL_VALUES])
            for _ in range(small_loops)
        ]
        await asyncio.gather(*loops)
    return stats, hostile, attackers


async def _warm(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.base, timeout=30.0) as http:
        for tenant in BENIGN_TENANTS:
            for _, code, _ in BENIGN:
                await http.post("/v1/exec", json={"code": code}, headers=_auth(tenant))


class RssSampler:
    """A thread reading the service process's RSS every ``interval_s``; keeps the peak."""

    def __init__(self, server: LiveServer, interval_s: float = 0.1) -> None:
        self.server = server
        self.interval_s = interval_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.server.rss_bytes()[0])
            self._stop.wait(self.interval_s)


def quota_bound() -> list[tuple[str, int]]:
    """What the service may hold beyond its base in this run, by the documented quotas (default settings)."""
    s = Settings()
    tenants = len(TENANT_KEYS)
    return [
        (
            f"saved results: min({tenants} tenants x tenant_results_bytes, results_max_bytes)",
            min(tenants * s.tenant_results_bytes, s.results_max_bytes),
        ),
        ("event logs of finished cells: events_retained_bytes", s.events_retained_bytes),
    ]


POOL_COUNTERS = (
    "codemode_workers_spawned_total",
    "codemode_workers_recycled_total",
    "codemode_worker_replacements_refused_total",
)


def _pool_counters(server: LiveServer) -> dict[str, float]:
    """The worker pool's counters from /metrics (a counter the served tree lacks is left out)."""
    text = httpx.get(server.base + "/metrics", headers=_auth(BENIGN_TENANTS[0]), timeout=5.0).text
    found = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(codemode_\w+_total) (\S+)$", text, re.M)}
    return {name: found[name] for name in POOL_COUNTERS if name in found}


def run_soak(
    seconds: float = 30.0,
    workers: int = 4,
    benign_loops: int = 2,
    hostile: bool = True,
    skip: tuple[str, ...] = (),
    burners: int = 0,
    small_loops: int = 2,
    root: Path = ROOT,
    hostile_loops: int = 2,
) -> dict[str, Any]:
    cases = _mix(skip) if hostile else []
    burners = burners or workers + 2
    tmp = Path(tempfile.mkdtemp(prefix="codemode-soak-"))
    server = LiveServer(tmp, workers=workers, root=root)
    server.start()
    try:
        asyncio.run(_warm(server))
        rss_start = server.rss_bytes()
        probe = HealthProbe(server, interval_s=0.05).start()
        started = time.monotonic()
        with RssSampler(server) as rss:
            stats, hostile_stats, attackers = asyncio.run(
                _traffic(
                    server,
                    seconds,
                    benign_loops,
                    cases,
                    hostile_loops,
                    burners if hostile else 0,
                    small_loops if hostile else 0,
                )
            )
        elapsed = time.monotonic() - started
        probe.stop()
        # Let recycled workers be replaced before the final reading.
        time.sleep(1.0)
        rss_end = server.rss_bytes()
        alive = server.answers(2.0)
        counters = _pool_counters(server)
    finally:
        server.stop()
    return {
        "root": str(root),
        "seconds": elapsed,
        "stats": stats,
        "hostile_stats": hostile_stats,
        "attackers": attackers,
        "rss_start": rss_start,
        "rss_end": rss_end,
        "rss_peak": max(rss.peak, rss_end[0]),
        "alive": alive,
        "counters": counters,
        "healthz": [lat for _, lat in probe.samples],
        "healthz_failures": probe.failures,
        "cases": [c.id for c in cases],
        "hostile": hostile,
        "workers": workers,
        "burners": burners if hostile else 0,
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f}"


def _five(statuses: Counter[int]) -> int:
    return sum(n for status, n in statuses.items() if status >= 500)


def render(result: dict[str, Any]) -> str:
    stats: dict[str, TenantStats] = result["stats"]
    attackers: dict[str, AttackerStats] = result["attackers"]
    hostile: HostileStats = result["hostile_stats"]
    lines = [
        f"soak of {result['root']}: {result['seconds']:.1f} s, {result['workers']} workers; "
        f"{len(BENIGN_TENANTS)} benign tenants; hostile mix ({len(result['cases'])} cases) from "
        f"{len(HOSTILE_TENANTS)} tenants: {'on' if result['hostile'] else 'off'}; long-burner loops {result['burners']}",
        "",
        "tenant   benign      p50 ms   p99 ms   max ms     5xx  other-bad",
    ]
    total = Counter[int]()
    for tenant, s in stats.items():
        lat = s.latencies
        total.update(s.statuses)
        lines.append(
            f"{tenant:8} {len(lat):6}  {_ms(percentile(lat, 0.5))} {_ms(percentile(lat, 0.99))} "
            f"{_ms(max(lat, default=float('nan')))}  {_five(s.statuses):6}  {sum(s.benign_bad.values()) - _five(s.statuses):9}"
        )
    lines.append(
        f"hostile corpus ({', '.join(HOSTILE_TENANTS)}): {hostile.runs} runs, "
        f"{sum(hostile.violations.values())} against the contract, HTTP {dict(sorted(hostile.statuses.items()))}"
    )
    for role, tenant in (("long-burner", BURNER), ("many-small-values", SMALL_VALUES)):
        a = attackers[tenant]
        outcomes = ", ".join(f"{k} x{n}" for k, n in a.outcomes.most_common(4))
        lines.append(f"{role} ({tenant}): {a.runs} cells, HTTP {dict(sorted(a.statuses.items()))}; {outcomes}")
    unanswered = sum(s.unanswered for s in stats.values())
    five = sum(_five(s.statuses) for s in stats.values())
    lines += [
        "",
        f"benign tenants' HTTP statuses: {dict(sorted(total.items()))}",
        f"5xx answers to benign cells: {five}" + ("" if five == 0 else "   <-- must be 0"),
        f"requests of benign tenants without an answer (timeout/connection lost): {unanswered}"
        + ("" if unanswered == 0 else "   <-- must be 0"),
    ]
    health = result["healthz"]
    lines.append(
        f"/healthz: {len(health)} probes, p50 {percentile(health, 0.5) * 1000:.1f} ms, "
        f"p99 {percentile(health, 0.99) * 1000:.1f} ms, max {max(health, default=0) * 1000:.0f} ms, "
        f"failed probes {result['healthz_failures']}"
    )
    (s0, w0), (s1, w1) = result["rss_start"], result["rss_end"]
    bound = quota_bound()
    lines.append(
        f"RSS service {s0 / MiB:.0f} -> {s1 / MiB:.0f} MiB, peak {result['rss_peak'] / MiB:.0f} MiB; workers "
        f"{w0 / MiB:.0f} -> {w1 / MiB:.0f} MiB"
    )
    lines.append(
        f"service peak against its quotas: {result['rss_peak'] / MiB:.0f} MiB <= start {s0 / MiB:.0f} MiB + "
        + " + ".join(f"{n / MiB:.0f} MiB ({what})" for what, n in bound)
        + f" = {(s0 + sum(n for _, n in bound)) / MiB:.0f} MiB: "
        + ("yes" if result["rss_peak"] <= s0 + sum(n for _, n in bound) else "NO")
    )
    lines.append(f"service answered /healthz after the run: {result['alive']}")
    lines.append(
        "worker pool: " + ", ".join(f"{k.removeprefix('codemode_')} {v:.0f}" for k, v in result["counters"].items())
    )
    bad = Counter[str]()
    for s in stats.values():
        bad.update(s.benign_bad)
    if bad:
        lines.append("benign failures: " + ", ".join(f"{k} x{n}" for k, n in bad.most_common(8)))
    if hostile.violations:
        lines.append(
            "hostile cases answered against the contract: "
            + ", ".join(f"{k} x{n}" for k, n in hostile.violations.most_common())
        )
    return "\n".join(lines)


def render_comparison(results: list[dict[str, Any]]) -> str:
    """Per benign tenant, p99 and 5xx of each round, in the order run."""
    head = "tenant   " + "  ".join(f"{Path(r['root']).name[:14]:>14} p99 ms / 5xx" for r in results)
    lines = ["", "rounds side by side (same machine, alternating):", head]
    for tenant in BENIGN_TENANTS:
        cells = []
        for r in results:
            s = r["stats"][tenant]
            cells.append(f"{percentile(s.latencies, 0.99) * 1000:16.1f} / {_five(s.statuses):3}")
        lines.append(f"{tenant:8} " + "  ".join(cells))
    lines.append(
        "peak RSS " + "  ".join(f"{Path(r['root']).name[:14]:>14} {r['rss_peak'] / MiB:6.0f} MiB" for r in results)
    )
    return "\n".join(lines)


def _passed(result: dict[str, Any]) -> bool:
    stats: dict[str, TenantStats] = result["stats"]
    benign_five = sum(_five(s.statuses) for s in stats.values())
    unanswered = sum(s.unanswered for s in stats.values())
    return benign_five == 0 and unanswered == 0 and bool(result["alive"])


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    skip = tuple(p.strip() for p in args.skip.split(",") if p.strip())
    roots = [ROOT]
    if args.compare:
        roots = [Path(args.compare).resolve(), ROOT] * max(1, args.rounds)
    results = []
    for root in roots:
        print(f"soak: serving {root}, traffic for {args.seconds:.0f} s...", flush=True)
        result = run_soak(
            args.seconds,
            args.workers,
            args.benign_loops,
            not args.no_hostile,
            skip,
            args.burners,
            args.small_values_loops,
            root,
            args.hostile_loops,
        )
        print(render(result), flush=True)
        results.append(result)
    if len(results) > 1:
        print(render_comparison(results))
    return 0 if all(_passed(r) for r in results if Path(r["root"]) == ROOT) else 1
