"""Admission to running slots, on its own: burst slots, the order of grants, shares, and give-ups.

``Admission`` is pure bookkeeping over asyncio futures (no processes), so each rule is a table:
who holds what, who asks, and what they get.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from service.errors import Overloaded
from service.runtime.workers.admission import Admission


def refuse() -> Exception:
    return Overloaded("no slot", retry_after=1)


def admission(size: int, burst: int = 0, held: dict[str, int] | None = None, **kw: Any) -> Admission:
    adm = Admission(size, refuse, burst=burst, **kw)
    for tenant, n in (held or {}).items():
        for _ in range(n):
            assert adm.take_now(tenant), (tenant, held)
    return adm


def run(make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(make())


# size, burst, slots held before, the tenant asking, whether it gets a slot at once
IMMEDIATE = [
    (2, 0, {}, "a", True),
    (2, 0, {"a": 1}, "a", True),
    (2, 0, {"a": 2}, "a", False),
    (2, 0, {"a": 2}, "b", False),  # no burst: a newcomer waits like anyone
    (2, 1, {"a": 2}, "b", True),  # a burst slot: b holds fewer than a
    (2, 1, {"a": 2}, "a", False),  # never for the tenant holding the most
    (2, 1, {"a": 2, "b": 1}, "c", False),  # every burst slot is taken
    (2, 2, {"a": 2, "b": 1}, "b", True),  # b still holds fewer than a
    (2, 2, {"a": 2, "b": 1}, "c", True),
    (2, 2, {"a": 1, "b": 1}, "b", False),  # nobody holds more than b: it waits for a release
    (4, 4, {"a": 4, "d": 1}, "d", True),  # one long-running tenant never makes another wait
    (4, 0, {"a": 3}, "a", True),
    (1, 3, {"a": 1, "b": 1, "c": 1}, "d", True),
    (1, 3, {"a": 1, "b": 1, "c": 1, "d": 1}, "e", False),
]


@pytest.mark.parametrize(("size", "burst", "held", "tenant", "granted"), IMMEDIATE)
def test_who_gets_a_slot_at_once(size, burst, held, tenant, granted):
    """A slot is free below ``size``; above it, up to ``size + burst``, only a tenant that holds fewer slots
    than another tenant gets one."""

    async def ask() -> bool:
        adm = admission(size, burst, held)
        return adm.take_now(tenant)

    assert run(ask) is granted


def test_a_caller_waits_behind_its_own_tenants_queue():
    """A tenant whose earlier callers are queued does not jump them, even when a burst slot is free for it."""

    async def scenario() -> tuple[bool, list[str]]:
        adm = admission(1, 1, {"a": 1, "b": 1})
        waiting = adm.enqueue("c")  # every slot held: c queues
        adm.give_back("b")  # the burst slot frees: c's queued caller gets it
        granted_queued = waiting.done()
        adm.give_back("c")
        first = adm.take_now("c")  # no queue left: a new caller of c takes the free burst slot at once
        return granted_queued and first, [t for t in ("a", "b", "c") if adm.running_slots(t)]

    assert run(scenario) == (True, ["a", "c"])


# size, burst, slots held at the start, callers queued in order, holders that give back one by one,
# the tenants granted in that order
ORDER = [
    # Fewest held first; ties go to the one served longest ago (b and c were never served).
    (1, 0, {"a": 1}, ["a", "a", "b", "c"], ["a", "b", "c", "a"], ["b", "c", "a", "a"]),
    # A tenant holding two waits behind one holding one.
    (4, 0, {"a": 2, "b": 1, "c": 1}, ["a", "b"], ["c"], ["b"]),
    # Above `size` a freed slot goes only to a tenant that holds fewer than another: a (holding the
    # most) waits until fewer than `size` are held, after the bursts drained.
    (2, 2, {"a": 2, "b": 1, "c": 1}, ["a", "d"], ["b", "c", "a", "d"], ["d", "a"]),
]


@pytest.mark.parametrize(("size", "burst", "held", "queued", "releases", "granted"), ORDER)
def test_freed_slots_go_to_the_tenant_holding_fewest(size, burst, held, queued, releases, granted):
    """Each freed slot goes to the waiting tenant that holds the fewest (then the one served longest ago)."""

    async def scenario() -> list[str]:
        adm = admission(size, burst, held)
        waiters = [(tenant, adm.enqueue(tenant)) for tenant in queued]
        assert not any(w.done() for _, w in waiters), "nobody is granted while every slot is held"
        order: list[str] = []
        for holder in releases:
            adm.give_back(holder)
            order += [tenant for tenant, w in waiters if w.done()]
            waiters = [(tenant, w) for tenant, w in waiters if not w.done()]
        return order

    assert run(scenario) == granted


# size, a sequence of (take/give, tenant) and the tenants over their share after each step
SHARES = [
    (4, [("take", "a")] * 4, [set(), set(), set(), set()]),  # alone: never over
    (
        4,
        [("take", "a")] * 4 + [("take", "b"), ("give", "b")],
        [set(), set(), set(), set(), {"a"}, set()],  # b's burst slot halves a's share while it runs
    ),
    (
        4,
        [("take", "a")] * 3 + [("take", "b"), ("take", "c")],
        [set(), set(), set(), {"a"}, {"a"}],  # two tenants: share 2; three: ceil(4 / 3) = 2
    ),
    (4, [("take", "a"), ("take", "a"), ("take", "b"), ("take", "b")], [set(), set(), set(), set()]),
]


@pytest.mark.parametrize(("size", "steps", "over_after"), SHARES)
def test_tenants_over_their_share_are_reported(size, steps, over_after):
    """While tenants compete, one holding more than ceil(size / competing tenants) is over its share;
    the callback hears each change once."""

    async def scenario() -> tuple[list[set[str]], list[tuple[str, bool]]]:
        heard: list[tuple[str, bool]] = []
        adm = admission(size, burst=4, on_share=lambda t, over: heard.append((t, over)))
        seen = []
        for op, tenant in steps:
            if op == "take":
                assert adm.take_now(tenant)
            else:
                adm.give_back(tenant)
            seen.append({t for t in "abc" if adm.over_share(t)})
        return seen, heard

    seen, heard = run(scenario)
    assert seen == over_after
    expected_calls = []
    before: set[str] = set()
    for now in over_after:
        expected_calls += [(t, t in now) for t in sorted(now ^ before)]
        before = now
    assert heard == expected_calls


def test_a_waiting_tenant_counts_towards_the_shares():
    """A tenant that only waits (no burst) still halves the share of the one holding every slot."""

    async def scenario() -> tuple[bool, bool]:
        adm = admission(2, 0, {"a": 2}, on_share=lambda t, over: None)
        waiter = adm.enqueue("b")
        over_while_b_waits = adm.over_share("a")
        adm.withdraw("b", waiter)
        return over_while_b_waits, adm.over_share("a")

    assert run(scenario) == (True, False)


def test_a_wait_that_runs_out_is_refused_and_holds_nothing():
    """admit raises the refusal at its timeout; the caller left the queue and holds no slot."""

    async def scenario() -> tuple[type[BaseException] | None, int, int]:
        adm = admission(1, 0, {"a": 1})
        raised = None
        try:
            await adm.admit("b", 0.01)
        except Exception as exc:  # noqa: BLE001 - the test records what was raised
            raised = type(exc)
        return raised, adm.queued("b"), adm.running_slots("b")

    assert run(scenario) == (Overloaded, 0, 0)


def test_a_cancelled_wait_that_was_granted_gives_the_slot_back():
    """A slot granted in the same breath as the waiting task is cancelled is not lost: it goes on."""

    async def scenario() -> tuple[int, int, bool]:
        adm = admission(1, 0, {"a": 1})
        task = asyncio.ensure_future(adm.admit("b", 10.0))
        await asyncio.sleep(0)  # b is queued
        later = adm.enqueue("c")
        adm.give_back("a")  # granted to b ...
        task.cancel()  # ... as its caller goes away
        with pytest.raises(asyncio.CancelledError):
            await task
        return adm.running_slots("b"), adm.running_slots("c"), later.done()

    assert run(scenario) == (0, 1, True)


def test_the_peak_counts_burst_slots():
    """``peak`` is the most slots held at once, never above size + burst."""

    async def scenario() -> tuple[int, int]:
        adm = admission(2, 1, {"a": 2, "b": 1})
        refused = [adm.take_now(t) for t in ("a", "b", "c")]
        assert refused == [False, False, False]
        adm.give_back("b")
        return adm.peak, adm.held

    assert run(scenario) == (3, 2)


def test_a_queued_caller_waits_on_one_loop_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A queued admit is bounded by a loop timer, not ``asyncio.timeout`` (a Timeout object, a task lookup
    and a reschedule per queued caller): granted in time it holds its slot, and its timer is gone."""

    def no_timeout(*args: object) -> object:
        raise AssertionError("admit made an asyncio.timeout")

    monkeypatch.setattr(asyncio, "timeout", no_timeout)

    async def scenario() -> tuple[int, int, int]:
        adm = admission(1, 0, {"a": 1})
        task = asyncio.ensure_future(adm.admit("b", 10.0))
        await asyncio.sleep(0)  # b is queued
        adm.give_back("a")
        await task
        timers = len(asyncio.get_running_loop()._scheduled)  # type: ignore[attr-defined]
        return adm.running_slots("b"), adm.queued("b"), timers

    assert run(scenario) == (1, 0, 0)


def test_a_grant_and_a_run_out_wait_in_the_same_turn_keep_the_grant() -> None:
    """A slot granted just before the waiter's timer fires stands: the caller holds it, nothing is refused."""

    async def scenario() -> int:
        adm = admission(1, 0, {"a": 1})
        task = asyncio.ensure_future(adm.admit("b", 0.001))
        await asyncio.sleep(0)  # b is queued
        adm.give_back("a")  # granted now; its timer may fire before b runs
        await asyncio.sleep(0.01)
        await task
        return adm.running_slots("b")

    assert run(scenario) == 1
