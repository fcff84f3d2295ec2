"""ResultsStore: run-scoped saved results."""

from __future__ import annotations

import re

import pytest

from service.stores.errors import (
    ResultsAllowanceError,
    ResultsCapacityError,
    ResultsQuotaError,
    ResultUnavailableError,
)
from service.stores.saved_results import ENTRY_OVERHEAD, ResultScope, ResultsStore

RUN = ResultScope("acme", "s1", "run-1")
ALLOWANCE = 10 * 1024 * 1024
TTL = 600.0
UNAVAILABLE = "saved result is unavailable or expired; fetch fresh data if needed"


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_save_returns_uuid_id_and_load_returns_text() -> None:
    """save returns result_<uuid4>; load returns the same JSON text."""
    store = ResultsStore()
    result_id = store.save(RUN, '{"rows":[1,2]}', ALLOWANCE, TTL)
    uuid4 = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
    assert re.fullmatch(f"result_{uuid4}", result_id)
    assert store.load(RUN, result_id) == '{"rows":[1,2]}'
    assert store.usage(RUN) == (1, 14)


def test_capacity_is_64_per_run_and_never_evicts() -> None:
    """The 65th save raises ResultsCapacityError; all 64 old references still load."""
    store = ResultsStore()
    ids = [store.save(RUN, str(i), ALLOWANCE, TTL) for i in range(64)]
    with pytest.raises(ResultsCapacityError, match="64 saved results per run") as caught:
        store.save(RUN, "64", ALLOWANCE, TTL)
    assert caught.value.code == "results_capacity"
    assert store.usage(RUN)[0] == 64
    assert [store.load(RUN, result_id) for result_id in ids] == [str(i) for i in range(64)]
    assert store.save(ResultScope("acme", "s1", "run-2"), "1", ALLOWANCE, TTL)


def test_delete_frees_a_slot() -> None:
    """Deleting a reference makes room for one more save; deleting again returns False."""
    store = ResultsStore(max_entries=2)
    first = store.save(RUN, "1", ALLOWANCE, TTL)
    store.save(RUN, "2", ALLOWANCE, TTL)
    assert store.delete(RUN, first) is True
    assert store.delete(RUN, first) is False
    store.save(RUN, "3", ALLOWANCE, TTL)
    with pytest.raises(ResultUnavailableError):
        store.load(RUN, first)


def test_allowance_counts_utf8_bytes_and_refuses_without_change() -> None:
    """A save past the byte allowance raises ResultsAllowanceError and stores nothing."""
    store = ResultsStore()
    store.save(RUN, '"éé"', 10, TTL)  # 6 UTF-8 bytes
    with pytest.raises(ResultsAllowanceError) as caught:
        store.save(RUN, '"abc"', 10, TTL)  # 5 more would make 11
    assert caught.value.code == "results_allowance"
    assert store.usage(RUN) == (1, 6)
    store.save(RUN, '"ab"', 10, TTL)
    assert store.usage(RUN) == (2, 10)


@pytest.mark.parametrize(
    "other",
    [
        ResultScope("other", "s1", "run-1"),
        ResultScope("acme", "s2", "run-1"),
        ResultScope("acme", "s1", "run-2"),
        ResultScope("acme", "", "run-1"),
    ],
    ids=["tenant", "session", "run", "no-session"],
)
def test_other_scopes_cannot_see_or_delete(other: ResultScope) -> None:
    """Another tenant, session or run gets the generic unavailable error and cannot delete."""
    store = ResultsStore()
    result_id = store.save(RUN, "[1]", ALLOWANCE, TTL)
    with pytest.raises(ResultUnavailableError) as caught:
        store.load(other, result_id)
    assert str(caught.value) == UNAVAILABLE
    assert caught.value.code == "result_unavailable"
    assert store.delete(other, result_id) is False
    assert store.load(RUN, result_id) == "[1]"


@pytest.mark.parametrize("bad_id", ["result_00000000-0000-4000-8000-000000000000", "", "nope", 7, None])
def test_unknown_ids_are_unavailable(bad_id: object) -> None:
    """Unknown or non-string ids raise the same unavailable error."""
    store = ResultsStore()
    store.save(RUN, "1", ALLOWANCE, TTL)
    with pytest.raises(ResultUnavailableError, match=re.escape(UNAVAILABLE)):
        store.load(RUN, bad_id)


