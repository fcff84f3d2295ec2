"""The leg's two timers: park time wakes the leg, kill time asks whether a guest was killed."""

from __future__ import annotations

import asyncio

from service.runtime.clocks import LegClock


def test_the_park_time_wakes_the_leg_and_the_kill_time_reports_a_kill():
    async def scenario() -> tuple[bool, bool, list[str]]:
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()
        told: list[str] = []

        def kill() -> bool:
            told.append("kill")
            return True

        now = loop.time()
        with LegClock(now + 0.01, now + 0.02, woken.set, kill) as clock:
            await woken.wait()
            due_when_woken = clock.due
            while not told:
                await asyncio.sleep(0.005)
        return due_when_woken, clock.overran, told

    due, overran, told = asyncio.run(scenario())
    assert due and overran and told == ["kill"]


def test_a_kill_time_with_nothing_running_is_no_overrun_and_leaving_cancels_both_timers():
    async def scenario() -> tuple[bool, bool, list[str]]:
        loop = asyncio.get_running_loop()
        told: list[str] = []

        def nothing_to_kill() -> bool:
            told.append("asked")
            return False

        now = loop.time()
        with LegClock(now + 10, now + 0.001, lambda: told.append("wake"), nothing_to_kill) as c:
            await asyncio.sleep(0.01)  # the kill time passes; the callback answers False (no guest ran)
        overran = c.overran
        with LegClock(now + 0.001, now + 0.002, lambda: told.append("late wake"), lambda: True) as left:
            pass
        await asyncio.sleep(0.01)  # both of the second clock's moments pass after it was left
        return overran, left.due or left.overran, told

    overran, fired_after_leaving, told = asyncio.run(scenario())
    assert overran is False and told == ["asked"]
    assert fired_after_leaving is False
