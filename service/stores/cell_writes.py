"""Per-cell write buffer behind the guest's ``store(key, value)`` and ``load(key)``."""

from __future__ import annotations

from collections.abc import Mapping

from .limits import (
    StoreLimits,
    check_key,
    check_tenant,
    check_total,
    check_value_size,
    entry_bytes,
    value_bytes,
)

__all__ = ["CellStoreWrites"]


class CellStoreWrites:
    """A cell's view of its session store: the committed snapshot plus the cell's own writes.

    Writes are checked against committed + buffered state when made, so the guest sees
    TypeError/RangeError at the call site.  Deletes are buffered only for keys of the committed
    snapshot, so what the buffer holds is bounded by the session limits. Nothing reaches the backend until the cell
    completes and the caller commits ``pending()``; a failed cell simply drops this object.
    """

    def __init__(
        self, snapshot: Mapping[str, str], limits: StoreLimits, tenant_usage: tuple[int, int] | None = None
    ) -> None:
        """``tenant_usage`` is the tenant's ``(bytes, sessions)`` when the snapshot was read; with it,
        writes over the tenant's quotas are refused at the call site too (the commit re-checks)."""
        self._committed = dict(snapshot)
        self._limits = limits
        self._buffer: dict[str, str | None] = {}
        self._total = sum(entry_bytes(key, text) for key, text in self._committed.items())
        self._committed_total = self._total
        self._tenant_usage = tenant_usage

    @property
    def total_bytes(self) -> int:
        """Session total as this cell sees it (UTF-8 key bytes plus value bytes)."""
        return self._total

    def get(self, key: object) -> str | None:
        """Return the JSON text the cell sees for ``key``, or None when it is absent."""
        check_key(key, self._limits)
        assert isinstance(key, str)
        if key in self._buffer:
            return self._buffer[key]
        return self._committed.get(key)

    def set(self, key: object, json_text: str | None) -> None:
        """Buffer a write (None deletes); on StoreKeyError/StoreLimitError the buffer is unchanged."""
        key_size = len(check_key(key, self._limits))
        assert isinstance(key, str)
        old = self.get(key)
        old_cost = 0 if old is None else key_size + value_bytes(old)
        new_cost = 0
        if json_text is not None:
            size = value_bytes(json_text)
            check_value_size(size, self._limits)
            new_cost = key_size + size
        total = self._total - old_cost + new_cost
        if new_cost > old_cost:
            # Shrinking writes are always allowed, even if a sibling cell left the session over the limit.
            check_total(total, self._limits)
            if self._tenant_usage is not None:
                check_tenant(self._committed_total, total, *self._tenant_usage, self._limits)
        if json_text is None and key not in self._committed:
            # Deleting what only this cell wrote, or nothing: forget the key instead of buffering a
            # delete, so the buffer stays within the session limits however many keys a cell deletes.
            self._buffer.pop(key, None)
        else:
            self._buffer[key] = json_text
        self._total = total

    def pending(self) -> tuple[dict[str, str], tuple[str, ...]]:
        """Return ``(sets, deletes)`` for ``SessionStore.commit``; both empty if nothing was written."""
        sets = {key: text for key, text in self._buffer.items() if text is not None}
        deletes = tuple(key for key, text in self._buffer.items() if text is None)
        return sets, deletes

    def has_pending(self) -> bool:
        """Return whether the cell wrote anything."""
        return bool(self._buffer)
