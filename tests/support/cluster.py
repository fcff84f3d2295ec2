"""A real cluster on loopback: one redis-server (or a Sentinel-managed group), N `codemode serve`
replicas, HAProxy in front (configured by deploy/haproxy.cfg itself).  Used by tests/cluster/ and by
``python -m bench replicas``."""

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
from tests.support.sentinels import SentinelGroup

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

    def terminate(self) -> None:
        """SIGTERM, as Kubernetes or ``docker stop`` sends it: the replica drains, then stops (not awaited)."""
        self.process.send_signal(signal.SIGTERM)


@dataclass
class Cluster:
    store_env: dict[str, str]  # how every replica reaches the store (CODEMODE_STORE_URL, Sentinels)
    front: str
    replicas: list[Replica]
    redis_dir: Path
    redis_port: int
    redis: subprocess.Popen[bytes] | None  # None: the store is a Sentinel group the caller runs
    config: str | None = None  # the TOML every replica reads
    _stack: ExitStack = field(default_factory=ExitStack)

    def add_replica(self, workdir: Path, *, workers: int = 1, env: dict[str, str] | None = None) -> Replica:
        """Start one more replica (not behind the front) sharing the store; stopped with the cluster."""
        replica = self._stack.enter_context(_replica(workdir, {**self.store_env, **(env or {})}, workers, self.config))
        return replica

    def stop_redis(self) -> None:
        assert self.redis is not None, "the cluster's store is a Sentinel group"
        stop_redis_server(self.redis, hard=True)

    def restart_redis(self) -> None:
        """Start Redis again on the same port and data (the replicas reconnect on their own)."""
        _, self.redis = start_redis_server(self.redis_dir, self.redis_port)


@contextmanager
def _replica(workdir: Path, env: dict[str, str], workers: int, config: str | None) -> Iterator[Replica]:
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
    with live_process(argv, base + "/readyz", workdir, env, config) as process:
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
    workdir: Path,
    replicas: int = 3,
    *,
    workers: int = 1,
    env: dict[str, str] | None = None,
    config: str | None = None,
    sentinels: SentinelGroup | None = None,
) -> Iterator[Cluster]:
    """Redis, ``replicas`` replicas (``env``: their extra CODEMODE_ settings, ``config``: their TOML) and
    HAProxy round robin.  With ``sentinels`` the replicas use that Sentinel-managed group instead of a
    redis-server of their own."""
    redis_dir = workdir / "redis"
    if sentinels is None:
        redis_port, redis = start_redis_server(redis_dir)
        store_env = {"CODEMODE_STORE_URL": f"redis://127.0.0.1:{redis_port}/0"}
    else:
        redis_port, redis, store_env = 0, None, sentinels.env
    cluster = Cluster({**store_env, **(env or {})}, "", [], redis_dir, redis_port, redis, config)
    try:
        with cluster._stack:
            for n in range(replicas):
                cluster.replicas.append(cluster.add_replica(workdir / f"replica{n + 1}", workers=workers))
            cluster.front = cluster._stack.enter_context(_haproxy(workdir, cluster.replicas))
            yield cluster
    finally:
        if cluster.redis is not None:
            stop_redis_server(cluster.redis)
