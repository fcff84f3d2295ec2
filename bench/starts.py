"""``python -m bench starts``: how long a warm install takes to answer, for the two commands people start.

* **codemode mcp**: the stdio server a desktop MCP client launches, from process start until it answers
  ``initialize`` (the client waits for that before anything else; the target is 2 s);
* **scripts/serve**: the README's first command on an install whose ``pyproject.toml`` has not changed
  (it skips the install), from process start until ``/healthz`` answers.

Each is started ``ROUNDS`` times in a row (the first round warms the file cache and is left out); the
median and the slowest of the rest are printed.  Both run on a clean ``CODEMODE_`` environment with a
data directory of their own.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson

from .servers import free_port

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 4
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


def _environment(data_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMODE_")}
    env["CODEMODE_DATA_DIR"] = data_dir
    return env


def mcp_initialize_s() -> float:
    """Seconds from starting ``codemode mcp`` until its answer to ``initialize`` is read."""
    codemode = Path(sys.executable).parent / "codemode"
    with tempfile.TemporaryDirectory() as data:
        started = time.perf_counter()
        proc = subprocess.Popen(
            [str(codemode), "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_environment(data),
            cwd=data,
        )
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(orjson.dumps(INITIALIZE) + b"\n")
            proc.stdin.flush()
            answer = orjson.loads(proc.stdout.readline())
            elapsed = time.perf_counter() - started
            assert answer.get("id") == 1 and "result" in answer, answer
            return elapsed
        finally:
            proc.kill()
            proc.wait()


def serve_healthz_s() -> float:
    """Seconds from starting ``scripts/serve`` (nothing to install) until ``/healthz`` answers."""
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        started = time.perf_counter()
        proc = subprocess.Popen(
            ["bash", str(ROOT / "scripts" / "serve"), "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=_environment(data),
            cwd=ROOT,
        )
        try:
            while time.perf_counter() - started < 120:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0).status_code == 200:
                        return time.perf_counter() - started
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
            raise RuntimeError("scripts/serve did not answer /healthz within 120 s")
        finally:
            proc.terminate()
            proc.wait()


def main() -> int:
    for name, measure in (
        ("codemode mcp -> initialize answered", mcp_initialize_s),
        ("scripts/serve -> /healthz", serve_healthz_s),
    ):
        times = [measure() for _ in range(ROUNDS)][1:]
        print(
            f"{name:40s} median {statistics.median(times):6.2f} s, slowest {max(times):6.2f} s ({len(times)} warm starts)"
        )
    return 0
