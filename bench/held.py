"""``python -m bench held``: what held guest data costs the service, and what values cost its event loop.

Each reproduction starts its own ``codemode serve`` on loopback (the test tools plugin, four API
keys) and prints one line of figures; tenant ``beta`` sends ``return 1`` every 50 ms as the victim
while tenant ``alpha`` attacks, and a probe asks ``/healthz`` every 20 ms.  Memory is the service
process's RSS and the PSS of the whole process tree (service + workers), from /proc.

``--only NAME[,NAME]`` runs some of them: final_values, mcp_pattern, parked_background_output,
approval_parked, client_args_parked, background_output, tiny_arrays_echo, schema_empty_arrays,
cancelled_parked, inflight_args, counter (in-process: the value counter against parsing the same
texts, best of 5 alternating runs; needs no server).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from bench.servers import descendants
from tests.support.tenant_server import TENANT_KEYS, HealthProbe, LiveServer, config_toml, percentile

MiB = 1024 * 1024
PLUGINS = ("tests.support.echo_plugin",)
PAD_1M = "let pad = []; for (let i = 0; i < 1e6; i++) pad.push([i % 10]);"


def _pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def memory(server: LiveServer) -> tuple[float, float]:
    """(service RSS, process tree PSS) in MiB."""
    rss = server.rss_bytes()[0]
    pss = sum(_pss(p) for p in [server.pid, *descendants(server.pid)])
    return rss / MiB, pss / MiB


def _auth(tenant: str) -> dict[str, str]:
    return {"authorization": "Bearer " + TENANT_KEYS[tenant]}


class Victim:
    """Tenant beta's ``return 1`` every 50 ms; latencies of the answers."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self.latencies: list[float] = []
        self.errors: list[int] = []
        self._task: asyncio.Task[None] | None = None

    async def _loop(self) -> None:
        while True:
            started = time.monotonic()
            r = await self.http.post("/v1/exec", json={"code": "return 1"}, headers=_auth("beta"), timeout=60)
            self.latencies.append(time.monotonic() - started)
            if r.status_code != 200:
                self.errors.append(r.status_code)
            await asyncio.sleep(0.05)

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> str:
        assert self._task is not None
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        lat = self.latencies
        return (
            f"victim p50 {percentile(lat, 0.5) * 1000:.0f} ms, worst {max(lat, default=0) * 1000:.0f} ms, "
            f"non-200 {len(self.errors)}"
        )


def _serve(tmp: Path, extra_toml: str = "", env: dict[str, str] | None = None, workers: int = 2) -> LiveServer:
    server = LiveServer(tmp, workers=workers, env=env)
    server.config.write_text(config_toml(PLUGINS) + "\n" + extra_toml)
    server.start()
    return server


async def _exec(http: httpx.AsyncClient, body: dict[str, Any], tenant: str = "alpha", timeout: float = 180) -> Any:
    r = await http.post("/v1/exec", json=body, headers=_auth(tenant), timeout=timeout)
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, r.text


def _brief(answer: tuple[int, Any]) -> str:
    status, body = answer
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return f"{status} {err.get('code')}"
        return f"{status} {body.get('status')} {body.get('code') or ''} {str(body.get('error') or '')[:90]}".strip()
    return f"{status} {str(body)[:60]}"


async def approval_parked(server: LiveServer, http: httpx.AsyncClient) -> str:
    """3 cells parked on an approval of echo({x: pad}), pad = 1M one-number arrays (the issue's figure),
    then 3 within a 1M-value cap (pad of 400k arrays)."""
    out = []
    for count, code in (
        (1e6, PAD_1M + " return await echo({x: pad});"),
        (4e5, PAD_1M.replace("1e6", "4e5") + " return await echo({x: pad});"),
    ):
        steps = [memory(server)[0]]
        answers = []
        for _ in range(3):
            answers.append(
                await _exec(
                    http,
                    {"code": code, "require_approval": ["echo"], "memory_limit_bytes": 512 * MiB, "timeout_ms": 60000},
                )
            )
            await asyncio.sleep(0.5)
            steps.append(memory(server)[0])
        out.append(
            f"{count:.0e} arrays: RSS " + " -> ".join(f"{s:.0f}" for s in steps) + f" MiB ({_brief(answers[0])})"
        )
        for _, body in answers:
            if isinstance(body, dict) and body.get("status") == "waiting":
                await http.post(f"/v1/cells/{body['cell_id']}/cancel", headers=_auth("alpha"))
    return "; ".join(out)


