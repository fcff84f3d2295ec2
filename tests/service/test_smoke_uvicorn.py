"""The quick start on a real socket: `codemode serve` answers the quick-start curl body."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m service.cli serve` on a free loopback port, data dir in tmp; yields its base URL."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMODE_")}
    env["CODEMODE_DATA_DIR"] = str(tmp_path_factory.mktemp("served"))
    log = tmp_path_factory.mktemp("served_log") / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
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
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"codemode serve exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                if httpx.get(base + "/readyz", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"codemode serve did not become ready: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_quick_start_curl_body_over_a_real_socket(served):
    """POST the quick start's curl body (README.md): completed, value 2, output [text "hi"]."""
    r = httpx.post(
        served + "/v1/exec",
        content=b'{"code":"text(\\"hi\\"); return 1+1"}',
        headers={"content-type": "application/json"},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    env = r.json()
    assert env["status"] == "completed"
    assert env["value"] == 2
    assert env["output"] == [{"type": "text", "text": "hi"}]
