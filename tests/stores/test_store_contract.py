"""Contract suite every SessionStore backend must pass (SQLite file and a real redis-server)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable

import pytest

from service.stores import (
    RunFailures,
    RunIncrement,
    SessionStore,
    StoreKeyError,
    StoreLimitError,
    StoreLimits,
    StoreQuotaError,
    StoreUnavailableError,
    charged_total,
    open_store,
    sqlite_url,
)
from service.stores.cell_writes import CellStoreWrites
from service.stores.limits import run_counter_bytes

pytestmark = pytest.mark.anyio

LIMITS = StoreLimits()
KIB = 1024


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """URL of a fresh SQLite file or of the shared test redis-server."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "stores" / "session.db")
    return request.getfixturevalue("redis_url")


@pytest.fixture
async def make_store(store_url: str) -> AsyncIterator[Callable[[], SessionStore]]:
    """Open independent store objects on the same backend; all are closed afterwards."""
    opened: list[SessionStore] = []

    def make() -> SessionStore:
        store = open_store(store_url, LIMITS)
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.close()


@pytest.fixture
async def store(make_store: Callable[[], SessionStore]) -> SessionStore:
    """One open store object."""
    store = make_store()
    await store.ping()
    return store


@pytest.fixture
def tenant() -> str:
    """A tenant no other test uses, so tests can share one redis-server."""
    return f"tenant-{uuid.uuid4().hex}"


def json_of_bytes(total: int) -> str:
    """Return a JSON string literal whose compact text is exactly ``total`` bytes."""
    return '"' + "a" * (total - 2) + '"'


async def test_implements_protocol(store: SessionStore) -> None:
    """Both backends satisfy the SessionStore protocol."""
    assert isinstance(store, SessionStore)


async def test_unknown_session_is_empty(store: SessionStore, tenant: str) -> None:
    """A session never written has no entries, no sizes and nothing to delete."""
    assert await store.get_all(tenant, "s1") == {}
    assert await store.sizes(tenant, "s1") == {}
    assert await store.delete_session(tenant, "s1") is False


async def test_commit_then_get_all_and_sizes(store: SessionStore, tenant: str) -> None:
    """Committed JSON texts come back verbatim; sizes are UTF-8 bytes of the values."""
    await store.commit(tenant, "s1", {"a": '{"x":1}', "b": '"héllo"', "c": "[1,2,3]"}, ())
    assert await store.get_all(tenant, "s1") == {"a": '{"x":1}', "b": '"héllo"', "c": "[1,2,3]"}
    assert await store.sizes(tenant, "s1") == {"a": 7, "b": 8, "c": 7}


async def test_commit_overwrites_and_deletes(store: SessionStore, tenant: str) -> None:
    """A later commit overwrites values and removes deleted keys; deleting a missing key is harmless."""
    await store.commit(tenant, "s1", {"a": "1", "b": "2", "c": "3"}, ())
    await store.commit(tenant, "s1", {"a": "10"}, ["b", "never-there"])
    assert await store.get_all(tenant, "s1") == {"a": "10", "c": "3"}


async def test_deletes_apply_before_sets(store: SessionStore, tenant: str) -> None:
    """A key both deleted and set in one commit ends up set."""
    await store.commit(tenant, "s1", {"a": "1"}, ())
    await store.commit(tenant, "s1", {"a": "2"}, ["a"])
    assert await store.get_all(tenant, "s1") == {"a": "2"}


async def test_empty_commit_is_a_no_op(store: SessionStore, tenant: str) -> None:
    """Committing nothing leaves the session as it was."""
    await store.commit(tenant, "s1", {"a": "1"}, ())
    await store.commit(tenant, "s1", {}, ())
    assert await store.get_all(tenant, "s1") == {"a": "1"}


async def test_null_value_is_stored(store: SessionStore, tenant: str) -> None:
    """JSON null is a stored value, distinct from a missing key."""
    await store.commit(tenant, "s1", {"nothing": "null"}, ())
    assert await store.get_all(tenant, "s1") == {"nothing": "null"}
    assert await store.sizes(tenant, "s1") == {"nothing": 4}


async def test_unicode_keys(store: SessionStore, tenant: str) -> None:
    """Non-ASCII keys, astral characters at the 256-unit limit and __proto__ round-trip."""
    keys = ["ключ", "😀" * 128, "__proto__", "a:b", " "]
    await store.commit(tenant, "s1", {key: f'"{i}"' for i, key in enumerate(keys)}, ())
    assert await store.get_all(tenant, "s1") == {key: f'"{i}"' for i, key in enumerate(keys)}


