"""The worker processes assigned to a principal, and which one a principal's next cell packs into.

A fresh process is assigned to the tenant and the principal of its first cell (``service.principals``:
who may share a process, by ``worker_isolation``) and serves only cells of that principal until it
ends: nothing ever assigns it again, so a process an attacker took over through one principal's cell
never receives another principal's cell.  A process whose principal is None (``cell`` isolation, or a
cell without a session under ``session``) serves its one cell and is never picked for another.

A new cell goes to its principal's process that already holds the most runtimes (parked cells gather
in few processes, so emptied ones can retire), provided it takes new cells: serving, not busy, nobody
waiting for it, under ``max_runtimes`` runtimes and with room for one more parked heap under
``max_parked_bytes``.  Idle empty processes beyond what the slots can keep busy are retired, the one
idle longest first (a principal that just used its process is likely to use it again).  Processes are
also kept by tenant: what tenants share fairly (running slots, CPU lowering) is counted per tenant.
"""

from __future__ import annotations

from .process import Worker, WorkerState


class AssignedWorkers:
    """Assigned processes by principal (packing) and by tenant (CPU lowering), and their idle order."""

    def __init__(self, *, max_runtimes: int, max_parked_bytes: int, snapshot_bytes: int) -> None:
        self.max_runtimes = max_runtimes
        self.max_parked_bytes = max_parked_bytes
        self.snapshot_bytes = snapshot_bytes
        self._by_tenant: dict[str, list[Worker]] = {}  # tenant -> its live workers
        self._by_principal: dict[str, list[Worker]] = {}  # principal -> its live workers (None's: not here)
        self._idle_since: dict[Worker, int] = {}  # process -> when it last went idle (a counter)
        self._idle_clock = 0

    def all(self) -> list[Worker]:
        return [w for ws in self._by_tenant.values() for w in ws]

    def of(self, tenant: str) -> list[Worker]:
        return self._by_tenant.get(tenant, [])

    def count(self) -> int:
        return sum(len(ws) for ws in self._by_tenant.values())

    def assign(self, worker: Worker, tenant: str, principal: str | None) -> None:
        """``worker`` (fresh) serves ``principal``'s cells, of ``tenant``, from now until it ends."""
        if worker.state is not WorkerState.FRESH:
            raise RuntimeError(f"a {worker.state.value} worker process is never assigned again")
        worker.tenant = tenant
        worker.principal = principal
        worker.state = WorkerState.SERVING
        self._by_tenant.setdefault(tenant, []).append(worker)
        if principal is not None:
            self._by_principal.setdefault(principal, []).append(worker)

    def takes_new_cells(self, w: Worker) -> bool:
        return (
            w.state is WorkerState.SERVING
            and not w.dead
            and not w.busy
            and not w.waiters
            and len(w.cells) < self.max_runtimes
            and w.parked_bytes + self.snapshot_bytes <= self.max_parked_bytes
        )

    def pick(self, principal: str | None) -> Worker | None:
        """The principal's process a new cell packs into (the first of those holding the most runtimes), if any.

        None for a principal of None: such a cell always gets a fresh process.
        """
        best: Worker | None = None
        if principal is not None:
            for w in self._by_principal.get(principal, ()):
                if (best is None or len(w.cells) > len(best.cells)) and self.takes_new_cells(w):
                    best = w
        return best

    def idle_of_another(self, principal: str | None) -> Worker | None:
        """The idle empty process serving a principal other than ``principal`` that went idle first
        (retired to make room for a fresh process at the cap), if any.

        Another principal's, whatever its tenant: a process of the same tenant but another key or
        session is of no more use to this cell than another tenant's.
        """
        idle = [w for w in self.all() if _idle_empty(w) and (principal is None or w.principal != principal)]
        return min(idle, key=lambda w: self._idle_since.get(w, 0), default=None)

    def went_idle(self, worker: Worker, keep: int) -> Worker | None:
        """``worker`` is idle and empty now; the idle empty process to retire when more than ``keep`` are."""
        self._idle_since[worker] = self._idle_clock = self._idle_clock + 1
        idle_empty = [w for w in self.all() if _idle_empty(w)]
        if len(idle_empty) <= keep:
            return None
        return min(idle_empty, key=lambda w: self._idle_since.get(w, 0))

    def forget(self, worker: Worker) -> None:
        self._idle_since.pop(worker, None)
        _remove(self._by_tenant, worker.tenant, worker)
        _remove(self._by_principal, worker.principal, worker)

    def clear(self) -> None:
        self._by_tenant.clear()
        self._by_principal.clear()
        self._idle_since.clear()

    def stats(self) -> dict[str, int]:
        assigned = self.all()
        return {
            "idle": sum(1 for w in assigned if not w.busy and not w.cells),
            "holding": sum(1 for w in assigned if not w.busy and w.cells),
            "busy": sum(1 for w in assigned if w.busy),
            "runtimes": sum(len(w.cells) for w in assigned),
            "principals": len(self._by_principal),  # shared principals holding a process
            "single_use": sum(1 for w in assigned if w.principal is None),  # processes of one cell
        }


def _idle_empty(w: Worker) -> bool:
    return not w.busy and not w.cells and not w.waiters


def _remove(index: dict[str, list[Worker]], name: str | None, worker: Worker) -> None:
    if name is None:
        return
    ws = index.get(name, [])
    if worker in ws:
        ws.remove(worker)
        if not ws:
            del index[name]
