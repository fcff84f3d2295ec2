"""``python bench/loop_attacks.py [--roots DIR ...]``: caller-sized work that could hold the event loop.

For each attack, a real ``codemode serve`` (2 workers, from each ``--roots`` tree in turn, so a
tree before a change and one after it alternate on the same machine) serves tenant alpha's attack
while tenant beta sends ``return 1`` every 50 ms on its own connection and a probe asks ``/healthz``
every 20 ms; the victim's and the probe's worst latency during the attack (and in 2 s idle before
it) are printed with the attack's own answers.

- ``schema_bomb``: 8 concurrent execs whose client tool ``input_schema`` holds 600k empty arrays (1.8 MB).
- ``schema_costly``: 8 concurrent execs, each declaring 2 valid schemas never seen before of 990 subschemas
  each (the most the 2,000-object cap allows: ~0.3 s of meta-schema checking apiece).
- ``pattern``: 2 cells each calling a client tool whose schema has the pattern
  ``[ab]*a[ab]{999}[ab]{999}c`` with a 200k-character a/b string.
- ``tool_results``: 8 concurrent waits carrying 40,000 ``tool_results`` entries each (840 KB).
- ``unread``: 64 connections ask for a 9.6 MB cell status and never read; the service's RSS before,
  at its peak, and 20 s later (after the default 15 s write timeout).

Run it with the repository's virtualenv from anywhere: ``--roots`` defaults to this tree; a tree is
used through ``PYTHONPATH`` (its ``tests/support/tenant_server.py`` starts its own service).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ATTACKS = ("schema_bomb", "schema_costly", "pattern", "tool_results", "unread")
PATTERN = "[ab]*a[ab]{999}[ab]{999}c"


async def _victim(base: str, key: str, stop: asyncio.Event, worst: list[float]) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=base, timeout=60.0) as http:
        while not stop.is_set():
            started = time.monotonic()
            r = await http.post("/v1/exec", json={"code": "return 1"}, headers={"authorization": "Bearer " + key})
            worst.append(time.monotonic() - started)
            if r.status_code != 200:
                worst.append(float("inf"))
            await asyncio.sleep(0.05)


async def _attack(name: str, base: str, key: str, server: Any) -> str:
    import httpx

    auth = {"authorization": "Bearer " + key}
    async with httpx.AsyncClient(base_url=base, timeout=120.0) as http:
        if name == "schema_bomb":
            body = json.dumps(
                {"code": "return 1", "client_tools": [{"name": "t", "input_schema": {"x": [[]] * 600_000}}]},
                separators=(",", ":"),
            ).encode()
            posts = [
                http.post("/v1/exec", content=body, headers={**auth, "content-type": "application/json"})
                for _ in range(8)
            ]
            return " ".join(str(r.status_code) for r in await asyncio.gather(*posts))
        if name == "schema_costly":
            run = os.urandom(4).hex()

            def schema(tag: str) -> dict[str, Any]:
                return {"title": tag, "type": "object", "properties": {f"p{i}": {} for i in range(990)}}

            posts = [
                http.post(
                    "/v1/exec",
                    json={
                        "code": "return 1",
                        "client_tools": [{"name": f"t{j}", "input_schema": schema(f"{run}-{i}-{j}")} for j in range(2)],
                    },
                    headers=auth,
                )
                for i in range(8)
            ]
            return " ".join(str(r.status_code) for r in await asyncio.gather(*posts))
        if name == "pattern":
            schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": PATTERN}}}
            code = (
                "const s = 'ab'.repeat(100000);"
                "try { await t({s}) } catch (e) { return e.code + ': ' + e.message.slice(0, 60) } return 'waiting'"
            )
            execs = [
                http.post(
                    "/v1/exec",
                    json={"code": code, "client_tools": [{"name": "t", "input_schema": schema}]},
                    headers=auth,
                )
                for _ in range(2)
            ]
            answers = await asyncio.gather(*execs)
            for r in answers:  # a parked cell (the check passed) is cancelled again
                if r.json().get("status") == "waiting":
                    await http.post(f"/v1/cells/{r.json()['cell_id']}/cancel", headers=auth)
            return " | ".join(str(r.json().get("value") or r.json().get("status")) for r in answers)
        if name == "tool_results":
            env = (
                await http.post(
                    "/v1/exec", json={"code": "return await t({})", "client_tools": [{"name": "t"}]}, headers=auth
                )
            ).json()
            # 840 KB: under the 1 MiB a wait body may hold besides values, so only a count cap refuses it early.
            body = json.dumps({"tool_results": [{"id": "x", "ok": True}] * 40_000}, separators=(",", ":"))
            waits = [
                http.post(
                    f"/v1/cells/{env['cell_id']}/wait",
                    content=body,
                    headers={**auth, "content-type": "application/json"},
                )
                for _ in range(8)
            ]
            statuses = " ".join(str(r.status_code) for r in await asyncio.gather(*waits))
            await http.post(f"/v1/cells/{env['cell_id']}/cancel", headers=auth)
            return statuses
        if name == "unread":
            code = "const s = 'x'.repeat(4_800_000); return await Promise.all([t({s}), t({s})])"
            env = (
                await http.post("/v1/exec", json={"code": code, "client_tools": [{"name": "t"}]}, headers=auth)
            ).json()
            before = server.rss_bytes()[0]
            socks = []
            for _ in range(64):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.connect(("127.0.0.1", server.port))
                s.sendall(
                    f"GET /v1/cells/{env['cell_id']} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n".encode()
                )
                socks.append(s)
            peak, ends = before, time.monotonic() + 20.0
            while time.monotonic() < ends:
                await asyncio.sleep(0.5)
                peak = max(peak, server.rss_bytes()[0])
            after = server.rss_bytes()[0]
            for s in socks:
                s.close()
            await http.post(f"/v1/cells/{env['cell_id']}/cancel", headers=auth)
            mib = 1024 * 1024
            return f"RSS {before // mib} -> peak {peak // mib} -> after 20 s {after // mib} MiB"
    raise ValueError(name)


async def _one(name: str) -> dict[str, Any]:
    from tests.support.tenant_server import TENANT_KEYS, HealthProbe, LiveServer

    server = LiveServer(Path(tempfile.mkdtemp(prefix="loop-attacks-")), workers=2)
    server.start()
    probe = HealthProbe(server).start()
    try:
        stop, worst = asyncio.Event(), []
        victim = asyncio.create_task(_victim(server.base, TENANT_KEYS["beta"], stop, worst))
        idle_from = time.monotonic()
        await asyncio.sleep(2.0)
        idle, idle_healthz = max(worst, default=0.0), probe.worst_between(idle_from, time.monotonic())
        worst.clear()
        started = time.monotonic()
        outcome = await _attack(name, server.base, TENANT_KEYS["alpha"], server)
        healthz = probe.worst_between(started, time.monotonic())
        stop.set()
        await victim
        return {
            "attack": name,
            "idle_worst_ms": idle * 1000,
            "idle_healthz_ms": idle_healthz * 1000,
            "victim_worst_ms": max(worst, default=0) * 1000,
            "healthz_worst_ms": healthz * 1000,
            "outcome": outcome,
        }
    finally:
        probe.stop()
        server.stop()


def _run_in(root: Path, name: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, str(HERE), "--one", name], cwd=root, env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        return {"attack": name, "error": out.stderr[-600:]}
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--roots", nargs="+", default=[str(HERE.parents[1])], help="source trees to compare, alternating")
    p.add_argument("--attacks", nargs="+", default=list(ATTACKS), choices=ATTACKS)
    p.add_argument("--rounds", type=int, default=1, help="alternating rounds per attack")
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(asyncio.run(_one(args.one))))
        return
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name in args.attacks:
        for round_ in range(args.rounds):
            for root in args.roots:
                r = _run_in(Path(root), name)
                if "error" in r:
                    print(f"{name:13} {root}: failed: {r['error']}")
                    continue
                print(
                    f"{name:13} round {round_ + 1} {root}: victim worst {r['victim_worst_ms']:.0f} ms "
                    f"(idle {r['idle_worst_ms']:.0f}), /healthz worst {r['healthz_worst_ms']:.0f} ms "
                    f"(idle {r['idle_healthz_ms']:.0f}); {r['outcome']}"
                )


if __name__ == "__main__":
    main()
