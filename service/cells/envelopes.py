"""Every cell envelope is built here, one function per kind, and matches ``CellEnvelope`` (service.api.schemas).

Kinds: ``completed``, ``waiting`` (a leg parked on host work), ``failed`` (any phase), ``input_refusal``
(a failed envelope for code refused before any worker was involved), ``status_snapshot`` (what
``GET /v1/cells/{id}`` shows of a live cell: ``running`` or ``waiting``, without output) and
``finished_summary`` (what it shows of an ended one).  tests/service/test_envelope_schema.py builds each
kind through the real service and validates it against the OpenAPI schema.

A cell's side effects that commit at its end (store writes) may only commit once its final envelope
is known to be sendable, so the envelope is encoded before they run.  ``SealedEnvelope`` carries
those bytes on to the HTTP response, which sends them as they are instead of encoding again; it is
read-only so the bytes cannot go stale.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal, NoReturn

from bridge.messages import Phase
from bridge.truncation import truncate_error
from service.tools.untrusted import wrap_untrusted

from .spec import Telemetry

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


class SealedEnvelope(dict[str, Any]):
    """A final envelope and its compact JSON (``encoded``), which were checked to agree."""

    __slots__ = ("encoded",)

    def __init__(self, envelope: dict[str, Any], encoded: bytes) -> None:
        super().__init__(envelope)
        self.encoded = encoded

    def _read_only(self, *_: Any, **__: Any) -> NoReturn:
        raise TypeError("a sealed envelope is read-only: its encoded bytes would go stale")

    __setitem__ = __delitem__ = __ior__ = _read_only  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _read_only  # type: ignore[assignment]


def finished_summary(envelope: dict[str, Any]) -> dict[str, Any]:
    """What ``GET /v1/cells/{id}`` shows of a finished cell: bounded whatever the cell produced."""
    summary = {key: envelope[key] for key in SUMMARY_FIELDS if key in envelope}
    if isinstance(summary.get("error"), str):
        summary["error"] = truncate_error(summary["error"], SUMMARY_TEXT_BYTES)
    if isinstance(summary.get("warnings"), list):
        summary["warnings"] = [
            truncate_error(str(w), SUMMARY_TEXT_BYTES) for w in summary["warnings"][:SUMMARY_WARNINGS]
        ]
    return summary


def completed(
    cell_id: str,
    *,
    value: Any,
    output: list[Any],
    bridge_dispatch_started: bool,
    replay_safe: bool,
    telemetry: dict[str, Any],
) -> dict[str, Any]:
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
    output: list[Any],
    reason: str,
    pending_tool_calls: list[dict[str, Any]],
    bridge_dispatch_started: bool,
    replay_safe: bool,
    telemetry: dict[str, Any],
) -> dict[str, Any]:
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
    phase: Phase | str,
    output: list[Any],
    bridge_dispatch_started: bool,
    replay_safe: bool,
    telemetry: dict[str, Any],
) -> dict[str, Any]:
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


def input_refusal(message: str) -> dict[str, Any]:
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
    telemetry: dict[str, Any],
    reason: str | None = None,
    pending_tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A live cell's status without resuming it; a waiting one names what it waits for (no output)."""
    out: dict[str, Any] = {
        "status": status,
        "cell_id": cell_id,
        "bridge_dispatch_started": bridge_dispatch_started,
        "replay_safe": replay_safe,
        "telemetry": telemetry,
    }
    if status == "waiting":
        out["reason"] = reason
        out["pending_tool_calls"] = pending_tool_calls
    return out


def add_warnings(envelope: dict[str, Any], warnings: list[str]) -> None:
    """Notes from the end-of-cell steps (a store write that could not commit, ...)."""
    envelope["warnings"] = warnings


def drop_warnings(envelope: dict[str, Any]) -> None:
    del envelope["warnings"]


def mark_untrusted(envelope: dict[str, Any]) -> None:
    """Once a cell has seen network-derived data, its model-facing text is wrapped as untrusted.

    Text entries are what an agent shows its model; ``json`` entries and the value stay raw.
    """
    envelope["untrusted_content"] = True
    for i, entry in enumerate(envelope.get("output") or []):
        if isinstance(entry, dict) and entry.get("type") == "text" and isinstance(entry.get("text"), str):
            envelope["output"][i] = {"type": "text", "text": wrap_untrusted(entry["text"], "network")}
