"""A real server process on a real socket: `codemode serve` (or any uvicorn command line)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

from bench.servers import free_port  # one helper for the bench and the tests

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def live_process(
    argv: Sequence[str],
    probe_url: str,
    workdir: Path,
    env: dict[str, str] | None = None,
    config: str | None = None,
    ready: Callable[[httpx.Response], bool] = lambda response: True,
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv`` (CODEMODE_ settings from ``env``, TOML from ``config``), wait until
    ``probe_url`` answers (and the answer is ``ready``), yield the process, then stop it."""
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
                if ready(httpx.get(probe_url, timeout=1.0)):
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
    argv = [
        sys.executable,
        "-m",
        "service.cli",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "2",
        "--log-level",
        "warning",
    ]
    base = f"http://127.0.0.1:{port}"
    with live_process(argv, base + "/healthz", workdir, env, config):
        yield base
