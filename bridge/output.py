"""Bounded output capture (worker side) and the per-cell output projection (host side).

Byte accounting.  All sizes are UTF-8 bytes; JSON sizes are of compact JSON text.

* An output entry costs the size of its compact JSON as the worker produced it
  (``{"type":"text","text":"hi"}`` = 27 bytes).  A leg's ``output`` list costs
  ``2 + sum(entries) + (n - 1)`` (brackets and commas); an empty list costs 0.
* The final value costs its compact JSON size; a marker costs its compact JSON size.
* An error costs the UTF-8 size of its message.
* Budget ``max_output_bytes`` (M) is one pool per cell.  Output delivered in full is *committed*:
  the sum of those lists' costs over all legs.  Everything else in an envelope (an output marker,
  the value or error) is a view of data not delivered yet, and is re-derived on every leg from the
  original sources, never from an earlier marker.  Invariant of every leg:
  ``committed + output-marker + value-or-error <= M``.
* Non-final legs (cell waiting) keep ``R = min(FINAL_RESERVE_BYTES, M // 2)`` free for the final
  value or error; their output allotment is ``M - committed - R``.  So the final leg always has at
  least R bytes, enough for a marker and a bounded error.
* Final leg, failed: with ``A = M - committed`` and ``O`` the size of the undelivered output, the
  error gets ``A - min(O, A // 2)`` (longer errors keep their leading cause and end with
  ``" [error truncated]"``); output gets the rest.
* Final leg, completed: if output and value fit ``A`` both go out whole.  Otherwise the value
  reserves ``min(V, max(A // 2, smallest value marker))``, output gets ``A - reserve`` and the
  value gets what output left: whole, a reference marker (objects/arrays, when ``retain`` is given)
  or a truncation marker.
* Undelivered output (all entries not yet delivered whole, in order) goes out whole when it fits
  its allotment, else as ``[marker]`` whose prefix is a prefix of the undelivered entries' compact
  JSON array (``[`` included) and whose ``omittedBytes`` is exact.  A later leg may replace that
  marker with a newer one or with the entries themselves; an identical marker is not re-sent.
  A waiting leg with no room even for a marker defers the output (``output_deferred``).
* A value marker's prefix is a prefix of the value's original compact JSON.  Markers are always
  built from these original sources, never from an earlier marker.

Worker side: ``OutputCapture`` ships at most ``max_output_bytes + CAPTURE_SLACK_BYTES`` bytes of
entry text and at most ``MAX_OUTPUT_ENTRIES`` entries per cell; beyond either only sizes travel.
The host never needs more: committed output plus the largest marker prefix is at most M.  The
host keeps the text of at most ``MAX_OUTPUT_ENTRIES`` entries too (later ones count as
undelivered bytes, so they end up in a truncation marker).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bridge.errors import InvalidSource, OutputLimitExceeded, OutputStateClosed
from bridge.json_syntax import surely_json
from bridge.jsoncodec import as_host_writes, fragment
from bridge.messages import OutputShipment
from bridge.refs import shrink_descriptor
from bridge.truncation import (
    TRUNCATION_GUIDANCE,
    json_size,
    json_text_prefix,
    parse_json,
    truncate_error,
    truncation_marker,
    utf8_size,
)

CAPTURE_SLACK_BYTES = 1024
#: Output entries one cell may emit.  The guest refuses more (``text``/``json`` throw a RangeError,
#: guest_runtime/quickjs/prelude/output.js); capture and projection re-check it, keeping only the size of entries
#: past it, so a cell's entry count bounds the host's per-entry work either way.
MAX_OUTPUT_ENTRIES = 10_000
FINAL_RESERVE_BYTES = 1024
REFERENCE_GUIDANCE = "Full result saved for this run; use results.load(reference.id) in a later exec."
NOT_RETAINED_CAPTURE = "result exceeds the capture allowance"
NOT_RETAINED_BUDGET = "reference exceeds output budget"

# Size of a typical reference id ("result_" + uuid4) for the value reservation.
_TYPICAL_REFERENCE_ID = "result_" + "0" * 36


# ---------------------------------------------------------------- worker side


class OutputCapture:
    """Keeps a cell's output entries for shipping, bounded to the budget plus a small slack."""

    def __init__(self, max_output_bytes: int, slack_bytes: int = CAPTURE_SLACK_BYTES) -> None:
        self._cap = max_output_bytes + slack_bytes
        self._kept = 0
        self._items: list[dict[str, Any]] = []
        self._overflowed = False
        self._counted_bytes = 0
        self._counted_entries = 0
        self.total_bytes = 0
        self.total_entries = 0

    def add(self, entry_json: str) -> None:
        """Record one entry given as compact JSON text."""
        entry_json = as_host_writes(entry_json)
        size = utf8_size(entry_json)
        self.total_bytes += size
        self.total_entries += 1
        if self.total_entries > MAX_OUTPUT_ENTRIES:
            self._overflowed = True
        if self._overflowed:
            self._counted_bytes += size
            self._counted_entries += 1
        elif self._kept + size <= self._cap:
            self._items.append({"json": entry_json})
            self._kept += size
        else:
            prefix = json_text_prefix(entry_json, self._cap - self._kept)
            self._items.append({"prefix": prefix, "bytes": size})
            self._kept += utf8_size(prefix)
            self._overflowed = True

    def drain(self) -> list[dict[str, Any]]:
        """Return the source items recorded since the last drain."""
        items, self._items = self._items, []
        if self._counted_entries:
            items.append({"bytes": self._counted_bytes, "entries": self._counted_entries})
            self._counted_bytes = self._counted_entries = 0
        return items

    def ship(self) -> tuple[OutputShipment, list[bytes]]:
        """The items recorded since the last drain, as a frame's shipment and the raw frames that follow."""
        return shipment_of(self.drain())