def test_entries_expire_after_ttl() -> None:
    """After its TTL a reference is unavailable, no longer counts, and expire() drops it."""
    clock = FakeClock()
    store = ResultsStore(max_entries=1, clock=clock)
    old = store.save(RUN, "1", ALLOWANCE, 60)
    other = store.save(ResultScope("b", "", "r"), "2", ALLOWANCE, 120)
    clock.now += 59.9
    assert store.load(RUN, old) == "1"
    clock.now += 0.1
    with pytest.raises(ResultUnavailableError):
        store.load(RUN, old)
    assert store.usage(RUN) == (0, 0)
    store.save(RUN, "3", ALLOWANCE, 60)
    clock.now += 60
    assert store.expire() == 2
    with pytest.raises(ResultUnavailableError):
        store.load(ResultScope("b", "", "r"), other)


def test_end_run_drops_only_that_run() -> None:
    """end_run removes every reference of the run and returns the count; other runs keep theirs."""
    store = ResultsStore()
    ids = [store.save(RUN, str(i), ALLOWANCE, TTL) for i in range(3)]
    keep = store.save(ResultScope("acme", "s1", "run-2"), "x", ALLOWANCE, TTL)
    assert store.end_run(RUN) == 3
    assert store.end_run(RUN) == 0
    for result_id in ids:
        with pytest.raises(ResultUnavailableError):
            store.load(RUN, result_id)
    assert store.usage(RUN) == (0, 0)
    assert store.load(ResultScope("acme", "s1", "run-2"), keep) == "x"


def test_plain_tuples_work_as_scopes() -> None:
    """A plain (tenant, session, run) tuple addresses the same scope as ResultScope."""
    store = ResultsStore()
    result_id = store.save(("acme", "s1", "run-1"), "1", ALLOWANCE, TTL)
    assert store.load(RUN, result_id) == "1"


def test_tenant_quota_spans_runs_and_spares_other_tenants() -> None:
    """Fresh run_ids do not escape the tenant's byte quota; another tenant can still save."""
    one = 1000 + ENTRY_OVERHEAD
    store = ResultsStore(tenant_max_bytes=3 * one, max_bytes=100 * one)
    text = '"' + "x" * 998 + '"'
    for run in range(3):
        store.save(ResultScope("hog", "s", f"run-{run}"), text, ALLOWANCE, TTL)
    with pytest.raises(ResultsQuotaError, match="tenant_results_bytes") as caught:
        store.save(ResultScope("hog", "s", "run-fresh"), text, ALLOWANCE, TTL)
    assert caught.value.code == "results_quota"
    assert store.tenant_bytes("hog") == 3 * one
    assert store.save(ResultScope("other", "s", "run-0"), text, ALLOWANCE, TTL)


def test_global_cap_bounds_all_tenants_together() -> None:
    """results_max_bytes refuses a save that fits its tenant's quota but not the server's total."""
    one = 1000 + ENTRY_OVERHEAD
    store = ResultsStore(tenant_max_bytes=10 * one, max_bytes=2 * one)
    text = '"' + "x" * 998 + '"'
    store.save(ResultScope("a", "s", "r"), text, ALLOWANCE, TTL)
    store.save(ResultScope("b", "s", "r"), text, ALLOWANCE, TTL)
    with pytest.raises(ResultsQuotaError, match="results_max_bytes"):
        store.save(ResultScope("c", "s", "r"), text, ALLOWANCE, TTL)


def test_quota_is_released_by_delete_end_run_and_expiry() -> None:
    """Every way an entry goes away gives its bytes back to the tenant and the global total."""
    clock = FakeClock()
    store = ResultsStore(clock=clock, tenant_max_bytes=10**6, max_bytes=10**6)
    a = store.save(RUN, "[1]", ALLOWANCE, TTL)
    store.save(RUN, "[2]", ALLOWANCE, TTL)
    other_run = ResultScope("acme", "s1", "run-2")
    store.save(other_run, "[3]", ALLOWANCE, TTL)
    assert store.tenant_bytes("acme") == store.total_bytes == 3 * (3 + ENTRY_OVERHEAD)
    store.delete(RUN, a)
    assert store.tenant_bytes("acme") == 2 * (3 + ENTRY_OVERHEAD)
    assert store.end_run(RUN) == 1
    assert store.tenant_bytes("acme") == 3 + ENTRY_OVERHEAD
    clock.now += TTL
    assert store.expire() == 1
    assert store.tenant_bytes("acme") == store.total_bytes == 0
