"""A session store that stops answering never stalls cells: a live ``codemode serve`` on a real
redis-server that the test SIGSTOPs (a hung server or a partition, not a refused connection), and on
a SQLite file whose write lock another process holds.

Store calls are bounded by the store's own timeout (``store_timeout_ms``) and the cell's; whatever
may wait on the store happens before a cell takes a worker, so another tenant's session-less cells
never queue behind it; ``/readyz`` answers within a second.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.stores.conftest import start_redis_server, stop_redis_server
from tests.support.tenant_server import TENANT_KEYS, LiveServer

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

STORE_TIMEOUT_MS = 1000
ALPHA = {"authorization": "Bearer " + TENANT_KEYS["alpha"]}
BETA = {"authorization": "Bearer " + TENANT_KEYS["beta"]}


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A redis-server of this module alone (the others share theirs and must not see it stop)."""
    port, process = start_redis_server(tmp_path_factory.mktemp("hung-redis"))
    try:
        yield port, process
    finally:
        os.kill(process.pid, signal.SIGCONT)
        stop_redis_server(process)


@pytest.fixture(scope="module")
def on_redis(
    tmp_path_factory: pytest.TempPathFactory, redis_server: tuple[int, subprocess.Popen[bytes]]
) -> Iterator[LiveServer]:
    env = {
        "CODEMODE_STORE_URL": f"redis://127.0.0.1:{redis_server[0]}/0",
        "CODEMODE_STORE_TIMEOUT_MS": str(STORE_TIMEOUT_MS),
    }
    server = LiveServer(tmp_path_factory.mktemp("stall-redis"), workers=2, env=env)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def hung(process: subprocess.Popen[bytes]) -> Iterator[None]:
    """The redis-server stops answering (its sockets stay open) until the block ends."""
    os.kill(process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(process.pid, signal.SIGCONT)


def _exec(server: LiveServer, body: dict, headers: dict[str, str]) -> tuple[int, dict, float]:
    started = time.monotonic()
    r = httpx.post(server.base + "/v1/exec", json=body, headers=headers, timeout=60)
    return r.status_code, r.json(), time.monotonic() - started


def test_readyz_answers_within_a_second_while_redis_hangs(on_redis, redis_server) -> None:
    """/readyz says the store is unavailable (503) instead of waiting for it, and says so within 1 s."""
    with hung(redis_server[1]):
        started = time.monotonic()
        r = httpx.get(on_redis.base + "/readyz", timeout=30)
        elapsed = time.monotonic() - started
    assert r.status_code == 503 and r.json()["checks"]["store"].startswith("unavailable: no answer within")
    assert elapsed < 1.0, elapsed
    assert httpx.get(on_redis.base + "/readyz", timeout=30).status_code == 200  # and recovers with it


def test_session_cells_are_bounded_by_the_store_timeout(on_redis, redis_server) -> None:
    """A session cell completes within its timeout (its run-counter read gives up after
    store_timeout_ms); a store cell's store()/load() reject with the catchable, transient store_unavailable
    at once, having been tried before the cell started, and the cell completes."""
    store_cell = """
    const codes = [];
    for (const call of [() => store("k", 1), () => load("k")]) {
      try { await call(); codes.push("ok"); } catch (e) { codes.push(`${e.code}/${e.errorType}`); }
    }
    return codes;
    """
    with hung(redis_server[1]):
        plain = _exec(on_redis, {"code": "return 1", "session_id": "s-" + uuid.uuid4().hex, "timeout_ms": 3000}, ALPHA)
        stored = _exec(on_redis, {"code": store_cell, "session_id": "s-" + uuid.uuid4().hex, "timeout_ms": 3000}, ALPHA)
    for status, env, elapsed in (plain, stored):
        assert status == 200 and env["status"] == "completed", env
        assert elapsed < 3.0, elapsed  # the cell's timeout, not the store's retries (20 s before)
    assert plain[1]["value"] == 1
    assert stored[1]["value"] == ["store_unavailable/transient", "store_unavailable/transient"]  # retrying may work


def test_another_tenants_cells_never_wait_for_a_hung_store(on_redis, redis_server) -> None:
    """While tenant alpha's session cells (three per worker) wait on the hung store, tenant beta's
    session-less cells all complete, none 503, none slower than a store timeout."""

    async def run() -> tuple[list[tuple[int, str]], list[tuple[int, float]]]:
        async with httpx.AsyncClient(base_url=on_redis.base, timeout=60) as http:

            async def cell(body: dict, headers: dict[str, str]) -> tuple[int, float, dict]:
                started = time.monotonic()
                r = await http.post("/v1/exec", json=body, headers=headers)
                return r.status_code, time.monotonic() - started, r.json()

            sessions = [
                asyncio.ensure_future(cell({"code": "return 1", "session_id": f"s-{i}-{uuid.uuid4().hex}"}, ALPHA))
                for i in range(6)
            ]
            victims = []
            for _ in range(8):
                victims.append(await cell({"code": "return 1"}, BETA))
            done = await asyncio.gather(*sessions)
            return [(s, e.get("status", "")) for s, _, e in done], [(s, t) for s, t, _ in victims]

    with hung(redis_server[1]):
        attackers, victims = asyncio.run(run())
    assert all(status == 200 and outcome == "completed" for status, outcome in attackers), attackers
    assert [status for status, _ in victims] == [200] * 8, victims
    slowest = max(t for _, t in victims)
    print(f"\nvictim cells while the store hangs: slowest {slowest * 1000:.0f} ms")
    assert slowest < STORE_TIMEOUT_MS / 1000, victims


@pytest.fixture
def on_sqlite(tmp_path: Path) -> Iterator[tuple[LiveServer, Path]]:
    path = tmp_path / "store.sqlite3"
    env = {"CODEMODE_STORE_URL": f"sqlite:///{path}", "CODEMODE_STORE_TIMEOUT_MS": str(STORE_TIMEOUT_MS)}
    server = LiveServer(tmp_path, workers=2, env=env)
    server.start()
    try:
        yield server, path
    finally:
        server.stop()


def test_a_locked_sqlite_store_costs_a_commit_its_timeout_only(on_sqlite) -> None:
    """While another process holds the SQLite write lock, a store cell still reads, runs and completes
    within its timeout; its commit gives up after store_timeout_ms with a warning; once the lock goes,
    a commit lands again."""
    server, path = on_sqlite
    sid = "s-" + uuid.uuid4().hex
    foreign = sqlite3.connect(path, isolation_level=None)
    foreign.execute("BEGIN IMMEDIATE")
    try:
        status, env, elapsed = _exec(
            server, {"code": 'await store("k", 1); return await load("k");', "session_id": sid}, ALPHA
        )
    finally:
        foreign.execute("ROLLBACK")
        foreign.close()
    assert status == 200 and env["status"] == "completed" and env["value"] == 1, env
    assert any("may not have been saved" in w for w in env["warnings"]), env["warnings"]
    assert elapsed < 1.0 + STORE_TIMEOUT_MS / 1000, elapsed
    status, env, _ = _exec(server, {"code": 'await store("k", 2); return 1;', "session_id": sid}, ALPHA)
    assert status == 200 and not env.get("warnings"), env
    status, env, _ = _exec(server, {"code": 'return await load("k");', "session_id": sid}, ALPHA)
    assert env["value"] == 2, env