def shipment_of(items: list[dict[str, Any]]) -> tuple[OutputShipment, list[bytes]]:
    """Source items (whole entries, then at most one cut entry, then a count) as a shipment and its raw
    frames: each entry's text travels as it is, never inside a frame the host must decode."""
    shipment: OutputShipment = {"entries": 0}
    texts: list[bytes] = []
    for item in items:
        if "json" in item:
            assert "cut" not in shipment and "counted" not in shipment, "whole entries come first"
            shipment["entries"] += 1
            texts.append(item["json"].encode("utf-8", "replace"))
        elif "prefix" in item:
            assert "counted" not in shipment, "a cut entry comes before the count"
            shipment["cut"] = item["bytes"]
            texts.append(item["prefix"].encode("utf-8", "replace"))
        else:
            shipment["counted"] = [item["bytes"], item["entries"]]
    return shipment, texts


def received_output(shipment: OutputShipment, texts: list[str]) -> list[dict[str, Any]]:
    """The source items a shipment and its raw frames' texts stand for (the inverse of ``shipment_of``)."""
    entries = shipment["entries"]
    items: list[dict[str, Any]] = [{"json": text} for text in texts[:entries]]
    if "cut" in shipment:
        items.append({"prefix": texts[entries], "bytes": shipment["cut"]})
    if "counted" in shipment:
        size, count = shipment["counted"]
        items.append({"bytes": size, "entries": count})
    return items


def capture_value(json_text: str, limit_bytes: int) -> dict[str, Any]:
    """Return the value source: the whole JSON text, or a safe prefix and the true size."""
    json_text = as_host_writes(json_text)
    size = utf8_size(json_text)
    if size <= limit_bytes:
        return {"json": json_text}
    return {"prefix": json_text_prefix(json_text, limit_bytes), "bytes": size}


def shipped_value(source: dict[str, Any]) -> tuple[int, bytes]:
    """A value source as a done frame ships it: the whole JSON's size, and the raw frame (the JSON, or a
    prefix of it when shorter than that size)."""
    if "json" in source:
        data = source["json"].encode("utf-8", "replace")
        return len(data), data
    return source["bytes"], source["prefix"].encode("utf-8", "replace")


def received_value(size: int, text: str) -> dict[str, Any]:
    """The value source a done frame's size and raw frame's text stand for (the inverse of ``shipped_value``)."""
    return {"json": text} if utf8_size(text) == size else {"prefix": text, "bytes": size}


# ---------------------------------------------------------------- host side


