"""A real cluster on loopback: one redis-server, N `codemode serve` replicas, HAProxy in front
(configured by deploy/haproxy.cfg itself).  Used by tests/cluster/ and by ``python -m bench replicas``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.stores.conftest import start_redis_server, stop_redis_server
from tests.support.live_server import ROOT, free_port, is_200, live_process

HAPROXY = "/usr/sbin/haproxy"
HAPROXY_CONFIG = ROOT / "deploy" / "haproxy.cfg"
HAPROXY_SLOTS = 3  # servers named in deploy/haproxy.cfg


def haproxy_binary() -> str:
    found = HAPROXY if os.access(HAPROXY, os.X_OK) else shutil.which("haproxy")
    if not found:
        raise RuntimeError(
            f"haproxy is required for the cluster tests and was not found at {HAPROXY} or on "
            "PATH; install it (Debian/Ubuntu: `apt-get install haproxy`, as scripts/test does)"
        )
    return found


@dataclass
class Replica:
    base: str
    process: subprocess.Popen[bytes]
    workdir: Path

    def kill(self) -> None:
        """SIGKILL the replica's service process (its workers notice their parent is gone)."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


@dataclass
class Cluster:
    redis_url: str
    front: str
    replicas: list[Replica]
    redis_dir: Path
    redis_port: int
    redis: subprocess.Popen[bytes]
    _stack: ExitStack = field(default_factory=ExitStack)

    def add_replica(self, workdir: Path, *, workers: int = 1, env: dict[str, str] | None = None) -> Replica:
        """Start one more replica (not behind the front) sharing the store; stopped with the cluster."""
        replica = self._stack.enter_context(_replica(workdir, self.redis_url, workers, env or {}))
        return replica

    def stop_redis(self) -> None:
        stop_redis_server(self.redis, hard=True)

    def restart_redis(self) -> None:
        """Start Redis again on the same port and data (the replicas reconnect on their own)."""
        _, self.redis = start_redis_server(self.redis_dir, self.redis_port)


@contextmanager
def _replica(workdir: Path, redis_url: str, workers: int, env: dict[str, str]) -> Iterator[Replica]:
    workdir.mkdir(parents=True, exist_ok=True)
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
        str(workers),
        "--log-level",
        "warning",
    ]
    base = f"http://127.0.0.1:{port}"
    with live_process(argv, base + "/readyz", workdir, {"CODEMODE_STORE_URL": redis_url, **env}) as process:
        yield Replica(base, process, workdir)


@contextmanager
def _haproxy(workdir: Path, replicas: list[Replica]) -> Iterator[str]:
    port = free_port()
    env = {"CODEMODE_FRONT": f"127.0.0.1:{port}"}
    for slot in range(HAPROXY_SLOTS):
        env[f"CODEMODE_REPLICA_{slot + 1}"] = replicas[slot % len(replicas)].base.removeprefix("http://")
    front = f"http://127.0.0.1:{port}"
    argv = [haproxy_binary(), "-db", "-f", str(HAPROXY_CONFIG)]
    # Ready once HAProxy has seen a healthy replica: before that it answers 503 itself.
    with live_process(argv, front + "/readyz", workdir, env, ready=is_200):
        yield front


@contextmanager
def running_cluster(
    workdir: Path, replicas: int = 3, *, workers: int = 1, env: dict[str, str] | None = None
) -> Iterator[Cluster]:
    """Redis, ``replicas`` replicas (``env``: their extra CODEMODE_ settings) and HAProxy round robin."""
    redis_dir = workdir / "redis"
    redis_port, redis = start_redis_server(redis_dir)
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    cluster = Cluster(redis_url, "", [], redis_dir, redis_port, redis)
    try:
        with cluster._stack:
            for n in range(replicas):
                cluster.replicas.append(cluster.add_replica(workdir / f"replica{n + 1}", workers=workers, env=env))
            cluster.front = cluster._stack.enter_context(_haproxy(workdir, cluster.replicas))
            yield cluster
    finally:
        stop_redis_server(cluster.redis)
