"""Saved results in Redis: shared by replicas, caps that hold across them, TTLs on every key, outages."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from service.stores import ResultsLimits, StoreUnavailableError, open_results
from service.stores.base import DEFAULT_TIMEOUT_SECONDS
from service.stores.errors import ResultsQuotaError, ResultUnavailableError
from service.stores.redis_results import PREFIX, RedisResultsStore
from service.stores.saved_results import ENTRY_OVERHEAD, ResultScope

from .conftest import free_port, start_redis_server, stop_redis_server

pytestmark = pytest.mark.anyio

ALLOWANCE = 10 * 1024 * 1024
TTL = 600.0
RESULTS_DB = 4
ONE = 1000 + ENTRY_OVERHEAD
TEXT = '"' + "x" * 998 + '"'  # 1000 bytes: charged ONE


class FakeClock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def replicas(redis_url: str, clock: FakeClock) -> AsyncIterator[Callable[..., RedisResultsStore]]:
    """Independent store objects (one connection pool each, as replicas have) on one emptied database."""
    url = redis_url.rsplit("/", 1)[0] + f"/{RESULTS_DB}"
    opened: list[RedisResultsStore] = []

    def make(**limits: int) -> RedisResultsStore:
        store = open_results(url, ResultsLimits(**limits), clock)
        assert isinstance(store, RedisResultsStore)
        opened.append(store)
        return store

    await make()._link.call(opened[0]._link.client.flushdb())
    yield make
    for store in opened:
        await store.close()


async def _keys(store: RedisResultsStore) -> list[str]:
    return [key async for key in store._link.client.scan_iter(match=PREFIX + "*")]


def scope(tenant: str = "acme") -> ResultScope:
    return ResultScope(tenant, "s1", f"run-{uuid.uuid4().hex[:8]}")


async def test_a_result_saved_through_one_replica_loads_through_another(replicas) -> None:
    """Replica B loads, counts and deletes what replica A saved; then A sees it gone."""
    a, b, run = replicas(), replicas(), scope()
    result_id = await a.save(run, '{"rows":[1,2,3]}', ALLOWANCE, TTL, network=True)
    assert await b.load_entry(run, result_id) == ('{"rows":[1,2,3]}', True)
    assert await b.usage(run) == (1, 16)
    assert await b.delete(run, result_id) is True
    with pytest.raises(ResultUnavailableError):
        await a.load_entry(run, result_id)


@pytest.mark.parametrize("cap", ["tenant_max_bytes", "max_bytes"])
async def test_caps_hold_when_replicas_race(replicas, cap: str) -> None:
    """40 concurrent saves through two replicas against a 7-entry cap: exactly 7 succeed, 7 are charged."""
    first, second = replicas(**{cap: 7 * ONE}), replicas(**{cap: 7 * ONE})

    async def attempt(store: RedisResultsStore) -> bool:
        try:
            await store.save(scope("race"), TEXT, ALLOWANCE, TTL)
            return True
        except ResultsQuotaError as exc:
            assert ("tenant_results_bytes" if cap == "tenant_max_bytes" else "results_max_bytes") in str(exc)
            return False

    outcomes = await asyncio.gather(*(attempt(first if i % 2 else second) for i in range(40)))
    assert outcomes.count(True) == 7
    assert await first.tenant_bytes("race") == await second.total_bytes() == 7 * ONE


async def test_every_key_has_a_ttl_and_nothing_is_left_after_expiry(replicas, clock: FakeClock) -> None:
    """Each key the store writes expires on its own; once everything expired and was swept, no key remains."""
    store = replicas(tenant_max_bytes=10**6)
    odd = ResultScope("a:b:é", "s:1", "r:2")  # separators and non-ASCII inside the scope parts
    for run in (scope(), scope("other"), odd):
        await store.save(run, "[1]", ALLOWANCE, 60)
        await store.save(run, "[2]", ALLOWANCE, 120)
    keys = await _keys(store)
    assert len(keys) == 6 + 3 * 2 + 3 + 2  # entries, run sets and charges, tenants, total and index
    ttls = [await store._link.client.pttl(key) for key in keys]
    assert all(0 < ttl <= (120 + 300) * 1000 for ttl in ttls), dict(zip(keys, ttls))
    clock.now += 120
    assert await store.expire() == 6
    assert await store.tenant_bytes("a:b:é") == await store.total_bytes() == 0
    assert await _keys(store) == []


async def test_a_save_sweeps_expired_entries_of_any_replica_first(replicas, clock: FakeClock) -> None:
    """An expired run of another tenant does not hold the global cap: the next save forgets it."""
    a, b = replicas(max_bytes=2 * ONE), replicas(max_bytes=2 * ONE)
    await a.save(scope("gone"), TEXT, ALLOWANCE, 60)
    await a.save(scope("gone"), TEXT, ALLOWANCE, 60)
    clock.now += 61
    assert await b.save(scope("fresh"), TEXT, ALLOWANCE, TTL)
    assert await b.tenant_bytes("gone") == 0


async def test_unreachable_server_fails_fast_with_the_store_named() -> None:
    """Nothing listening: save, load and delete raise store_unavailable at once, naming the store."""
    # A refused connection is an answer: no call may wait for the store's timeout, made long here (120 s)
    # so that a call that waited it out shows against the bound below, which load cannot reach.
    store = open_results(f"redis://127.0.0.1:{free_port()}/0", ResultsLimits(), timeout_seconds=120)
    started = time.monotonic()
    try:
        for call in (
            store.save(scope(), "1", ALLOWANCE, TTL),
            store.load_entry(scope(), "result_00000000-0000-4000-8000-000000000000"),
            store.end_run(scope()),
        ):
            with pytest.raises(StoreUnavailableError, match="Redis saved-results store at .* is unavailable"):
                await call
    finally:
        await store.close()
    assert time.monotonic() - started < 60, "a refused connection waited out the store's timeout"


@pytest.mark.slow
async def test_a_hung_server_is_bounded_by_the_store_timeout(tmp_path: Path) -> None:
    """A server that stops answering (SIGSTOP) fails a load within the store's timeout (its retry included)."""
    port, server = start_redis_server(tmp_path)
    store = open_results(f"redis://127.0.0.1:{port}/0", ResultsLimits())
    try:
        run = scope()
        result_id = await store.save(run, "1", ALLOWANCE, TTL)
        os.kill(server.pid, signal.SIGSTOP)
        # The reason shows the bound: the call's own timeout (retry included) ended it, not a socket's.
        within = f"did not answer within {DEFAULT_TIMEOUT_SECONDS:g} s"
        with pytest.raises(StoreUnavailableError, match=within):
            await store.load_entry(run, result_id)
    finally:
        os.kill(server.pid, signal.SIGCONT)
        await store.close()
        stop_redis_server(server)


async def test_a_retried_save_is_charged_once(replicas) -> None:
    """The save script run twice for one id (a retry after a lost reply) keeps one entry and one charge."""
    store, run = replicas(), scope("retry")
    result_id = await store.save(run, TEXT, ALLOWANCE, TTL)
    original = store._save
    store._save = lambda keys, args: original(
        keys=[PREFIX + "entry:" + result_id, *keys[1:]], args=[*args[:4], result_id, *args[5:]]
    )
    assert await store.save(run, TEXT, ALLOWANCE, TTL)
    assert await store.usage(run) == (1, 1000)
    assert await store.tenant_bytes("retry") == ONE
