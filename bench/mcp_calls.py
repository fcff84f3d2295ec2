"""``python -m bench.mcp_calls``: the cost of one MCP tool call from a cell, over stdio and Streamable HTTP.

An in-process service (like ``bench/inproc.py``) has the SDK test server (``tests/mcp/servers``) twice:
``stdio`` (a child process on pipes) and ``http`` (its Streamable HTTP variant on a loopback port).  Each
round runs one cell per transport that makes ``--calls`` sequential ``echo`` calls and then ``--calls``
calls in one ``Promise.all`` (distinct arguments, so the loop guard lets them through), timed on the
guest clock; the figures are the medians over ``--rounds`` rounds, in µs per call.  ``--json`` prints
them as one JSON object (for comparing two source trees run alternately).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from service.assembly import build_components
from service.auth import LOCAL_TENANT
from service.runtime.envelopes import plain
from service.runtime.spec import CellSpec
from service.settings import Settings
from service.settings_mcp import McpServerConfig

from . import loops
from .servers import free_port

SERVER_SCRIPT = Path(__file__).resolve().parents[1] / "tests" / "mcp" / "servers" / "test_server.py"
TOKEN = "bench-token"


def _code(server: str, n: int) -> str:
    return f"""
const N = {n};
let t = Date.now();
for (let i = 0; i < N; i++) await MCP.{server}.echo({{text: "s" + i}});
const seq = Date.now() - t;
t = Date.now();
await Promise.all(Array.from({{length: N}}, (_, i) => MCP.{server}.echo({{text: "b" + i}})));
return {{seq, batch: Date.now() - t}};
"""


def _start_http(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, str(SERVER_SCRIPT), "http", str(port), TOKEN])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the MCP test server did not listen within 30 s")


async def run(calls: int, rounds: int) -> dict[str, Any]:
    port = free_port()
    http = _start_http(port)
    servers = (
        McpServerConfig(name="stdio", command=sys.executable, args=(str(SERVER_SCRIPT), "stdio"), timeout_ms=30000),
        McpServerConfig(
            name="http", url=f"http://127.0.0.1:{port}/mcp", headers={"X-Test-Token": TOKEN}, timeout_ms=30000
        ),
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings(
                workers=2,
                data_dir=tmp,
                mcp_servers=servers,
                max_calls_per_cell=4 * calls,
                max_pending_requests=4 * calls,
            ).check()
            svc = build_components(settings, store=False)
            await svc.start()
            try:
                limits = svc.cells.limits(timeout_ms=60000, memory_limit_bytes=None, max_output_bytes=None)
                samples: dict[str, list[float]] = {}
                for _ in range(rounds + 1):  # the first round connects the servers and warms up: not counted
                    for name in ("stdio", "http"):
                        spec = CellSpec(code=_code(name, calls), tenant=LOCAL_TENANT, limits=limits, headless=True)
                        env = plain(await svc.cells.exec(spec))
                        if env["status"] != "completed":
                            raise RuntimeError(f"bench cell did not complete: {env.get('code')}: {env.get('error')}")
                        for kind in ("seq", "batch"):
                            samples.setdefault(f"{name}_{kind}", []).append(1000 * env["value"][kind] / calls)
            finally:
                await svc.close()
    finally:
        http.kill()
        http.wait()
    return {key: statistics.median(values[1:]) for key, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.mcp_calls", description=__doc__)
    parser.add_argument("--calls", type=int, default=200, help="calls per cell, sequential and batched each")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    figures = loops.run(run(args.calls, args.rounds))
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        print(f"{key:>13}: {value:8.0f} µs per MCP call")


if __name__ == "__main__":
    main()
