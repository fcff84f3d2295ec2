"""Each cell's event log (``GET /v1/cells/{id}/events``) and the logs of one service process.

A log is a cell's history as numbered events (1, 2, 3, ... per cell): ``status``, ``output`` (one
output entry each, exactly as an envelope shows it), ``pending`` and, last, ``envelope``.  Readers
get no queue of their own: each reads the log by event id, so a slow or stalled reader holds only
its place and a cell never waits for a reader.

Memory is bounded per log by ``events_buffer_bytes`` of encoded events: the oldest go first, an
event larger than the whole buffer is never kept (its id is still used), and a reader that missed
ids gets one ``dropped`` event naming them instead.  The final envelope is always kept.  Every
output entry goes out once on the stream, as an ``output`` event, so the ``envelope`` event carries
``output: []``.

A background cell's output is also *undelivered* until a reader wrote its event or a ``wait``
answer carried it: a ``wait`` answers only what no one was shown yet.  Undelivered entries are
kept encoded (the bytes of their events, shared) and charged to the tenant's held-bytes quota, like
the final envelope, until they are collected.

Logs of finished cells (a background cell's once its result was collected; another cell's if a
reader opened it) stay readable for ``events_retain_seconds`` (a reader may connect after a quick cell
ended), within ``events_retained_bytes`` for all of them, oldest dropped first.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from bridge import jsoncodec
from bridge.inbox import HeldAccount
from service.errors import TooManyRequests

from .envelopes import Envelope

#: Bookkeeping of one event (its object, its place in the log) charged on top of its data.
EVENT_OVERHEAD_BYTES = 96
#: A log's own objects, charged when a finished cell's log is retained.
LOG_OVERHEAD_BYTES = 2048
#: An envelope not yet encoded for a reader is held as objects: charged at this many times its JSON size.
UNENCODED_FACTOR = 3
DROPPED_MESSAGE = (
    "events {first}..{last} of this cell were dropped (over events_buffer_bytes, or one event larger "
    "than the buffer); GET /v1/cells/{{id}} shows its status, wait answers its undelivered output"
)


class Event:
    """One numbered event; an ``envelope`` event is encoded only when a reader first asks for it."""

    __slots__ = ("id", "kind", "cost", "_data", "_envelope")

    def __init__(
        self, event_id: int, kind: str, data: bytes | None, *, envelope: Envelope | None = None, size: int = 0
    ) -> None:
        self.id = event_id
        self.kind = kind
        self._data = data
        self._envelope = envelope
        self.cost = (len(data) if data is not None else size) + EVENT_OVERHEAD_BYTES

    @property
    def data(self) -> bytes:
        if self._data is None:
            assert self._envelope is not None
            # Its output entries went out as output events just before.
            self._data = _encoded({**self._envelope, "output": []}) or b"{}"
            self._envelope = None
        return self._data


def _encoded(value: object) -> bytes | None:
    try:
        return jsoncodec.dumps_kept(value)
    except (jsoncodec.JSONEncodeError, TypeError):
        return None  # too deep to encode: treated like an event too large to keep


class EventLog:
    """The numbered events of one cell, bounded to ``max_bytes``."""

    def __init__(self, cell_id: str, tenant: str, max_bytes: int, account: HeldAccount | None = None) -> None:
        self.cell_id = cell_id
        self.tenant = tenant
        self.max_bytes = max_bytes
        self.account = account  # charged for undelivered output and the held envelope (background cells)
        self.held = 0  # bytes charged to it now
        self.bytes = 0
        self.last_id = 0
        self.ended = False  # the envelope event was published: nothing follows it
        self.envelope_delivered = False  # a reader wrote the envelope event
        self._events: deque[Event] = deque()
        self._status: str | None = None
        self._changed: asyncio.Event | None = None  # made when a reader waits
        # Background cells: output event id -> (its entry's JSON, whether it is a truncation marker).
        self._undelivered: dict[int, tuple[bytes, bool]] = {}

    # ---- writing ----------------------------------------------------------------------------------

    def status(self, status: str) -> None:
        if status != self._status:
            self._status = status
            self._append(Event(self.last_id + 1, "status", jsoncodec.dumps({"status": status})))

    def output(self, entries: list[object], *, undelivered: bool = False) -> int:
        """One event per entry; ``undelivered``: a later ``wait`` answers them unless a reader wrote them.

        Returns the bytes of the entries' JSON."""
        size = 0
        if undelivered and entries and self._undelivered:
            last = next(reversed(self._undelivered))
            if self._undelivered[last][1]:
                # newer output re-covers what a truncation marker stood for
                self._release(len(self._undelivered.pop(last)[0]))
        for entry in entries:
            data = _encoded(entry)
            size += len(data) if data is not None else 0
            self._append(Event(self.last_id + 1, "output", data))
            if undelivered and data is not None:
                marker = isinstance(entry, dict) and entry.get("truncated") is True
                self._undelivered[self.last_id] = (data, marker)
                self._charge(len(data))
        return size

    def hold(self, n: int) -> None:
        """Charge ``n`` more bytes held for this cell until its result is collected."""
        self._charge(n)

    @property
    def over_quota(self) -> bool:
        """The tenant's held bytes are over its quota."""
        return self.account is not None and self.account.used > self.account.capacity

    def _charge(self, n: int) -> None:
        # Forced: a cell's output budget (max_output_bytes) bounds it; the quota refuses the next request.
        if self.account is not None:
            self.account.charge(n)
            self.held += n

    def _release(self, n: int) -> None:
        if self.account is not None:
            given = min(n, self.held)
            self.account.release(given)
            self.held -= given

    def release_held(self) -> None:
        """The cell's result was collected (or dropped): nothing is held for it any more."""
        self._release(self.held)
        self._undelivered.clear()

    def pending(self, reason: str, calls: list[dict[str, object]]) -> None:
        self._append(Event(self.last_id + 1, "pending", _encoded({"reason": reason, "pending_tool_calls": calls})))

    def final(self, envelope: Envelope, *, undelivered: bool = False) -> None:
        """The cell ended: its last output, its outcome, and the envelope (kept whatever its size)."""
        if self.ended:
            return
        output_bytes = self.output(list(envelope.get("output") or []), undelivered=undelivered)
        self.status(str(envelope.get("status")))
        if undelivered:
            # Kept until its result is collected: held encoded (its output went out as events above).
            data = _encoded({**envelope, "output": []}) or b"{}"
            self._charge(len(data))
            self._append(Event(self.last_id + 1, "envelope", data), keep=True)
        else:
            encoded = getattr(envelope, "encoded", None)
            # Its data leaves the output out: about the sealed encoding less the entries' bytes.
            size = UNENCODED_FACTOR * max(len(encoded) - output_bytes, 0) if isinstance(encoded, bytes) else 0
            self._append(Event(self.last_id + 1, "envelope", None, envelope=envelope, size=size), keep=True)
        self.ended = True

    def _append(self, event: Event, *, keep: bool = False) -> None:
        self.last_id = event.id
        if keep or (event._data is not None and event.cost <= self.max_bytes):
            self._events.append(event)
            self.bytes += event.cost
            while self.bytes > self.max_bytes and len(self._events) > 1:
                self.bytes -= self._events.popleft().cost
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    # ---- reading ----------------------------------------------------------------------------------

    @property
    def changed(self) -> asyncio.Event:
        """Set at the next publication (take it before reading, then wait on it)."""
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def since(self, after: int) -> list[Event]:
        """Events after id ``after`` in order, a ``dropped`` event standing for each run of missing ids."""
        newer: list[Event] = []
        for event in reversed(self._events):  # a reader that keeps up costs only the new events
            if event.id <= after:
                break
            newer.append(event)
        newer.reverse()
        out: list[Event] = []
        expected = after + 1
        for event in newer:
            if event.id > expected:
                out.append(_dropped(expected, event.id - 1))
            out.append(event)
            expected = event.id + 1
        if expected <= self.last_id:
            out.append(_dropped(expected, self.last_id))
        return out

    def delivered(self, event: Event) -> None:
        """A reader wrote ``event``: its output is not repeated in a later envelope."""
        if event.kind == "output":
            entry = self._undelivered.pop(event.id, None)
            if entry is not None:
                self._release(len(entry[0]))
        elif event.kind == "envelope":
            self.envelope_delivered = True

    def take_undelivered(self) -> list[object]:
        """Output nobody was shown yet, for an envelope (it then counts as delivered), still encoded."""
        entries = [jsoncodec.fragment(data) for data, _ in self._undelivered.values()]
        self._release(sum(len(data) for data, _ in self._undelivered.values()))
        self._undelivered.clear()
        return entries