async def test_delete_session(store: SessionStore, tenant: str) -> None:
    """delete_session drops one session's entries and reports it had some; others remain."""
    await store.commit(tenant, "s1", {"a": "1", "b": "2"}, ())
    await store.commit(tenant, "s2", {"a": "3"}, ())
    assert await store.delete_session(tenant, "s1") is True
    assert await store.get_all(tenant, "s1") == {}
    assert await store.get_all(tenant, "s2") == {"a": "3"}
    assert await store.delete_session(tenant, "s1") is False


async def test_session_isolation(store: SessionStore, tenant: str) -> None:
    """Sessions of one tenant never see each other's keys."""
    await store.commit(tenant, "s1", {"k": '"one"'}, ())
    await store.commit(tenant, "s2", {"k": '"two"'}, ())
    assert await store.get_all(tenant, "s1") == {"k": '"one"'}
    assert await store.get_all(tenant, "s2") == {"k": '"two"'}


async def test_tenant_isolation(store: SessionStore, tenant: str) -> None:
    """Tenants with the same session id never see each other's keys, even with ':' in names."""
    other = tenant + "-other"
    await store.commit(tenant, "s1", {"k": '"mine"'}, ())
    assert await store.get_all(other, "s1") == {}
    await store.commit(other, "s1", {"k": '"theirs"'}, ())
    assert await store.get_all(tenant, "s1") == {"k": '"mine"'}
    await store.commit(f"{tenant}:x", "y", {"k": "1"}, ())
    await store.commit(tenant, "x:y", {"k": "2"}, ())
    assert await store.get_all(f"{tenant}:x", "y") == {"k": "1"}
    assert await store.get_all(tenant, "x:y") == {"k": "2"}


async def test_value_limit_is_inclusive(store: SessionStore, tenant: str) -> None:
    """A value of exactly 256 KiB is accepted; one byte more is refused."""
    await store.commit(tenant, "s1", {"big": json_of_bytes(256 * KIB)}, ())
    with pytest.raises(StoreLimitError) as caught:
        await store.commit(tenant, "s1", {"bigger": json_of_bytes(256 * KIB + 1)}, ())
    assert caught.value.code == "store_range"
    assert await store.sizes(tenant, "s1") == {"big": 256 * KIB}


async def test_oversized_value_commit_changes_nothing(store: SessionStore, tenant: str) -> None:
    """A commit with one oversized value applies none of its sets or deletes."""
    await store.commit(tenant, "s1", {"keep": '"old"', "gone?": "1"}, ())
    with pytest.raises(StoreLimitError):
        await store.commit(tenant, "s1", {"keep": '"new"', "huge": json_of_bytes(256 * KIB + 1)}, ["gone?"])
    assert await store.get_all(tenant, "s1") == {"keep": '"old"', "gone?": "1"}


async def test_total_limit_commit_changes_nothing(store: SessionStore, tenant: str) -> None:
    """A commit that would push the session past 1 MiB (keys + values) is refused whole."""
    first = {f"k{i}": json_of_bytes(250 * KIB) for i in range(4)}
    await store.commit(tenant, "s1", first, ())
    before = await store.get_all(tenant, "s1")
    used = charged_total(await store.sizes(tenant, "s1"))
    room = LIMITS.max_total_bytes - used
    with pytest.raises(StoreLimitError) as caught:
        await store.commit(tenant, "s1", {"k0": json_of_bytes(250 * KIB + 1), "x": json_of_bytes(room)}, ())
    assert "limit" in str(caught.value)
    assert await store.get_all(tenant, "s1") == before
    await store.commit(tenant, "s1", {"x": json_of_bytes(room - 1)}, ())
    assert charged_total(await store.sizes(tenant, "s1")) == LIMITS.max_total_bytes


async def test_delete_in_same_commit_frees_room(store: SessionStore, tenant: str) -> None:
    """Deletes in a commit count before its sets, so a replacement that only fits after them succeeds."""
    await store.commit(tenant, "s1", {f"k{i}": json_of_bytes(250 * KIB) for i in range(4)}, ())
    await store.commit(tenant, "s1", {"new": json_of_bytes(250 * KIB)}, ["k0"])
    assert sorted(await store.get_all(tenant, "s1")) == ["k1", "k2", "k3", "new"]


