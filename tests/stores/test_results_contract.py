"""The saved-results contract both backends keep: in this process, and in a real redis-server."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Callable

import pytest

from service.stores import ResultsBackend, ResultsLimits, open_results, sqlite_url
from service.stores.errors import (
    ResultsAllowanceError,
    ResultsCapacityError,
    ResultsQuotaError,
    ResultUnavailableError,
)
from service.stores.redis_results import RedisResultsStore
from service.stores.results_backend import LocalResults
from service.stores.saved_results import ENTRY_OVERHEAD, ResultScope

pytestmark = pytest.mark.anyio

ALLOWANCE = 10 * 1024 * 1024
TTL = 600.0
UNAVAILABLE = "saved result is unavailable or expired; fetch fresh data if needed"
RESULTS_DB = 3  # its own database: the global byte counter is not shared with other tests


class FakeClock:
    """A clock the test moves by hand (near real time, as the Redis store's is)."""

    def __init__(self) -> None:
        self.now = 1.8e9

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["memory", "redis"])
def results_url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "memory":
        return sqlite_url(tmp_path / "store.db")
    return request.getfixturevalue("redis_url").rsplit("/", 1)[0] + f"/{RESULTS_DB}"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def make_results(results_url: str, clock: FakeClock) -> AsyncIterator[Callable[..., ResultsBackend]]:
    """Open results stores on one backend (for Redis: an emptied database), all closed afterwards."""
    opened: list[ResultsBackend] = []

    def make(**limits: int) -> ResultsBackend:
        store = open_results(results_url, ResultsLimits(**limits), clock)
        opened.append(store)
        return store

    first = make()
    if isinstance(first, RedisResultsStore):
        await first._link.call(first._link.client.flushdb())
    yield make
    for store in opened:
        await store.close()


def scope(tenant: str = "acme") -> ResultScope:
    """A fresh run of ``tenant``."""
    return ResultScope(tenant, "s1", f"run-{uuid.uuid4().hex[:8]}")


async def tenant_bytes(store: ResultsBackend, tenant: str) -> int:
    if isinstance(store, LocalResults):
        return store.store.tenant_bytes(tenant)
    assert isinstance(store, RedisResultsStore)
    return await store.tenant_bytes(tenant)


async def test_save_load_delete_roundtrip(make_results) -> None:
    """save gives result_<uuid4>; load gives the text and network mark; delete answers True then False."""
    store, run = make_results(), scope()
    plain = await store.save(run, '{"rows":[1,2],"name":"é"}', ALLOWANCE, TTL)
    marked = await store.save(run, "[1]", ALLOWANCE, TTL, network=True)
    assert re.fullmatch(r"result_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", plain)
    assert await store.load_entry(run, plain) == ('{"rows":[1,2],"name":"é"}', False)
    assert await store.load_entry(run, marked) == ("[1]", True)
    assert await store.usage(run) == (2, len('{"rows":[1,2],"name":"é"}'.encode()) + 3)
    assert await store.delete(run, plain) is True
    assert await store.delete(run, plain) is False
    with pytest.raises(ResultUnavailableError):
        await store.load_entry(run, plain)


async def test_entries_per_run_are_capped_and_never_evicted(make_results) -> None:
    """The save past max_entries raises results_capacity; the old references still load."""
    store, run = make_results(max_entries=3), scope()
    ids = [await store.save(run, str(i), ALLOWANCE, TTL) for i in range(3)]
    with pytest.raises(ResultsCapacityError, match="at most 3 saved results per run"):
        await store.save(run, "3", ALLOWANCE, TTL)
    assert [(await store.load_entry(run, i))[0] for i in ids] == ["0", "1", "2"]
    assert await store.save(scope(), "1", ALLOWANCE, TTL)


async def test_run_allowance_counts_utf8_bytes(make_results) -> None:
    """A save past the run's byte allowance raises results_allowance and changes nothing."""
    store, run = make_results(), scope()
    await store.save(run, '"éé"', 10, TTL)  # 6 UTF-8 bytes
    with pytest.raises(ResultsAllowanceError, match=r"\(6 of 10 bytes used\)"):
        await store.save(run, '"abc"', 10, TTL)
    assert await store.usage(run) == (1, 6)


