"""A Sentinel-managed Redis (real redis-server primary and replicas, three real Sentinels): the session
store and saved results follow a failover, and every write they reported done survives it.

``redis_wait_replicas`` is what makes "done" mean "on a replica too"; the last test shows, in the same
setting, a write the primary alone answered being lost, so the first test could see a loss.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import redis

from service.stores import (
    RedisHA,
    ResultsLimits,
    SessionStore,
    StoreLimits,
    StoreUnavailableError,
    open_results,
    open_store,
)
from tests.support.polling import apoll_until
from tests.support.sentinels import MASTER_NAME, SentinelGroup, sentinel_group

pytestmark = pytest.mark.anyio

#: The URL gives the database (and credentials): the Sentinels name the server.
URL = f"redis://{MASTER_NAME}/0"
TIMEOUT_S = 2.0
#: Writes acknowledged before the primary is killed, and after the store found the new one.
BEFORE, AFTER = 30, 30
#: From the kill to the first write done again: down-after (1 s here) + the Sentinels' vote and
#: promotion + the client's next try, several times over for a loaded machine.
RECOVERY_BOUND_S = 45.0


def _ha(group: SentinelGroup, wait_replicas: int = 1) -> RedisHA:
    return RedisHA(sentinels=group.addresses, master_name=MASTER_NAME, wait_replicas=wait_replicas)


@pytest.mark.slow
async def test_writes_follow_a_failover_and_none_reported_done_is_lost(tmp_path: Path) -> None:
    """Four writers commit session entries and save results while the primary is SIGKILLed; the stores
    find the promoted replica on their own, and every write reported done is there afterwards."""
    with sentinel_group(tmp_path) as group:
        store = open_store(URL, StoreLimits(), timeout_seconds=TIMEOUT_S, ha=_ha(group))
        results = open_results(URL, ResultsLimits(), timeout_seconds=TIMEOUT_S, ha=_ha(group))
        done_entries: dict[tuple[str, str], str] = {}
        done_results: dict[str, tuple[tuple[str, str, str], str]] = {}
        refused: list[str] = []
        killed_at: list[float] = []
        back_at: list[float] = []
        after_kill = 0
        old = group.primary_port()

        async def writer(n: int) -> None:
            nonlocal after_kill
            i = 0
            deadline = time.monotonic() + RECOVERY_BOUND_S + 30
            while after_kill < AFTER and time.monotonic() < deadline:
                i += 1
                session, key = f"s{n}", f"k{n}-{i}"
                scope = ("acme", session, f"run-{i}")
                try:
                    await store.commit("acme", session, {key: str(i)}, ())
                    done_entries[(session, key)] = str(i)
                    result_id = await results.save(scope, f"[{n}, {i}]", 1 << 20, 600)
                    done_results[result_id] = (scope, f"[{n}, {i}]")
                except StoreUnavailableError as exc:
                    refused.append(str(exc))
                    await asyncio.sleep(0.05)
                    continue
                if killed_at:
                    if not back_at:
                        back_at.append(time.monotonic())
                    after_kill += 1

        async def killer() -> None:
            while len(done_entries) < BEFORE:
                await asyncio.sleep(0.01)
            await asyncio.to_thread(group.kill_primary)
            killed_at.append(time.monotonic())

        try:
            await asyncio.gather(*(writer(n) for n in range(4)), killer())
            assert after_kill >= AFTER, f"writes did not resume after the primary died; last refusals: {refused[-3:]}"
            new = await asyncio.to_thread(group.wait_for_new_primary, old)
            assert new != old
            assert back_at[0] - killed_at[0] < RECOVERY_BOUND_S
            if refused:  # the outage is reported as the store being unavailable, naming it
                assert "primary of 'codemode'" in refused[0], refused[0]
            for (session, key), value in done_entries.items():
                entries = await store.get_all("acme", session)
                assert entries.get(key) == value, (session, key)
            for result_id, (scope, text) in done_results.items():
                assert (await results.load_entry(scope, result_id))[0] == text
        finally:
            await store.close()
            await results.close()


async def test_a_write_no_replica_confirmed_is_not_reported_done(redis_url: str) -> None:
    """With ``redis_wait_replicas = 1`` and a server no replica follows, a commit and a save are refused
    as ``store_unavailable`` naming the setting; with 0 the same writes are done."""
    waiting = RedisHA(wait_replicas=1)
    store = open_store(redis_url, StoreLimits(), timeout_seconds=0.5, ha=waiting)
    results = open_results(redis_url, ResultsLimits(), timeout_seconds=0.5, ha=waiting)
    plain = open_store(redis_url, StoreLimits(), timeout_seconds=0.5)
    try:
        with pytest.raises(StoreUnavailableError, match="redis_wait_replicas") as caught:
            await store.commit("acme", "unconfirmed", {"k": "1"}, ())
        assert "0 of 1 replicas confirmed" in str(caught.value)
        with pytest.raises(StoreUnavailableError, match="redis_wait_replicas"):
            await results.save(("acme", "unconfirmed", "r"), "[1]", 1024, 60)
        await plain.commit("acme", "confirmed", {"k": "1"}, ())
        assert await plain.get_all("acme", "confirmed") == {"k": "1"}
    finally:
        for closing in (store, results, plain):
            await closing.close()


@pytest.mark.slow
async def test_without_wait_a_write_the_primary_answered_can_be_lost(tmp_path: Path) -> None:
    """A primary that lost its replicas (and was not told ``min-replicas-to-write``) answers a write alone;
    killed, its write is gone after the failover.  With ``redis_wait_replicas = 1`` the same kind of
    write is refused instead of reported done."""
    with sentinel_group(tmp_path) as group:
        answered_alone = open_store(URL, StoreLimits(), timeout_seconds=TIMEOUT_S, ha=_ha(group, wait_replicas=0))
        confirmed = open_store(URL, StoreLimits(), timeout_seconds=TIMEOUT_S, ha=_ha(group))
        try:
            await confirmed.commit("acme", "s", {"before": "1"}, ())
            primary, replicas = group.primary_port(), group.replica_ports()
            for port in replicas:
                group.pause(port)  # they cannot reconnect once cut off
            with redis.Redis(port=primary) as server:
                server.config_set("min-replicas-to-write", 0)
                server.client_kill_filter(_type="replica")
            await answered_alone.commit("acme", "s", {"lost": "1"}, ())  # done, as far as the primary says
            with pytest.raises(StoreUnavailableError, match="redis_wait_replicas"):
                await confirmed.commit("acme", "s", {"refused": "1"}, ())
            await asyncio.to_thread(group.kill_primary)
            for port in replicas:
                group.resume(port)
            await asyncio.to_thread(group.wait_for_new_primary, primary)
            entries = await apoll_until(lambda: _readable(confirmed), "the store reads from the new primary")
            assert entries == {"before": "1"}, entries
        finally:
            await answered_alone.close()
            await confirmed.close()


async def _readable(store: SessionStore) -> dict[str, str] | None:
    try:
        return await store.get_all("acme", "s")
    except StoreUnavailableError:
        return None
