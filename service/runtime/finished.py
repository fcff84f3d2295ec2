"""Summaries of finished cells, kept per tenant so one tenant's volume cannot evict another's.

Each tenant has its own ring of the last ``per_tenant`` summaries; at most ``max_tenants`` tenants
are tracked, and the tenant that finished a cell least recently is forgotten first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from .envelopes import Envelope


@dataclass
class FinishedCell:
    snapshot: Envelope  # what its status shows (envelopes.finished_summary)
    expired: bool  # it ended by expiry, or its uncollected result was dropped


class FinishedCells:
    """Bounded per-tenant rings of ``{cell_id: FinishedCell}``."""

    def __init__(self, per_tenant: int, max_tenants: int) -> None:
        self.per_tenant = per_tenant
        self.max_tenants = max_tenants
        self._rings: OrderedDict[str, OrderedDict[str, FinishedCell]] = OrderedDict()

    def add(self, tenant: str, cell_id: str, summary: FinishedCell) -> None:
        ring = self._rings.get(tenant)
        if ring is None:
            ring = self._rings[tenant] = OrderedDict()
            while len(self._rings) > self.max_tenants:
                self._rings.popitem(last=False)
        else:
            self._rings.move_to_end(tenant)
        ring[cell_id] = summary
        while len(ring) > self.per_tenant:
            ring.popitem(last=False)

    def get(self, tenant: str, cell_id: str) -> FinishedCell | None:
        ring = self._rings.get(tenant)
        return None if ring is None else ring.get(cell_id)

    def mark_expired(self, tenant: str, cell_id: str) -> None:
        """The cell's result was never collected and has been dropped (its wait then says so)."""
        summary = self.get(tenant, cell_id)
        if summary is not None:
            summary.expired = True

    def __len__(self) -> int:
        return sum(len(ring) for ring in self._rings.values())
