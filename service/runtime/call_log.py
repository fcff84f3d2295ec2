"""A cell's call log: each host request it made, as a caller's timeline shows it (exec ``call_log: true``).

The envelope's ``telemetry.call_log`` lists the requests settled since the previous envelope of the cell
(each is shown once, like output): the request's id, method, target (a tool's or MCP tool's name), the
bytes of its arguments and of its reply, its duration and its outcome.  A timer is a request too.

What is held is charged: an entry waiting to be shown costs ``ENTRY_BYTES`` of the cell's inbox allowance
(and so of its tenant's ``tenant_held_bytes``), and at most ``MAX_ENTRIES`` wait at once.  An entry that
does not fit is counted instead (``telemetry.call_log_dropped``), so a cell of a million timers holds a
count, not a million entries.
"""

from __future__ import annotations

import time
from typing import TypedDict

from bridge.inbox import InboxAllowance

#: Entries waiting to be shown, at most (a busy leg's calls; a caller that wants more waits more often).
MAX_ENTRIES = 256
#: What one entry is charged: a bound of its dict and its few small values.
ENTRY_BYTES = 512


class CallEntry(TypedDict):
    """One settled host request, as ``telemetry.call_log`` shows it."""

    id: str
    method: str
    target: str | None
    request_bytes: int
    reply_bytes: int | None  # None: it ended without a reply (cancelled with its cell, a cleared timer)
    ms: float
    outcome: str  # "ok", the error's code, or "dropped"


class CallLog:
    """The entries of one cell not shown yet, charged to its inbox."""

    __slots__ = ("_inbox", "_entries", "dropped")

    def __init__(self, inbox: InboxAllowance) -> None:
        self._inbox = inbox
        self._entries: list[CallEntry] = []
        self.dropped = 0  # entries left out since the last envelope

    def add(
        self,
        request_id: int,
        method: str,
        target: str | None,
        began: float,
        sizes: tuple[int, int | None],
        outcome: str,
    ) -> None:
        """Record one request that ended (``began``: its ``time.perf_counter()`` at dispatch)."""
        if len(self._entries) >= MAX_ENTRIES or self._inbox.try_admit(ENTRY_BYTES) is not None:
            self.dropped += 1
            return
        self._entries.append(
            {
                "id": f"req_{request_id}",
                "method": method,
                "target": target,
                "request_bytes": sizes[0],
                "reply_bytes": sizes[1],
                "ms": round((time.perf_counter() - began) * 1000, 3),
                "outcome": outcome,
            }
        )

    def take(self) -> tuple[list[CallEntry], int]:
        """The entries not shown yet and the count left out, handed over (their charge given back)."""
        entries, dropped = self._entries, self.dropped
        self._entries, self.dropped = [], 0
        self._inbox.release(ENTRY_BYTES * len(entries))
        return entries, dropped
