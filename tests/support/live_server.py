"""A real server process on a real socket: `codemode serve` (or any uvicorn command line)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def live_process(argv: Sequence[str], probe_url: str, workdir: Path,
                 env: dict[str, str] | None = None, config: str | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv`` (CODEMODE_ settings from ``env``, TOML from ``config``), wait until
    ``probe_url`` answers, yield the process, then stop it."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CODEMODE_")}
    environ["CODEMODE_DATA_DIR"] = str(workdir / "data")
    environ["PYTHONPATH"] = str(ROOT)
    if config is not None:
        path = workdir / "codemode.toml"
        path.write_text(config, encoding="utf-8")
        environ["CODEMODE_CONFIG"] = str(path)
    environ.update(env or {})
    log = workdir / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(list(argv), cwd=ROOT, env=environ, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                httpx.get(probe_url, timeout=1.0)
                break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server did not answer: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextmanager
def codemode_serve(workdir: Path, env: dict[str, str] | None = None, config: str | None = None) -> Iterator[str]:
    """`codemode serve` on a free loopback port with two workers; yields its base URL."""
    port = free_port()
    argv = [sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--workers", "2", "--log-level", "warning"]
    base = f"http://127.0.0.1:{port}"
    with live_process(argv, base + "/healthz", workdir, env, config):
        yield base