async def client_args_parked(server: LiveServer, http: httpx.AsyncClient, cells: int = 64) -> str:
    """``cells`` cells each parking ~9.6 MB of pending client-tool arguments (3 calls of 3.2 MB)."""
    code = """const big = "x".repeat(3.2e6);
      return await Promise.all([0, 1, 2].map(i => sink({i, big})));"""
    before = memory(server)
    parked = 0
    refused = ""
    sem = asyncio.Semaphore(8)

    async def one() -> None:
        nonlocal parked, refused
        async with sem:
            status, body = await _exec(http, {"code": code, "client_tools": [{"name": "sink"}]})
        if status == 200 and body.get("status") == "waiting":
            parked += 1
        elif not refused:
            refused = _brief((status, body))

    await asyncio.gather(*(one() for _ in range(cells)))
    after = memory(server)
    return (
        f"{cells} cells, {parked} parked: service RSS {before[0]:.0f} -> {after[0]:.0f} MiB, "
        f"tree PSS {before[1]:.0f} -> {after[1]:.0f} MiB" + (f" (first refusal: {refused})" if refused else "")
    )


async def background_output(server: LiveServer, http: httpx.AsyncClient, cells: int = 4) -> str:
    """``cells`` background cells, one after the other, each emitting json(pad) of 1M one-number arrays
    (4 MB) that nobody reads."""
    code = PAD_1M + " json(pad); return 1;"
    body = {
        "code": code,
        "background": True,
        "max_output_bytes": 10 * MiB,
        "memory_limit_bytes": 256 * MiB,
        "timeout_ms": 60000,
    }
    steps = [memory(server)[0]]
    ended = []
    for _ in range(cells):
        status, answer = await _exec(http, body)
        if status != 200:
            ended.append(str(status))
            continue
        deadline = time.monotonic() + 90
        state = "running"
        while state == "running" and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            got = await http.get(f"/v1/cells/{answer['cell_id']}", headers=_auth("alpha"))
            state = got.json().get("status")
        ended.append(state)
        await asyncio.sleep(0.3)
        steps.append(memory(server)[0])
    return f"{cells} cells ({', '.join(ended)}): service RSS " + " -> ".join(f"{m:.0f}" for m in steps) + " MiB"


async def tiny_arrays_echo(server: LiveServer, http: httpx.AsyncClient) -> str:
    """2 cells each calling echo({x: [i, pad]}) 4 times, pad = 1.8M one-digit arrays (~7 MB), while beta's
    victim runs; then the same with pad = 450k arrays (within a 1M-value cap)."""
    out = []
    for n in ("1.8e6", "4.5e5"):
        code = f"let pad = []; for (let i = 0; i < {n}; i++) pad.push([i % 10]);" + (
            " let r; for (let i = 0; i < 4; i++) r = await echo({x: [i, pad]}); return typeof r;"
        )
        probe = HealthProbe(server).start()
        victim = Victim(http)
        victim.start()
        await asyncio.sleep(0.5)
        started = time.monotonic()
        answers = await asyncio.gather(
            *(_exec(http, {"code": code, "timeout_ms": 60000, "memory_limit_bytes": 512 * MiB}) for _ in range(2))
        )
        ended = time.monotonic()
        await asyncio.sleep(0.3)
        summary = await victim.stop()
        probe.stop()
        out.append(
            f"pad {n}: {summary}, /healthz worst {probe.worst_between(started, ended) * 1000:.0f} ms "
            f"({_brief(answers[0])})"
        )
    return "; ".join(out)


async def schema_empty_arrays(server: LiveServer, http: httpx.AsyncClient) -> str:
    """8 callers each sending a 1.8 MB exec body whose client-tool schema holds 600k empty arrays."""
    schema = {"type": "object", "properties": {"x": {"enum": [[]] * 600_000}}}
    body = json.dumps(
        {"code": "return 1", "client_tools": [{"name": "t", "input_schema": schema}]}, separators=(",", ":")
    ).encode()
    probe = HealthProbe(server).start()
    victim = Victim(http)
    victim.start()
    await asyncio.sleep(0.5)
    started = time.monotonic()
    headers = {**_auth("alpha"), "content-type": "application/json"}
    answers = await asyncio.gather(
        *(http.post("/v1/exec", content=body, headers=headers, timeout=60) for _ in range(8))
    )
    ended = time.monotonic()
    await asyncio.sleep(0.3)
    summary = await victim.stop()
    probe.stop()
    first = answers[0]
    return (
        f"{len(body) / 1e6:.1f} MB body x8: answers {sorted({a.status_code for a in answers})} in "
        f"{ended - started:.2f} s, {summary}, /healthz worst {probe.worst_between(started, ended) * 1000:.0f} ms "
        f"({first.text[:80]})"
    )


