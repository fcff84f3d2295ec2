"""What a drained replica left behind: one fate per cell it still held when it stopped, kept in the
shared store (``codemode:drained:<replica id>``, for ``cell_ttl_seconds``) so that any replica can
answer a later request for such a cell with ``cell_drained`` instead of a bare ``cell_not_found``.

A fate is ``"<kind> <unix seconds>"``.  The only kind today is ``dropped``: a live cell's guest heap is
in its worker process and dies with it.  A cell that can move (a sealed Python snapshot another replica
resumes) would be recorded as another kind naming where it went, and the relay would send its
requests there (``service/drain.py`` is where a drain decides each cell's fate).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from service.errors import CellDrained

DROPPED = "dropped"


@dataclass(frozen=True)
class Fate:
    kind: str
    at: float  # unix seconds: when the drain ended

    def text(self) -> str:
        return f"{self.kind} {self.at:.0f}"

    @classmethod
    def parse(cls, text: str) -> Fate:
        kind, _, at = text.partition(" ")
        try:
            return cls(kind, float(at))
        except ValueError:
            return cls(kind, 0.0)


def cell_drained(cell_id: str, holder: str, fate: Fate) -> CellDrained:
    """The answer for a cell a drained replica dropped: what happened, and what to do."""
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(fate.at)) if fate.at else "its shutdown"
    return CellDrained(
        f"cell {cell_id} was still held by replica {holder} when that replica was shut down (drained at {when}); "
        "its state was in that replica's worker process and could not be kept. Start the cell again: a new "
        "exec with the same code and inputs (answers given to the old cell are not replayed)"
    )
