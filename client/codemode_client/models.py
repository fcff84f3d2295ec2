"""Typed views of what the service sends: envelopes, output entries, pending calls, stream events.

Each keeps the dict it was read from in ``raw``, so a field this client does not know yet is still
there; the typed fields are read from it once and never written back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import ProtocolError

CellStatus = Literal["completed", "waiting", "failed", "running"]
FINAL_STATUSES = ("completed", "failed")


def _mapping(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ProtocolError(f"{what} is not a JSON object: {type(data).__name__}")
    return data


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class OutputEntry:
    """One entry of a cell's output: ``text``, ``json``, or ``truncated`` (the budget's marker)."""

    kind: Literal["text", "json", "truncated", "unknown"]
    text: str | None = None
    value: Any = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def parse(cls, data: Any) -> OutputEntry:
        entry = _mapping(data, "an output entry")
        kind = entry.get("type")
        if kind == "text":
            return cls("text", text=_str_or_none(entry.get("text")), raw=entry)
        if kind == "json":
            return cls("json", value=entry.get("value"), raw=entry)
        if entry.get("truncated") is True:
            # The marker for output over max_output_bytes: its prefix, the omitted byte count, guidance.
            return cls("truncated", text=_str_or_none(entry.get("prefix")), raw=entry)
        return cls("unknown", raw=entry)


@dataclass(frozen=True)
class PendingCall:
    """A request the cell waits on: a client tool (``input`` given), an approval, a yield, a host call."""

    id: str
    method: str
    tool: str | None = None  # the callable name the guest called
    input: Any = None
    reason: str | None = None
    name: str | None = None  # client tools: the name as declared in client_tools
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def parse(cls, data: Any) -> PendingCall:
        entry = _mapping(data, "a pending call")
        call_id, method = entry.get("id"), entry.get("method")
        if not isinstance(call_id, str) or not isinstance(method, str):
            raise ProtocolError(f"a pending call without a string id and method: {dict(entry)!r:.200}")
        return cls(
            call_id,
            method,
            _str_or_none(entry.get("tool")),
            entry.get("input"),
            _str_or_none(entry.get("reason")),
            _str_or_none(entry.get("name")),
            raw=entry,
        )

    @property
    def is_approval(self) -> bool:
        """A tool call that runs only once the caller approves it."""
        return self.method == "approval"

    @property
    def is_client_tool(self) -> bool:
        """A call of a tool declared in ``client_tools``: the caller runs it and posts its result."""
        # The service shows a call's input only for client tools (and approvals, handled above).
        return not self.is_approval and "input" in self.raw

    @property
    def is_yield(self) -> bool:
        return self.method == "yield"


@dataclass(frozen=True)
class Envelope:
    """A cell's answer (HTTP 200 for every outcome; a failed cell is data, not an exception)."""

    status: str
    cell_id: str
    value: Any = None
    output: tuple[OutputEntry, ...] = ()
    warnings: tuple[str, ...] = ()
    reason: str | None = None
    pending_tool_calls: tuple[PendingCall, ...] = ()
    error: str | None = None
    #: A failed cell's cause: ``uncaught_error`` (its own code threw, or a tool error went uncaught),
    #: ``invalid_input``, ``stalled``, ``timeout``, ``memory_limit_exceeded``, … (docs/reference/errors.md);
    #: only ``internal_error`` is a fault of the service.
    code: str | None = None
    failure_phase: str | None = None
    untrusted_content: bool = False  # the cell has seen network-derived data (its text output is wrapped)
    bridge_dispatch_started: bool = False
    replay_safe: bool = True
    telemetry: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def parse(cls, data: Any) -> Envelope:
        env = _mapping(data, "the envelope")
        status, cell_id = env.get("status"), env.get("cell_id")
        if not isinstance(status, str) or not isinstance(cell_id, str):
            raise ProtocolError(f"an envelope without a string status and cell_id: {dict(env)!r:.200}")
        warnings = env.get("warnings") or ()
        telemetry = env.get("telemetry")
        return cls(
            status=status,
            cell_id=cell_id,
            value=env.get("value"),
            output=tuple(OutputEntry.parse(e) for e in env.get("output") or ()),
            warnings=tuple(w for w in warnings if isinstance(w, str)),
            reason=_str_or_none(env.get("reason")),
            pending_tool_calls=tuple(PendingCall.parse(p) for p in env.get("pending_tool_calls") or ()),
            error=_str_or_none(env.get("error")),
            code=_str_or_none(env.get("code")),
            failure_phase=_str_or_none(env.get("failure_phase")),
            untrusted_content=env.get("untrusted_content") is True,
            bridge_dispatch_started=env.get("bridge_dispatch_started") is True,
            replay_safe=env.get("replay_safe") is not False,
            telemetry=telemetry if isinstance(telemetry, Mapping) else {},
            raw=env,
        )

    @property
    def is_final(self) -> bool:
        """Completed or failed: nothing more will happen to this cell."""
        return self.status in FINAL_STATUSES

    @property
    def text(self) -> str:
        """The ``text`` entries of ``output`` joined by newlines (what a person reads)."""
        return "\n".join(e.text for e in self.output if e.kind == "text" and e.text is not None)


# ---- events of GET /v1/cells/{cell_id}/events ----------------------------------------------------


@dataclass(frozen=True)
class StatusEvent:
    """The cell changed status: ``running``, ``waiting``, ``completed`` or ``failed``."""

    id: int | None
    status: str
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class OutputEvent:
    """One output entry, as the guest produced it (not repeated in a later envelope)."""

    id: int | None
    entry: OutputEntry
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class PendingEvent:
    """The cell needs the caller: client tool calls, approvals or a yield (answer them through ``wait``)."""

    id: int | None
    reason: str | None
    pending_tool_calls: tuple[PendingCall, ...]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class EnvelopeEvent:
    """The final envelope (completed or failed); the stream ends after it."""

    id: int | None
    envelope: Envelope
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class UnknownEvent:
    """An event type this client does not know (a newer service); ``data`` is its parsed JSON or text."""

    id: int | None
    event: str
    data: Any


CellEvent = StatusEvent | OutputEvent | PendingEvent | EnvelopeEvent | UnknownEvent