async def cancelled_parked(server: LiveServer, http: httpx.AsyncClient, cells: int = 128) -> str:
    """``cells`` cells parked with a ~3 MB heap each (a client-tool call pending), cancelled; tree PSS after."""
    code = 'globalThis.keep = Array.from({length: 4e4}, (_, i) => ({i, s: "v" + i})); return await sink({});'
    base = memory(server)
    sem = asyncio.Semaphore(8)

    async def one() -> Any:
        async with sem:
            return await _exec(http, {"code": code, "client_tools": [{"name": "sink"}]})

    answers = await asyncio.gather(*(one() for _ in range(cells)))
    parked = memory(server)
    for status, body in answers:
        if status == 200 and isinstance(body, dict) and body.get("status") == "waiting":
            await http.post(f"/v1/cells/{body['cell_id']}/cancel", headers=_auth("alpha"))
    marks = []
    t0 = time.monotonic()
    for wait_s in (1, 5, 15):
        await asyncio.sleep(max(0.0, t0 + wait_s - time.monotonic()))
        marks.append(f"{wait_s} s {memory(server)[1]:.0f}")
    return f"tree PSS idle {base[1]:.0f}, {cells} parked {parked[1]:.0f}, after cancel: " + ", ".join(marks) + " MiB"


async def inflight_args(server: LiveServer, http: httpx.AsyncClient, cells: int = 3) -> str:
    """``cells`` cells whose native tool (echo, 600 s) still runs with 450k one-digit arrays (1.8 MB) in its
    arguments, each parked before the next starts: the service's RSS and what it holds for the tenant
    (``codemode_cell_held_bytes``) after each; a 64 MiB inbox, so the arguments' parsed cost fits."""
    code = (
        "let pad = []; for (let i = 0; i < 450000; i++) pad.push([i % 10]);"
        " const p = echo({x: pad, delay: 600}); pad = null; await p; return 1;"
    )
    body = {"code": code, "memory_limit_bytes": 256 * MiB, "timeout_ms": 5000}
    base = memory(server)[0]
    steps = []
    answers = []
    probe = HealthProbe(server).start()
    victim = Victim(http)
    victim.start()
    await asyncio.sleep(0.5)
    started = time.monotonic()
    for _ in range(cells):
        answers.append(await _exec(http, body))
        await asyncio.sleep(0.5)
        metrics = (await http.get("/metrics")).text
        held = next(
            (float(line.split()[1]) for line in metrics.splitlines() if line.startswith("codemode_cell_held_bytes ")),
            0.0,
        )
        steps.append((memory(server)[0] - base, held / MiB))
    ended = time.monotonic()
    summary = await victim.stop()
    probe.stop()
    for _, answer in answers:
        if isinstance(answer, dict) and answer.get("status") == "waiting":
            await http.post(f"/v1/cells/{answer['cell_id']}/cancel", headers=_auth("alpha"))
    grown_held = ", ".join(f"{grown:.0f} / {held:.0f}" for grown, held in steps)
    return (
        f"{cells} cells ({_brief(answers[0])}): RSS grown / held, MiB: {grown_held}; {summary}, "
        f"/healthz worst {probe.worst_between(started, ended) * 1000:.0f} ms"
    )


def counter() -> str:
    """``count_values`` against the service's parse (``jsoncodec.loads``) of the same texts (best of 5, alternating)."""
    import orjson

    from bridge import jsoncodec
    from bridge.json_values import count_values

    texts = {
        "1.8M one-digit arrays": orjson.dumps({"x": 1, "pad": [[i % 10] for i in range(1_800_000)]}),
        "50k rows x 10 fields": orjson.dumps(
            [{f"f{j}": (f"v{i}" if j % 2 else i) for j in range(10)} for i in range(50_000)]
        ),
        "1M strings holding commas": orjson.dumps([",a,[b{"] * 1_000_000),
    }
    out = []
    for name, text in texts.items():
        best = {"count": float("inf"), "parse": float("inf")}
        for _ in range(5):
            for kind, fn in (
                ("count", lambda: count_values(text, 1_000_000)),  # noqa: B023 - timed in this iteration
                ("parse", lambda: jsoncodec.loads(text)),  # noqa: B023 - timed in this iteration
            ):
                started = time.perf_counter()
                fn()
                best[kind] = min(best[kind], time.perf_counter() - started)
        out.append(
            f"{name} ({len(text) / 1e6:.1f} MB): count {best['count'] * 1000:.1f} ms, parse {best['parse'] * 1000:.1f} ms"
        )
    return "; ".join(out)


