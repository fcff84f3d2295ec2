"""Client tools and approvals for ``run()``: declarations from callables, and answers from their results.

Shared by the blocking and the asyncio client; nothing here does I/O or calls a handler itself.
"""

from __future__ import annotations

import functools
import inspect
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import RunLimitError
from .models import Envelope, OutputEntry, PendingCall

#: The service's caps on a declaration (service/api/schemas.py ClientToolDecl).
MAX_DESCRIPTION_CHARS = 4096
OPEN_OBJECT_SCHEMA: Mapping[str, Any] = {"type": "object"}
NO_APPROVER_REASON = "no approver was given to run(): pass approve=callable to answer approval requests"

#: ``run()``'s bounds by default: legs (the exec, then each wait) and seconds.  Far more than a cell that
#: finishes needs (a leg per round of client tool calls), so they stop only a loop that never ends.
DEFAULT_MAX_LEGS = 1000
DEFAULT_DEADLINE_S = 900.0
#: The pause before a wait whose stop only yielded: the first, doubled each time, up to the last.
FIRST_YIELD_PAUSE_S = 0.05
LAST_YIELD_PAUSE_S = 2.0

#: ``{name: callable}``, or a list of ``(spec, callable)`` pairs and spec dicts holding a ``handler``.
ClientTools = Mapping[str, Callable[..., Any]] | Sequence[Any]


@dataclass(frozen=True)
class ToolSet:
    """The declarations sent with ``exec`` and the callable answering each tool."""

    declarations: list[dict[str, Any]] = field(default_factory=list)
    handlers: dict[str, Callable[..., Any]] = field(default_factory=dict)

    def handler(self, call: PendingCall) -> Callable[..., Any] | None:
        """The handler of the client tool a pending call is for (by the name it was declared with)."""
        return self.handlers.get(call.name) if call.name is not None else None


def _description(fn: Callable[..., Any]) -> str | None:
    while isinstance(fn, functools.partial):
        fn = fn.func  # a partial's own docstring describes functools.partial, not the tool
    doc = inspect.getdoc(fn)
    return doc[:MAX_DESCRIPTION_CHARS] if doc else None


def _declaration(spec: Mapping[str, Any], handler: Callable[..., Any] | None) -> dict[str, Any]:
    decl = {k: v for k, v in spec.items() if k != "handler"}
    name = decl.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"a client tool spec needs a non-empty string 'name': {spec!r:.200}")
    if handler is not None and not callable(handler):
        raise TypeError(f"client tool {name!r}: its handler is not callable ({type(handler).__name__})")
    description = _description(handler) if handler is not None and decl.get("description") is None else None
    if description:
        decl["description"] = description
    return decl


def tool_set(client_tools: ClientTools | None) -> ToolSet:
    """Declarations and handlers from any of the accepted forms (a spec dict without handler declares only)."""
    tools = ToolSet()
    if client_tools is None:
        return tools
    if isinstance(client_tools, Mapping):
        pairs: list[tuple[Mapping[str, Any], Any]] = []
        for name, fn in client_tools.items():
            if not callable(fn):
                raise TypeError(f"client tool {name!r}: {type(fn).__name__} is not callable")
            pairs.append(({"name": name, "input_schema": dict(OPEN_OBJECT_SCHEMA)}, fn))
    elif isinstance(client_tools, (str, bytes)) or not isinstance(client_tools, Sequence):
        raise TypeError("client_tools takes {name: callable} or a list of (spec, callable) pairs / spec dicts")
    else:
        pairs = []
        for item in client_tools:
            if isinstance(item, Mapping):
                pairs.append((item, item.get("handler")))
            elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], Mapping):
                pairs.append((item[0], item[1]))
            else:
                raise TypeError(f"client_tools entry {item!r:.100}: expected a spec dict or a (spec, callable) pair")
    for spec, fn in pairs:
        decl = _declaration(spec, fn)
        if decl["name"] in tools.handlers or any(d["name"] == decl["name"] for d in tools.declarations):
            raise ValueError(f"client tool {decl['name']!r} is declared twice")
        tools.declarations.append(decl)
        if fn is not None:
            tools.handlers[decl["name"]] = fn
    return tools


# ---- answers ------------------------------------------------------------------------------------


def _failure(exc: BaseException) -> dict[str, Any]:
    return {"message": f"{type(exc).__name__}: {exc}", "name": type(exc).__name__}


