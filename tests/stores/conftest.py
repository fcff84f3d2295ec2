"""Fixtures for store tests, including a real redis-server reusable by service-level tests."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.live_server import spawn
from tests.support.ports import free_port

REDIS_SERVER = "/usr/bin/redis-server"
_START_TIMEOUT_SECONDS = 10.0


def redis_server_binary() -> str:
    """Return the redis-server executable, or fail the test with an install hint."""
    if os.access(REDIS_SERVER, os.X_OK):
        return REDIS_SERVER
    found = shutil.which("redis-server")
    if found:
        return found
    pytest.fail(
        f"redis-server is required for the Redis store tests and was not found at {REDIS_SERVER} "
        "or on PATH; install it (Debian/Ubuntu: `apt-get install redis-server`)",
        pytrace=False,
    )


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def start_redis_server(
    tmp_dir: Path, port: int | None = None, extra: Sequence[str] = ()
) -> tuple[int, subprocess.Popen[bytes]]:
    """Start redis-server on 127.0.0.1 with fsync-always AOF in ``tmp_dir``; return (port, process).

    Passing the port and directory of a stopped server restarts it on the same data; ``extra``: more
    command-line options (``--replicaof HOST PORT``, say).
    """
    binary = redis_server_binary()
    tmp_dir = Path(tmp_dir)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    attempts = 1 if port is not None else 3
    last_log = ""
    for _ in range(attempts):
        chosen = port if port is not None else free_port()
        log_path = tmp_dir / f"redis-{chosen}.log"
        try:
            process = spawn(
                [
                    binary,
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    str(chosen),
                    "--dir",
                    str(tmp_dir),
                    "--save",
                    "",
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                    "--daemonize",
                    "no",
                    "--logfile",
                    str(log_path),
                    *extra,
                ],
                functools.partial(_answers_ping, chosen),
                "redis-server",
                timeout_s=_START_TIMEOUT_SECONDS,
            )
            return chosen, process
        except RuntimeError:  # exited (the port was taken meanwhile, say) or never answered PING
            last_log = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
    raise RuntimeError(f"redis-server did not start; log tail:\n{last_log}")


def stop_redis_server(process: subprocess.Popen[bytes], *, hard: bool = False) -> None:
    """Stop a server from ``start_redis_server``: SIGTERM (clean shutdown) or SIGKILL if ``hard``."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a redis-server shared by this test session (per xdist worker); stopped at the end."""
    port, process = start_redis_server(tmp_path_factory.mktemp("redis"))
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop_redis_server(process)


@pytest.fixture
def anyio_backend() -> str:
    """Run async store tests on asyncio, the loop the service uses."""
    return "asyncio"
