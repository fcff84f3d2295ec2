"""A ``wait`` for a parked Python cell its replica no longer holds: take the cell up here first.

The cell's record (service/runtime/parked_cells.py) is read and its seal and claims checked for the
caller's tenant; the cell is made again from the exec body it keeps, with the caller's key, which must
give the cell the worker principal it had (``SnapshotForeign`` otherwise: another key's cells never
share a process); then the record is claimed, once in the whole cluster, and the cell taken up.  Both the
HTTP route and the MCP facade's ``wait`` come through here.
"""

from __future__ import annotations

from service.errors import ReplicaUnavailable, SnapshotForeign
from service.runtime.envelopes import Envelope
from service.runtime.registry import CellRegistry
from service.settings import ApiKey

from .exec import cell_spec, parsed
from .keyed_tools import KeyedTools
from .schemas import ExecRequest


async def take_up_parked(cells: CellRegistry, tools: KeyedTools, key: ApiKey, cell_id: str) -> Envelope | None:
    """Hold ``cell_id`` here if it is not held here and its record is kept; the envelope of a cell that ended
    on the way (None: it waits here now, or there was nothing to take up)."""
    keeper = cells.parked_cells
    if keeper is None or cells.holds(cell_id):
        return None
    found = await keeper.open(cell_id, key.tenant)
    if found is None:
        return None
    opened, tag = found
    body = opened.state.get("spec")
    spec = await cell_spec(cells, tools, key, parsed(ExecRequest, body if isinstance(body, dict) else {}, "spec"))
    if spec.principal != opened.claims.principal:
        raise SnapshotForeign(
            f"cell {cell_id} ran for another API key's tool policy or session (worker_isolation), so this key "
            "cannot take it up; wait with the key that started it"
        )
    if not await keeper.claim(cell_id, tag):
        raise ReplicaUnavailable(
            f"cell {cell_id} is being taken up by another replica after its own stopped; retry shortly (the "
            "request then reaches the replica that holds it)",
            retry_after=1,
        )
    return await cells.take_up(cell_id, spec, opened)
