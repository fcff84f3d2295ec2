"""One /v1/monty connection: the client's requests to its worker, the worker's events back, in turns.

Monty's protocol alternates strictly: the client sends one request, the worker answers with ``Print``
events and one turn-ending event.  The relay reads the client only between turns, and bounds each
turn by the clamped turn budget plus the kill grace (the worker's own clock stops while it waits, so
this wall clock is the backstop).  A function call or name lookup the key's policy refuses is answered
to the worker here and the turn goes on: the client never sees it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from service.errors import WorkerGone

from . import frames
from .child import MontyChild
from .frames import FrameCaps
from .policy import FunctionPolicy

#: Receives the client's next frame (None: it closed the connection); sends one frame to it.
Receive = Callable[[], Awaitable[bytes | None]]
Send = Callable[[bytes], Awaitable[None]]


@dataclass(frozen=True)
class RelayBounds:
    caps: FrameCaps
    idle_seconds: float
    grace_seconds: float


@dataclass(frozen=True)
class Ending:
    """How a connection ended without a failure: ``idle`` when the relay ended it."""

    reason: str
    idle: bool = False


async def relay(receive: Receive, send: Send, child: MontyChild, bounds: RelayBounds, policy: FunctionPolicy) -> Ending:
    """Serve the connection until the client closes it, goes idle or the worker ends the session.

    Raises ``MalformedFrame`` (a frame of either side) and ``WorkerGone`` (the worker died or overran).
    """
    turn_seconds = bounds.caps.max_duration_micros / 1e6
    while True:
        try:
            data = await asyncio.wait_for(receive(), bounds.idle_seconds)
        except TimeoutError:
            return Ending(f"no frame for {bounds.idle_seconds:g} s (monty_idle_seconds)", idle=True)
        if data is None:
            return Ending("the client closed the connection")
        request = frames.request(data, bounds.caps)
        if request.refusal:
            await send(request.refusal)
            continue
        if request.turn_micros:
            turn_seconds = request.turn_micros / 1e6
        await child.send(request.data)
        deadline = turn_seconds + bounds.grace_seconds
        try:
            kind = await asyncio.wait_for(_turn(send, child, bounds.caps, policy), deadline)
        except TimeoutError:
            raise WorkerGone(f"the Monty worker ran past its turn budget and {bounds.grace_seconds:g} s") from None
        if kind == "fatal_error" or request.kind == "shutdown":
            return Ending(f"the worker ended the session ({kind})")


async def _turn(send: Send, child: MontyChild, caps: FrameCaps, policy: FunctionPolicy) -> str:
    """Pass the worker's events to the client until one ends the turn; returns its kind."""
    while True:
        data = await child.receive()
        event = frames.event(data, caps)
        if event.name is not None:
            why = policy.refusal(event.name)
            if why is not None:
                call = event.kind == "function_call"
                await child.send(frames.refused_call(event.call_id, why) if call else frames.undefined_name())
                continue
        await send(data)
        if event.kind != "print":
            return event.kind
