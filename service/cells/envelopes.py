"""Final cell envelopes, encoded once, and the bounded summaries kept after a cell ends.

A cell's side effects that commit at its end (store writes) may only commit once its final envelope
is known to be sendable, so the envelope is encoded before they run.  ``SealedEnvelope`` carries
those bytes on to the HTTP response, which sends them as they are instead of encoding again; it is
read-only so the bytes cannot go stale.
"""

from __future__ import annotations

from typing import Any, NoReturn

from bridge.truncation import truncate_error

#: Bytes of ``error`` (and of each warning) a finished cell's summary keeps.
SUMMARY_TEXT_BYTES = 2048
#: Warnings a finished cell's summary keeps.
SUMMARY_WARNINGS = 8
#: Fields of a final envelope that a summary keeps: its outcome, never its data (value, output).
SUMMARY_FIELDS = ("status", "cell_id", "error", "code", "failure_phase", "warnings",
                  "bridge_dispatch_started", "replay_safe", "untrusted_content", "telemetry")


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
        summary["warnings"] = [truncate_error(str(w), SUMMARY_TEXT_BYTES)
                               for w in summary["warnings"][:SUMMARY_WARNINGS]]
    return summary
