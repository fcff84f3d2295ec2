"""A plugin for the tool-clock tests: tools that sleep, and record what happened to each call.

``EVENTS[tag]`` lists what one call (named by its ``tag`` argument) went through: ``started``, then
``finished``, ``cancelled`` (the call's task was cancelled: its clock ran out, or its cell ended) or,
for ``stubborn``, ``swallowed`` for every cancellation it ignored and ``returned`` once released.
The plugin runs in the test's process (TestClient), so the test reads ``EVENTS`` directly.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from service.tools import ToolContext, ToolRegistry

PLUGIN_ID = "clocks"
#: The declared wall clock of ``slow`` and ``stubborn``, in seconds.
SLOW_TIMEOUT_S = 0.5
#: The clock of ``sleeper`` and ``stubborn_long``: longer than any test waits.
LONG_TIMEOUT_S = 60
EVENTS: dict[str, list[str]] = {}
#: The task each ``in_task`` call ran in, by tag, in call order (kept referenced, so each stays distinct).
TASKS: dict[str, list[asyncio.Task[Any] | None]] = {}
#: Set by a test to let every ``stubborn`` call return.
RELEASE = threading.Event()

_SLEEP_INPUT = {
    "type": "object",
    "required": ["s", "tag"],
    "properties": {"s": {"type": "number"}, "tag": {"type": "string"}},
}


def _record(tag: str, event: str) -> None:
    EVENTS.setdefault(tag, []).append(event)


async def _sleep(call_id: str, params: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    tag = params["tag"]
    _record(tag, "started")
    try:
        await asyncio.sleep(params["s"])
    except asyncio.CancelledError:
        _record(tag, "cancelled")  # a tool may clean up here; then it lets the cancellation go on
        raise
    _record(tag, "finished")
    return {"slept": params["s"]}


async def _stubborn(call_id: str, params: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Ignores every cancellation until the test sets RELEASE (a plugin bug the host must survive)."""
    tag = params["tag"]
    _record(tag, "started")
    while not RELEASE.is_set():
        try:
            await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            _record(tag, "swallowed")
    _record(tag, "returned")
    return {"late": True}


async def _in_task(call_id: str, params: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Uses ``asyncio.timeout`` (which needs the call's own task) from its first line; sleeps ``s``
    seconds in it, or not at all for 0, and records the task it ran in, or ``started elsewhere``."""
    task = asyncio.current_task()
    async with asyncio.timeout(LONG_TIMEOUT_S):
        if params["s"]:
            await asyncio.sleep(params["s"])
    if asyncio.current_task() is not task:
        _record(params["tag"], "started elsewhere")
    TASKS.setdefault(params["tag"], []).append(task)
    return {"slept": params["s"]}


def register(registry: ToolRegistry) -> None:
    registry.add_tool(
        name="slow",
        description="Sleep s seconds (its clock: 0.5 s).",
        execute=_sleep,
        input_schema=_SLEEP_INPUT,
        timeout_s=SLOW_TIMEOUT_S,
    )
    registry.add_tool(
        name="slow_default",
        description="Sleep s seconds (on the default clock, tool_timeout_seconds).",
        execute=_sleep,
        input_schema=_SLEEP_INPUT,
    )
    registry.add_tool(
        name="sleeper",
        description="Sleep s seconds (its clock: a minute, so only its cell's end cancels it in a test).",
        execute=_sleep,
        input_schema=_SLEEP_INPUT,
        timeout_s=LONG_TIMEOUT_S,
    )
    registry.add_tool(
        name="stubborn_long",
        description="Sleep until released, ignoring cancellation (its clock: a minute).",
        execute=_stubborn,
        input_schema={"type": "object", "required": ["tag"], "properties": {"tag": {"type": "string"}}},
        timeout_s=LONG_TIMEOUT_S,
    )
    registry.add_tool(
        name="in_task",
        description="Sleep s seconds under asyncio.timeout, recording the task it ran in.",
        execute=_in_task,
        input_schema=_SLEEP_INPUT,
    )
    registry.add_tool(
        name="stubborn",
        description="Sleep until released, ignoring cancellation (its clock: 0.5 s).",
        execute=_stubborn,
        input_schema={"type": "object", "required": ["tag"], "properties": {"tag": {"type": "string"}}},
        timeout_s=SLOW_TIMEOUT_S,
    )
