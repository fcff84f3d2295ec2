"""Cells as MCP tasks (the ``io.modelcontextprotocol/tasks`` extension of the 2026-07-28 protocol).

A client that declares the extension on its request gets its ``exec`` run as a background cell.  If the
cell ends or needs a person within the exec's ``timeout_ms``, the exec answers as usual; if it is still
running, the exec answers ``resultType: "task"`` with the cell id as the task id, and the cell runs on its
own.  Then:

* ``tasks/get`` reads the cell's status without collecting anything: ``working`` while it runs;
  ``input_required`` with one approval form per pending call (the forms of ``approval_forms``, keyed by
  the call ids, which a cell never reuses) while it waits for approvals; and once it ended, its result:
  the cell's envelope as the tool result ``exec`` would have answered (a failed cell is a completed task
  whose result has ``isError``); ``failed`` when the cell was lost (its replica stopped, or it expired).
  A cell that yielded (``yield_control``) is resumed.
* ``tasks/update`` applies a person's answers to the forms, as ``wait``'s ``approvals`` would (answers to
  keys not outstanding are ignored, as the extension says).
* ``tasks/cancel`` cancels the cell.

The task is the cell: it lives in the replica that holds the cell, whose id names it, so a ``tasks/*``
request reaching another replica is relayed there by its ``Mcp-Name`` header (service/http/replica_routing.py)
and each task's record is kept only here.  A task id is a bearer capability bound to its tenant: another
tenant's request is told the task is unknown.  Output a poll or an update collected on the way (resuming
the cell collects what it wrote so far) is kept with the task and comes first in its result; a finished
task's result is kept, at most ``KEPT_RESULTS`` of them and ``KEPT_RESULT_BYTES`` per tenant, for polls
that come again.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from bridge import jsoncodec

from .approval_forms import ApprovalForm

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
#: How often a client should poll a task.
POLL_INTERVAL_MS = 500
#: Finished tasks' results kept per tenant for polls that come again (the oldest go first).
KEPT_RESULTS = 32
KEPT_RESULT_BYTES = 8 * 1024 * 1024


@dataclass
class TaskRecord:
    """One cell run as a task, as long as this replica keeps it."""

    cell_id: str
    tenant: str
    created_at: float
    updated_at: float
    output: list[object] = field(default_factory=list)  # collected before the end: shown first in the result
    result: dict[str, object] | None = None  # the final tool result (``content``, ``structuredContent``, ...)
    status: str = "working"  # or completed, cancelled, failed once it ended
    message: str | None = None  # why it failed, or how it was cancelled
    # One tasks/* request at a time acts on the cell (two polls of a cell that ended would both collect it).
    busy: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(frozen=True)
class TaskView:
    """What ``tasks/get`` answers about one task, without the wire's spelling."""

    record: TaskRecord
    status: str  # working, input_required, completed, failed, cancelled
    ttl_ms: int
    forms: tuple[ApprovalForm, ...] = ()  # input_required: one per pending approval


class TaskBook:
    """The tasks this replica holds, by cell id; unfinished ones are dropped ``ttl_seconds`` after their last
    news (their cell cannot outlive that), finished ones kept within the per-tenant bounds."""

    def __init__(self, ttl_seconds: float, clock: Callable[[], float] = time.time) -> None:
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._records: dict[str, TaskRecord] = {}
        self._kept: dict[str, OrderedDict[str, int]] = {}  # tenant -> finished cell ids -> result bytes

    def open(self, cell_id: str, tenant: str, output: list[object]) -> TaskRecord:
        """The task of a cell (made now, with the output collected so far, or the one it already has)."""
        now = self._clock()
        for stale in [r for r in self._records.values() if r.result is None and r.updated_at < now - self.ttl_seconds]:
            del self._records[stale.cell_id]
        record = self._records.get(cell_id)
        if record is None or record.tenant != tenant:
            record = self._records[cell_id] = TaskRecord(cell_id, tenant, now, now)
        record.output += output
        return record

    def get(self, cell_id: str, tenant: str) -> TaskRecord | None:
        record = self._records.get(cell_id)
        return record if record is not None and record.tenant == tenant else None

    def touch(self, record: TaskRecord, output: list[object]) -> None:
        record.output += output
        record.updated_at = self._clock()

    def finish(self, record: TaskRecord, status: str, result: dict[str, object] | None, message: str | None) -> None:
        """The task ended: keep its outcome for later polls, within its tenant's bounds."""
        record.status, record.result, record.message = status, result or {}, message
        record.output = []
        record.updated_at = self._clock()
        kept = self._kept.setdefault(record.tenant, OrderedDict())
        kept[record.cell_id] = len(jsoncodec.dumps(record.result))
        while len(kept) > KEPT_RESULTS or sum(kept.values()) > KEPT_RESULT_BYTES:
            gone, _ = kept.popitem(last=False)
            self._records.pop(gone, None)
        if not kept:
            del self._kept[record.tenant]