def tool_result(call: PendingCall, *, value: Any = None, error: BaseException | None = None) -> dict[str, Any]:
    """The ``tool_results`` entry for a finished handler: its value, or ``ok: false`` with the error."""
    if error is not None:
        return {"id": call.id, "ok": False, "error": _failure(error)}
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return {
            "id": call.id,
            "ok": False,
            "error": {"message": f"client tool {call.tool!r} returned a value that is not JSON: {exc}"},
        }
    return {"id": call.id, "ok": True, "value": value}


def missing_handler(call: PendingCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "ok": False,
        "error": {"message": f"no handler for client tool {call.name or call.tool!r} was given to run()"},
    }


def approval(call: PendingCall, decision: Any) -> dict[str, Any]:
    """The ``approvals`` entry from an approver's answer: ``bool`` or ``(bool, reason)``."""
    reason: Any = None
    if isinstance(decision, tuple) and len(decision) == 2:
        decision, reason = decision
    if not isinstance(decision, bool) or not (reason is None or isinstance(reason, str)):
        raise TypeError(f"the approver must return a bool or (bool, reason: str | None), not {decision!r:.100}")
    answer: dict[str, Any] = {"id": call.id, "approve": decision}
    if reason is not None:
        answer["reason"] = reason
    return answer


def no_approver(call: PendingCall) -> dict[str, Any]:
    return {"id": call.id, "approve": False, "reason": NO_APPROVER_REASON}


# ---- the run loop's bookkeeping ----------------------------------------------------------------


@dataclass
class RunState:
    """What ``run()`` has seen so far (every output entry, across the exec and each wait), and its bounds:
    ``max_legs`` legs, ``deadline`` seconds from its start (None: none), timed by ``clock``."""

    max_legs: int = DEFAULT_MAX_LEGS
    deadline: float | None = DEFAULT_DEADLINE_S
    clock: Callable[[], float] = time.monotonic
    on_envelope: Callable[[Envelope], object] | None = None
    output: list[OutputEntry] = field(default_factory=list)
    legs: int = 0
    _pause: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.max_legs, bool) or not isinstance(self.max_legs, int) or self.max_legs < 1:
            raise ValueError(f"max_legs must be a positive integer, not {self.max_legs!r}")
        if self.deadline is not None and (isinstance(self.deadline, bool) or not self.deadline > 0):
            raise ValueError(f"deadline must be a positive number of seconds or None, not {self.deadline!r}")
        self.started = self.clock()

    def seen(self, env: Envelope) -> Envelope:
        self.legs += 1
        self.output.extend(env.output)
        if self.on_envelope is not None:
            self.on_envelope(env)
        return env

    def over(self, env: Envelope) -> RunLimitError | None:
        """Why the run may not wait on the unfinished cell of ``env`` again (None: it may)."""
        if self.legs >= self.max_legs:
            return RunLimitError(
                f"run() stopped cell {env.cell_id} after {self.legs} legs (max_legs={self.max_legs}) without it "
                "finishing, and cancelled it: it kept stopping (yields, tool calls) instead of ending. Fix the "
                "loop in its code, or pass a larger max_legs if it needs that many round trips.",
                code="max_legs_exceeded",
                envelope=env,
            )
        elapsed = self.clock() - self.started
        if self.deadline is not None and elapsed >= self.deadline:
            return RunLimitError(
                f"run() stopped cell {env.cell_id} after {elapsed:.1f} s (deadline={self.deadline:g} s) without "
                "it finishing, and cancelled it. Make the cell do less, or pass a later deadline.",
                code="deadline_exceeded",
                envelope=env,
            )
        return None

    def pause(self, env: Envelope, answered: bool) -> float:
        """Seconds to wait before resuming ``env``'s cell: none after a stop that was answered or still
        runs host work; after one that only yielded, a pause that doubles each time (within the deadline)."""
        if answered or env.status != "waiting" or env.reason != "yield":
            self._pause = 0.0
            return 0.0
        self._pause = min(self._pause * 2, LAST_YIELD_PAUSE_S) if self._pause else FIRST_YIELD_PAUSE_S
        if self.deadline is None:
            return self._pause
        return max(0.0, min(self._pause, self.deadline - (self.clock() - self.started)))

    def final(self, env: Envelope) -> Envelope:
        """The last envelope, its ``output`` holding the whole run's output in order (``raw`` as sent)."""
        return replace(env, output=tuple(self.output))


def split_pending(env: Envelope) -> tuple[list[PendingCall], list[PendingCall]]:
    """The client tool calls and the approvals of a waiting envelope (yields and host calls need no answer)."""
    calls = [p for p in env.pending_tool_calls if p.is_client_tool]
    approvals = [p for p in env.pending_tool_calls if p.is_approval]
    return calls, approvals