@pytest.mark.parametrize("other", [("other", "s1"), ("acme", "s2"), ("acme", "")], ids=["tenant", "session", "none"])
async def test_other_scopes_cannot_load_or_delete(make_results, other: tuple[str, str]) -> None:
    """Another tenant, session or run gets the generic unavailable error and cannot delete."""
    store, run = make_results(), scope()
    result_id = await store.save(run, "[1]", ALLOWANCE, TTL)
    for elsewhere in (ResultScope(*other, run.run_id), ResultScope("acme", "s1", "another-run")):
        with pytest.raises(ResultUnavailableError, match=re.escape(UNAVAILABLE)):
            await store.load_entry(elsewhere, result_id)
        assert await store.delete(elsewhere, result_id) is False
    assert (await store.load_entry(run, result_id))[0] == "[1]"


@pytest.mark.parametrize(
    "bad_id",
    ["result_00000000-0000-4000-8000-000000000000", "", "nope", 7, None, "result_../../x", "result_" + "A" * 36],
)
async def test_unknown_ids_are_unavailable(make_results, bad_id: object) -> None:
    """Unknown, malformed or non-string ids raise the same unavailable error and delete nothing."""
    store, run = make_results(), scope()
    await store.save(run, "1", ALLOWANCE, TTL)
    with pytest.raises(ResultUnavailableError, match=re.escape(UNAVAILABLE)):
        await store.load_entry(run, bad_id)
    assert await store.delete(run, bad_id) is False


async def test_ttl_expiry_frees_the_quota(make_results, clock: FakeClock) -> None:
    """After its TTL a reference is unavailable and uncounted; expire() drops it and gives its bytes back."""
    store, run = make_results(tenant_max_bytes=10**6), scope("ttl")
    old = await store.save(run, "1", ALLOWANCE, 60)
    clock.now += 59.9
    assert (await store.load_entry(run, old))[0] == "1"
    clock.now += 0.1
    with pytest.raises(ResultUnavailableError):
        await store.load_entry(run, old)
    assert await store.usage(run) == (0, 0)
    await store.expire()
    assert await tenant_bytes(store, "ttl") == 0


async def test_end_run_drops_only_that_run(make_results) -> None:
    """end_run counts and removes the run's live references; another run keeps its own."""
    store, run, other = make_results(), scope(), scope()
    ids = [await store.save(run, str(i), ALLOWANCE, TTL) for i in range(3)]
    keep = await store.save(other, "x", ALLOWANCE, TTL)
    assert await store.end_run(run) == 3
    assert await store.end_run(run) == 0
    for result_id in ids:
        with pytest.raises(ResultUnavailableError):
            await store.load_entry(run, result_id)
    assert (await store.load_entry(other, keep))[0] == "x"


async def test_tenant_and_global_caps_name_their_settings(make_results) -> None:
    """tenant_results_bytes spans a tenant's runs; results_max_bytes spans all tenants; both are catchable."""
    one = 1000 + ENTRY_OVERHEAD
    store = make_results(tenant_max_bytes=2 * one, max_bytes=3 * one)
    text = '"' + "x" * 998 + '"'
    for _ in range(2):
        await store.save(scope("hog"), text, ALLOWANCE, TTL)
    with pytest.raises(ResultsQuotaError, match="tenant_results_bytes") as caught:
        await store.save(scope("hog"), text, ALLOWANCE, TTL)
    assert caught.value.code == "results_quota"
    assert await tenant_bytes(store, "hog") == 2 * one
    await store.save(scope("b"), text, ALLOWANCE, TTL)
    with pytest.raises(ResultsQuotaError, match="results_max_bytes"):
        await store.save(scope("c"), text, ALLOWANCE, TTL)


async def test_every_way_out_gives_bytes_back(make_results, clock: FakeClock) -> None:
    """delete, end_run and expiry each return an entry's charge to its tenant."""
    store, run, other = make_results(tenant_max_bytes=10**6), scope("back"), scope("back")
    first = await store.save(run, "[1]", ALLOWANCE, TTL)
    await store.save(run, "[2]", ALLOWANCE, TTL)
    await store.save(other, "[3]", ALLOWANCE, TTL)
    assert await tenant_bytes(store, "back") == 3 * (3 + ENTRY_OVERHEAD)
    await store.delete(run, first)
    assert await store.end_run(run) == 1
    assert await tenant_bytes(store, "back") == 3 + ENTRY_OVERHEAD
    clock.now += TTL
    assert await store.expire() == 1
    assert await tenant_bytes(store, "back") == 0