async def _under_load(server: LiveServer, http: httpx.AsyncClient, work: Awaitable[list[Any]]) -> tuple[str, list[Any]]:
    """Victim and probe figures while ``work`` runs, after the same figures idle (measured first, in this run)."""
    figures = []
    answers: list[Any] = []
    for busy in (False, True):
        probe = HealthProbe(server).start()
        victim = Victim(http)
        victim.start()
        await asyncio.sleep(0.5)
        started = time.monotonic()
        if busy:
            answers = await work
        else:
            await asyncio.sleep(2.0)
        ended = time.monotonic()
        summary = await victim.stop()
        probe.stop()
        figures.append(
            f"{'busy' if busy else 'idle'}: {summary}, /healthz worst {probe.worst_between(started, ended) * 1000:.0f} ms"
        )
    return "; ".join(figures), answers


#: The final value of 2.4M one-number arrays (9.6 MB), allowed by a 10 MiB output budget.
BIG_VALUES = {
    "javascript": "const pad = []; for (let i = 0; i < 2400000; i++) pad.push([i % 10]); return pad",
    "python": "[[i % 10] for i in range(2000000)]",
}


async def final_values(server: LiveServer, http: httpx.AsyncClient) -> str:
    """Two cells at once, each returning a 9.6 MB value of one-number arrays (8 MB in Python), while beta's
    victim runs: the value goes back as the worker wrote it, never parsed by the service."""
    out = []
    for language, code in BIG_VALUES.items():
        body = {
            "code": code,
            "language": language,
            "max_output_bytes": 10 * MiB,
            "memory_limit_bytes": 1024 * MiB,
            "timeout_ms": 60000,
        }
        before = memory(server)[0]
        figures, answers = await _under_load(server, http, asyncio.gather(*(_exec(http, body) for _ in range(2))))
        out.append(
            f"{language} ({_brief(answers[0])}): {figures}; service RSS {before:.0f} -> {memory(server)[0]:.0f} MiB"
        )
    return " | ".join(out)


#: The MCP server of ``mcp_pattern``: its ``evil`` tool's outputSchema has the pattern ``^(a+)+$``.
OUTPUT_SCHEMAS = Path(__file__).resolve().parents[1] / "tests" / "mcp" / "servers" / "output_schemas.py"


async def mcp_pattern(server: LiveServer, http: httpx.AsyncClient) -> str:
    """One call of a tool whose outputSchema has ``^(a+)+$`` and whose answer is n a's and a "!", while beta's
    victim runs: n = 25 (the issue's: the SDK's own check held the loop 4.6-5.8 s), 30 (32 times that) and
    20,000 (checked in a helper process; Python's re would never finish); then 120 calls at once from one cell whose
    answers fit (each checked in the helper)."""
    await _exec(http, {"code": "await MCP.out.calls({}); return 1"})  # the tenant's server process is up
    one = "try {{ await MCP.out.evil({{n: {n}}}); return 'fits'; }} catch (e) {{ return e.code; }}"
    # Answers that fit (no trailing "!"): a mismatch counts against the run, which blocks the tool after 4.
    burst = (
        "const s = await Promise.allSettled(Array.from({length: 120}, (_, i) => MCP.out.evil({n: 20000 + i, tail: ''})));"
        " return s.filter(r => r.status === 'fulfilled').length + ' fit';"
    )
    out = []
    for label, code in (
        ("n=25", one.format(n=25)),
        ("n=30", one.format(n=30)),
        ("n=20000", one.format(n=20_000)),
        ("120 calls at once (a cell's pending cap is 128), n=20000+i, no '!'", burst),
    ):

        async def timed(code: str = code) -> list[Any]:
            started = time.monotonic()
            answer = await _exec(http, {"code": code})
            return [answer, time.monotonic() - started]

        figures, ((status, body), seconds) = await _under_load(server, http, timed())
        verdict = body.get("value") if isinstance(body, dict) else _brief((status, body))
        out.append(f"{label} ({verdict} in {seconds * 1000:.0f} ms): {figures}")
    return " | ".join(out)


