"""Replica ids and the cell ids that name their holder.

A replica id is random per process start: a restarted replica never answers for cells of its
previous life (their heaps died with it).
"""

from __future__ import annotations

import re
import secrets

# Cell ids are "cell_<replica id>.<uuid4>" in a cluster ("cell_<uuid4>" otherwise); only these
# characters, so the id still matches the API's id pattern.
_CLUSTER_CELL_ID = re.compile(r"^cell_([0-9a-f]{12})\.[0-9a-f-]{36}$")


def new_replica_id() -> str:
    return secrets.token_hex(6)


def cell_id_prefix(replica_id: str) -> str:
    """What the replica's cell ids start with."""
    return f"cell_{replica_id}."


def holder_of(cell_id: str) -> str | None:
    """The replica id a cell id names, or None for an id no replica made (answered locally as unknown)."""
    match = _CLUSTER_CELL_ID.match(cell_id)
    return match.group(1) if match else None
