"""The per-cell inbox allowance: bytes of settled replies the guest has not consumed yet.

It caps *concurrently pending* reply bytes, not a running total: a reply is charged when it
settles and released once the guest has consumed it, so sequential pages reuse the room.
A reply that does not fit is replaced by ``INBOX_EXCEEDED_MESSAGE`` and charges nothing.
"""

from __future__ import annotations

import threading

INBOX_EXCEEDED_MESSAGE = (
    "program-data budget exceeded: the reply did not fit the cell's inbox allowance. "
    "Paginate or narrow the tool request, or consume pending replies before requesting more data."
)


class InboxAllowance:
    """Charges and releases reply bytes against a fixed capacity."""

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes < 0:
            raise ValueError("inbox capacity must not be negative")
        self._capacity = capacity_bytes
        self._used = 0
        # Replies may settle on other threads (tool executors); charging must stay exact.
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        """Total bytes the inbox may hold at once."""
        return self._capacity

    @property
    def used(self) -> int:
        """Bytes charged and not yet released."""
        return self._used

    @property
    def remaining(self) -> int:
        """Bytes that may still be admitted."""
        return self._capacity - self._used

    def admit(self, n: int) -> bool:
        """Charge ``n`` bytes if they fit; otherwise charge nothing and return False."""
        if n < 0:
            raise ValueError("reply size must not be negative")
        with self._lock:
            if self._used + n > self._capacity:
                return False
            self._used += n
            return True

    def release(self, n: int) -> None:
        """Give back ``n`` bytes of a consumed reply."""
        if n < 0:
            raise ValueError("reply size must not be negative")
        with self._lock:
            # After release_all (cancel/expiry) a late consumer may still release: never go negative.
            self._used = max(0, self._used - n)

    def release_all(self) -> None:
        """Drop every charge (cancel, expiry, cell end)."""
        with self._lock:
            self._used = 0