@dataclass(frozen=True)
class FinalValue:
    """The cell completed; ``source`` is what ``capture_value`` produced."""

    source: dict[str, Any]


@dataclass(frozen=True)
class FinalError:
    """The cell failed with this message."""

    message: str


FinalSource = FinalValue | FinalError


@dataclass(frozen=True)
class NotRetained:
    """The retain callback could not keep the value; ``reason`` is shown to the guest's caller."""

    reason: str


#: A reference descriptor (see ``bridge.refs``) or the reason nothing was kept.
RetainResult = dict[str, Any] | NotRetained


@dataclass(frozen=True)
class Projection:
    """One leg's envelope parts.  ``value`` is meaningful only for a completed final leg."""

    output: list[Any]
    value: Any = None
    error: str | None = None
    output_truncated: bool = False
    value_truncated: bool = False
    error_truncated: bool = False
    reference_id: str | None = None
    release_reference_id: str | None = None  # saved but not shown: the caller deletes it
    output_deferred: bool = False  # waiting leg: undelivered output had no room even for a marker
    committed_bytes: int = 0


@dataclass(frozen=True)
class _Chunk:
    text: str  # known compact JSON ("" when only the size travelled)
    size: int  # true size of the entries in the chunk
    entries: int
    complete: bool


@dataclass(frozen=True)
class _Pending:
    chunks: list[_Chunk]
    size: int  # true size of the undelivered entries' JSON array
    complete: bool

    def known_text(self) -> str:
        """The prefix of that array known here (built only for a truncation marker: it copies the text)."""
        parts: list[str] = []
        for chunk in self.chunks:
            parts.append(chunk.text)
            if not chunk.complete:
                break
        return "[" + ",".join(parts) + ("]" if self.complete else "")


def _chunk(item: Any) -> _Chunk:
    if isinstance(item, dict):
        if isinstance(item.get("json"), str):
            return _Chunk(item["json"], utf8_size(item["json"]), 1, True)
        size = item.get("bytes")
        if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
            prefix = item.get("prefix")
            if isinstance(prefix, str) and utf8_size(prefix) <= size:
                return _Chunk(prefix, size, 1, False)
            entries = item.get("entries", 1)
            if "prefix" not in item and isinstance(entries, int) and entries >= 1:
                return _Chunk("", size, entries, False)
    raise InvalidSource(f"malformed output source item: {str(item)[:120]}")


def _value_source(source: Any) -> _Chunk:
    chunk = _chunk(source)
    if chunk.entries != 1 or (not chunk.complete and "prefix" not in source):
        raise InvalidSource("malformed value source")
    return chunk


def _parse(text: str) -> Any:
    try:
        return parse_json(text)
    except ValueError as exc:
        raise InvalidSource(f"source is not JSON: {exc}") from None


#: How a text output entry starts: such entries are decoded (one string, cheap to build, and the
#: untrusted-content marking rewrites their text); every other entry and the value stay encoded.
_TEXT_ENTRY = '{"type":"text","text":'


def _is_text_entry(text: str) -> bool:
    return text.startswith(_TEXT_ENTRY)


def _spliced(text: str) -> Any:
    """An entry or value as an envelope holds it: a text entry decoded, anything else kept encoded
    (``jsoncodec.fragment``: the envelope's encoding embeds it as it is, and no Python objects of it
    are ever built).  Kept-encoded texts were checked as JSON before (``OutputState.unchecked``)."""
    return _parse(text) if _is_text_entry(text) else fragment(text.encode("utf-8"))


def check_json(text: str) -> None:
    """Raise ``InvalidSource`` unless ``text`` is one JSON value (as the guest could write it)."""
    if not surely_json(text.encode("utf-8", "surrogatepass")):
        _parse(text)


def check_json_bytes(data: bytes) -> None:
    """``check_json`` of UTF-8 bytes (``UnicodeDecodeError`` if they are not UTF-8), scanned without a copy."""
    if not surely_json(data):
        _parse(data.decode("utf-8"))