async def test_invalid_key_commit_changes_nothing(store: SessionStore, tenant: str) -> None:
    """A commit with a key over 256 units is refused with StoreKeyError and applies nothing."""
    with pytest.raises(StoreKeyError):
        await store.commit(tenant, "s1", {"ok": "1", "x" * 257: "2"}, ())
    assert await store.get_all(tenant, "s1") == {}


async def test_limits_rechecked_in_commit_order(store: SessionStore, tenant: str) -> None:
    """Two cells that each fit their snapshot cannot together exceed the total: the second commit fails."""
    await store.commit(tenant, "s1", {"base": json_of_bytes(200 * KIB)}, ())
    snapshot = await store.get_all(tenant, "s1")
    cell_a = CellStoreWrites(snapshot, LIMITS)
    cell_b = CellStoreWrites(snapshot, LIMITS)
    cell_a.set("a1", json_of_bytes(250 * KIB))
    cell_a.set("a2", json_of_bytes(250 * KIB))
    cell_b.set("b1", json_of_bytes(250 * KIB))
    cell_b.set("b2", json_of_bytes(250 * KIB))
    await store.commit(tenant, "s1", *cell_a.pending())
    with pytest.raises(StoreLimitError):
        await store.commit(tenant, "s1", *cell_b.pending())
    assert sorted(await store.get_all(tenant, "s1")) == ["a1", "a2", "base"]


async def test_commit_visible_to_new_store_object(make_store: Callable[[], SessionStore], tenant: str) -> None:
    """A commit through one store object is read by another opened on the same URL."""
    writer, reader = make_store(), make_store()
    await writer.commit(tenant, "s1", {"k": '{"v":[1,2]}'}, ())
    assert await reader.get_all(tenant, "s1") == {"k": '{"v":[1,2]}'}


async def test_persists_across_close_and_reopen(make_store: Callable[[], SessionStore], tenant: str) -> None:
    """Data committed before close() is there after reopening (new file handle / new connection)."""
    first = make_store()
    await first.commit(tenant, "s1", {"k": '"kept"', "gone": "1"}, ())
    await first.commit(tenant, "s1", {}, ["gone"])
    await first.close()
    second = make_store()
    assert await second.get_all(tenant, "s1") == {"k": '"kept"'}


async def test_closed_store_is_unavailable(make_store: Callable[[], SessionStore], tenant: str) -> None:
    """After close() calls raise StoreUnavailableError; closing twice is harmless."""
    store = make_store()
    await store.ping()
    await store.close()
    await store.close()
    with pytest.raises(StoreUnavailableError):
        await store.get_all(tenant, "s1")


