"""Per-tenant counters against their caps, in one place: what a tenant runs, parks, waits and holds.

Every refusal is a 429 (``TooManyRequests``) naming the setting that raises it:

- ``tenant_max_concurrency``: exec and wait calls of a tenant running at once (``running``; a
  background cell's later legs are ``counted`` without the check, it was admitted at its exec);
- ``max_parked_cells`` (the whole server) and ``tenant_max_parked_cells``: parked cells, a
  background cell counting as parked from its exec until its result is collected (``hold``);
- ``tenant_max_waits``: wait calls of a tenant in progress (``waiting``);
- ``tenant_held_bytes``: bytes held for a tenant's live cells (its ``HeldAccount``).

Counters of a tenant with nothing counted are dropped, so the table is bounded by active tenants.
The registry and the background cells share this one object; nothing else changes the counters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from bridge.inbox import HeldAccount
from service.errors import TooManyRequests


@dataclass
class _Usage:
    running: int = 0
    parked: int = 0
    waits: int = 0


@dataclass(frozen=True)
class QuotaCaps:
    """The caps, read from settings once."""

    max_parked_cells: int
    tenant_max_parked_cells: int
    tenant_max_concurrency: int
    tenant_max_waits: int
    tenant_held_bytes: int


class TenantQuotas:
    """Running calls, parked cells, waits and held bytes per tenant, checked against ``caps``."""

    def __init__(self, caps: QuotaCaps) -> None:
        self.caps = caps
        self._usage: dict[str, _Usage] = {}
        self._parked: dict[str, str] = {}  # parked cell id -> its tenant
        self._held: dict[str, HeldAccount] = {}  # one per tenant (API-key tenants: a bounded table)
        self.parks = 0  # legs that ended parked (a cell waiting for work or for its caller)

    # ---- parked cells ------------------------------------------------------------------------------

    def check_new_cell(self, tenant: str) -> HeldAccount:
        """Refuse a new exec when a parked-cell cap or the held-bytes quota is reached; its account."""
        caps = self.caps
        if len(self._parked) >= caps.max_parked_cells:
            raise TooManyRequests(
                f"too many parked cells ({len(self._parked)}, cap max_parked_cells="
                f"{caps.max_parked_cells}): finish or cancel waiting cells first",
                retry_after=1,
            )
        parked = self._of(tenant).parked
        if parked >= caps.tenant_max_parked_cells:
            raise TooManyRequests(
                f"parked-cells quota reached: tenant {tenant!r} has {parked} parked cells (cap "
                f"tenant_max_parked_cells={caps.tenant_max_parked_cells}); wait on, cancel or let "
                "them finish first",
                retry_after=1,
            )
        return self.check_held(tenant)

    def park(self, cell_id: str, tenant: str) -> bool:
        """Count ``cell_id`` as parked; False (nothing counted) when a parked-cell cap is reached."""
        if cell_id not in self._parked:
            if len(self._parked) >= self.caps.max_parked_cells or (
                self._of(tenant).parked >= self.caps.tenant_max_parked_cells
            ):
                return False
            self.hold(cell_id, tenant)
        self.parks += 1
        return True

    def hold(self, cell_id: str, tenant: str) -> None:
        """Count ``cell_id`` as parked without a cap check (a background cell, admitted at its exec)."""
        if cell_id not in self._parked:
            self._parked[cell_id] = tenant
            self._of(tenant).parked += 1

    def unpark(self, cell_id: str) -> None:
        tenant = self._parked.pop(cell_id, None)
        if tenant is not None:
            self._of(tenant).parked -= 1
            self._drop_if_idle(tenant)

    def is_parked(self, cell_id: str) -> bool:
        return cell_id in self._parked

    def parked_ids(self) -> list[str]:
        return list(self._parked)

    # ---- running calls and waits ---------------------------------------------------------------------

    @contextlib.contextmanager
    def running(self, tenant: str) -> Iterator[None]:
        """One of the tenant's running exec or wait calls, refused at ``tenant_max_concurrency``."""
        running = self._of(tenant).running
        if running >= self.caps.tenant_max_concurrency:
            raise TooManyRequests(
                f"running-cells quota reached: tenant {tenant!r} already runs {running} cells (cap "
                f"tenant_max_concurrency={self.caps.tenant_max_concurrency}); retry after one finishes",
                retry_after=1,
            )
        with self.counted(tenant):
            yield

    @contextlib.contextmanager
    def counted(self, tenant: str) -> Iterator[None]:
        """One of the tenant's running calls, counted without a cap check."""
        self._of(tenant).running += 1
        try:
            yield
        finally:
            self._of(tenant).running -= 1
            self._drop_if_idle(tenant)

    @contextlib.contextmanager
    def waiting(self, tenant: str) -> Iterator[None]:
        """One of the tenant's wait calls in progress, refused at ``tenant_max_waits``."""
        waits = self._of(tenant).waits
        if waits >= self.caps.tenant_max_waits:
            raise TooManyRequests(
                f"concurrent-waits quota reached: tenant {tenant!r} has {waits} waits in progress (cap "
                f"tenant_max_waits={self.caps.tenant_max_waits}); retry after one returns",
                retry_after=1,
            )
        self._of(tenant).waits += 1
        try:
            yield
        finally:
            self._of(tenant).waits -= 1
            self._drop_if_idle(tenant)

    # ---- held bytes ----------------------------------------------------------------------------------

    def held_account(self, tenant: str) -> HeldAccount:
        """What the service holds for ``tenant``'s live cells, against ``tenant_held_bytes``."""
        account = self._held.get(tenant)
        if account is None:
            account = self._held[tenant] = HeldAccount(tenant, self.caps.tenant_held_bytes)
        return account

    def check_held(self, tenant: str, incoming: int = 0) -> HeldAccount:
        """429 when ``tenant`` holds its whole quota, or ``incoming`` more bytes would not fit it."""
        account = self.held_account(tenant)
        if account.used + max(incoming, 1) > account.capacity:  # a new cell needs room for at least a byte
            more = f", and this request brings {incoming} more" if incoming else ""
            raise TooManyRequests(
                f"held-bytes quota reached: the service holds {account.used} bytes for tenant {tenant!r}'s "
                f"live cells (cap tenant_held_bytes={account.capacity}: pending arguments, unconsumed replies, "
                f"uncollected output and results){more}; collect, answer or cancel waiting cells first",
                retry_after=1,
            )
        return account

    # ---- introspection -------------------------------------------------------------------------------

    def usage(self, tenant: str) -> dict[str, int]:
        """What ``tenant`` holds now against its caps: running calls, parked cells, waits, held bytes."""
        usage = self._usage.get(tenant) or _Usage()
        held = self._held.get(tenant)
        return {
            "running": usage.running,
            "parked": usage.parked,
            "waits": usage.waits,
            "held_bytes": held.used if held else 0,
        }

    def stats(self) -> dict[str, int]:
        return {
            "parked": len(self._parked),
            "held_bytes": sum(a.used for a in self._held.values()),
            "tenants_counted": len(self._usage),
        }

    def _of(self, tenant: str) -> _Usage:
        usage = self._usage.get(tenant)
        if usage is None:  # not setdefault: that would make a _Usage on every call
            usage = self._usage[tenant] = _Usage()
        return usage

    def _drop_if_idle(self, tenant: str) -> None:
        usage = self._usage.get(tenant)
        if usage is not None and not (usage.running or usage.parked or usage.waits):
            del self._usage[tenant]
