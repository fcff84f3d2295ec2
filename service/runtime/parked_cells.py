"""Parked Python cells that outlive their process: written to the store when they park, taken up elsewhere.

A Python cell that parks waiting only for its API caller (a client tool's result, an approval, a yield)
is written out: its worker dumps the paused program (Monty's snapshot and what the engine keeps beside
it), and this module seals that dump (``parked_seal.py``) together with what the service holds of the
cell (its exec body, the calls it waits on, its counters) and keeps the record in the store
(``keep``).  When the cell's replica is gone, the replica a ``wait`` reaches (or this service, restarted
on its SQLite file) opens the record, checks its seal and claims, claims it in the store, once, and
takes the cell up in a worker of the cell's own principal (``CellRegistry.take_up``).  The holder
forgets the record as soon as the cell runs again (``forget``), so the record never outlives the state
it describes: a record is of a cell that has run nothing since.

What does not move: a cell with host work under way when it parks (a tool call running, a timer), a
cell with buffered session-store writes, a background cell's legs, a JavaScript cell (QuickJS cannot
dump a heap).  They stay in their process's memory, as every parked cell did before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from guest_runtime.monty.dump_format import engine_build
from service.errors import StoreUnavailable
from service.stores.errors import StoreError

from .parked_seal import SECRET_NAME, OpenedRecord, SealClaims, open_record, seal, tag_of

if TYPE_CHECKING:
    from .dispatch import CellContext
    from .spec import CellSpec

log = logging.getLogger("codemode.cells")
T = TypeVar("T")

#: Bytes of a record beyond its dump: its claims, its spec (the cell's code) and its calls' inputs.
STATE_ALLOWANCE_BYTES = 64 * 1024 * 1024


@runtime_checkable
class ParkedVault(Protocol):
    """Where records of parked cells are kept (both session stores)."""

    async def shared_secret(self, name: str) -> bytes: ...

    async def keep_parked(self, cell_id: str, record: bytes, tag: str, expires_at: float) -> None: ...

    async def parked_record(self, cell_id: str) -> bytes | None: ...

    async def claim_parked(self, cell_id: str, tag: str, claimant: str, ttl_seconds: float) -> bool: ...

    async def drop_parked(self, cell_id: str) -> None: ...


class ParkedCells:
    """Writes parked Python cells out to ``vault`` and takes them up again (see the module's text)."""

    def __init__(
        self,
        vault: ParkedVault,
        *,
        ttl_seconds: float,
        max_snapshot_bytes: int,
        claimant: str = "",
        carries: Callable[[CellContext], bool] = lambda _: True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.vault = vault
        self.ttl_seconds = ttl_seconds  # the cells' idle expiry (cell_ttl_seconds)
        self.max_record_bytes = max_snapshot_bytes + STATE_ALLOWANCE_BYTES
        self.claimant = claimant  # this replica's id, named as the adopter of what it takes up
        self._carries = carries  # whether a cell's handler state can be made again elsewhere
        self._clock = clock  # wall clock: records are read by other machines
        self._secret: bytes | None = None

    def can_carry(self, context: CellContext) -> bool:
        return self._carries(context)

    async def keep(self, cell_id: str, spec: CellSpec, held: dict[str, object], dump: bytes) -> bool:
        """Seal and keep the record of cell ``cell_id`` (``held``: what the service holds of it, ``dump``: its
        engine's); whether it is kept.  A store that fails leaves the cell parked here only (logged)."""
        now = self._clock()
        state: dict[str, object] = {"spec": exec_body(spec), **held}
        claims = SealClaims(cell_id, spec.tenant, spec.principal, engine_build(), int((now + self.ttl_seconds) * 1000))
        try:
            record = seal(await self.secret(), claims, state, dump)
            if len(record) > self.max_record_bytes:
                return False
            await self.vault.keep_parked(cell_id, record, tag_of(record), now + self.ttl_seconds)
        except StoreError as exc:
            log.warning("cell %s stays parked in this process only: the store did not keep it (%s)", cell_id, exc)
            return False
        return True

    async def forget(self, cell_id: str, *, quiet: bool = False) -> None:
        """Drop the cell's record.  Before a leg runs it must go (``StoreUnavailable`` otherwise: a replica
        taking up the old record would run the cell's calls twice); at its end, ``quiet`` only logs."""
        try:
            await self.vault.drop_parked(cell_id)
        except StoreError as exc:
            if quiet:
                log.warning("the record of ended cell %s stays in the store until it expires (%s)", cell_id, exc)
                return
            raise StoreUnavailable(
                f"cell {cell_id} cannot resume now: the store keeping its parked state did not answer ({exc}); "
                "retry shortly",
                retry_after=1,
            ) from None

    async def open(self, cell_id: str, tenant: str) -> tuple[OpenedRecord, str] | None:
        """The record kept of ``cell_id`` for ``tenant``, its seal and claims checked, and its tag; None if
        none is kept.  Raises ``SnapshotRefused`` subclasses for a record that must not be used."""
        record = await self._read(self.vault.parked_record(cell_id))
        if record is None:
            return None
        opened = open_record(
            await self.secret(),
            record,
            cell_id=cell_id,
            tenant=tenant,
            engine=engine_build(),
            now_ms=int(self._clock() * 1000),
            max_bytes=self.max_record_bytes,
        )
        return opened, tag_of(record)

    async def claim(self, cell_id: str, tag: str) -> bool:
        """Take the record read (by its ``tag``) for this process, once in the whole cluster."""
        return bool(await self._read(self.vault.claim_parked(cell_id, tag, self.claimant, self.ttl_seconds)))

    async def secret(self) -> bytes:
        if self._secret is None:
            self._secret = await self._read(self.vault.shared_secret(SECRET_NAME))
        return self._secret

    async def _read(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except StoreError as exc:
            raise StoreUnavailable(
                f"the store keeping parked cells did not answer: {exc}; retry shortly", retry_after=1
            ) from None


def exec_body(spec: CellSpec) -> dict[str, object]:
    """The exec request that makes ``spec`` again, with the caller's key (``service.api.parked``)."""
    limits = spec.limits
    return {
        "code": spec.code,
        "language": spec.language,
        "title": spec.title,
        "session_id": spec.session_id,
        "run_id": spec.run_id,
        "restart_safe": spec.restart_safe,
        "headless": spec.headless,
        "call_log": spec.call_log,
        "require_approval": list(spec.require_approval),
        "timeout_ms": limits.timeout_ms,
        "memory_limit_bytes": limits.memory_limit_bytes,
        "max_output_bytes": limits.max_output_bytes,
        "client_tools": [
            {
                k: v
                for k, v in (("name", t.tool_name), ("description", t.description), ("input_schema", t.input_schema))
                if v
            }
            for t in spec.client_tools
        ],
    }