class FakeClock:
    """Wall-clock seconds the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


QUOTA = StoreLimits(max_tenant_bytes=3 * 1000, max_tenant_sessions=3, session_ttl_seconds=3600)


@pytest.fixture
async def quota_store(store_url: str) -> AsyncIterator[tuple[SessionStore, FakeClock]]:
    """A store with small tenant quotas and a one-hour session TTL on a clock the test controls."""
    clock = FakeClock()
    store = open_store(store_url, QUOTA, clock)
    await store.ping()
    yield store, clock
    await store.close()


async def test_tenant_byte_quota_spans_sessions(quota_store, tenant: str) -> None:
    """A tenant cannot exceed tenant_store_bytes by spreading writes over sessions; others are unaffected."""
    store, _ = quota_store
    for sid in ("s1", "s2"):
        await store.commit(tenant, sid, {"k": json_of_bytes(1000 - 1)}, ())
    with pytest.raises(StoreQuotaError, match="tenant_store_bytes") as caught:
        await store.commit(tenant, "s1", {"k2": json_of_bytes(1200 - 2)}, ())
    assert caught.value.code == "store_quota"
    assert await store.get_all(tenant, "s1") == {"k": json_of_bytes(999)}
    assert await store.usage(tenant) == (2000, 2)
    await store.commit(tenant, "s1", {"k2": json_of_bytes(1000 - 2)}, ())  # exactly at the quota
    assert await store.usage(tenant) == (3000, 2)
    await store.commit(tenant + "-other", "s1", {"k": json_of_bytes(1000 - 1)}, ())
    # Shrinking is always allowed, and frees quota.
    await store.commit(tenant, "s1", {}, ("k2",))
    assert await store.usage(tenant) == (2000, 2)


async def test_tenant_session_quota(quota_store, tenant: str) -> None:
    """The (max_tenant_sessions + 1)th session with data is refused; deleting one makes room."""
    store, _ = quota_store
    for sid in ("s1", "s2", "s3"):
        await store.commit(tenant, sid, {"k": "1"}, ())
    with pytest.raises(StoreQuotaError, match="tenant_max_sessions"):
        await store.commit(tenant, "s4", {"k": "1"}, ())
    assert await store.get_all(tenant, "s4") == {}
    await store.commit(tenant, "s3", {"k": "2"}, ())  # an existing session may still be written
    assert await store.delete_session(tenant, "s2") is True
    await store.commit(tenant, "s4", {"k": "1"}, ())
    assert await store.usage(tenant) == (6, 3)


async def test_session_expires_ttl_after_its_last_write(quota_store, tenant: str) -> None:
    """A session reads as empty once session_ttl_seconds passed since its last commit; a write renews it."""
    store, clock = quota_store
    await store.commit(tenant, "old", {"k": '"v"'}, ())
    await store.commit(tenant, "renewed", {"k": '"v"'}, ())
    clock.now += 3000
    await store.commit(tenant, "renewed", {"k2": '"w"'}, ())
    clock.now += 600
    assert await store.get_all(tenant, "old") == {}
    assert await store.sizes(tenant, "old") == {}
    assert await store.delete_session(tenant, "old") is False
    assert await store.get_all(tenant, "renewed") == {"k": '"v"', "k2": '"w"'}
    assert await store.usage(tenant) == (9, 1)


async def test_expire_removes_expired_data_and_frees_quota(quota_store, tenant: str) -> None:
    """expire() deletes expired sessions of every tenant; their quota is free again."""
    store, clock = quota_store
    other = tenant + "-é"  # non-ASCII tenant names are parsed correctly by the sweep
    for who in (tenant, other):
        for sid in ("s1", "s2", "s3"):
            await store.commit(who, sid, {"k": json_of_bytes(900)}, ())
    clock.now += 1800
    await store.commit(tenant, "s3", {"k": json_of_bytes(900)}, ())  # renewed: survives
    clock.now += 1800
    removed = await store.expire()
    assert removed >= 5
    assert await store.usage(tenant) == (901, 1)
    assert await store.usage(other) == (0, 0)
    clock.now -= 3600  # even with the clock turned back, the removed data is gone
    assert await store.get_all(other, "s1") == {}
    assert await store.get_all(tenant, "s1") == {}
    assert await store.get_all(tenant, "s3") == {"k": json_of_bytes(900)}
    clock.now += 3600
    for sid in ("s4", "s5"):
        await store.commit(tenant, sid, {"k": json_of_bytes(900)}, ())


async def test_write_to_expired_session_starts_empty(quota_store, tenant: str) -> None:
    """A commit to an expired session does not resurrect its old keys."""
    store, clock = quota_store
    await store.commit(tenant, "s1", {"a": "1"}, ())
    clock.now += 3601
    await store.commit(tenant, "s1", {"b": "2"}, ())
    assert await store.get_all(tenant, "s1") == {"b": "2"}


# ---- run failure counters: shared by every replica, kept across restarts, within the tenant's bytes ----


def add(tenant: str, run: str, failures: dict[str, int], blocked: dict[str, str] | None = None, sid: str = "s1"):
    return RunIncrement(tenant, sid, run, failures, blocked or {})


async def test_run_failures_count_per_tool_and_block(store: SessionStore, tenant: str) -> None:
    """Failures add up per tool; a block reason sticks (the first one wins); other runs stay clean."""
    assert (await store.run_failures(tenant, "s1", "r1")).failures == {}
    await store.add_run_failures([add(tenant, "r1", {"fetch": 1})])
    [counters] = await store.add_run_failures([add(tenant, "r1", {"fetch": 1})])
    assert counters is not None
    assert counters.failures == {"fetch": 2} and counters.blocked == {} and counters.total == 2
    await store.add_run_failures([add(tenant, "r1", {"deploy": 1}, {"deploy": "not configured"})])
    [counters] = await store.add_run_failures([add(tenant, "r1", {"deploy": 1}, {"deploy": "second reason"})])
    assert counters is not None
    assert counters.failures == {"fetch": 2, "deploy": 2} and counters.total == 4
    assert counters.blocked == {"deploy": "not configured"}
    assert await store.run_failures(tenant, "s1", "r1") == counters
    assert (await store.run_failures(tenant, "s1", "r2")).failures == {}
    assert (await store.run_failures(tenant + "x", "s1", "r1")).failures == {}
    await store.delete_run_failures(tenant, "s1", "r1")
    assert (await store.run_failures(tenant, "s1", "r1")).failures == {}


async def test_one_batch_adds_to_several_runs(store: SessionStore, tenant: str) -> None:
    """A batch carries several runs' increments (counts above one included); each gets its own answer."""
    answers = await store.add_run_failures(
        [add(tenant, "r1", {"a": 3, "b": 1}), add(tenant, "r2", {"a": 1}, {"a": "gone"}), add(tenant, "r1", {"a": 1})]
    )
    assert [a.failures if a else None for a in answers] == [{"a": 3, "b": 1}, {"a": 1}, {"a": 4, "b": 1}]
    assert (await store.run_failures(tenant, "s1", "r2")).blocked == {"a": "gone"}
    assert await store.add_run_failures([]) == []