def _dropped(first: int, last: int) -> Event:
    data = {"first_id": first, "last_id": last, "message": DROPPED_MESSAGE.format(first=first, last=last)}
    return Event(last, "dropped", jsoncodec.dumps(data))


class EventLogs:
    """The event logs of this process: live cells', then finished cells' for a while; reader counts."""

    def __init__(
        self,
        *,
        buffer_bytes: int,
        retain_seconds: float,
        retained_bytes: int,
        tenant_max_streams: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.buffer_bytes = buffer_bytes
        self.retain_seconds = retain_seconds
        self.retained_bytes = retained_bytes
        self.tenant_max_streams = tenant_max_streams
        self._clock = clock
        self._live: dict[str, EventLog] = {}
        self._retained: OrderedDict[str, tuple[EventLog, float]] = OrderedDict()
        self._retained_total = 0
        self._streams: dict[str, int] = {}

    def open(self, cell_id: str, tenant: str, account: HeldAccount | None = None) -> EventLog:
        log = self._live[cell_id] = EventLog(cell_id, tenant, self.buffer_bytes, account)
        return log

    def live(self, cell_id: str) -> EventLog | None:
        return self._live.get(cell_id)

    def find(self, tenant: str, cell_id: str) -> EventLog | None:
        """The log of a live or recently finished cell of ``tenant`` (another tenant's: None)."""
        log = self._live.get(cell_id)
        if log is None:
            held = self._retained.get(cell_id)
            log = held[0] if held is not None else None
        return log if log is not None and log.tenant == tenant else None

    def retire(self, cell_id: str) -> None:
        """The cell ended and its result was delivered: its log stays readable for a while."""
        log = self._live.pop(cell_id, None)
        if log is None:
            return
        log.release_held()  # from here on ``events_retained_bytes`` bounds what it keeps
        self._retained[cell_id] = (log, self._clock() + self.retain_seconds)
        self._retained_total += log.bytes + LOG_OVERHEAD_BYTES
        while self._retained_total > self.retained_bytes and self._retained:
            self._drop_oldest()

    def sweep(self) -> None:
        now = self._clock()
        while self._retained and next(iter(self._retained.values()))[1] <= now:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        _, (log, _) = self._retained.popitem(last=False)
        self._retained_total -= log.bytes + LOG_OVERHEAD_BYTES

    def stream_slot(self, tenant: str) -> Callable[[], None]:
        """Count one open event stream of ``tenant``; returns its release (429 at the cap)."""
        open_streams = self._streams.get(tenant, 0)
        if open_streams >= self.tenant_max_streams:
            raise TooManyRequests(
                f"event-streams quota reached: tenant {tenant!r} has {open_streams} open event streams (cap "
                f"tenant_max_event_streams={self.tenant_max_streams}); close one first",
                retry_after=1,
            )
        self._streams[tenant] = open_streams + 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                left = self._streams.get(tenant, 1) - 1
                if left > 0:
                    self._streams[tenant] = left
                else:
                    self._streams.pop(tenant, None)

        return release

    def open_streams(self, tenant: str) -> int:
        return self._streams.get(tenant, 0)

    def stats(self) -> dict[str, int]:
        return {"live": len(self._live), "retained": len(self._retained), "retained_bytes": self._retained_total}