class OutputState:
    """The output and final result of one cell across all legs, projected against one budget."""

    def __init__(self, max_output_bytes: int) -> None:
        self._max = max_output_bytes
        self._reserve = min(FINAL_RESERVE_BYTES, max_output_bytes // 2)
        self._chunks: list[_Chunk] = []  # not delivered whole yet (delivered ones are let go)
        self._committed = 0
        self._last_marker: dict[str, Any] | None = None
        self._closed = False
        self._entries = 0
        self._checked = 0  # chunks whose texts were checked as JSON (``checked``)
        self._value_checked = False

    @property
    def committed_bytes(self) -> int:
        """Bytes of output delivered whole so far."""
        return self._committed

    def extend(self, items: list[Any]) -> None:
        """Append one leg's output source items, in order."""
        if self._closed:
            raise OutputStateClosed("cell output is already final")
        for item in items:
            chunk = _chunk(item)
            self._entries += chunk.entries
            if self._entries > MAX_OUTPUT_ENTRIES and chunk.text:
                chunk = _Chunk("", chunk.size, chunk.entries, False)  # past the cap only its size counts
            self._chunks.append(chunk)

    def unchecked(self, final: FinalSource | None = None) -> list[str]:
        """The JSON texts a projection may embed as they are that nobody checked yet: whole output entries
        that arrived since the last ``checked`` (text entries aside: those are decoded, which checks them)
        and, when ``final`` is a whole value, its text.  The caller checks each (``check_json``, or off
        the event loop when large), then says so (``checked``), before it projects: a worker may be owned,
        and its texts go into envelopes as they are."""
        texts = [c.text for c in self._chunks[self._checked :] if c.complete and not _is_text_entry(c.text)]
        if isinstance(final, FinalValue) and not self._value_checked:
            value = _value_source(final.source)
            if value.complete:
                texts.append(value.text)
        return texts

    def checked(self, final: FinalSource | None = None) -> None:
        """What ``unchecked(final)`` handed out was checked: it is JSON."""
        self._checked = len(self._chunks)
        self._value_checked = self._value_checked or isinstance(final, FinalValue)

    def project(
        self,
        final: FinalSource | None = None,
        retain: Callable[[str], RetainResult] | None = None,
    ) -> Projection:
        """Build this leg's envelope parts; ``final`` is None while the cell is waiting.

        Whole entries and a whole value are embedded encoded: every such text must have been checked
        first (``unchecked``, ``checked``; ``InvalidSource`` otherwise).
        """
        if self._closed:
            raise OutputStateClosed("cell output is already final")
        if self._checked < len(self._chunks) or (isinstance(final, FinalValue) and not self._value_checked):
            raise InvalidSource("output or a value was projected before its JSON was checked")
        available = self._max - self._committed
        pending = self._pending()
        if final is None:
            output, cost, truncated = self._project_output(pending, available - self._reserve, False)
            return Projection(
                output=output,
                output_truncated=truncated,
                output_deferred=pending is not None and cost == 0,
                committed_bytes=self._committed,
            )
        self._closed = True
        if isinstance(final, FinalError):
            return self._project_failure(final.message, pending, available)
        if isinstance(final, FinalValue):
            return self._project_success(_value_source(final.source), pending, available, retain)
        raise TypeError(f"final must be FinalValue, FinalError or None, not {type(final).__name__}")

    def retention_candidate(self, final: FinalValue) -> str | None:
        """The value text ``project(final, retain)`` may pass to ``retain``, or None when it cannot.

        Lets a caller whose store answers asynchronously save the value before projecting.
        """
        if self._closed:
            return None
        value = _value_source(final.source)
        pending = self._pending()
        fits = (pending is None or pending.complete) and (pending.size if pending else 0) + value.size <= (
            self._max - self._committed
        )
        return value.text if value.complete and value.text[:1] in ("{", "[") and not fits else None

    # -- internals

    def _pending(self) -> _Pending | None:
        chunks = self._chunks
        if not chunks:
            return None
        entries = sum(c.entries for c in chunks)
        size = 2 + sum(c.size for c in chunks) + entries - 1
        return _Pending(chunks, size, all(c.complete for c in chunks))

    def _project_output(self, pending: _Pending | None, allotment: int, required: bool) -> tuple[list[Any], int, bool]:
        """Return (output list, its cost in the view, truncated)."""
        if pending is None:
            return [], 0, False
        if pending.complete and pending.size <= allotment:
            output = [_spliced(c.text) for c in pending.chunks]
            self._committed += pending.size
            # Delivered: only their size matters from here on (every one was checked before it was).
            self._chunks, self._checked = [], 0
            self._last_marker = None
            return output, pending.size, False
        marker = truncation_marker(pending.known_text(), pending.size, allotment - 2)
        if marker is None:
            if required:
                raise OutputLimitExceeded("output does not fit even as a truncation marker")
            return [], 0, False  # stays undelivered; a later leg reports it
        cost = json_size(marker) + 2
        if marker == self._last_marker:
            return [], cost, True
        self._last_marker = marker
        return [marker], cost, True

    def _project_failure(self, message: str, pending: _Pending | None, available: int) -> Projection:
        output_size = pending.size if pending else 0
        error = truncate_error(message, available - min(output_size, available // 2))
        output, _, truncated = self._project_output(pending, available - utf8_size(error), True)
        return Projection(
            output=output,
            error=error,
            output_truncated=truncated,
            error_truncated=error != message,
            committed_bytes=self._committed,
        )

    def _project_success(
        self,
        value: _Chunk,
        pending: _Pending | None,
        available: int,
        retain: Callable[[str], RetainResult] | None,
    ) -> Projection:
        output_size = pending.size if pending else 0
        output_whole = pending is None or pending.complete
        if output_whole and value.complete and output_size + value.size <= available:
            output, _, _ = self._project_output(pending, available, True)
            return Projection(output=output, value=_spliced(value.text), committed_bytes=self._committed)
        container = value.text[:1] in ("{", "[")
        retain = retain if container else None
        smallest = json_size(
            {"truncated": True, "prefix": "", "omittedBytes": value.size, "guidance": TRUNCATION_GUIDANCE}
        )
        if retain is not None:
            smallest = max(smallest, json_size(_reference_marker({"id": _TYPICAL_REFERENCE_ID})))
        reserve = max(available // 2, smallest)
        if value.complete:
            reserve = min(reserve, value.size)
        output, output_cost, output_truncated = self._project_output(pending, available - reserve, True)
        left = available - output_cost
        if value.complete and value.size <= left:
            return Projection(
                output=output,
                value=_spliced(value.text),
                output_truncated=output_truncated,
                committed_bytes=self._committed,
            )
        shown, reference_id, release_id = _truncated_value(value, left, retain)
        return Projection(
            output=output,
            value=shown,
            output_truncated=output_truncated,
            value_truncated=True,
            reference_id=reference_id,
            release_reference_id=release_id,
            committed_bytes=self._committed,
        )


def _reference_marker(descriptor: dict[str, Any]) -> dict[str, Any]:
    return {"truncated": True, "reference": descriptor, "guidance": REFERENCE_GUIDANCE}


def _truncated_value(
    value: _Chunk, budget: int, retain: Callable[[str], RetainResult] | None
) -> tuple[dict[str, Any], str | None, str | None]:
    """Return (marker, shown reference id, reference id to release) for a value over budget."""
    guidance = TRUNCATION_GUIDANCE
    release_id: str | None = None
    if retain is not None:
        if not value.complete:
            reason = NOT_RETAINED_CAPTURE
        else:
            result = retain(value.text)
            if isinstance(result, NotRetained):
                reason = result.reason
            else:
                overhead = json_size(_reference_marker({}))
                descriptor = shrink_descriptor(result, budget - overhead + 2)
                reference = _reference_marker(descriptor)
                if json_size(reference) <= budget:
                    return reference, descriptor["id"], None
                release_id = result["id"]
                reason = NOT_RETAINED_BUDGET
        guidance = f"Not retained: {reason.rstrip('.')}. {TRUNCATION_GUIDANCE}"
    marker = truncation_marker(value.text, value.size, budget, guidance)
    if marker is None and guidance != TRUNCATION_GUIDANCE:
        marker = truncation_marker(value.text, value.size, budget)
    if marker is None:
        raise OutputLimitExceeded("value does not fit even as a truncation marker", release_id)
    return marker, None, release_id
