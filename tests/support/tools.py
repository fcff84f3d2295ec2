"""Simple Python tools the service tests register through the dispatch seam (real tools, not mocks)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from service.tools import ToolResult, ToolSpec

CALLS: dict[str, int] = {}


#: The ``x`` of each echo call running right now, and the most that ran at once since a test last set
#: "peak" to 0: a test proves that calls overlapped, or that an answer did not wait for a call, by
#: these rather than by how long things took.
ECHO_IN_FLIGHT: dict[str, Any] = {"running": [], "peak": 0}


async def _echo(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
    CALLS["echo"] = CALLS.get("echo", 0) + 1
    running: list[Any] = ECHO_IN_FLIGHT["running"]
    running.append(params.get("x"))
    ECHO_IN_FLIGHT["peak"] = max(ECHO_IN_FLIGHT["peak"], len(running))
    try:
        await asyncio.sleep(float(params.get("delay", 0)))
    finally:
        running.remove(params.get("x"))
    return {"echo": params.get("x"), "session": ctx.session_id}


def held_tool(release: threading.Event, name: str = "held") -> ToolSpec:
    """A tool whose calls return ``{"held": x}`` only once the test sets ``release``: a test proves that an
    answer did not wait for the call by releasing it only after it has that answer (an event, not a time)."""

    async def execute(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
        while not release.is_set():
            await asyncio.sleep(0.01)
        return {"held": params.get("x")}

    return ToolSpec(
        name=name,
        description="Returns x once the test releases the call.",
        execute=execute,
        input_schema={"type": "object", "properties": {"x": {}}, "additionalProperties": False},
    )


async def _fail(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
    CALLS["fail"] = CALLS.get("fail", 0) + 1
    raise ValueError(params.get("message", "tool failed on purpose"))


def _reporting(name: str) -> Any:
    """A tool that counts its runs and returns ``params["reply"]`` as its result (a tool failure contract envelope)."""

    async def execute(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
        CALLS[name] = CALLS.get(name, 0) + 1
        return params.get("reply")

    return execute


def _flaky(name: str) -> Any:
    """Raises ConnectionError the first ``resets`` times it is called with a ``key``, then answers."""

    async def execute(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
        key = f"{name}:{params['key']}"
        CALLS[key] = CALLS.get(key, 0) + 1
        if CALLS[key] <= int(params.get("resets", 0)):
            raise ConnectionError("connection reset by peer")
        return {"key": params["key"], "attempts": CALLS[key]}

    return execute


_REPLY_SCHEMA = {"type": "object", "properties": {"reply": {}, "n": {"type": "integer"}}, "additionalProperties": False}
_FLAKY_SCHEMA = {
    "type": "object",
    "required": ["key"],
    "additionalProperties": False,
    "properties": {"key": {"type": "string"}, "resets": {"type": "integer"}},
}


async def _blob(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
    """A reply of ``size`` bytes of text (for inbox tests)."""
    await asyncio.sleep(float(params.get("delay", 0)))
    return {"page": params.get("page", 0), "data": "x" * int(params["size"])}


async def _news(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
    return ToolResult(details={"headline": "remote says hi"}, text="remote says hi")


TEST_TOOLS = [
    ToolSpec(
        name="echo",
        description="Echo x back after an optional delay in seconds.",
        execute=_echo,
        input_schema={
            "type": "object",
            "properties": {"x": {}, "delay": {"type": "number"}},
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name="fail",
        description="Always fails with the given message.",
        execute=_fail,
        input_schema={"type": "object", "properties": {"message": {"type": "string"}}},
    ),
    ToolSpec(
        name="blob",
        description="Returns a page of size bytes of data.",
        execute=_blob,
        input_schema={
            "type": "object",
            "required": ["size"],
            "properties": {"size": {"type": "integer"}, "page": {"type": "integer"}, "delay": {"type": "number"}},
        },
    ),
    ToolSpec(
        name="news",
        description="Network-derived headline.",
        execute=_news,
        network=True,
        output_schema={
            "type": "object",
            "properties": {"headline": {"type": "string"}},
            "required": ["headline"],
            "additionalProperties": False,
        },
    ),
]

#: Tools for the tool failure contract tests (tests/service/capabilities/test_tool_failures.py); kept apart from
#: TEST_TOOLS so the other modules' catalogs stay as they are.
FAILURE_TOOLS = [
    # The tool failure contract's failure kinds: each returns the envelope it is given and counts its runs in CALLS.
    *(
        ToolSpec(
            name=name,
            description=f"Returns params.reply as its result ({name}).",
            execute=_reporting(name),
            input_schema=_REPLY_SCHEMA,
        )
        for name in ("report", "report_b", "report_c", "report_d")
    ),
    ToolSpec(
        name="flaky_read",
        description="Idempotent read that fails with connection resets first.",
        execute=_flaky("flaky_read"),
        input_schema=_FLAKY_SCHEMA,
        idempotent=True,
    ),
    ToolSpec(
        name="flaky_feed",
        description="Idempotent read used by the breaker test.",
        execute=_flaky("flaky_feed"),
        input_schema=_FLAKY_SCHEMA,
        idempotent=True,
    ),
    ToolSpec(
        name="flaky_write",
        description="Non-idempotent write that fails with connection resets first.",
        execute=_flaky("flaky_write"),
        input_schema=_FLAKY_SCHEMA,
    ),
]
