"""HTTP load generators: ``wrk`` when installed, else a small asyncio keep-alive client.

Both post the same JSON body over persistent loopback connections for a fixed duration and
report latency percentiles, throughput, bad answers (non-200 or a body without
``"status":"completed"``) and their own CPU use, so a saturated client is visible.
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

import orjson

COMPLETED = b'"status":"completed"'

WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = os.getenv("BENCH_BODY")
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) bad = 0 end
function response(status, headers, body)
  if status ~= 200 or not string.find(body, '"status":"completed"', 1, true) then bad = bad + 1 end
end
function done(summary, latency, requests)
  local b = 0
  for _, t in ipairs(threads) do b = b + t:get("bad") end
  local e = summary.errors
  io.write(string.format("BENCH %d %d %d %d %d %d %d\\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), b,
    e.connect + e.read + e.write + e.timeout))
end
"""


@dataclass
class LoadResult:
    client: str
    concurrency: int
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    rps: float
    bad: int
    client_cpu_pct: float  # of one core

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def run_wrk(url: str, body: dict[str, Any], concurrency: int, seconds: float) -> LoadResult:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(WRK_SCRIPT)
        script = f.name
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run(
            ["wrk", "-t1", f"-c{concurrency}", f"-d{max(1, round(seconds))}s", "--timeout", "10s", "-s", script, url],
            env={**os.environ, "BENCH_BODY": orjson.dumps(body).decode()},
            capture_output=True,
            text=True,
            check=True,
            timeout=seconds + 30,
        ).stdout
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        os.unlink(script)
    line = next(ln for ln in out.splitlines() if ln.startswith("BENCH "))
    requests, duration_us, p50_us, p99_us, p999_us, bad, sock_err = (int(x) for x in line.split()[1:])
    secs = duration_us / 1e6
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return LoadResult(
        "wrk",
        concurrency,
        requests,
        secs,
        p50_us / 1000,
        p99_us / 1000,
        p999_us / 1000,
        requests / secs,
        bad + sock_err,
        100 * cpu / secs,
    )


async def _connection(host: str, port: int, request: bytes, deadline: float, lat: list[float], bad: list[int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            payload = await reader.readexactly(length)
            lat.append(time.perf_counter() - t0)
            if not head.startswith(b"HTTP/1.1 200") or COMPLETED not in payload:
                bad[0] += 1
    finally:
        writer.close()


def run_python(url: str, body: dict[str, Any], concurrency: int, seconds: float) -> LoadResult:
    rest = url.split("://", 1)[1]
    hostport, path = rest.split("/", 1)
    host, port = hostport.split(":")
    data = orjson.dumps(body)
    request = (
        f"POST /{path} HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode() + data
    lat: list[float] = []
    bad = [0]

    async def main() -> float:
        t0 = time.perf_counter()
        deadline = t0 + seconds
        await asyncio.gather(*(_connection(host, int(port), request, deadline, lat, bad) for _ in range(concurrency)))
        return time.perf_counter() - t0

    cpu0 = time.process_time()
    secs = asyncio.run(main())
    cpu = time.process_time() - cpu0
    lat.sort()
    n = len(lat)
    pct = (lambda q: lat[min(n - 1, int(q * n))] * 1000) if n else (lambda q: float("nan"))
    return LoadResult(
        "python", concurrency, n, secs, pct(0.50), pct(0.99), pct(0.999), n / secs, bad[0], 100 * cpu / secs
    )


def run_load(kind: str, url: str, body: dict[str, Any], concurrency: int, seconds: float) -> LoadResult:
    return (run_wrk if kind == "wrk" else run_python)(url, body, concurrency, seconds)
