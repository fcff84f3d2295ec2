"""The host <-> worker protocol: every frame kind, as TypedDicts (no logic).

The conversation for one cell is strict ping-pong, which keeps both sides simple:

    host  -> worker   run      (code, limits, guest config, leg budget)
    worker -> host    idle     (new guest requests, cancelled timers, new output) ... guest is blocked
    host  -> worker   settle   (replies, leg budget)                                  ... guest resumes
    worker -> host    idle | done

Cancelling a cell kills its worker: a guest stuck in native code could not obey anything else.

A worker announces itself once with ``ready`` after start-up.  Reply payloads travel as raw
frames of JSON text, so the worker hands them to the guest's ``JSON.parse`` without decoding them.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

#: Failure phases, as in the cell envelope.
Phase = Literal["input", "guest", "bridge", "host"]


class GuestConfig(TypedDict):
    """What the prelude needs to build the guest's globals for one cell."""

    tools: list[dict[str, Any]]  # handle metadata: callableName, toolName, description, source, ...
    mcp: list[dict[str, Any]]  # MCP servers: {identifier, serverName, tools: [tool identifiers]}
    mcpUnavailable: list[dict[str, Any]]  # configured servers that are down: {identifier, serverName}
    maxRequestBytes: int  # JSON arguments of one guest request; larger calls reject in the guest
    maxQueuedRequests: int  # requests one synchronous burst may queue; more reject in the guest
    maxPendingRequests: NotRequired[int]  # requests (tool calls, timers, yields) pending at once; RangeError over it
    maxQueuedBytes: NotRequired[int]  # argument characters one synchronous burst may carry; RangeError over it


class RunMessage(TypedDict):
    t: Literal["run"]
    cell_id: str
    code: str
    budget_ms: int
    memory_limit_bytes: int
    max_output_bytes: int
    value_capture_bytes: int
    config: GuestConfig


class Reply(TypedDict):
    id: int
    ok: bool
    error: NotRequired[dict[str, Any]]  # {message, code?, name?}, when not ok


# A settle frame is followed by one raw frame per ``ok`` reply, in order: the reply's JSON text
# as UTF-8 bytes.  Payloads of many megabytes then cross the pipe without being escaped into
# (and unescaped out of) a JSON string.


class SettleMessage(TypedDict):
    t: Literal["settle"]
    budget_ms: int
    replies: list[Reply]


class GuestRequest(TypedDict):
    id: int
    method: str
    args: str  # JSON text of the argument array


class IdleMessage(TypedDict):
    t: Literal["idle"]
    requests: list[GuestRequest]
    cancels: list[int]
    output: list[Any]  # output source items (bridge.output.OutputCapture)
    outstanding: int
    cpu_ms: float
    heap_bytes: int


class GuestFailure(TypedDict):
    text: str
    phase: Phase
    code: str


class DoneMessage(TypedDict):
    t: Literal["done"]
    ok: bool
    value: NotRequired[Any]  # value source (see bridge.output)
    error: NotRequired[GuestFailure]
    output: list[Any]
    cancels: list[int]  # timers dropped because nobody awaited them
    cpu_ms: float
    heap_bytes: int
    recycle: bool  # the worker must not run another cell (limit hit, engine fault)


class ReadyMessage(TypedDict):
    t: Literal["ready"]
    pid: int


HostMessage = RunMessage | SettleMessage
WorkerMessage = ReadyMessage | IdleMessage | DoneMessage
