"""A session store that stops answering never stalls cells: a live ``codemode serve`` on a real
redis-server that the test SIGSTOPs (a hung server or a partition, not a refused connection), and on
a SQLite file whose write lock another process holds.

Store calls are bounded by the store's own timeout (``store_timeout_ms``) and the cell's; whatever
may wait on the store happens before a cell takes a worker, so another tenant's session-less cells
never queue behind it; ``/readyz`` answers within a second.

No test here times the service: the answers name the bound that ended a wait, and "never waits for
the store" is shown by order (answered while the store still hangs and the store's waiters still wait).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from service.http.ops_routes import READY_STORE_SECONDS
from tests.stores.conftest import start_redis_server, stop_redis_server
from tests.support.tenant_server import TENANT_KEYS, LiveServer

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

STORE_TIMEOUT_MS = 1000
#: The store timeout of the server whose store waits must outlast the test: the most the setting allows.
LONG_STORE_TIMEOUT_MS = 60000
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


def _on_redis(
    tmp_path_factory: pytest.TempPathFactory, port: int, store_timeout_ms: int, name: str
) -> Iterator[LiveServer]:
    env = {"CODEMODE_STORE_URL": f"redis://127.0.0.1:{port}/0", "CODEMODE_STORE_TIMEOUT_MS": str(store_timeout_ms)}
    server = LiveServer(tmp_path_factory.mktemp(name), workers=2, env=env)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def on_redis(
    tmp_path_factory: pytest.TempPathFactory, redis_server: tuple[int, subprocess.Popen[bytes]]
) -> Iterator[LiveServer]:
    yield from _on_redis(tmp_path_factory, redis_server[0], STORE_TIMEOUT_MS, "stall-redis")


@pytest.fixture(scope="module")
def on_redis_waiting_long(
    tmp_path_factory: pytest.TempPathFactory, redis_server: tuple[int, subprocess.Popen[bytes]]
) -> Iterator[LiveServer]:
    """A server on the same redis-server whose store calls wait up to a minute for it."""
    yield from _on_redis(tmp_path_factory, redis_server[0], LONG_STORE_TIMEOUT_MS, "stall-redis-long")


@contextmanager
def hung(process: subprocess.Popen[bytes]) -> Iterator[None]:
    """The redis-server stops answering (its sockets stay open) until the block ends."""
    os.kill(process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(process.pid, signal.SIGCONT)


def _exec(server: LiveServer, body: dict, headers: dict[str, str]) -> tuple[int, dict]:
    r = httpx.post(server.base + "/v1/exec", json=body, headers=headers, timeout=60)
    return r.status_code, r.json()


def test_readyz_answers_within_a_second_while_redis_hangs(on_redis, redis_server) -> None:
    """/readyz says the store is unavailable (503) instead of waiting for it, and says so within 1 s:
    its own half-second bound gave up (the answer names it), not the store's timeout."""
    with hung(redis_server[1]):
        r = httpx.get(on_redis.base + "/readyz", timeout=30)
    assert r.status_code == 503, r.text
    assert r.json()["checks"]["store"] == f"unavailable: no answer within {READY_STORE_SECONDS} s", r.text
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
    # "completed" is the bound: the service ends a cell at its timeout_ms (as failed, code timeout), and
    # the store stays hung until these answers are in, so a store wait that did not give up never completes.
    for status, env in (plain, stored):
        assert status == 200 and env["status"] == "completed", env
    assert plain[1]["value"] == 1
    assert stored[1]["value"] == ["store_unavailable/transient", "store_unavailable/transient"]  # retrying may work


def test_another_tenants_cells_never_wait_for_a_hung_store(on_redis_waiting_long, redis_server) -> None:
    """While tenant alpha's session cells (three per worker) wait on the hung store, tenant beta's
    session-less cells all complete, none 503, all while every one of alpha's cells still waits.

    The store waits up to a minute and the store stays hung until beta is done: a beta cell that queued
    behind alpha's would not be answered before the store is released (it would time out instead)."""
    server = on_redis_waiting_long

    async def run() -> tuple[list[tuple[int, str]], list[int], int]:
        async with httpx.AsyncClient(base_url=server.base, timeout=120) as http:

            async def cell(body: dict, headers: dict[str, str]) -> tuple[int, dict]:
                r = await http.post("/v1/exec", json=body, headers=headers)
                return r.status_code, r.json()

            sessions = [
                asyncio.ensure_future(
                    cell({"code": "return 1", "session_id": f"s-{i}-{uuid.uuid4().hex}", "timeout_ms": 60000}, ALPHA)
                )
                for i in range(6)
            ]
            victims = []
            with hung(redis_server[1]):
                for _ in range(8):
                    victims.append((await cell({"code": "return 1"}, BETA))[0])
                alpha_answered = sum(s.done() for s in sessions)
            done = await asyncio.gather(*sessions)
            return [(s, e.get("status", "")) for s, e in done], victims, alpha_answered

    attackers, victims, alpha_answered = asyncio.run(run())
    assert victims == [200] * 8, victims
    assert alpha_answered == 0, f"{alpha_answered} of alpha's cells gave up on the store before beta was done"
    assert all(status == 200 and outcome == "completed" for status, outcome in attackers), attackers


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
        status, env = _exec(server, {"code": 'await store("k", 1); return await load("k");', "session_id": sid}, ALPHA)
    finally:
        foreign.execute("ROLLBACK")
        foreign.close()
    assert status == 200 and env["status"] == "completed" and env["value"] == 1, env
    # The lock is held until this answer is in: "completed" shows the commit gave up (the warning names
    # it) instead of waiting for the lock, and the read ran (value 1).
    assert any("may not have been saved" in w for w in env["warnings"]), env["warnings"]
    status, env = _exec(server, {"code": 'await store("k", 2); return 1;', "session_id": sid}, ALPHA)
    assert status == 200 and not env.get("warnings"), env
    status, env = _exec(server, {"code": 'return await load("k");', "session_id": sid}, ALPHA)
    assert env["value"] == 2, env