async def test_run_failures_visible_to_new_store_object(make_store: Callable[[], SessionStore], tenant: str) -> None:
    """Counters written through one store object (then closed) are read by a fresh one: restarts, replicas."""
    first = make_store()
    await first.add_run_failures([add(tenant, "r1", {"fetch": 1}, {"fetch": "gone"})])
    await first.close()
    assert (await make_store().run_failures(tenant, "s1", "r1")).blocked == {"fetch": "gone"}


async def test_run_failures_expire_with_the_session_ttl(quota_store, tenant: str, store_url: str) -> None:
    """Counters live session_ttl_seconds after the run's latest failure (Redis: a key TTL; SQLite: the clock)."""
    store, clock = quota_store
    await store.add_run_failures([add(tenant, "r1", {"fetch": 1})])
    if store_url.startswith("redis:"):
        from service.stores.redis_store import run_key

        ttl_ms = await store._client.pttl(run_key(tenant, "s1", "r1"))  # noqa: SLF001 - the backend's own TTL
        assert 0 < ttl_ms <= QUOTA.session_ttl_seconds * 1000
        return
    clock.now += QUOTA.session_ttl_seconds - 1
    assert (await store.run_failures(tenant, "s1", "r1")).failures == {"fetch": 1}
    clock.now += 2
    assert (await store.run_failures(tenant, "s1", "r1")).failures == {}
    [counters] = await store.add_run_failures([add(tenant, "r1", {"fetch": 1})])
    assert counters is not None and counters.failures == {"fetch": 1}  # an expired run starts again from zero


async def test_run_counters_are_charged_to_the_tenants_bytes(quota_store, tenant: str) -> None:
    """Each tool's counter in a run costs run_counter_bytes of the tenant's store bytes: it shows in
    usage (not as a session), counts against commits, and a new run that would pass the quota is
    refused whole (None) while a run already charged keeps counting."""
    store, _ = quota_store
    cost = run_counter_bytes("s1", "r1", "fetch")
    await store.add_run_failures([add(tenant, "r1", {"fetch": 1})])
    assert await store.usage(tenant) == (cost, 0)
    await store.commit(tenant, "s1", {"k": json_of_bytes(QUOTA.max_tenant_bytes - cost - 1)}, ())
    with pytest.raises(StoreQuotaError, match="tenant_store_bytes"):
        await store.commit(tenant, "s2", {"k": json_of_bytes(2)}, ())
    assert await store.add_run_failures([add(tenant, "r2", {"fetch": 1}), add(tenant, "r1", {"fetch": 1})]) == [
        None,
        RunFailures({"fetch": 2}),
    ]
    assert (await store.run_failures(tenant, "s1", "r2")).failures == {}
    assert (await store.add_run_failures([add(tenant + "-other", "r2", {"fetch": 1})]))[0] is not None


async def test_ending_or_expiring_a_run_gives_its_bytes_back(quota_store, tenant: str) -> None:
    """Deleting a run, and the sweep after its TTL, release what its counters were charged."""
    store, clock = quota_store
    reason = "x" * 100
    await store.add_run_failures([add(tenant, "r1", {"a": 1, "b": 2}, {"b": reason}), add(tenant, "r2", {"a": 1})])
    charged = (
        run_counter_bytes("s1", "r1", "a")
        + run_counter_bytes("s1", "r1", "b", reason)
        + run_counter_bytes("s1", "r2", "a")
    )
    assert (await store.usage(tenant))[0] == charged
    await store.delete_run_failures(tenant, "s1", "r1")
    assert (await store.usage(tenant))[0] == run_counter_bytes("s1", "r2", "a")
    clock.now += QUOTA.session_ttl_seconds + 1
    await store.expire()
    assert await store.usage(tenant) == (0, 0)
