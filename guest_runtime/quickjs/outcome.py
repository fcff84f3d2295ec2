"""What a slice of a JavaScript cell came to: the prelude's ``take`` read as the engine contract's ``Slice``.

The prelude hands over, in one JSON text (``take`` in hook.js), what the cell queued since the last take
and its outcome so far.  Whether the cell waits, returned or failed also depends on what only the engine
sees (promise rejections nobody handled, timers nobody awaits), so ``slice_of`` asks the engine through
``Takes``; it runs no JavaScript of its own.
"""

from __future__ import annotations

from typing import Protocol, TypedDict

from bridge.messages import GuestRequest

from ..engine import Failed, Returned, Slice, Waiting, bridge_failure_code, stalled
from ..errors import MEMORY_LIMIT_EXCEEDED, UNCAUGHT_ERROR
from .cell_stacks import map_stack


class Done(TypedDict):
    """The cell's outcome as the prelude's ``finish`` writes it (hook.js); only ``ok`` when it returned."""

    ok: bool
    bridge: bool  # a host request's rejection ended it
    error: str  # ``Name: message`` and the engine's stack
    code: str  # the host's code of that rejection
    oom: bool  # the engine's heap cap ended it


class Taken(TypedDict):
    """What the prelude's ``take`` hands over: queued since the last take, and the outcome so far."""

    requests: list[GuestRequest]
    cancels: list[int]
    output: list[str]  # each entry one JSON text
    outstanding: int  # pending host requests, timers included
    required: int  # pending host requests that are not timers
    done: Done | None


class BridgeRejection(TypedDict):
    """A host failure of a request that nobody handled: its error text and the host's code."""

    error: str
    code: str


class Takes(Protocol):
    """The engine's operations a slice's outcome is read with."""

    def take(self) -> Taken: ...

    def cancel_timers(self) -> None: ...

    def unhandled_rejections(self) -> list[str]: ...

    def unhandled_bridge_rejection(self) -> BridgeRejection | None: ...


def slice_of(engine: Takes) -> Slice:
    """What the cell came to once its jobs ran out (the engine pumped them)."""
    taken = engine.take()
    done, cancels, output = taken["done"], taken["cancels"], taken["output"]
    if done is not None and taken["required"] == 0:
        if taken["outstanding"]:  # only timers are left: nobody awaits them, they are dropped
            engine.cancel_timers()
            cancels = cancels + engine.take()["cancels"]
        return _ended(engine, done, cancels, output)
    if taken["outstanding"] == 0:
        # A rejection nobody handled (e.g. a timer the host refused) explains the stall better.
        unhandled = engine.unhandled_rejections()
        if unhandled:
            return Failed(_unhandled(unhandled[0]), "guest", UNCAUGHT_ERROR, cancels, output)
        return stalled(cancels, output)
    return Waiting(taken["requests"], cancels, taken["outstanding"], output)


def _ended(engine: Takes, done: Done, cancels: list[int], output: list[str]) -> Slice:
    """How the cell whose outcome is ``done`` ended, rejections nobody handled counted."""
    if done["ok"]:
        bridge = engine.unhandled_bridge_rejection()
        if bridge is not None:
            code = bridge_failure_code(bridge["code"])
            return Failed(_unhandled(bridge["error"]), "bridge", code, cancels, output)
        unhandled = engine.unhandled_rejections()
        if unhandled:
            return Failed(_unhandled(unhandled[0]), "guest", UNCAUGHT_ERROR, cancels, output)
        return Returned(cancels, output)
    if done["oom"]:  # the cell itself ended on the engine's heap cap: a clean failure
        return Failed(
            "memory limit exceeded: InternalError: out of memory", "guest", MEMORY_LIMIT_EXCEEDED, cancels, output
        )
    if done["bridge"]:
        return Failed(map_stack(done["error"]), "bridge", bridge_failure_code(done["code"]), cancels, output)
    return Failed(map_stack(done["error"]), "guest", UNCAUGHT_ERROR, cancels, output)


def _unhandled(reason: str) -> str:
    return "Unhandled promise rejection: " + map_stack(reason)
