"""Start a uvicorn server as a subprocess on a free loopback port and read its CPU use from /proc."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.live_server import answers, is_200, wait_ready
from tests.support.ports import free_port

CLK_TCK = os.sysconf("SC_CLK_TCK")
#: The source tree this bench belongs to (its servers run from it unless told another).
ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def otlp_collector() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    """A loopback OTLP/HTTP endpoint; yields its base URL and the posts it received (path, content type, body)."""
    received: list[tuple[str, str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def proc_stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state first); empty when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def cpu_ns(pid: int) -> int:
    """The process's time on a CPU in ns (``/proc/<pid>/schedstat``; ``stat``'s ticks are 10 ms coarse), 0 when gone."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except OSError:
        return 0


def _cpu_seconds(pid: int) -> float:
    fields = proc_stat(pid)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK if fields else 0.0  # utime + stime


def _reaped_children_cpu(pid: int) -> float:
    """CPU of children that already exited and were waited for (recycled workers): cutime + cstime."""
    fields = proc_stat(pid)
    return (int(fields[13]) + int(fields[14])) / CLK_TCK if fields else 0.0


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (the service's workers and helpers), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by ``pid``, every live process below it, and the children each of them
    already reaped (recycled workers): what a service did, which a busy machine does not inflate."""
    tree = (pid, *descendants(pid))
    return sum(_cpu_seconds(p) + _reaped_children_cpu(p) for p in tree)


class Server:
    """A server subprocess; ``cpu()`` returns (main process, worker children) CPU seconds so far."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str] | None = None, root: Path = ROOT) -> None:
        self.name = name
        self.port = free_port()
        self.tmp = tempfile.mkdtemp(prefix=f"codemode-bench-{name}-")
        full_env = {**os.environ, **(env or {})}
        full_env["CODEMODE_DATA_DIR"] = self.tmp
        # The tree's root must be importable (bench.bare_app, service) whatever the caller's cwd.
        full_env["PYTHONPATH"] = str(root) + os.pathsep + full_env.get("PYTHONPATH", "")
        self.log_path = Path(self.tmp) / "server.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - open for the server's life, closed by close()
        self.proc = subprocess.Popen(
            [sys.executable, *argv, "--port", str(self.port)],
            env=full_env,
            cwd=root,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.base = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        wait_ready(self.proc, answers(self.base + "/readyz", is_200), f"{self.name} server", self.log_path, timeout_s)

    def cpu(self) -> tuple[float, float]:
        live = sum(_cpu_seconds(c) for c in descendants(self.proc.pid))
        return _cpu_seconds(self.proc.pid), live + _reaped_children_cpu(self.proc.pid)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # uvicorn's graceful shutdown runs the lifespan
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> Server:
        try:
            self.wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def codemode_server(workers: int = 0, env: dict[str, str] | None = None, root: Path = ROOT) -> Server:
    """The real service (from ``root``); ``workers`` 0 leaves its own default (4; running slots: one per usable CPU)."""
    return Server(
        "codemode",
        ["-m", "service.cli", "serve", "--log-level", "warning"],
        env={**({"CODEMODE_WORKERS": str(workers)} if workers else {}), **(env or {})},
        root=root,
    )


def bare_server() -> Server:
    return Server("bare", ["-m", "bench.bare_app", "--log-level", "warning"])
