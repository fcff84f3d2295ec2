"""One tool call's wall clock (service.tools.clocks.CallClock) inside a real CallSession: per call, not
per attempt; a cancellation from elsewhere stays a cancellation; the overdue callback fires only for a
tool that ignores its cancellation; a tool without a clock is not on one."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from service.tools import clocks
from service.tools.catalog import CatalogView, ToolCatalog
from service.tools.clocks import CallClock
from service.tools.errors import ToolCallError, ToolTimeoutError
from service.tools.plugin import ToolSpec
from service.tools.session import CallSession


def _session(*specs: ToolSpec) -> CallSession:
    return CallSession(ToolCatalog.build(list(specs)).view(), max_calls=50)


@pytest.mark.anyio
async def test_an_idempotent_tools_retries_share_one_clock(ctx) -> None:
    """Each attempt of `flaky` fails transiently after 0.3 s, within its 0.5 s clock; on a clock per
    attempt all three would run and the call would fail with tool_error.  The clock is per call: the
    second attempt is cut and the call rejects with tool_timeout."""
    attempts: list[int] = []

    async def flaky(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
        attempts.append(1)
        await asyncio.sleep(0.3)
        raise ConnectionError("upstream reset")

    session = _session(ToolSpec(name="flaky", description="", execute=flaky, idempotent=True, timeout_s=0.5))
    with pytest.raises(ToolTimeoutError) as info:
        await session.call("flaky", {}, ctx)
    assert info.value.code == "tool_timeout" and info.value.limit_s == 0.5
    assert len(attempts) <= 2, attempts


@pytest.mark.anyio
async def test_a_cancellation_from_elsewhere_stays_a_cancellation(ctx) -> None:
    """Cancelling the task running a clocked call (its cell ended) raises CancelledError, not tool_timeout."""
    entered = asyncio.Event()

    async def wait_long(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
        entered.set()
        await asyncio.sleep(60)

    session = _session(ToolSpec(name="wait_long", description="", execute=wait_long, timeout_s=30))
    task = asyncio.ensure_future(session.call("wait_long", {}, ctx))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.anyio
async def test_both_clock_and_outer_cancellation_propagate_the_outer_one() -> None:
    """When the clock expired and the task is cancelled from elsewhere too, the block lets the
    cancellation through (the cell's end wins) and takes back only its own."""

    async def body() -> None:
        with CallClock(0.01, "t"):
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                asyncio.current_task().cancel()  # type: ignore[union-attr] - the outer cancel arrives meanwhile
                await asyncio.sleep(0)

    task = asyncio.ensure_future(body())
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.anyio
async def test_overdue_is_told_only_about_a_tool_that_ignores_its_cancellation(ctx) -> None:
    """A tool that unwinds on cancellation never triggers `overdue`; one that ignores it does, with
    the tool_timeout rejection, while it still runs."""
    told: list[ToolCallError] = []
    release = asyncio.Event()

    async def polite(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
        await asyncio.sleep(60)

    async def stubborn(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
        while not release.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                pass
        return {"late": True}

    session = _session(
        ToolSpec(name="polite", description="", execute=polite, timeout_s=0.05),
        ToolSpec(name="stubborn", description="", execute=stubborn, timeout_s=0.05),
    )
    with pytest.raises(ToolTimeoutError):
        await session.call_detailed("polite", {}, ctx, overdue=told.append)
    assert told == []
    running = asyncio.ensure_future(session.call_detailed("stubborn", {}, ctx, overdue=told.append))
    while not told:
        await asyncio.sleep(0.01)
    assert isinstance(told[0], ToolTimeoutError) and told[0].tool == "stubborn"
    assert not running.done()
    release.set()
    with pytest.raises(ToolTimeoutError):  # it returned, but too late: its result is dropped
        await running


@pytest.mark.anyio
async def test_a_tool_without_a_clock_is_not_cancelled(ctx) -> None:
    """The same tool past a 1 ms clock rejects; its entry off any clock (as client tools are) runs to the end."""

    async def quick(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
        await asyncio.sleep(0.05)
        return 7

    catalog = ToolCatalog.build([ToolSpec(name="quick", description="", execute=quick, timeout_s=0.001)])
    clocked = catalog.view()
    with pytest.raises(ToolTimeoutError):
        await CallSession(clocked, max_calls=5).call("quick", {}, ctx)
    unclocked = CatalogView(catalog, [replace(entry, timeout_s=None) for entry in clocked.entries()])
    assert await CallSession(unclocked, max_calls=5).call("quick", {}, ctx) == 7


OPEN = {"type": "object", "additionalProperties": True}


def _wheel_heap() -> list[object]:
    return clocks._wheel_of(asyncio.get_running_loop())._heap  # noqa: SLF001 - the bound is the wheel's own size


@pytest.mark.anyio
async def test_a_call_after_an_earlier_ones_deadline_keeps_its_own_clock(ctx) -> None:
    """The shared timer stays armed for the first call's deadline after it ended: when it fires during
    the next call, that call (on a later deadline) is not cut; each call still gets its whole clock."""

    async def nap(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
        await asyncio.sleep(params["s"])
        return params["s"]

    session = _session(ToolSpec(name="nap", description="", execute=nap, timeout_s=0.15, input_schema=OPEN))
    assert await session.call("nap", {"s": 0}, ctx) == 0
    await asyncio.sleep(0.05)
    assert await session.call("nap", {"s": 0.12}, ctx) == 0.12  # the first deadline passes meanwhile
    with pytest.raises(ToolTimeoutError):
        await session.call("nap", {"s": 0.3}, ctx)


@pytest.mark.anyio
async def test_a_shorter_clock_started_later_expires_first(ctx) -> None:
    """A call on a 50 ms clock started while one on a 30 s clock runs is cut at its own limit."""

    async def wait(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
        await asyncio.sleep(params["s"])

    session = _session(
        ToolSpec(name="slow", description="", execute=wait, timeout_s=30, input_schema=OPEN),
        ToolSpec(name="quick", description="", execute=wait, timeout_s=0.05, input_schema=OPEN),
    )
    long_call = asyncio.ensure_future(session.call("slow", {"s": 60}, ctx))
    await asyncio.sleep(0)
    started = asyncio.get_running_loop().time()
    with pytest.raises(ToolTimeoutError):
        await session.call("quick", {"s": 60}, ctx)
    assert asyncio.get_running_loop().time() - started < 15  # half the slow clock: a bound load does not reach
    assert not long_call.done()
    long_call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await long_call


@pytest.mark.anyio
async def test_ended_clocks_behind_a_long_one_stay_bounded(ctx) -> None:
    """One call that runs on while 2,000 quick calls start and end after it: the ended clocks do not
    pile up behind the long one's deadline (the heap stays within twice the running clocks plus slack)."""

    async def wait(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
        await asyncio.sleep(params["s"])

    session = CallSession(
        ToolCatalog.build(
            [ToolSpec(name="wait", description="", execute=wait, timeout_s=0.5, input_schema=OPEN)]
        ).view(),
        max_calls=3000,
    )
    long_call = asyncio.ensure_future(session.call("wait", {"s": 0.2, "long": True}, ctx))
    await asyncio.sleep(0)
    for i in range(2000):
        await session.call("wait", {"s": 0, "i": i}, ctx)
        assert len(_wheel_heap()) <= 2 * 1 + clocks._SLACK + 1  # noqa: SLF001
    assert await long_call is None
    assert _wheel_heap() == []


def test_each_event_loop_keeps_its_own_clocks() -> None:
    """Calls on clocks in two threads' event loops at once expire on their own loop's timer, each in time."""

    def run(_: int) -> tuple[object, float]:
        async def body() -> tuple[object, float]:
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(ToolTimeoutError):
                with CallClock(0.05, "t"):
                    await asyncio.sleep(60)
            return clocks._wheel_of(loop), loop.time() - started  # noqa: SLF001

        return asyncio.run(body())

    with ThreadPoolExecutor(2) as pool:
        (first, first_s), (second, second_s) = pool.map(run, range(2))
    assert first is not second
    assert first_s < 30 and second_s < 30  # half the 60 s sleep only a missed clock waits out: load does not reach it
