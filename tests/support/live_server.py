"""Real server processes on real sockets: one launcher for `codemode serve`, uvicorn command lines,
MCP servers and redis-server, used by the tests and the bench alike."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import httpx

from tests.support.polling import poll_until
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]

#: How long a server may take to answer after it was started. `codemode serve` needs ~2 s on a quiet
#: machine and over 20 s on two cores shared by several test runs; only a hang should reach this.
START_TIMEOUT_S = 60.0


def is_200(response: httpx.Response) -> bool:
    """The answer of a ready server (``/readyz`` is 503 until the workers are up)."""
    return response.status_code == 200


def answers(url: str, ready: Callable[[httpx.Response], bool] = lambda response: True) -> Callable[[], bool]:
    """A readiness probe: ``url`` answers over HTTP (and the answer is ``ready``)."""

    def probe() -> bool:
        try:
            return ready(httpx.get(url, timeout=1.0))
        except httpx.TransportError:
            return False

    return probe


def listening(port: int) -> Callable[[], bool]:
    """A readiness probe: something accepts TCP connections on the loopback ``port``."""

    def probe() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            return False

    return probe


def _tail(log: Path | None, chars: int = 3000) -> str:
    if log is None:
        return "(no log kept)"
    try:
        return log.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log written)"


def wait_ready(
    proc: subprocess.Popen[bytes], ready: Callable[[], bool], what: str, log: Path | None, timeout_s: float
) -> None:
    """Wait until ``ready()`` holds; raise RuntimeError with the log's tail if ``proc`` exits first or the
    deadline passes."""

    def probe() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}: {_tail(log)}")
        return ready()

    try:
        poll_until(probe, f"{what} ready", timeout_s)
    except AssertionError as exc:
        raise RuntimeError(f"{exc}: {_tail(log)}") from None


def spawn(
    argv: Sequence[str],
    ready: Callable[[], bool],
    what: str,
    *,
    log: Path | None = None,
    env: dict[str, str] | None = None,
    cwd: Path = ROOT,
    timeout_s: float = START_TIMEOUT_S,
    new_session: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` (output appended to ``log``, else discarded) and return it once ``ready()`` holds;
    a process that exits or never becomes ready is stopped and reported with its log's tail.
    ``new_session``: its own process group, so the caller can kill it with everything it spawned."""
    # The child keeps its own copy of the log's descriptor; ours closes once it is started.
    with open(log, "ab") if log is not None else nullcontext(subprocess.DEVNULL) as out:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=new_session,
        )
    try:
        wait_ready(proc, ready, what, log, timeout_s)
    except BaseException:
        stop_process(proc)
        raise
    return proc


def stop_process(proc: subprocess.Popen[Any], grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``; returns once the process is reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait(5)


def codemode_environ(workdir: Path, env: dict[str, str] | None = None, config: str | None = None) -> dict[str, str]:
    """This process's environment without CODEMODE_ settings, data under ``workdir``, a worker wait long
    enough for a loaded machine (``acquire_timeout_ms`` 60 s), workers at the service's priority, the TOML ``config`` written there, then ``env``
    on top."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CODEMODE_")}
    environ["CODEMODE_DATA_DIR"] = str(workdir / "data")
    environ["PYTHONPATH"] = str(ROOT)
    # A worker start (run at a low priority) can take seconds on a loaded machine: wait for one far longer
    # than the service's default 5 s, as make_client does; a test about the wait sets its own.
    environ["CODEMODE_ACQUIRE_TIMEOUT_MS"] = "60000"
    environ["CODEMODE_WORKER_NICE"] = "0"  # workers at the service's priority, as in-process (tests/conftest.py)
    if config is not None:
        path = workdir / "codemode.toml"
        path.write_text(config, encoding="utf-8")
        environ["CODEMODE_CONFIG"] = str(path)
    environ.update(env or {})
    return environ


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
    proc = spawn(
        argv,
        answers(probe_url, ready),
        "server",
        log=workdir / "server.log",
        env=codemode_environ(workdir, env, config),
    )
    try:
        yield proc
    finally:
        stop_process(proc)


def serve_argv(port: int, workers: int = 2) -> list[str]:
    """`codemode serve` on the loopback ``port`` with ``workers`` workers, logging warnings only."""
    return [
        sys.executable,
        "-m",
        "service.cli",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
    ]


@contextmanager
def codemode_serve(
    workdir: Path, env: dict[str, str] | None = None, config: str | None = None, ready_path: str = "/healthz"
) -> Iterator[str]:
    """`codemode serve` on a free loopback port with two workers, once ``ready_path`` answers; yields its
    base URL (``ready_path="/readyz"`` waits for 200, that is for the workers too)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with live_process(
        serve_argv(port),
        base + ready_path,
        workdir,
        env,
        config,
        is_200 if ready_path == "/readyz" else lambda response: True,
    ):
        yield base