async def parked_background_output(server: LiveServer, http: httpx.AsyncClient, cells: int = 3) -> str:
    """``cells`` background cells, each emitting json(pad) of 450k one-number arrays (1.8 MB) and then
    parking on a 600 s timer: the service RSS per parked cell against the bytes it charges for it."""
    code = (
        "let pad = []; for (let i = 0; i < 450000; i++) pad.push([i % 10]); json(pad); pad = null;"
        " await new Promise(r => setTimeout(r, 600000)); return 1"
    )
    body = {
        "code": code,
        "background": True,
        "max_output_bytes": 10 * MiB,
        "memory_limit_bytes": 256 * MiB,
        "timeout_ms": 60000,
    }
    steps = [memory(server)[0]]
    held = [await _held(http)]
    for n in range(1, cells + 1):
        status, answer = await _exec(http, body)
        if status != 200:
            return f"exec answered {status}: {answer}"
        for _ in range(600):  # until its output is held (its first leg ended on the timer)
            await asyncio.sleep(0.1)
            if await _held(http) >= held[0] + n * 1_800_000:
                break
        await asyncio.sleep(0.3)
        steps.append(memory(server)[0])
        held.append(await _held(http))
    grown = (steps[-1] - steps[0]) * MiB / max(held[-1] - held[0], 1)
    return (
        f"service RSS {' -> '.join(f'{m:.0f}' for m in steps)} MiB; charged "
        f"{' -> '.join(f'{h / MiB:.1f}' for h in held)} MiB; RSS growth / bytes charged {grown:.2f}"
    )


async def _held(http: httpx.AsyncClient) -> float:
    """``codemode_cell_held_bytes``: what the service says it holds for live cells."""
    for line in (await http.get("/metrics")).text.splitlines():
        if line.startswith("codemode_cell_held_bytes "):
            return float(line.split()[1])
    return 0.0


REPRODUCTIONS: dict[str, Callable[[LiveServer, httpx.AsyncClient], Awaitable[str]]] = {
    "final_values": final_values,
    "mcp_pattern": mcp_pattern,
    "parked_background_output": parked_background_output,
    "approval_parked": approval_parked,
    "client_args_parked": client_args_parked,
    "background_output": background_output,
    "tiny_arrays_echo": tiny_arrays_echo,
    "schema_empty_arrays": schema_empty_arrays,
    "cancelled_parked": cancelled_parked,
    "inflight_args": inflight_args,
}


#: Settings a reproduction needs: parking a 1M-array heap needs a larger snapshot cap than the default.
ENV = {
    "approval_parked": {
        "CODEMODE_MAX_SNAPSHOT_BYTES": str(256 * MiB),
        "CODEMODE_WORKER_MAX_PARKED_BYTES": str(1024 * MiB),
    },
    "inflight_args": {"CODEMODE_MAX_SNAPSHOT_BYTES": str(64 * MiB)},
}


#: Configuration a reproduction adds to the service's (TOML).
TOML = {
    "mcp_pattern": f'[mcp.servers.out]\ncommand = "{sys.executable}"\nargs = ["{OUTPUT_SCHEMAS}", "stdio"]\n',
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench held", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="", help="comma-separated reproduction names")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    names = [n for n in args.only.split(",") if n] or [*REPRODUCTIONS, "counter"]
    for name in names:
        if name == "counter":
            print(f"counter: {counter()}", flush=True)
            continue
        with tempfile.TemporaryDirectory(prefix="codemode-held-") as tmp:
            env = {"CODEMODE_TENANT_MAX_PARKED_CELLS": "256", **ENV.get(name, {})}
            server = _serve(Path(tmp), TOML.get(name, ""), env=env)
            try:

                async def go() -> str:
                    async with httpx.AsyncClient(base_url=server.base, timeout=60) as http:  # noqa: B023 - awaited in this iteration
                        await _exec(http, {"code": "return 1"})
                        await _exec(http, {"code": "return 1"}, tenant="beta")
                        return await REPRODUCTIONS[name](server, http)  # noqa: B023 - awaited in this iteration

                try:
                    print(f"{name}: {asyncio.run(go())}", flush=True)
                except httpx.HTTPError as exc:
                    print(f"{name}: no answer ({type(exc).__name__})", flush=True)
            finally:
                server.stop()
    return 0
