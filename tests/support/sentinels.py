"""A real Sentinel-managed Redis on loopback: a primary, two replicas and three Sentinels (``redis-server
--sentinel``: the Debian redis-server package runs Sentinel too), as the store tests and the cluster
failover test use it.

The servers run with the settings docs/operations/deploy.md asks of production: an append-only file,
and ``min-replicas-to-write 1`` so a primary cut off from every replica stops taking writes.
Sentinels declare the primary down after ``DOWN_AFTER_MS`` (the production default is 30 s; 1 s here
keeps the test short) and need two of three to agree.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.stores.conftest import redis_server_binary, start_redis_server, stop_redis_server
from tests.support.live_server import listening, spawn
from tests.support.polling import poll_until
from tests.support.ports import free_port

MASTER_NAME = "codemode"
DOWN_AFTER_MS = 1000
QUORUM = 2
#: Production settings the servers run with (docs/operations/deploy.md names them).
REPLICATION = ("--min-replicas-to-write", "1", "--min-replicas-max-lag", "10")


@dataclass
class SentinelGroup:
    """One primary, its replicas and the Sentinels watching them; ``primary_port`` moves on failover."""

    workdir: Path
    servers: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    sentinels: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def addresses(self) -> tuple[str, ...]:
        """The Sentinels as ``redis_sentinels`` entries."""
        return tuple(f"127.0.0.1:{port}" for port in self.sentinels)

    @property
    def env(self) -> dict[str, str]:
        """The CODEMODE_ settings of a replica that uses this group as its store."""
        return {
            "CODEMODE_STORE_URL": f"redis://{MASTER_NAME}/0",
            "CODEMODE_REDIS_SENTINELS": ",".join(self.addresses),
            "CODEMODE_REDIS_MASTER_NAME": MASTER_NAME,
            "CODEMODE_REDIS_WAIT_REPLICAS": "1",
        }

    def primary_port(self) -> int:
        """The primary's port as a majority of the Sentinels report it."""
        votes: dict[int, int] = {}
        for port in self.sentinels:
            with contextlib.suppress(redis.RedisError):
                with redis.Redis(port=port, socket_timeout=1) as sentinel:
                    address = sentinel.sentinel_get_master_addr_by_name(MASTER_NAME)
                if address:
                    votes[int(address[1])] = votes.get(int(address[1]), 0) + 1
        best = max(votes.items(), key=lambda kv: kv[1], default=(0, 0))
        return best[0] if best[1] >= QUORUM else 0

    def kill_primary(self) -> int:
        """SIGKILL the primary (no shutdown, no last replication); return its port."""
        port = self.primary_port()
        stop_redis_server(self.servers[port], hard=True)
        return port

    def pause(self, port: int) -> None:
        self.servers[port].send_signal(signal.SIGSTOP)

    def resume(self, port: int) -> None:
        self.servers[port].send_signal(signal.SIGCONT)

    def replica_ports(self) -> list[int]:
        primary = self.primary_port()
        return [port for port, proc in self.servers.items() if port != primary and proc.poll() is None]

    def wait_for_new_primary(self, old: int, timeout_s: float = 60.0) -> int:
        """The port of the replica the Sentinels promoted once ``old`` died, once it takes writes."""

        def promoted() -> int:
            port = self.primary_port()
            if port in (0, old):
                return 0
            with contextlib.suppress(redis.RedisError), redis.Redis(port=port, socket_timeout=1) as server:
                if server.info("replication").get("role") == "master":
                    return port
            return 0

        return poll_until(promoted, "the Sentinels promote a replica", timeout_s)

    def close(self) -> None:
        for proc in [*self.sentinels.values(), *self.servers.values()]:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)  # a paused server cannot stop
            stop_redis_server(proc)


def _sentinel(workdir: Path, primary: int) -> tuple[int, subprocess.Popen[bytes]]:
    port = free_port()
    config = workdir / f"sentinel-{port}.conf"  # Sentinel rewrites its own file as it learns
    config.write_text(
        "\n".join(
            [
                f"port {port}",
                "bind 127.0.0.1",
                f"dir {workdir}",
                f"logfile {workdir / f'sentinel-{port}.log'}",
                f"sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} {QUORUM}",
                f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}",
                f"sentinel failover-timeout {MASTER_NAME} 10000",
                f"sentinel parallel-syncs {MASTER_NAME} 1",
                "",
            ]
        )
    )
    proc = spawn(
        [redis_server_binary(), str(config), "--sentinel", "--daemonize", "no"],
        listening(port),
        "redis-sentinel",
        timeout_s=10.0,
    )
    return port, proc


@contextlib.contextmanager
def sentinel_group(workdir: Path, replicas: int = 2, sentinels: int = 3) -> Iterator[SentinelGroup]:
    """Start the group and wait until every Sentinel knows the primary, its replicas and each other."""
    workdir.mkdir(parents=True, exist_ok=True)
    group = SentinelGroup(workdir)
    try:
        primary, proc = start_redis_server(workdir / "primary", extra=REPLICATION)
        group.servers[primary] = proc
        for n in range(replicas):
            port, proc = start_redis_server(
                workdir / f"replica{n + 1}", extra=(*REPLICATION, "--replicaof", "127.0.0.1", str(primary))
            )
            group.servers[port] = proc
        for _ in range(sentinels):
            port, proc = _sentinel(workdir, primary)
            group.sentinels[port] = proc

        def settled() -> bool:
            with redis.Redis(port=primary, socket_timeout=1) as server:
                info = server.info("replication")
                # Good replicas (acknowledged within min-replicas-max-lag): the primary takes writes.
                if info.get("connected_slaves") != replicas or info.get("min_slaves_good_slaves") != replicas:
                    return False
            for port in group.sentinels:
                with redis.Redis(port=port, socket_timeout=1) as sentinel:
                    state = sentinel.sentinel_master(MASTER_NAME)
                    if state["num-slaves"] != replicas or state["num-other-sentinels"] != sentinels - 1:
                        return False
            return True

        # Sentinels find each other through hello messages every 2 s.
        poll_until(settled, "the Sentinels know the primary, its replicas and each other", timeout_s=60.0)
        yield group
    finally:
        group.close()
