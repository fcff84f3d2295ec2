"""The worker processes assigned to tenants, and which one a tenant's next cell packs into.

A process belongs to one tenant from its first cell on.  A new cell goes to the tenant's process
that already holds the most runtimes (parked cells gather in few processes, so emptied ones can
retire), provided it takes new cells: serving, not busy, nobody waiting for it, under
``max_runtimes`` runtimes and with room for one more parked heap under ``max_parked_bytes``.
Idle empty processes beyond what the slots can keep busy are retired, the one idle longest first
(a tenant that just used its process is likely to use it again).
"""

from __future__ import annotations

from .worker_process import Worker, WorkerState


class TenantWorkers:
    """Assigned processes by tenant, with the idle order used to pick one to retire."""

    def __init__(self, *, max_runtimes: int, max_parked_bytes: int, snapshot_bytes: int) -> None:
        self.max_runtimes = max_runtimes
        self.max_parked_bytes = max_parked_bytes
        self.snapshot_bytes = snapshot_bytes
        self._by_tenant: dict[str, list[Worker]] = {}  # tenant -> its live workers
        self._idle_since: dict[Worker, int] = {}  # process -> when it last went idle (a counter)
        self._idle_clock = 0

    def all(self) -> list[Worker]:
        return [w for ws in self._by_tenant.values() for w in ws]

    def of(self, tenant: str) -> list[Worker]:
        return self._by_tenant.get(tenant, [])

    def count(self) -> int:
        return sum(len(ws) for ws in self._by_tenant.values())

    def assign(self, tenant: str, worker: Worker) -> None:
        worker.tenant = tenant
        worker.state = WorkerState.SERVING
        self._by_tenant.setdefault(tenant, []).append(worker)

    def takes_new_cells(self, w: Worker) -> bool:
        return (
            w.state is WorkerState.SERVING
            and not w.dead
            and not w.busy
            and not w.waiters
            and len(w.cells) < self.max_runtimes
            and w.parked_bytes + self.snapshot_bytes <= self.max_parked_bytes
        )

    def has_room(self, tenant: str) -> bool:
        return self.pick(tenant) is not None

    def pick(self, tenant: str) -> Worker | None:
        """The tenant's process a new cell packs into (the first of those holding the most runtimes), if any."""
        best: Worker | None = None
        for w in self._by_tenant.get(tenant, ()):
            if (best is None or len(w.cells) > len(best.cells)) and self.takes_new_cells(w):
                best = w
        return best

    def idle_of_another(self, tenant: str) -> Worker | None:
        """An idle empty process of a tenant other than ``tenant`` (retired to make room at the cap)."""
        for other, ws in self._by_tenant.items():
            if other != tenant:
                for w in ws:
                    if _idle_empty(w):
                        return w
        return None

    def went_idle(self, worker: Worker, keep: int) -> Worker | None:
        """``worker`` is idle and empty now; the idle empty process to retire when more than ``keep`` are."""
        self._idle_since[worker] = self._idle_clock = self._idle_clock + 1
        idle_empty = [w for w in self.all() if _idle_empty(w)]
        if len(idle_empty) <= keep:
            return None
        return min(idle_empty, key=lambda w: self._idle_since.get(w, 0))

    def forget(self, worker: Worker) -> None:
        self._idle_since.pop(worker, None)
        ws = self._by_tenant.get(worker.tenant or "")
        if ws is not None and worker in ws:
            ws.remove(worker)
            if not ws:
                del self._by_tenant[worker.tenant or ""]

    def clear(self) -> None:
        self._by_tenant.clear()
        self._idle_since.clear()

    def stats(self) -> dict[str, int]:
        assigned = self.all()
        return {
            "idle": sum(1 for w in assigned if not w.busy and not w.cells),
            "holding": sum(1 for w in assigned if not w.busy and w.cells),
            "busy": sum(1 for w in assigned if w.busy),
            "runtimes": sum(len(w.cells) for w in assigned),
        }


def _idle_empty(w: Worker) -> bool:
    return not w.busy and not w.cells and not w.waiters
