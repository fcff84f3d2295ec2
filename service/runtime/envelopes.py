"""Every cell envelope is built here, one function per kind, and matches ``CellEnvelope`` (service.api.schemas).

Kinds: ``completed``, ``waiting`` (a leg parked on host work), ``failed`` (any phase), ``input_refusal``
(a failed envelope for code refused before any worker was involved), ``status_snapshot`` (what
``GET /v1/cells/{id}`` shows of a live cell: ``running`` or ``waiting``, without output) and
``finished_summary`` (what it shows of an ended one).  tests/service/runtime/test_envelope_schema.py builds each
kind through the real service and validates it against the OpenAPI schema.

A cell's side effects that commit at its end (store writes) may only commit once its final envelope
is known to be sendable, so the envelope is encoded before they run.  ``SealedEnvelope`` carries
those bytes on to the HTTP response, which sends them as they are instead of encoding again; it is
read-only so the bytes cannot go stale.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Literal, NoReturn, NotRequired, TypedDict, cast

from bridge import jsoncodec
from bridge.messages import Phase
from bridge.truncation import truncate_error
from service.errors import ResponseNotEncodable
from service.tools.untrusted import wrap_untrusted

from .spec import Telemetry, TelemetryFields

#: Bytes of ``error`` (and of each warning) a finished cell's summary keeps.
SUMMARY_TEXT_BYTES = 2048
#: Warnings a finished cell's summary keeps.
SUMMARY_WARNINGS = 8
#: Fields of a final envelope that a summary keeps: its outcome, never its data (value, output).
SUMMARY_FIELDS = (
    "status",
    "cell_id",
    "error",
    "code",
    "failure_phase",
    "warnings",
    "bridge_dispatch_started",
    "replay_safe",
    "untrusted_content",
    "telemetry",
)

EnvelopeStatus = Literal["completed", "waiting", "failed", "running"]


class Envelope(TypedDict):
    """A cell envelope of any kind, as ``CellEnvelope`` (service.api.schemas) describes it.

    The kind-specific fields are present only in their kinds (see the builders below).
    """

    status: EnvelopeStatus
    cell_id: str
    bridge_dispatch_started: bool
    replay_safe: bool
    telemetry: TelemetryFields
    # Entries: text, json and truncated objects (bridge.output), or kept encoded (jsoncodec.fragment).
    output: NotRequired[list[object]]
    value: NotRequired[object]  # completed: decoded JSON, or JSON kept encoded (jsoncodec.fragment)
    warnings: NotRequired[list[str]]
    reason: NotRequired[str]  # waiting: "pending_tools" or "yield"
    # Each call as HostRequests.public() shows it (a held input may be an encoded JSON fragment).
    pending_tool_calls: NotRequired[list[dict[str, object]]]
    error: NotRequired[str]
    code: NotRequired[str]
    failure_phase: NotRequired[Phase]
    untrusted_content: NotRequired[bool]


class LegFields(TypedDict):
    """The fields every leg's envelope carries, as of the leg's stop."""

    bridge_dispatch_started: bool
    replay_safe: bool
    telemetry: TelemetryFields


class SealedEnvelope(dict[str, object]):
    """A final envelope and its compact JSON (``encoded``), which were checked to agree."""

    __slots__ = ("encoded",)

    def __init__(self, envelope: Envelope, encoded: bytes) -> None:
        super().__init__(envelope)
        self.encoded = encoded

    def _read_only(self, *_: object, **__: object) -> NoReturn:
        raise TypeError("a sealed envelope is read-only: its encoded bytes would go stale")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only


def sealed(envelope: Envelope, encoded: bytes) -> Envelope:
    """``envelope`` read-only with its encoding (a ``SealedEnvelope``, which HTTP sends as it is)."""
    # A class cannot derive from a TypedDict, so the sealed dict is named by the keys it holds.
    return cast(Envelope, SealedEnvelope(envelope, encoded))


def plain(envelope: Mapping[str, object]) -> dict[str, object]:
    """``envelope`` as plain JSON data: exactly what ``POST /v1/exec`` would send, decoded.

    The registry keeps parts of an envelope encoded (``jsoncodec.fragment``: the value and output as the
    worker wrote them, a pending call's input, a background cell's output and value), which only our
    codec can write.  A face that must hand objects on (the MCP facade's ``structuredContent``, which the
    SDK validates with pydantic) decodes them here, from the bytes HTTP sends, in one pass of the C codec;
    a final envelope is decoded from the bytes it was sealed with.
    """
    try:
        encoded = envelope.encoded if isinstance(envelope, SealedEnvelope) else jsoncodec.dumps(envelope)
    except jsoncodec.JSONEncodeError as exc:
        raise ResponseNotEncodable(
            f"the cell's envelope could not be written as JSON ({exc}); asking again returns the same answer: "
            "return values nested less deeply (at most 254 levels)"
        ) from None
    decoded = jsoncodec.loads(encoded)
    if not isinstance(decoded, dict):  # an envelope is an object; anything else is a fault of ours
        raise TypeError(f"a cell envelope encoded as {type(decoded).__name__}, not an object")
    return decoded


def finished_summary(envelope: Envelope) -> Envelope:
    """What ``GET /v1/cells/{id}`` shows of a finished cell: bounded whatever the cell produced."""
    # Only keys of an envelope are kept, so the summary is one (without its kind's data).
    summary = cast(Envelope, {key: value for key, value in envelope.items() if key in SUMMARY_FIELDS})
    if "error" in summary:
        summary["error"] = truncate_error(summary["error"], SUMMARY_TEXT_BYTES)
    if "warnings" in summary:
        summary["warnings"] = [truncate_error(w, SUMMARY_TEXT_BYTES) for w in summary["warnings"][:SUMMARY_WARNINGS]]
    return summary


def completed(
    cell_id: str,
    *,
    value: object,
    output: list[object],
    bridge_dispatch_started: bool,
    replay_safe: bool,
    telemetry: TelemetryFields,
) -> Envelope:
    return {
        "status": "completed",
        "cell_id": cell_id,
        "output": output,
        "bridge_dispatch_started": bridge_dispatch_started,
        "replay_safe": replay_safe,
        "telemetry": telemetry,
        "value": value,
    }


def waiting(
    cell_id: str,
    *,
    output: list[object],
    reason: str,
    pending_tool_calls: list[dict[str, object]],
    bridge_dispatch_started: bool,
    replay_safe: bool,
    telemetry: TelemetryFields,
) -> Envelope:
    return {
        "status": "waiting",
        "cell_id": cell_id,
        "output": output,
        "bridge_dispatch_started": bridge_dispatch_started,
        "replay_safe": replay_safe,
        "telemetry": telemetry,
        "reason": reason,
        "pending_tool_calls": pending_tool_calls,
    }


def failed(
    cell_id: str,
    *,
    error: str,
    code: str,
    phase: Phase,
    output: list[object],
    bridge_dispatch_started: bool,
    replay_safe: bool,
    telemetry: TelemetryFields,
) -> Envelope:
    return {
        "status": "failed",
        "cell_id": cell_id,
        "output": output,
        "bridge_dispatch_started": bridge_dispatch_started,
        "replay_safe": replay_safe,
        "telemetry": telemetry,
        "error": error,
        "code": code,
        "failure_phase": phase,
    }


def input_refusal(message: str) -> Envelope:
    """The envelope of a cell refused before any worker was involved (it gets an id it never uses)."""
    return failed(
        "cell_" + str(uuid.uuid4()),
        error=message,
        code="invalid_input",
        phase="input",
        output=[],
        bridge_dispatch_started=False,
        replay_safe=True,
        telemetry=Telemetry().public(0.0),
    )


def status_snapshot(
    cell_id: str,
    *,
    status: Literal["running", "waiting"],
    bridge_dispatch_started: bool,
    replay_safe: bool,
    telemetry: TelemetryFields,
    reason: str | None = None,
    pending_tool_calls: list[dict[str, object]] | None = None,
) -> Envelope:
    """A live cell's status without resuming it; a waiting one names what it waits for (no output)."""
    out: Envelope = {
        "status": status,
        "cell_id": cell_id,
        "bridge_dispatch_started": bridge_dispatch_started,
        "replay_safe": replay_safe,
        "telemetry": telemetry,
    }
    if status == "waiting":
        assert reason is not None and pending_tool_calls is not None, "a waiting cell names what it waits for"
        out["reason"] = reason
        out["pending_tool_calls"] = pending_tool_calls
    return out


def add_warnings(envelope: Envelope, warnings: list[str]) -> None:
    """Notes from the end-of-cell steps (a store write that could not commit, ...)."""
    envelope["warnings"] = warnings


def drop_warnings(envelope: Envelope) -> None:
    del envelope["warnings"]


def mark_untrusted(envelope: Envelope) -> None:
    """Once a cell has seen network-derived data, its model-facing text is wrapped as untrusted.

    Text entries are what an agent shows its model; ``json`` entries and the value stay raw.
    """
    envelope["untrusted_content"] = True
    output = envelope.get("output") or []
    for i, entry in enumerate(output):
        if isinstance(entry, dict) and entry.get("type") == "text" and isinstance(entry.get("text"), str):
            output[i] = {"type": "text", "text": wrap_untrusted(entry["text"], "network")}
