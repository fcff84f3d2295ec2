"""The per-cell inbox allowance: program data the host holds for a cell at one time.

Each allowance may belong to a tenant's ``HeldAccount`` (the ``tenant_held_bytes`` quota): every
byte charged to a cell is charged to its tenant too, so one tenant's parked cells together hold at
most the quota, whatever each cell's own allowance.

That is the bytes of settled replies the guest has not consumed yet, and the JSON arguments of
its pending requests at what they cost held: parsed while a handler works on them (a native tool
holds them for as long as it runs, at many times their bytes: ``bridge.json_cost``), their bytes
while they wait encoded (a client tool call's input waits on the host until the API caller answers).
It caps *concurrently held* bytes, not a running total: a reply is charged when it settles and
released once the guest has consumed it; arguments are charged when the request arrives and
released when it settles or is dropped; so sequential pages reuse the room.  A reply that does not
fit is replaced by ``INBOX_EXCEEDED_MESSAGE`` and charges nothing; a request whose arguments do
not fit is refused with ``arguments_exceeded_message``.

Both classes are used from the service's event loop alone (requests are dispatched and settled
there), so they take no locks: each call is a few integer operations no other thread interleaves.
"""

from __future__ import annotations

from typing import Literal

#: Why ``InboxAllowance.try_admit`` refused: the cell's own allowance, or its tenant's quota.
Refusal = Literal["cell", "tenant"]

INBOX_EXCEEDED_MESSAGE = (
    "program-data budget exceeded: the reply did not fit the cell's inbox allowance. "
    "Paginate or narrow the tool request, or consume pending replies before requesting more data."
)


def arguments_exceeded_message(size: int, cost: int | None, capacity: int, used: int) -> str:
    """The refusal of a request whose JSON arguments (``size`` bytes, ``cost`` bytes held, None: more than
    their bytes, not reckoned) do not fit the inbox allowance."""
    held = f"about {cost}" if cost is not None else f"more than {size}"
    return (
        f"program-data budget exceeded: this call's arguments are {size} bytes of JSON, held as {held} "
        f"bytes while the call runs, and the cell's inbox allowance of {capacity} bytes already holds {used} "
        "bytes of pending arguments and unconsumed replies. Pass less data per call (fewer, larger values "
        "cost less: a table as one CSV or JSON string), or await pending calls before starting more."
    )


def tenant_held_exceeded_message(size: int, account: HeldAccount) -> str:
    """The refusal of data that does not fit the tenant's held-bytes quota."""
    return (
        f"held-bytes quota exceeded: these {size} bytes do not fit, because the service already holds "
        f"{account.used} bytes for this tenant's cells (cap tenant_held_bytes={account.capacity}: pending "
        "arguments, unconsumed replies, uncollected output). Collect or cancel waiting cells, or pass less data."
    )


class HeldAccount:
    """The bytes held for one tenant's live cells, against its ``tenant_held_bytes`` quota."""

    def __init__(self, tenant: str, capacity_bytes: int) -> None:
        self.tenant = tenant
        self.capacity = capacity_bytes
        self.used = 0

    def admit(self, n: int) -> bool:
        if self.used + n > self.capacity:
            return False
        self.used += n
        return True

    def charge(self, n: int) -> None:
        self.used += n

    def release(self, n: int) -> None:
        self.used = max(0, self.used - n)


class InboxAllowance:
    """Charges and releases reply bytes against a fixed capacity (and the tenant's quota, if any)."""

    def __init__(self, capacity_bytes: int, account: HeldAccount | None = None) -> None:
        if capacity_bytes < 0:
            raise ValueError("inbox capacity must not be negative")
        self._capacity = capacity_bytes
        self._used = 0
        self.account = account

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
        return self.try_admit(n) is None

    def try_admit(self, n: int) -> Refusal | None:
        """Charge ``n`` bytes if they fit the cell and its tenant; else charge nothing and say which is full."""
        if n < 0:
            raise ValueError("reply size must not be negative")
        if self._used + n > self._capacity:
            return "cell"
        if self.account is not None and not self.account.admit(n):
            return "tenant"
        self._used += n
        return None

    def charge(self, n: int) -> None:
        """Charge ``n`` bytes even past capacity (data too small to refuse, or bounded elsewhere; see the caller)."""
        if n < 0:
            raise ValueError("reply size must not be negative")
        self._used += n
        if self.account is not None:
            self.account.charge(n)

    def release(self, n: int) -> None:
        """Give back ``n`` bytes of a consumed reply."""
        if n <= 0:
            if n < 0:
                raise ValueError("reply size must not be negative")
            return  # nothing to give back (most stops release nothing)
        # After release_all (cancel/expiry) a late consumer may still release: never go negative.
        given = min(n, self._used)
        self._used -= given
        if self.account is not None:
            self.account.release(given)

    def release_all(self) -> None:
        """Drop every charge (cancel, expiry, cell end)."""
        if self.account is not None:
            self.account.release(self._used)
        self._used = 0
